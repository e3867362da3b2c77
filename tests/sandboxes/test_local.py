"""The local backend: what isolation it reports, files in and out, diff, lifecycle."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mounts import churning_work_trees
from sandbox_helpers import env_without

from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.local import LocalSandbox, bubblewrap_problem
from swedojo.sandboxes.terminal import TimeBudgetExhaustedError

needs_bwrap = pytest.mark.skipif(
    bubblewrap_problem() is not None, reason=f"no bubblewrap here: {bubblewrap_problem()}"
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own needs root")

CONFIG = SandboxConfig(command_timeout_s=20, max_output_bytes=2000)


@pytest.fixture
def box(git_repo: Path) -> LocalSandbox:
    sandbox = LocalSandbox(git_repo, "HEAD", CONFIG)
    yield sandbox
    sandbox.close()


@needs_bwrap
@needs_root
def test_full_isolation_is_reported_and_in_force(box: LocalSandbox) -> None:
    iso = box.isolation
    assert iso.bubblewrap and iso.read_only_root and iso.seccomp and not any("bubblewrap" in line for line in iso.missing)
    assert set(iso.namespaces) == {"mount", "pid", "ipc", "uts", "net"}
    assert iso.uid >= 1_000_000 and iso.rlimits["nproc"] == CONFIG.pids
    status = box.exec("id -u; grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status; echo $$")
    assert status.output.split() == [
        str(iso.uid),
        "CapEff:",
        "0000000000000000",
        "NoNewPrivs:",
        "1",
        "Seccomp:",
        "2",
        "2",
    ]
    assert box.exec("ulimit -u; ulimit -f").output.split() == [
        str(CONFIG.pids),
        str(CONFIG.disk_mb << 10),
    ]


@needs_root
def test_fallback_without_bubblewrap_says_what_is_missing(git_repo: Path) -> None:
    sandbox = LocalSandbox(git_repo, "HEAD", CONFIG, bubblewrap=False)
    try:
        iso = sandbox.isolation
        assert not iso.bubblewrap and iso.namespaces == [] and not iso.read_only_root
        assert any("bubblewrap" in note for note in iso.missing)
        assert iso.seccomp and iso.uid >= 1_000_000
        status = sandbox.exec("id -u; grep -E '^Seccomp:' /proc/self/status; unshare -r true")
        assert status.output.split()[:3] == [str(iso.uid), "Seccomp:", "2"]
        assert status.exit_code != 0
        assert sandbox.exec("touch /etc/swedojo-fallback-probe").exit_code != 0
        assert sandbox.exec("echo x > f && cat f").output == "x\n"
    finally:
        sandbox.close()


@needs_bwrap
def test_the_network_switch_opens_sockets(git_repo: Path) -> None:
    """With the network on, commands may make network sockets: a server and its client inside."""
    talk = ("python3 -c 'import socket; s = socket.create_server((\"127.0.0.1\", 0)); "
            "socket.create_connection(s.getsockname()).send(b\"hi\"); print(s.accept()[0].recv(2).decode())'")
    sandbox = LocalSandbox(git_repo, "HEAD", CONFIG.model_copy(update={"network": True}))
    try:
        result = sandbox.exec(talk)
        assert result.output == "hi\n", result.output
    finally:
        sandbox.close()


@needs_bwrap
@needs_root
def test_without_slirp4netns_the_network_on_is_the_hosts(git_repo: Path) -> None:
    """Where no private network can be made, the network on is the host's, and that is said."""
    helpers = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="swedojo-helpers-"))  # seen inside: not under /tmp
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(60)
    port = server.getsockname()[1]
    dojo = [str(Path(sys.executable).with_name("dojo")), "sandbox", "exec", "--backend", "local", "--network"]
    env = {**env_without(helpers, "slirp4netns"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        done = subprocess.run([*dojo, "--repo", str(git_repo), "--", f"echo hi > /dev/tcp/127.0.0.1/{port}"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert "share the host's network namespace" in done.stderr and "slirp4netns not installed" in done.stderr
        conn, _ = server.accept()
        assert conn.recv(10) == b"hi\n"
        conn.close()
    finally:
        server.close()
        shutil.rmtree(helpers)


def test_files_in_and_out(box: LocalSandbox) -> None:
    box.write_file("new/dir/file.txt", b"one\n")
    assert box.exec("cat new/dir/file.txt").output == "one\n"
    box.exec("printf 'two\\0' > made.bin; echo tmp > /tmp/t.txt")
    assert box.read_file("made.bin") == b"two\0"
    assert box.read_file(f"{box.workdir}/made.bin") == b"two\0"
    assert box.read_file("/tmp/t.txt") == b"tmp\n"
    box.write_file("/tmp/from-host.txt", b"host\n")
    assert box.exec("cat /tmp/from-host.txt").output == "host\n"
    with pytest.raises(FileNotFoundError):
        box.read_file("missing.txt")
    with pytest.raises(IsADirectoryError):
        box.read_file("new")
    with pytest.raises(OSError):
        box.write_file("/usr/forbidden.txt", b"x")
    if box.isolation.uid != os.getuid():
        assert os.stat(Path(box.workdir) / "new/dir/file.txt").st_uid == box.isolation.uid


def test_diff_is_complete_and_survives_the_budget(git_repo: Path) -> None:
    config = CONFIG.model_copy(update={"total_time_s": 3})
    sandbox = LocalSandbox(git_repo, "HEAD", config)
    try:
        sandbox.write_file("README.md", b"changed\n")
        sandbox.write_file("big.txt", ("line\n" * 5000).encode())
        sandbox.exec("printf '\\x00\\x01' > blob.bin")
        assert sandbox.exec("sleep 10").timed_out
        with pytest.raises(TimeBudgetExhaustedError):
            sandbox.exec("true")
        patch = sandbox.diff()
        assert "+changed" in patch and patch.count("+line") == 5000 and "GIT binary patch" in patch
    finally:
        sandbox.close()


@needs_bwrap
@needs_root
def test_git_helpers_survive_work_trees_unmounted_on_the_host_meanwhile(box: LocalSandbox) -> None:
    """Other sandboxes closing (their work tree's tmpfs unmounted, its directory removed) while a
    fresh bubblewrap copies the host's mounts read-only made that bubblewrap fail, a few times in
    a hundred: a diff ended as an infra error in CI. Churning such mounts must not reach ours."""
    box.write_file("README.md", b"changed\n")
    with churning_work_trees():
        patches = [box.diff() for _ in range(150)]
    assert all("+changed" in patch for patch in patches)


def test_harness_python_is_reachable(git_repo: Path) -> None:
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    sandbox = LocalSandbox(git_repo, "HEAD", CONFIG.model_copy(update={"env": {"PATH": path}}))
    try:
        result = sandbox.exec("python -c 'import pytest, pydantic; print(\"ok\")'")
        assert result.output == "ok\n", result.output
        assert sandbox.exec("ls /root/.ssh 2>&1; ls /root | wc -l").exit_code == 0
    finally:
        sandbox.close()


def test_git_works_inside(box: LocalSandbox) -> None:
    result = box.exec("echo more >> README.md && git commit -qam more && git log --oneline | wc -l")
    assert result.output == "2\n", result.output


def test_shell_exit_restarts_in_the_work_tree(box: LocalSandbox) -> None:
    box.exec("cd /tmp")
    assert "the shell exited" in box.exec("exec true").output
    assert box.exec("pwd").output == f"{box.workdir}\n"


def test_close_ends_everything_and_removes_the_tree(git_repo: Path) -> None:
    sandbox = LocalSandbox(git_repo, "HEAD", CONFIG)
    sandbox.exec("(setsid sleep 300 &) ; sleep 300 &")
    uid, workdir = sandbox.isolation.uid, sandbox.workdir
    sandbox.close()
    sandbox.close()
    assert not os.path.exists(workdir)
    time.sleep(0.2)
    if uid != os.getuid():
        owners = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit():
                    owners.append(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                pass
        assert uid not in owners


@needs_bwrap
def test_timeout_ends_orphans_that_left_the_session(box: LocalSandbox) -> None:
    assert box.exec("(setsid sleep 302 &); sleep 100", timeout=1).timed_out
    assert box.exec("ps -eo args | grep -c '^sleep 302'").output == "0\n"


@needs_root
def test_helpers_are_not_taken_from_the_callers_path(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory on PATH the sandbox user can reach (under /tmp) holds look-alikes of every
    helper the harness runs as root: none of them runs."""
    planted = Path(tempfile.mkdtemp(prefix="swedojo-planted-"))
    try:
        planted.chmod(0o755)
        marker = planted / "ran"
        for name in ("env", "prlimit", "bwrap", "setpriv", "nsenter", "chown", "sh", "head", "tee"):
            (planted / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n")
            (planted / name).chmod(0o755)
        monkeypatch.setenv("PATH", f"{planted}:{os.environ['PATH']}")
        with LocalSandbox(git_repo, "HEAD", CONFIG) as sandbox:
            assert sandbox.exec("echo hi").output == "hi\n"
            sandbox.write_file("new.txt", b"x")
            assert sandbox.read_file("new.txt") == b"x" and "new.txt" in sandbox.diff()
        assert not marker.exists(), marker.read_text()
    finally:
        shutil.rmtree(planted)


def test_file_helpers_run_in_a_session_of_their_own(git_repo: Path) -> None:
    """No controlling terminal of the operator's for a helper (a link to /dev/tty would reach it).
    Seen without bubblewrap, where the helper's /proc is the host's; both paths start it alike."""
    with LocalSandbox(git_repo, "HEAD", CONFIG, bubblewrap=False) as sandbox:
        code, out, _ = sandbox._one_off(["sh", "-c", "read -r _ _ _ _ _ session _ < /proc/$$/stat; echo $session"])
        assert code == 0 and int(out) != os.getsid(0), out
