"""No sandbox outlives a run: what a `dojo eval` killed with SIGKILL leaves is reaped by the next run,
and a run that is still alive keeps its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from procs import running
from taskrepo import make_task_repo

from swedojo.sandboxes.owners import reap_local, this_process

DOJO = str(Path(sys.executable).with_name("dojo"))
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "COLUMNS": "400", "PYTHONPATH": str(ROOT)}

pytestmark = pytest.mark.slow


def _ends(argv: list[str], bound_s: float = 60.0) -> bool:
    """Whether the processes running `argv` end within `bound_s` (a liveness bound, not a speed check)."""
    deadline = time.monotonic() + bound_s
    while running(argv):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _suite(tmp_path: Path, name: str, sleep: list[str] | None) -> tuple[Path, Path]:
    """A one-task suite whose gold patch resolves it; with `sleep`, its test runs that command first."""
    mirror, task = make_task_repo(tmp_path / name / "mirror")
    if sleep:
        hang = task.test_patch.replace("@@ -8,3 +8,7 @@", "@@ -8,3 +8,9 @@").replace(
            "+def test_clamp_high():\n", f"+def test_clamp_high():\n+    import subprocess\n+    subprocess.run({sleep!r})\n")
        task = task.model_copy(update={"test_patch": hang})
    path = tmp_path / name / "suite.jsonl"
    path.write_text(task.model_dump_json() + "\n")
    return mirror, path


def _eval(tmp_path: Path, name: str, backend: str, sleep: list[str] | None = None) -> list[str]:
    mirror, path = _suite(tmp_path, name, sleep)
    return [DOJO, "eval", "--suite", str(path), "--mirror", str(mirror), "--no-launch", "--policy", "gold",
            "--rewards", "resolved", "--backend", backend, "--out", str(tmp_path / name / "run")]


def _started(command: list[str], sleep: list[str]) -> subprocess.Popen[str]:
    """A run, once its sandbox runs the test that sleeps."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    while not running(sleep):
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    return proc


def _local_leftovers(pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"swedojo-local-*-{pid}-*"))


def _containers(**labels: str) -> list[str]:
    from swedojo.sandboxes.docker import api

    return [c["Id"] for c in api().containers(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})]


def _dead_owner_container() -> str:
    """A container as a run killed between its create and its start leaves it: labelled by an owner
    (a real process) that has ended, never started, so nothing removes it by itself."""
    from swedojo.sandboxes.docker import (
        LABEL,
        OWNER_HOST_LABEL,
        OWNER_LABEL,
        OWNER_PID_LABEL,
        api,
    )

    proc = subprocess.Popen(["sleep", "60"])
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    token = f"{this_process().split('-')[0]}-{proc.pid}-{stat[stat.rfind(')') + 2:].split()[19]}"
    proc.kill()
    proc.wait()
    labels = {LABEL: "1", OWNER_PID_LABEL: str(proc.pid), OWNER_HOST_LABEL: socket.gethostname(), OWNER_LABEL: token}
    return api().create_container("swedojo/python:bookworm", command=["true"], labels=labels)["Id"]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_the_next_run_reaps_what_a_killed_run_left_and_not_what_a_live_run_has(tmp_path: Path, backend: str) -> None:
    token = f"9{os.getpid()}"
    live_sleep, killed_sleep = ["sleep", f"{token}1"], ["sleep", f"{token}2"]
    live = _started(_eval(tmp_path, "live", backend, live_sleep), live_sleep)
    try:
        killed = _started(_eval(tmp_path, "killed", backend, killed_sleep), killed_sleep)
        if backend == "local":
            held = _local_leftovers(live.pid)
        else:
            held = _containers(**{"swedojo.owner_pid": str(live.pid)})
            orphan = _dead_owner_container()
        assert held
        killed.kill()
        killed.communicate()
        if backend == "local":
            # bubblewrap dies with its parent, and the sandbox's processes with it, before any reaper runs
            # (the kernel's signals take a moment: bounded, not timed)
            assert _ends(killed_sleep), "the killed run's test process outlived it"
            left = _local_leftovers(killed.pid)
            assert left and all(os.path.ismount(p / "repo") for p in left if (p / "repo").exists())

        following = subprocess.run(_eval(tmp_path, "next", backend), capture_output=True, text=True, env=ENV,
                                   timeout=600, check=False)
        assert following.returncode == 0, following.stdout[-3000:] + following.stderr[-3000:]

        if backend == "local":
            assert _local_leftovers(killed.pid) == []
            assert _local_leftovers(live.pid) == held and live.poll() is None
        else:
            assert _containers(**{"swedojo.owner_pid": str(killed.pid)}) == []
            assert orphan not in _containers(**{"swedojo.sandbox": "1"})
            assert set(held) <= set(_containers(**{"swedojo.owner_pid": str(live.pid)})) and live.poll() is None
        assert running(killed_sleep) == [] and running(live_sleep)
    finally:
        live.send_signal(signal.SIGKILL)
        live.communicate()
        if backend == "local":
            reap_local()
        else:
            from swedojo.sandboxes.docker import prune

            prune()
