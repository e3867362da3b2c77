"""Escape and abuse attempts, each on every backend of `conftest.BACKENDS`.

Each test asserts that the attempt failed inside and that the host is untouched. Network tests
only target listeners the test itself opens on the host's loopback.
"""

from __future__ import annotations

import errno
import os
import secrets
import select
import shlex
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, DOCKER_IMAGE, ESCAPE_CONFIG, make_sandbox

from swedojo.sandboxes.base import MAX_FILE_BYTES, Sandbox, SandboxConfig
from swedojo.tools.base import ToolContext
from swedojo.tools.builtin.editor import EditorParams, EditorTool

Parse = Callable[[str], dict[str, tuple[int, ...]]]

DENIED = {errno.EPERM, errno.EACCES, errno.ENOSYS}


def host_mounts() -> str:
    with open("/proc/self/mountinfo") as f:
        return f.read()


def test_mount_fails_and_host_mounts_unchanged(
    sandbox: Sandbox, probe: str, parse_probe: Parse
) -> None:
    before = host_mounts()
    sandbox.exec("mkdir -p mnt")
    rows = parse_probe(sandbox.exec(f"{probe} mount mnt").output)
    assert rows["mount"][0] == -1 and rows["mount"][1] in DENIED
    shell = sandbox.exec("mount -t tmpfs none mnt; echo rc=$?; mount --bind / mnt; echo rc=$?")
    assert shell.output.count("rc=0") == 0, shell.output
    added = {line.split()[4] for line in set(host_mounts().splitlines()) - set(before.splitlines())}
    assert not [point for point in added if point.endswith("/mnt")], added  # others: the host's own (containers)


def test_unshare_and_namespace_clone_fail(sandbox: Sandbox, probe: str, parse_probe: Parse) -> None:
    rows = parse_probe(sandbox.exec(f"{probe} unshare").output)
    for name in ("unshare-user", "unshare-ns", "unshare-net", "setns", "clone-newuser"):
        assert rows[name][0] == -1 and rows[name][1] in DENIED, (name, rows)
    assert rows["clone3"][1] == errno.ENOSYS
    for command in ("unshare -r id", "unshare -U id", "unshare -m true"):
        assert sandbox.exec(command).exit_code != 0, command


def test_ptrace_of_another_process_fails(sandbox: Sandbox, probe: str, parse_probe: Parse) -> None:
    rows = parse_probe(sandbox.exec(f"{probe} ptrace").output)
    assert rows["ptrace-attach"][0] == -1 and rows["ptrace-attach"][1] in DENIED, rows
    assert rows["process_vm_readv"][0] == -1, rows
    # a process of the host (this test): invisible or protected
    rows = parse_probe(sandbox.exec(f"{probe} ptrace {os.getpid()}").output)
    assert rows["ptrace-attach"][0] == -1 and rows["process_vm_readv"][0] == -1, rows
    assert (
        sandbox.exec("sleep 30 & strace -p $! -o /dev/null; echo rc=$?").output.endswith("rc=1\n")
        or "not found" in sandbox.exec("strace -V").output
    )


def test_kernel_interfaces_are_denied(sandbox: Sandbox, probe: str, parse_probe: Parse) -> None:
    rows = parse_probe(sandbox.exec(f"{probe} kernel").output)
    for name in (
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "io_uring_setup",
        "init_module",
        "kexec_load",
    ):
        assert rows[name][0] == -1 and rows[name][1] in DENIED, (name, rows[name])


def test_setuid_chmod_fails_through_all_four_syscalls(
    sandbox: Sandbox, probe: str, parse_probe: Parse
) -> None:
    assert sandbox.exec("cp .probe target && chmod 755 target").exit_code == 0
    rows = parse_probe(sandbox.exec(f"{probe} chmod target").output)
    for call in ("chmod", "fchmod", "fchmodat", "fchmodat2"):
        for mode in ("4755", "2755"):
            rc, err, after = rows[f"{call}-{mode}"]
            assert rc == -1 and err in DENIED | {errno.ENOSYS}, (call, mode, rows)
            assert after & 0o6000 == 0, (call, mode, oct(after))
    shell = sandbox.exec("chmod u+s target; chmod g+s target; stat -c %a target")
    assert shell.output.splitlines()[-1] == "755", shell.output
    python = sandbox.exec("python3 -c 'import os; os.chmod(\"target\", 0o4755)'; stat -c %a target")
    assert python.output.splitlines()[-1] == "755", python.output


