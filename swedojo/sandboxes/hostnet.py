"""What of the host's networking a local sandbox could reach, and what keeps it out of reach.

With the network off, bubblewrap gives commands an empty network namespace. With it on, sharing
the host's would hand them its loopback services, its other addresses and its abstract Unix
sockets; instead they get a `PrivateNetwork`: a namespace of their own, held by a process of ours,
whose only way out is slirp4netns. That runs in the host's namespace and carries the namespace's
TCP and UDP (IPv4) out as connections of its own, so commands reach what the host reaches but
not the host itself:
- its loopback: slirp4netns would map its gateway (10.0.2.2) to it; `--disable-host-loopback`;
- its own addresses (a service listening on all of them) and whatever its main routing table
  sends out any interface but the default route's (container and VM bridges, VPNs): unreachable
  routes in the namespace, as `host_only_networks` reads them when the sandbox starts (an address
  or a bridge added later is not covered);
- DNS goes to slirp4netns's forwarder (`RESOLVER`), which asks the host's resolver from the host's
  namespace: the sandbox is given a resolv.conf naming it (`resolv_conf`), since a host resolver
  on 127.0.0.53 is out of reach from inside.
pasta (Debian `passt`) would carry the traffic faster, but bookworm's (2023-03) cannot make a
namespace as root (it drops to nobody and fails to map the user namespace), joins one only held
by a process stripped of every capability, and in the foreground says not when the namespace is
ready (in the background it outlives the harness); slirp4netns has `--ready-fd` and `--exit-fd`.

A port of the host's loopback the operator names (`SandboxConfig.host_ports`: a package mirror
served there) is relayed into the namespace's loopback by a thread of ours (`_Relay`): the
sandbox reaches that port and no other.

In any namespace the read-only root shows the host's files, and a Unix socket bound at a path is
connectable through its file: `bound_sockets` lists those for bubblewrap to cover.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import select
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from swedojo.sandboxes.base import SandboxError
from swedojo.sandboxes.hosttools import SYSTEM_PATH, installed, tool

RESOLVER = "10.0.2.3"
"""slirp4netns's DNS forwarder in its network (10.0.2.0/24, its gateway 10.0.2.2): it asks the
host's resolver."""
SETUP_TIMEOUT_S = 30.0
"""Bound on making the namespace and bringing slirp4netns up."""
_HELPERS = {"unshare": "util-linux", "nsenter": "util-linux", "ip": "iproute2", "slirp4netns": "slirp4netns"}
"""The programs a `PrivateNetwork` needs, with their Debian packages."""
_HOLD = ('ip=$1; shift; [ $# -eq 0 ] || printf "route replace unreachable %s\\n" "$@" | "$ip" -batch - || exit 1; '
         "echo ready; while read -r _; do :; done")
"""`sh -c _HOLD hold IP NETWORK...`, run in the new namespace: make each network unreachable,
say `ready`, then hold the namespace until standard input ends."""


class NetworkSetupError(SandboxError):
    """A sandbox's private network could not be made."""


