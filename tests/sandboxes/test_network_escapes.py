"""What a sandbox reaches of the host through sockets, with the network on and off, on every backend.

With the network on or off, a Unix socket the host binds at a path is not connectable from
inside, even one every uid may write. Each probe listens on the host and checks, inside and on
the host side, that nothing got through.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, ESCAPE_CONFIG, make_sandbox

from swedojo.sandboxes.base import Sandbox

ON_OFF = [pytest.param(True, id="network-on"), pytest.param(False, id="network-off")]

CONNECT = r"""python3 - "$@" <<'EOF'
import socket, sys
for target in sys.argv[1:]:
    if target.startswith(("/", "@")):  # a Unix socket: a path, or @name for an abstract one
        sock, address = socket.socket(socket.AF_UNIX), target.replace("@", "\0", 1)
    else:
        sock, address = socket.socket(), (target.rsplit(":", 1)[0], int(target.rsplit(":", 1)[1]))
    sock.settimeout(10)
    try:
        sock.connect(address)
        sock.sendall(b"sandbox")
        print(target, "connected")
    except OSError as exc:
        print(target, "refused", exc.errno)
    finally:
        sock.close()
EOF"""
"""Tries each target given (`host:port`, a socket path, `@abstract`); a line per target."""


class Listener:
    """A listening socket on the host that records what each connection sent, in order."""

    def __init__(self, server: socket.socket) -> None:
        self.server = server
        self.arrived: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        server.listen(8)
        server.settimeout(0.2)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    self.arrived.append(conn.recv(100))
                except OSError:
                    self.arrived.append(b"")

    def only_the_host_got_through(self, address: object) -> bool:
        """Connects from the host (the listener works) and, once that has arrived, tells whether it
        is all that ever did: connections are served in order, so the sandbox's would be first."""
        with socket.socket(self.server.family) as conn:
            conn.connect(address)
            conn.sendall(b"host")
        deadline = time.monotonic() + 30
        while b"host" not in self.arrived and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.arrived == [b"host"]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def sandbox_with(name: str, repo: Path, network: bool) -> Sandbox:
    return make_sandbox(name, repo, ESCAPE_CONFIG.model_copy(update={"network": network}))


def tries(sandbox: Sandbox, targets: list[str]) -> dict[str, str]:
    """What became of a connection from inside to each target: `connected` or `refused ERRNO`."""
    result = sandbox.exec(f"set -- {' '.join(targets)}\n{CONNECT}", timeout=120)
    rows = dict(line.split(" ", 1) for line in result.output.splitlines() if " " in line)
    assert set(rows) == set(targets), result.output
    return rows


@pytest.fixture
def unix_on_host() -> Iterator[list[tuple[str, Listener]]]:
    """Unix sockets any uid may connect to (mode 0777, in world-searchable directories), bound by
    the host at paths outside /tmp (/var/tmp, /run): [(path, listener)]."""
    tag = f"swedojo-escape-{secrets.token_hex(6)}"
    dirs = [Path("/var/tmp") / tag, Path("/run") / tag]
    made: list[tuple[str, Listener]] = []
    try:
        for directory in dirs:
            directory.mkdir(mode=0o755)
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(directory / "service.sock"))
            os.chmod(directory / "service.sock", 0o777)
            made.append((str(directory / "service.sock"), Listener(server)))
        yield made
    finally:
        for _, listener in made:
            listener.close()
        for directory in dirs:
            (directory / "service.sock").unlink(missing_ok=True)
            if directory.exists():
                directory.rmdir()


@pytest.mark.parametrize("network", ON_OFF)
@pytest.mark.parametrize("name", BACKENDS)
def test_the_hosts_unix_sockets_are_out_of_reach(
    name: str, network: bool, git_repo: Path, unix_on_host: list[tuple[str, Listener]]
) -> None:
    with sandbox_with(name, git_repo, network) as sandbox:
        rows = tries(sandbox, [address for address, _ in unix_on_host])
    assert all(row.startswith("refused") for row in rows.values()), rows
    for address, listener in unix_on_host:
        assert listener.only_the_host_got_through(address), address