@pytest.fixture
def tcp_listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's 127.0.0.1; yields (port, what arrived)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    arrived: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    arrived.append(b"connect:" + conn.recv(100))
                except OSError:
                    arrived.append(b"connect:")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], arrived
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def udp_listener() -> Iterator[tuple[int, socket.socket]]:
    """A UDP socket on the host's 127.0.0.1 standing in for a DNS server."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    yield server.getsockname()[1], server
    server.close()


def test_no_tcp_egress(
    sandbox: Sandbox, probe: str, parse_probe: Parse, tcp_listener: tuple[int, list[bytes]]
) -> None:
    port, arrived = tcp_listener
    rows = parse_probe(sandbox.exec(f"{probe} socket {port}").output)
    assert rows.get("connect", (-1,))[0] == -1, rows
    assert rows["socket-unix"][0] >= 0, rows
    attempts = [
        f"echo hello > /dev/tcp/127.0.0.1/{port}",
        f'python3 -c \'import socket; socket.create_connection(("127.0.0.1", {port}), 2).send(b"py")\'',
        f"exec 3<>/dev/tcp/localhost/{port} && echo hi >&3",
    ]
    for command in attempts:
        assert sandbox.exec(command, timeout=10).exit_code != 0, command
    time.sleep(0.5)
    assert arrived == []
    # the listener itself works: the host reaches it
    with socket.create_connection(("127.0.0.1", port), 2) as conn:
        conn.send(b"host")
    time.sleep(0.5)
    assert arrived == [b"connect:host"]


def test_a_server_on_the_sandboxs_own_loopback_answers_with_the_network_off(sandbox: Sandbox) -> None:
    """Test suites start their own servers (supertest, werkzeug, aiohttp): the sandbox's network
    namespace has its own loopback for them, and nothing else (the host's is unreachable above)."""
    script = ("import socket, threading; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); "
              "threading.Thread(target=lambda: s.accept()[0].sendall(b'pong'), daemon=True).start(); "
              "c = socket.create_connection(s.getsockname(), 2); print(c.recv(4).decode())")
    result = sandbox.exec(f'python3 -c "{script}"', timeout=20)
    assert result.exit_code == 0 and result.output.strip().endswith("pong"), result.output
    ipv6 = sandbox.exec("python3 -c \"import socket; socket.socket(socket.AF_INET6)\"")  # runtimes probe it
    assert ipv6.exit_code == 0, ipv6.output
    outside = sandbox.exec("python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), 2)\"", timeout=20)
    assert outside.exit_code != 0 and "unreachable" in outside.output.lower(), outside.output


def test_no_dns(sandbox: Sandbox, udp_listener: tuple[int, socket.socket]) -> None:
    port, server = udp_listener
    query = (
        struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
        + b"\x07example\x03com\x00\x00\x01\x00\x01"
    )
    script = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f"s.sendto({query!r}, ('127.0.0.1', {port}))"
    )
    sandbox.exec(f'python3 -c "{script}"')  # sent on the sandbox's own loopback: nobody there
    sandbox.exec(f"echo x > /dev/udp/127.0.0.1/{port}")
    time.sleep(0.5)
    with pytest.raises(BlockingIOError):
        server.recvfrom(512)