class PrivateNetwork:
    """A network namespace of its own whose only way out is slirp4netns; `enter` prefixes a
    command with joining it. `close` ends the process holding it and slirp4netns; so does the
    harness's death: both watch a pipe only the harness holds open."""

    def __init__(self) -> None:
        watched, self._lifeline = os.pipe()
        self._holder: subprocess.Popen[bytes] | None = None
        self._slirp: subprocess.Popen[bytes] | None = None
        self._relays: list[socket.socket] = []
        env = {"PATH": SYSTEM_PATH}
        try:
            argv = [tool("unshare"), "--net", "--", tool("sh"), "-c", _HOLD, "hold", tool("ip"), *host_only_networks()]
            with tempfile.TemporaryFile() as errors:
                self._holder = subprocess.Popen(argv, stdin=watched, stdout=subprocess.PIPE, stderr=errors, env=env)
                assert self._holder.stdout is not None
                _wait_for(self._holder.stdout.fileno(), b"ready\n", self._holder, errors, "the network namespace")
            ready, done = os.pipe()
            try:
                with tempfile.TemporaryFile() as errors:
                    try:
                        self._slirp = subprocess.Popen(
                            [tool("slirp4netns"), "--configure", "--mtu=65520", "--disable-host-loopback",
                             "--enable-sandbox", "--enable-seccomp", f"--ready-fd={done}", f"--exit-fd={watched}",
                             str(self._holder.pid), "tap0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                            pass_fds=(done, watched), env=env,
                        )
                    finally:
                        os.close(done)  # slirp4netns holds it: its end is the end of the wait below
                    _wait_for(ready, b"1", self._slirp, errors, "slirp4netns")
            finally:
                os.close(ready)
        except OSError as exc:  # a helper that would not start, or /proc/net unreadable
            self.close()
            raise NetworkSetupError(f"no private network: {exc}") from exc
        except BaseException:
            self.close()
            raise
        finally:
            os.close(watched)

    def relay(self, port: int) -> None:
        """Make port `port` of the host's loopback reachable at the same port of this namespace's."""
        assert self._holder is not None
        with _in_namespace(f"/proc/{self._holder.pid}/ns/net"):
            listener = socket.create_server(("127.0.0.1", port))
        self._relays.append(listener)
        threading.Thread(target=_relay, args=(listener, port), name=f"swedojo-relay-{port}", daemon=True).start()

    def enter(self, argv: list[str]) -> list[str]:
        """`argv` run in this namespace (nsenter needs root: put it before any change of uid)."""
        assert self._holder is not None
        return [tool("nsenter"), f"--net=/proc/{self._holder.pid}/ns/net", "--", *argv]

    def close(self) -> None:
        """End the relays, slirp4netns and the namespace's holder; idempotent."""
        for listener in self._relays:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._relays = []
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
        for process in (self._slirp, self._holder):
            if process is None:
                continue
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        self._slirp = self._holder = None


_CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def _in_namespace(path: str) -> Iterator[None]:
    """This thread in the network namespace at `path` (sockets made meanwhile stay in it), then back."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/thread-self/ns/net") as home, open(path) as there:
        if libc.setns(there.fileno(), _CLONE_NEWNET) != 0:
            raise NetworkSetupError(f"cannot enter {path}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if libc.setns(home.fileno(), _CLONE_NEWNET) != 0:
                raise NetworkSetupError(f"cannot leave {path}: {os.strerror(ctypes.get_errno())}")


def _relay(listener: socket.socket, port: int) -> None:
    """Accept on `listener` (in a sandbox's namespace) until it is closed; carry each connection to
    the host's loopback `port` and back."""
    while True:
        try:
            inside, _ = listener.accept()
        except OSError:
            return
        try:
            outside = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            inside.close()
            continue
        outside.settimeout(None)
        for source, sink in ((inside, outside), (outside, inside)):
            threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until either ends; then end both."""
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _wait_for(fd: int, word: bytes, process: subprocess.Popen[bytes], errors: IO[bytes], what: str) -> None:
    """Wait until `process` writes `word` on `fd`; NetworkSetupError, with what it wrote to
    `errors`, when it ends first or takes longer than `SETUP_TIMEOUT_S`."""
    seen = b""
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    while not seen.endswith(word):
        left = deadline - time.monotonic()
        chunk = os.read(fd, 64) if left > 0 and select.select([fd], [], [], left)[0] else None
        if not chunk:  # None: out of time; b"": it ended
            process.kill()
            process.wait()
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip() or f"exit code {process.returncode}"
            why = f"not ready after {SETUP_TIMEOUT_S:.0f} s" if chunk is None else said
            raise NetworkSetupError(f"{what} could not be set up: {why}")
        seen += chunk


@functools.cache
def nat_problem() -> str | None:
    """None when a `PrivateNetwork` can be made here (tried once per process); otherwise why not."""
    if os.getuid() != 0:
        return "not root (a network namespace of the sandbox's own needs it)"
    missing = [name for name in _HELPERS if not installed(name)]
    if missing:
        packages = " ".join(sorted({_HELPERS[name] for name in missing}))
        return f"{', '.join(missing)} not installed (apt-get install {packages}; scripts/system_deps.sh does)"
    try:
        PrivateNetwork().close()
    except NetworkSetupError as exc:
        return str(exc)
    return None


def host_only_networks() -> list[str]:
    """IPv4 networks that only the host reaches, from the harness's namespace as it is now: each of
    the host's own addresses but loopback, and every route of the main table that goes out an
    interface other than the default route's."""
    own: set[str] = set()
    leaf = ""
    with open("/proc/net/fib_trie") as trie:
        for line in trie:
            text = line.strip()
            if text.startswith("|-- "):
                leaf = text.removeprefix("|-- ")
            elif text == "/32 host LOCAL" and not leaf.startswith("127."):
                own.add(f"{leaf}/32")
    with open("/proc/net/route") as table:  # Iface Destination Gateway Flags RefCnt Use Metric Mask ...
        rows = [line.split() for line in table.read().splitlines()[1:] if line.strip()]
    outward = {row[0] for row in rows if int(row[7], 16) == 0}
    elsewhere = {f"{_ipv4(row[1])}/{int(row[7], 16).bit_count()}" for row in rows
                 if row[0] not in outward and row[0] != "lo"}
    return sorted(own | elsewhere)


def _ipv4(little_endian_hex: str) -> str:
    return socket.inet_ntoa(int(little_endian_hex, 16).to_bytes(4, "little"))


def resolv_conf(path: Path) -> None:
    """Write at `path` the host's resolv.conf with `RESOLVER` as its only name server."""
    try:
        host = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        host = []
    kept = [line for line in host if line.split()[:1] != ["nameserver"]]
    path.write_text("\n".join([*kept, f"nameserver {RESOLVER}", ""]))
    path.chmod(0o644)


def bound_sockets(uid: int, seen_afresh: list[str]) -> list[str]:
    """The Unix sockets bound at a path in the harness's network namespace now that `uid` could
    connect to (search on each directory above, write on the socket), as the files they are
    (symlinks resolved), but those under `seen_afresh` (places the sandbox does not share with
    the host). Not listed: a socket whose path was relative when bound, and sockets of processes in
    other network namespaces (containers, whose files are their own)."""
    with open("/proc/net/unix") as table:  # Num RefCount Protocol Flags Type St Inode Path
        rows = (line.split(maxsplit=7) for line in table.read().splitlines()[1:])
        named = {fields[7] for fields in rows if len(fields) == 8 and fields[7].startswith("/")}
    found: set[str] = set()
    for name in named:
        path = os.path.realpath(name)
        if any(path == place or path.startswith(place.rstrip("/") + "/") for place in seen_afresh):
            continue
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode) and _connectable(path, uid):
                found.add(path)
        except OSError:
            continue
    return sorted(found)


def _connectable(path: str, uid: int) -> bool:
    """`uid` may connect to the socket at `path` (resolved): as ourselves, what access(2) says; as
    a uid of the sandbox's own (in no group, owning no host file), what the others' bits allow."""
    if uid == os.getuid():
        return os.access(path, os.W_OK)
    parents = Path(path).parents
    return bool(os.stat(path).st_mode & 0o002) and all(os.stat(d).st_mode & 0o001 for d in parents)
