"""What every sandbox backend must do, run on each backend of `swedojo.sandboxes.registry`.

In the spirit of inspect_ai's sandbox self-check: the persistent terminal (output, exit code,
cwd and env kept, a timeout interrupts and the shell stays), files in and out (bytes exact,
parents made, paths relative to the work tree, the OSError Python would raise), nothing hangs
on a FIFO or a device, the diff, and a close that leaves nothing running. A new backend is
included by registering it; it also needs an entry in `LEFTOVERS`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, make_repo, make_sandbox

from swedojo.sandboxes.base import Sandbox, SandboxConfig, SandboxError

CONFIG = SandboxConfig(command_timeout_s=20, total_time_s=600, memory_mb=512, pids=128, disk_mb=64)


@pytest.fixture(params=BACKENDS)
def name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def box(name: str, tmp_path: Path) -> Iterator[Sandbox]:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "pkg/mod.py": "X = 1\n", "old.txt": "old\n"})
    sandbox = make_sandbox(name, repo, CONFIG)
    try:
        yield sandbox
    finally:
        sandbox.close()


# -- exec ------------------------------------------------------------------------------------


def test_exec_output_and_exit_code(box: Sandbox) -> None:
    result = box.exec("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    assert "out\n" in result.output and "err\n" in result.output
    assert box.exec("true").ok
    assert box.exec("pwd").output == f"{box.workdir}\n"
    assert box.exec("cat README.md").output == "hello\n"


def test_cwd_and_env_persist_between_execs(box: Sandbox) -> None:
    assert box.exec("mkdir -p sub && cd sub && export GREETING='hi there'").ok
    assert box.exec('echo "$PWD|$GREETING"').output == f"{box.workdir}/sub|hi there\n"


def test_commands_see_the_same_terminal_variables_on_every_backend(box: Sandbox) -> None:
    """A runner prints by TERM, LANG and CI (colours, progress bars, snapshot writing): a suite must
    print alike on every backend, so that a launch validated on one grades alike on the other. (The
    interactive shell's own TERM=dumb is not exported: its commands do not see it.)"""
    shown = box.exec("""sh -c 'echo "TERM=${TERM-unset} LANG=${LANG-unset} CI=${CI-unset} COLUMNS=${COLUMNS-unset}"'""").output
    assert shown == "TERM=unset LANG=C.UTF-8 CI=unset COLUMNS=unset\n"


@pytest.mark.parametrize("closing", ["exec 1>&- 2>&-", "exec >/dev/null 2>&1", "exec 2>&-"])
def test_a_command_that_closes_its_output_leaves_the_next_ones_theirs(box: Sandbox, closing: str) -> None:
    box.exec(closing)
    after = box.exec("echo out; echo err >&2; ls /nonexistent-path-here")
    assert "out" in after.output and "err" in after.output and "nonexistent-path-here" in after.output, after
    assert after.exit_code != 0


def test_a_timeout_interrupts_and_the_sandbox_stays_usable(box: Sandbox) -> None:
    box.exec("cd pkg && export KEPT=1")
    started = time.monotonic()
    slow = box.exec("sleep 60", timeout=1)
    assert slow.timed_out and slow.exit_code is None and not slow.ok
    assert time.monotonic() - started < 15
    again = box.exec('echo "still here $KEPT"; exit 4')
    assert again.output == "still here 1\n" and again.exit_code == 4
    assert box.exec("pwd").output == f"{box.workdir}/pkg\n"


# -- files -----------------------------------------------------------------------------------


def test_binary_bytes_round_trip(box: Sandbox) -> None:
    data = bytes(range(256)) * 16 + b"\r\n\0\n" + os.urandom(1 << 20)
    box.write_file("blob.bin", data)
    assert box.read_file("blob.bin") == data
    assert box.exec("wc -c < blob.bin").output.strip() == str(len(data))
    box.write_file("empty", b"")
    assert box.read_file("empty") == b""
    box.write_file("README.md", b"replaced\n")  # an existing file is overwritten, not appended to
    assert box.read_file("README.md") == b"replaced\n"


def test_paths_are_relative_to_the_work_tree_and_parents_are_made(box: Sandbox) -> None:
    box.write_file("deep/er/x.txt", b"one\n")
    assert box.exec("cat deep/er/x.txt").output == "one\n"
    assert box.read_file(f"{box.workdir}/deep/er/x.txt") == b"one\n"
    box.exec("cd deep")  # the terminal's cwd does not move the file ops
    assert box.read_file("deep/er/x.txt") == b"one\n"
    box.exec("printf 'from the shell\\0' > er/made.bin")
    assert box.read_file("deep/er/made.bin") == b"from the shell\0"
    box.write_file("/tmp/abs.txt", b"tmp\n")  # absolute paths are the sandbox's own (its /tmp)
    assert box.exec("cat /tmp/abs.txt").output == "tmp\n"


def test_file_errors_are_the_oserrors_python_raises(box: Sandbox) -> None:
    box.exec("mkdir -p adir && echo secret > locked && chmod 000 locked")
    with pytest.raises(FileNotFoundError):
        box.read_file("missing.txt")
    with pytest.raises(FileNotFoundError):
        box.read_file("no/such/dir/file")
    with pytest.raises(IsADirectoryError):
        box.read_file("adir")
    with pytest.raises(IsADirectoryError):
        box.write_file("adir", b"x")
    with pytest.raises(NotADirectoryError):
        box.write_file("README.md/x", b"x")
    with pytest.raises(PermissionError):
        box.read_file("locked")
    with pytest.raises(PermissionError):
        box.write_file("/usr/forbidden.txt", b"x")
    assert box.exec("ls /usr/forbidden.txt").exit_code != 0


def test_symlinks_inside_the_tree_are_read_through(box: Sandbox) -> None:
    assert box.exec("ln -s README.md link && ln -s pkg dirlink && ln -s nowhere dangling").ok
    assert box.read_file("link") == b"hello\n"
    assert box.read_file("dirlink/mod.py") == b"X = 1\n"
    with pytest.raises(IsADirectoryError):
        box.read_file("dirlink")
    with pytest.raises(FileNotFoundError):
        box.read_file("dangling")


@pytest.mark.parametrize("path", ["fifo", "/dev/zero", "/dev/null", "devlink"])
def test_fifos_and_devices_are_refused_not_hung_on(box: Sandbox, path: str) -> None:
    """Refused for what they are, not after the helpers' time bound (whose error says it timed out)."""
    assert box.exec("mkfifo fifo && ln -s /dev/zero devlink").ok
    with pytest.raises(OSError, match="Not a regular file"):
        box.read_file(path)
    with pytest.raises(OSError, match="Not a regular file"):
        box.write_file(path, b"x")
    assert box.exec("echo ok").output == "ok\n"


def test_diff_shows_modified_new_and_deleted_files(box: Sandbox) -> None:
    assert box.diff() == ""
    box.write_file("README.md", b"changed\n")
    box.write_file("new/file.txt", b"fresh\n")
    box.write_file("image.bin", bytes(range(256)))
    box.exec("rm old.txt && echo made > shell-made.txt")
    diff = box.diff()
    assert "--- a/README.md\n+++ b/README.md" in diff and "-hello\n+changed" in diff
    assert "+++ b/new/file.txt" in diff and "+fresh" in diff
    assert "+++ b/shell-made.txt" in diff
    assert "deleted file mode" in diff and "--- a/old.txt" in diff
    assert "GIT binary patch" in diff and "image.bin" in diff


# -- close -----------------------------------------------------------------------------------


def _proc_rows() -> list[tuple[int, int, int]]:
    """(pid, ppid, uid) of every process on the host."""
    rows = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            uid = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        rows.append((int(entry), int(stat.rsplit(")", 1)[1].split()[1]), uid))
    return rows


def _local_leftovers(sandbox: Sandbox, children_before: set[int]) -> list[str]:
    uid = sandbox.isolation.uid  # type: ignore[attr-defined]
    rows = _proc_rows()
    left = [f"child {pid}" for pid, ppid, _ in rows if ppid == os.getpid() and pid not in children_before]
    if uid != os.getuid():  # a uid of its own: nothing of it may run on
        left += [f"process {pid} of the sandbox uid" for pid, _, owner in rows if owner == uid]
    return left + ([f"work tree {sandbox.workdir}"] if os.path.exists(sandbox.workdir) else [])


def _docker_leftovers(sandbox: Sandbox, children_before: set[int]) -> list[str]:
    import docker.errors

    from swedojo.sandboxes.docker import api

    try:
        info = api().inspect_container(sandbox.container_id)  # type: ignore[attr-defined]
    except docker.errors.NotFound:
        return []
    return [f"container {info['Id'][:12]} ({info['State']['Status']})"]


LEFTOVERS: dict[str, Callable[[Sandbox, set[int]], list[str]]] = {
    "local": _local_leftovers,
    "docker": _docker_leftovers,
}
"""Per backend: what of a closed sandbox still exists (processes, containers); empty when nothing."""


def test_close_is_idempotent_and_leaves_nothing_running(name: str, tmp_path: Path) -> None:
    if name not in LEFTOVERS:
        pytest.fail(f"backend {name!r} has no leftover check in LEFTOVERS")
    children_before = {pid for pid, ppid, _ in _proc_rows() if ppid == os.getpid()}
    sandbox = make_sandbox(name, make_repo(tmp_path / "repo"), CONFIG)
    assert sandbox.exec("sleep 300 & (setsid sleep 301 &) ; nohup sleep 302 >/dev/null 2>&1 &").ok
    sandbox.close()
    sandbox.close()
    deadline = time.monotonic() + 10
    while (left := LEFTOVERS[name](sandbox, children_before)) and time.monotonic() < deadline:
        time.sleep(0.1)  # a kill is delivered at once, the reaping may lag
    assert not left
    with pytest.raises(SandboxError):
        sandbox.exec("true")
    with pytest.raises(SandboxError):
        sandbox.read_file("README.md")
    with pytest.raises(SandboxError):
        sandbox.diff()