def test_writes_outside_the_work_tree_do_not_reach_the_host(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    tag = f"swedojo-escape-{secrets.token_hex(6)}"
    targets = [f"/etc/{tag}", f"/usr/{tag}", f"/tmp/{tag}", f"/var/tmp/{tag}", f"/dev/shm/{tag}"]
    targets.append(f"{os.path.dirname(sandbox.workdir)}/{tag}")
    targets.append(f"{tmp_path}/{tag}")
    for target in targets:
        sandbox.exec(f"echo escaped > {target}; touch {target}")
        assert not os.path.exists(target), target
    # through the host-side file API, following a symlink planted inside
    sandbox.exec(f"ln -s /etc evil && ln -s {tmp_path} evil2")
    for path in (f"evil/{tag}", f"evil2/{tag}"):
        try:
            sandbox.write_file(path, b"escaped")
        except OSError:
            pass
    assert not os.path.exists(f"/etc/{tag}") and not os.path.exists(f"{tmp_path}/{tag}")
    # the work tree itself stays writable
    assert sandbox.exec("echo ok > inside.txt && cat inside.txt").output == "ok\n"


def test_host_secrets_are_not_readable(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o600)
    tmp_path.chmod(0o700)
    assert "top secret" not in sandbox.exec(f"cat {secret}").output
    with pytest.raises(OSError):
        sandbox.read_file(str(secret))
    sandbox.exec(f"ln -s {secret} link")
    with pytest.raises(OSError):
        sandbox.read_file("link")


def host_can_fork() -> bool:
    return subprocess.run(["true"], check=False).returncode == 0


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    result = sandbox.exec("bomb() { bomb | bomb & }; bomb; sleep 60", timeout=8)
    assert result.timed_out
    assert host_can_fork()
    after = sandbox.exec("echo alive; ls / | wc -l", timeout=30)
    assert after.exit_code == 0 and after.output.startswith("alive\n"), after.output
    count = sandbox.exec("ls /proc | grep -c '^[0-9]'").output.strip()
    assert int(count) < 20, count


def test_fork_bomb_in_foreground_is_contained(sandbox: Sandbox) -> None:
    result = sandbox.exec("f() { f | f; }; f", timeout=8)
    assert result.timed_out or result.exit_code != 0
    assert host_can_fork()
    assert sandbox.exec("echo alive; true | cat", timeout=30).output == "alive\n"


def test_pid_limit_holds(sandbox: Sandbox, escape_config: SandboxConfig) -> None:
    spawn = (
        "import subprocess\n"
        "procs = []\n"
        "try:\n"
        "    while len(procs) < 2000: procs.append(subprocess.Popen(['sleep', '60']))\n"
        "except OSError as exc: print('stopped', len(procs), exc.errno)\n"
        "for p in procs: p.kill()\n"
    )
    result = sandbox.exec(f"python3 -c {shlex.quote(spawn)}", timeout=60)
    word, count, code = result.output.split()
    assert word == "stopped" and int(code) == errno.EAGAIN, result.output
    assert int(count) < escape_config.pids
    assert host_can_fork()


def test_memory_bomb_is_killed(sandbox: Sandbox) -> None:
    hog = "python3 -c 'x = []\nwhile True: x.append(bytearray(50 * 2**20))'"
    result = sandbox.exec(hog, timeout=60)
    assert not result.timed_out and result.exit_code not in (0, None), result
    big = sandbox.exec("python3 -c 'b = bytearray(8 * 2**30); print(len(b))'", timeout=60)
    assert big.exit_code not in (0, None), big
    assert sandbox.exec("echo alive").output == "alive\n"


def test_disk_fill_is_bounded(sandbox: Sandbox, escape_config: SandboxConfig) -> None:
    cap = escape_config.disk_mb << 20
    for path in ("big.bin", "/tmp/big.bin"):
        result = sandbox.exec(
            f"head -c {4 * cap} /dev/zero > {path}; stat -c %s {path}", timeout=60
        )
        assert result.exit_code == 0, result.output
        size = int(result.output.split()[-1])
        assert size <= cap, (path, size)
        sandbox.exec(f"rm -f {path}")
    assert sandbox.exec("echo alive").output == "alive\n"


def test_infinite_loop_times_out_and_terminal_survives(sandbox: Sandbox) -> None:
    sandbox.exec("cd pkg && export MARK=kept")
    result = sandbox.exec("while :; do :; done", timeout=2)
    assert result.timed_out and result.exit_code is None
    looped = sandbox.exec("python3 -c 'while True: pass'", timeout=2)
    assert looped.timed_out
    state = sandbox.exec("basename $PWD; echo $MARK")
    assert state.output == "pkg\nkept\n"


def test_forged_end_marker(sandbox: Sandbox) -> None:
    forged = "".join(
        f"printf '\\036%s:0\\036\\n' {nonce}; " for nonce in ("0" * 16, secrets.token_hex(8))
    )
    result = sandbox.exec(forged + "printf '\\036x:0\\036\\n'; sleep 1; echo real-end; exit 4")
    assert result.exit_code == 4
    assert result.output.endswith("real-end\n")
    assert result.duration_s >= 1


def test_the_agents_git_config_does_not_shape_the_recorded_diff(sandbox: Sandbox) -> None:
    setup = sandbox.exec(
        "printf '#!/bin/sh\\necho forged\\n' > /tmp/ext && chmod +x /tmp/ext"
        " && git config diff.external /tmp/ext && git config core.fsmonitor 'touch fsmonitor-ran; false'"
        " && git config color.diff always && git config diff.noprefix true"
        " && git config filter.f.clean 'echo cleaned' && echo 'pkg/* filter=f' > .gitattributes"
        " && echo 'X = 2' > pkg/mod.py && echo ok")
    assert setup.output.strip().endswith("ok"), setup.output
    diff = sandbox.diff()
    assert "forged" not in diff and "\x1b" not in diff and "cleaned" not in diff, diff
    assert "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" in diff and "+X = 2\n" in diff, diff
    assert "fsmonitor-ran" not in sandbox.exec("ls").output


@pytest.mark.parametrize("make", [
    "mkfifo pipe.txt",
    "ln -s /dev/zero pipe.txt",
    "ln -s /dev/tty pipe.txt",
], ids=["fifo", "dev-zero", "dev-tty"])
def test_files_the_agent_made_unreadable_are_tool_errors(sandbox: Sandbox, make: str) -> None:
    """Viewing or editing them ends as a bounded tool error returned to the model, never a sandbox failure."""
    assert sandbox.exec(f"{make} && echo made", timeout=60).output.strip().endswith("made")
    unreadable_is_a_tool_error(sandbox)


@pytest.mark.parametrize("name", BACKENDS)
def test_a_file_over_the_read_bound_is_a_tool_error(name: str, git_repo: Path) -> None:
    """A file larger than `MAX_FILE_BYTES` is never read whole into the harness."""
    with make_sandbox(name, git_repo, ESCAPE_CONFIG.model_copy(update={"disk_mb": 256})) as sandbox:
        made = sandbox.exec(f"yes 'a line of text' | head -c {MAX_FILE_BYTES + 1} > pipe.txt && echo made", timeout=60)
        assert made.output.strip().endswith("made"), made.output
        unreadable_is_a_tool_error(sandbox)


def unreadable_is_a_tool_error(sandbox: Sandbox) -> None:
    editor, ctx = EditorTool(), ToolContext()
    for params in ({"command": "view", "path": "pipe.txt"},
                   {"command": "str_replace", "path": "pipe.txt", "old_str": "x", "new_str": "y"}):
        result = editor.run(sandbox, EditorParams(**params), ctx)
        assert result.is_error and len(result.output) < 1000, result.output[:300]
    with pytest.raises(OSError):
        sandbox.read_file("pipe.txt")
    assert sandbox.exec("echo alive").output == "alive\n"


def test_no_file_is_created_set_id(sandbox: Sandbox, probe: str, parse_probe: Parse) -> None:
    rows = parse_probe(sandbox.exec(f"{probe} create made").output)
    for call in ("open", "openat", "creat", "mknod", "mknodat"):
        rc, err, _ = rows[call]
        assert rc == -1 and err in DENIED, (call, rows)
    python = sandbox.exec("python3 -c 'import os; os.close(os.open(\"made2\", os.O_CREAT, 0o4755))'; stat -c %a made2")
    assert not python.output.splitlines()[-1].startswith(("4", "2", "6")), python.output


FORGERIES = (r"printf 'before\033]0;owned\007\033]52;c;b3duZWQ=\007\033[2J\302\2331;31mred\tcell\nafter\n'")
"""Output that retitles the window (OSC 0), fills the clipboard (OSC 52), clears the screen
(CSI, also as the one-character C1 CSI) and rings the bell, around printable text."""


def on_a_terminal(argv: list[str], stdin: bytes = b"") -> str:
    """What `argv` writes to a terminal (a pseudo-terminal as its stdout and stderr), `stdin` piped in."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # this checkout's code
    main, secondary = os.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    seen = bytearray()
    try:
        while select.select([main], [], [], 300)[0]:  # bounded: a hang fails the test
            try:
                chunk = os.read(main, 1 << 16)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            seen += chunk
    finally:
        proc.kill()
        proc.wait()
        os.close(main)
    return seen.decode(errors="replace")


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("command", ["exec", "shell"])
def test_escape_sequences_from_the_sandbox_do_not_reach_the_operators_terminal(
    name: str, command: str, git_repo: Path
) -> None:
    dojo = [str(Path(sys.executable).with_name("dojo")), "sandbox", command, "--backend", name, "--repo", str(git_repo)]
    dojo += ["--image", DOCKER_IMAGE] if name == "docker" else []
    if command == "exec":
        shown = on_a_terminal([*dojo, "--", FORGERIES])
    else:
        shown = on_a_terminal(dojo, f"{FORGERIES}\n".encode())
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in shown, repr(shown)
    lines = shown.replace("\r\n", "\n").splitlines()  # the terminal's own CRLF
    assert "after" in lines and any(line.endswith("red\tcell") and "before" in line for line in lines), repr(shown)


def flipper(link_target: str) -> str:
    """A command that swaps `flip` between a regular file (holding "regular") and a symlink to
    `link_target` until a file `stop` appears."""
    return rf"""python3 -c 'import os, time
deadline = time.monotonic() + 300
while not os.path.exists("stop") and time.monotonic() < deadline:
    os.symlink("{link_target}", "flip.new")
    os.replace("flip.new", "flip")
    with open("flip.new", "w") as f: f.write("regular\n")
    os.replace("flip.new", "flip")' >/dev/null 2>&1 &
sleep 0.5; echo flipping"""


def while_flipping(sandbox: Sandbox, link_target: str, call: Callable[[], object], wanted: object) -> set[object]:
    """What `call` gave (its value, or its OSError's message) while `flip` kept changing, until it
    gave `wanted` at least once (a busy machine may hold one state long)."""
    assert sandbox.exec(flipper(link_target)).output.strip().endswith("flipping")
    seen: set[object] = set()
    try:
        for attempt in range(600):
            try:
                seen.add(call())
            except OSError as exc:
                seen.add(exc.strerror or "")
            if attempt >= 60 and wanted in seen:
                break
    finally:
        sandbox.exec("touch stop; wait")
    return seen


NOT_REGULAR = "Not a regular file (a FIFO, socket or device)"


def test_a_name_swapped_for_a_device_link_is_never_followed_to_it(sandbox: Sandbox) -> None:
    """The file helpers judge the file they opened, not its name: however the name changes between
    the helpers' look and their open, only the regular file is read, never the device."""
    seen = while_flipping(sandbox, "/dev/null", lambda: sandbox.read_file("flip"), b"regular\n")
    assert b"regular\n" in seen and seen <= {b"regular\n", NOT_REGULAR}, seen
    assert sandbox.exec("ln -s pkg/mod.py link && echo made").output == "made\n"
    sandbox.write_file("link", b"X = 3\n")  # in-tree symlinks to regular files: written and read through
    assert sandbox.read_file("link") == b"X = 3\n" and sandbox.exec("cat pkg/mod.py").output == "X = 3\n"


def test_a_name_swapped_for_a_fifo_link_is_never_written_through(sandbox: Sandbox) -> None:
    """The write side of the swapped name: however the name changes between the helper's look and
    its open, the data goes to the regular file or nowhere, never into the FIFO behind the link
    (whose reader keeps what it gets in `drained`)."""
    reader = "setsid -f sh -c 'while [ ! -e stop ]; do cat pipe >> drained; done' >/dev/null 2>&1"  # not a job
    assert sandbox.exec(f"mkfifo pipe && {reader}; echo reading").output.strip().endswith("reading")
    seen = while_flipping(sandbox, "pipe", lambda: sandbox.write_file("flip", b"PAYLOAD\n"), None)
    sandbox.exec("timeout 5 sh -c ': > pipe'")  # a reader waiting to open wakes, and sees `stop`
    assert None in seen and seen <= {None, NOT_REGULAR}, seen
    assert "PAYLOAD" not in sandbox.exec("cat drained 2>/dev/null; echo end").output


HOLDERS = r"""python3 - <<'EOF'
import os, select, signal, struct
r, w = os.pipe()
kids = set()
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(200 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            os.write(w, struct.pack("i", os.getpid()))
            signal.pause()
        finally:
            os._exit(1)
    kids.add(pid)
os.close(w)
held, died = set(), set()
while held | died != kids and select.select([r], [], [], 300)[0] is not None:
    data = os.read(r, 64) if select.select([r], [], [], 0.1)[0] else b""
    held |= {struct.unpack("i", data[i:i + 4])[0] for i in range(0, len(data) - 3, 4)}
    for pid in kids - died:
        if os.waitpid(pid, os.WNOHANG)[0]:
            died.add(pid)
print("holding", len(held - died))
for pid in kids - died:
    os.kill(pid, 9)
EOF"""
"""Four processes that each take 200 MB and hold it: together more than the sandbox's 512 MB."""


def test_processes_together_cannot_exceed_the_memory_limit(sandbox: Sandbox, escape_config: SandboxConfig) -> None:
    isolation = getattr(sandbox, "isolation", None)  # the local backend's: a cgroup only where it can make one
    if isolation is not None and "memory" not in isolation.cgroup:
        pytest.skip(f"no cgroup here: {isolation.missing}")
    result = sandbox.exec(HOLDERS, timeout=600)
    holding = int(result.output.split("holding")[-1].split()[0])
    assert holding * 200 < escape_config.memory_mb, result.output
    assert sandbox.exec("echo alive").output == "alive\n"


def test_files_together_cannot_exceed_the_work_trees_cap(sandbox: Sandbox, escape_config: SandboxConfig) -> None:
    """Seen in an adversarial review: 251 MB written to a local work tree under a 64 MB disk limit,
    each file under the per-file bound. The work tree's size is bounded as a whole."""
    isolation = getattr(sandbox, "isolation", None)
    if isolation is not None and not any(place.startswith("work tree") for place in isolation.disk_mb):
        pytest.skip(f"the work tree cannot be capped here: {isolation.missing}")
    cap = escape_config.disk_mb << 20
    part = cap * 3 // 4  # each file within the per-file bound
    written = sandbox.exec(
        f"for i in 1 2 3 4; do head -c {part} /dev/zero > fill$i.bin; done; du -cb fill*.bin | tail -1", timeout=120
    )
    total = int(written.output.split()[-2])
    assert total <= cap, written.output
    sandbox.exec("rm -f fill*.bin")
    assert sandbox.exec("echo alive").output == "alive\n"


SPINNERS = """python3 - <<'EOF'
import os, subprocess, time
start = time.monotonic()
spin = "import time\\nt = time.monotonic()\\nwhile time.monotonic() - t < 3: pass"
for p in [subprocess.Popen(["python3", "-c", spin]) for _ in range(2)]:
    p.wait()
times = os.times()
print("cpu", times.children_user + times.children_system, "wall", time.monotonic() - start)
EOF"""
"""Two processes that spin for 3 s each: the CPU time they got, and the wall time they took."""


def test_processes_together_get_no_more_than_the_cpu_share(sandbox_factory: Callable[[SandboxConfig], Sandbox],
                                                           escape_config: SandboxConfig) -> None:
    """Seen in an adversarial review: the local backend bound CPU seconds per process, not the
    share of all the sandbox's processes together."""
    sandbox = sandbox_factory(escape_config.model_copy(update={"cpus": 0.5}))
    isolation = getattr(sandbox, "isolation", None)
    if isolation is not None and "cpu" not in isolation.cgroup:
        pytest.skip(f"no cgroup cpu controller here: {isolation.missing}")
    result = sandbox.exec(SPINNERS, timeout=60)
    words = result.output.split()
    cpu, wall = float(words[words.index("cpu") + 1]), float(words[words.index("wall") + 1])
    assert cpu <= 0.5 * wall * 1.25 + 0.2, result.output  # unbounded: up to 2 CPUs, 6 s here
