"""The docker backend against a real Docker Engine and the locally made images (`make docker-up`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from taskrepo import make_task_repo
from typer.testing import CliRunner

from swedojo.sandboxes import SandboxConfig, UnknownBackendError, open_sandbox
from swedojo.sandboxes.docker import SandboxClosedError

pytestmark = pytest.mark.docker

BASE_IMAGE = "swedojo/base:bookworm"
PYTHON_IMAGE = "swedojo/python:bookworm"


def labelled(container_id: str | None = None, owner: int | None = None) -> list[str]:
    """Ids of containers carrying the sandbox label (only `container_id`, only of `owner`)."""
    from swedojo.sandboxes.docker import LABEL, OWNER_PID_LABEL, api

    found = api().containers(all=True, filters={"label": f"{LABEL}=1"})
    return [
        c["Id"]
        for c in found
        if container_id in (None, c["Id"])
        and owner in (None, int(c["Labels"][OWNER_PID_LABEL]))
    ]


def wait_gone(container_id: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while labelled(container_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def task_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    mirror, task = make_task_repo(tmp_path_factory.mktemp("mirror"))
    return mirror / "owner" / "calc", task.base_commit


@pytest.fixture
def sandbox(task_repo: tuple[Path, str]):
    from swedojo.sandboxes.docker import DockerSandbox

    source, commit = task_repo
    with DockerSandbox(PYTHON_IMAGE, source, commit) as sb:
        yield sb


def test_container_from_base_image_runs_a_command() -> None:
    from swedojo.sandboxes.docker import DockerSandbox

    with DockerSandbox(BASE_IMAGE) as sb:
        result = sb.exec("echo hello from $(. /etc/os-release; echo $VERSION_CODENAME)")
    assert result.ok, result
    assert result.output == "hello from bookworm\n"


def test_hardening_is_visible_from_inside(sandbox) -> None:
    result = sandbox.exec(
        "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; ls /sys/class/net"
    )
    lines = result.output.split()
    assert lines[0] != "0"
    status = dict(zip(lines[1:7:2], lines[2:7:2]))
    assert status == {
        "CapEff:": "0000000000000000",
        "NoNewPrivs:": "1",
        "Seccomp:": "2",
    }
    assert lines[7:] == ["lo"]
    assert not sandbox.exec("touch /etc/x").ok, "root filesystem must be read-only"
    assert sandbox.exec("df -m /tmp | tail -1").output.split()[1] == str(
        SandboxConfig().disk_mb
    )


def test_threads_and_processes_start(sandbox) -> None:
    """glibc starts threads with clone3 and falls back to clone only on ENOSYS, not EPERM."""
    script = "import subprocess, threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()"
    result = sandbox.exec(f'python3 -c "{script}" && sh -c "echo process"')
    assert result.output == "thread\nprocess\n", result.output


def test_home_is_a_writable_executable_tmp(sandbox) -> None:
    """Repo layers put an overlay venv in $HOME; test suites run scripts from their tmp dirs."""
    script = 'cd && printf "#!/bin/sh\\necho ran\\n" > run.sh && chmod +x run.sh && ./run.sh && pwd'
    assert sandbox.exec(script).output == "ran\n/tmp\n"


def test_limits_reach_the_container(sandbox) -> None:
    from swedojo.sandboxes.docker import api

    host = api().inspect_container(sandbox.container_id)["HostConfig"]
    config = SandboxConfig()
    assert host["PidsLimit"] == config.pids
    assert host["Memory"] == config.memory_mb * 2**20
    assert host["NanoCpus"] == int(config.cpus * 1e9)
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] and host["Init"]


def test_repo_files_and_diff(sandbox, task_repo: tuple[Path, str]) -> None:
    _, commit = task_repo
    assert sandbox.workdir == "/testbed"
    assert sandbox.exec("git rev-parse HEAD").output.strip() == commit
    assert sandbox.exec("stat -c %u calc.py").output.strip() == "1000"
    assert sandbox.diff() == ""

    sandbox.write_file("pkg/new.py", b"X = 1\n")
    assert sandbox.read_file("/testbed/pkg/new.py") == b"X = 1\n"
    source = sandbox.read_file("calc.py").replace(b"return a + b", b"return b + a")
    sandbox.write_file("calc.py", source)
    sandbox.exec("rm test_calc.py")
    diff = sandbox.diff()
    assert "+++ b/pkg/new.py" in diff and "+X = 1" in diff
    assert "-    return a + b\n+    return b + a" in diff
    assert "deleted file mode" in diff
    assert sandbox.exec("python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -1").ok

    with pytest.raises(FileNotFoundError):
        sandbox.read_file("missing.txt")
    with pytest.raises(PermissionError):
        sandbox.write_file("/etc/passwd", b"x")


def test_terminal_persists_and_survives_a_timeout(sandbox) -> None:
    assert sandbox.exec("cd /tmp && export GREETING=hi").ok
    assert sandbox.exec("echo $PWD $GREETING").output == "/tmp hi\n"
    slow = sandbox.exec("sleep 30 & sleep 30", timeout=1)
    assert slow.timed_out and slow.exit_code is None
    again = sandbox.exec("echo still here; exit 7")
    assert again.output == "still here\n" and again.exit_code == 7
    assert sandbox.exec("echo $PWD").output == "/tmp\n"


def test_close_removes_the_container() -> None:
    from swedojo.sandboxes.docker import DockerSandbox, SandboxClosedError

    sb = DockerSandbox(PYTHON_IMAGE)
    assert labelled(sb.container_id)
    sb.close()
    sb.close()
    assert not labelled(sb.container_id)
    with pytest.raises(SandboxClosedError):
        sb.exec("true")


def test_missing_image_is_an_infra_error() -> None:
    from swedojo.sandboxes.docker import ImageNotFoundError

    with pytest.raises(ImageNotFoundError, match="no-such-image"):
        open_sandbox("docker", image="swedojo/no-such-image:1")


OWNER = textwrap.dedent(
    """
    import sys, time
    from swedojo.sandboxes.docker import DockerSandbox
    sb = DockerSandbox("swedojo/base:bookworm")
    print(sb.container_id, flush=True)
    time.sleep(600)
    """
)


def start_owner() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    container_id = proc.stdout.readline().strip()
    assert container_id and labelled(container_id)
    return proc, container_id


def test_sigterm_of_the_owner_removes_its_containers() -> None:
    proc, container_id = start_owner()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert not labelled(container_id)


def test_killed_owner_leaves_nothing_after_prune(sandbox) -> None:
    from swedojo.sandboxes.docker import prune

    proc, container_id = start_owner()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    prune()
    assert wait_gone(container_id)
    assert labelled(sandbox.container_id), "prune must keep containers of live owners"


def test_prune_all_removes_every_labelled_container() -> None:
    from swedojo.sandboxes.docker import DockerSandbox, prune

    sb = DockerSandbox(BASE_IMAGE)
    try:
        assert sb.container_id in prune(everything=True)
        assert not labelled(sb.container_id)
    finally:
        sb.close()


def test_warm_pool_hands_out_ready_sandboxes(task_repo: tuple[Path, str]) -> None:
    from swedojo.sandboxes.pool import PoolClosedError, SandboxPool

    source, commit = task_repo
    with SandboxPool(size=1, reuse=False) as pool:  # reuse: test_reuse.py
        assert pool.wait_ready(PYTHON_IMAGE, timeout=60)
        sb = pool.acquire(PYTHON_IMAGE, source, commit)
        assert sb.exec("git rev-parse HEAD").output.strip() == commit
        assert pool.wait_ready(PYTHON_IMAGE, timeout=60), (
            "the pool refills in the background"
        )
        pool.release(sb)
        with pytest.raises(SandboxClosedError):
            sb.exec("true")
        assert wait_gone(sb.container_id), "a released sandbox is removed in the background"
        waiting = labelled(owner=os.getpid())
    assert waiting and not any(labelled(c) for c in waiting), (
        "closing the pool removes its ready sandboxes"
    )
    with pytest.raises(PoolClosedError):
        pool.acquire(PYTHON_IMAGE)


def test_open_sandbox_registry(task_repo: tuple[Path, str]) -> None:
    source, commit = task_repo
    with open_sandbox("docker", image=PYTHON_IMAGE, source=source, commit=commit) as sb:
        assert sb.exec("ls calc.py").ok
    with pytest.raises(UnknownBackendError):
        open_sandbox("podman", image=PYTHON_IMAGE)


def test_cli_exec_runs_in_a_sandbox(task_repo: tuple[Path, str]) -> None:
    from swedojo.cli import app

    source, commit = task_repo
    args = [
        "sandbox",
        "exec",
        "--backend",
        "docker",
        "--image",
        PYTHON_IMAGE,
        "--repo",
        str(source),
        "--commit",
        commit,
    ]
    result = CliRunner().invoke(app, [*args, "--", "id -u; ls calc.py; exit 3"])
    assert result.exit_code == 3, result.output
    assert result.output.split() == ["1000", "calc.py"]
