"""Build steps are limited by their progress: one that keeps printing runs past the sandbox's
command timeout, one that goes silent is stopped with every process it started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, make_repo, make_sandbox

from swedojo.sandboxes.base import Sandbox, SandboxConfig
from swedojo.sandboxes.steps import run_step

CONFIG = SandboxConfig(command_timeout_s=2, total_time_s=600, memory_mb=512, pids=128, disk_mb=64)


@pytest.fixture(params=BACKENDS)
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    sandbox = make_sandbox(request.param, make_repo(tmp_path / "repo", {"README.md": "hello\n"}), CONFIG)
    try:
        yield sandbox
    finally:
        sandbox.close()


def test_a_step_that_keeps_printing_runs_past_the_command_timeout(box: Sandbox) -> None:
    result = run_step(box, "for i in 1 2 3 4 5; do echo step $i; sleep 1; done; exit 3", idle_s=3)
    assert result.exit_code == 3 and not result.timed_out
    assert result.output == "".join(f"step {i}\n" for i in range(1, 6))


def test_a_silent_step_is_stopped_with_what_it_started(box: Sandbox) -> None:
    result = run_step(box, "echo started; sleep 300 & sleep 300; echo never", idle_s=3)
    assert result.timed_out and result.exit_code is None
    assert result.output == "started\n[stopped: no output for 3s]\n"
    assert box.exec("pgrep -x sleep || echo none").output == "none\n"
    assert box.exec("pwd").output == f"{box.workdir}\n"  # the terminal is as it was
