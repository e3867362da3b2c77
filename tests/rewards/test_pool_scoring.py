"""Scoring from a warm sandbox pool is scoring: same reports as cold, on a real Docker Engine."""

from __future__ import annotations

import os
import time

import pytest

from swedojo.datasets.registry import load_suite
from swedojo.rewards.score import score
from swedojo.rollout import EnvironmentResolver
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.environment import DEFAULT_PYTHON_IMAGE
from swedojo.schema import EvalStatus, ExitStatus, TaskInstance, Trajectory

pytestmark = pytest.mark.docker


def _ours() -> set[str]:
    """Ids of this process's sandbox containers."""
    from swedojo.sandboxes.docker import LABEL, OWNER_PID_LABEL, api

    found = api().containers(all=True, filters={"label": [f"{LABEL}=1", f"{OWNER_PID_LABEL}={os.getpid()}"]})
    return {c["Id"] for c in found}


def _eventually_disjoint(taken: set[str], timeout: float = 30.0) -> bool:
    """Released containers are removed in the pool's background: wait for it."""
    deadline = time.monotonic() + timeout
    while not taken.isdisjoint(_ours()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _submitted(task: TaskInstance, patch: str) -> Trajectory:
    return Trajectory(instance_id=task.instance_id, policy="test", exit_status=ExitStatus.SUBMITTED, patch=patch)


def test_pool_scores_exactly_as_cold_and_leaves_no_container() -> None:
    from swedojo.sandboxes.pool import SandboxPool

    suite = load_suite("demo")
    task = suite.loaded.instances[0]
    cold = EnvironmentResolver(backend="docker", mirror=suite.mirror).resolve(task)
    with SandboxPool(size=1, reuse=False) as pool:
        warm = EnvironmentResolver(backend="docker", mirror=suite.mirror, pool=pool).resolve(task)
        assert "pool" not in warm.model_dump_json(), "the pool is not part of the recipe"
        runner = warm.warm_runner()
        assert runner is not None, "the demo's pytest command gets a warm runner"
        for patch, status in ((task.patch, EvalStatus.RESOLVED), ("", EvalStatus.EMPTY_PATCH)):
            assert pool.wait_ready(DEFAULT_PYTHON_IMAGE, timeout=120, runner=runner)
            ready = _ours()
            from_pool = score(warm, task, _submitted(task, patch))
            assert _eventually_disjoint(ready), "the score took the warm container (and it was removed)"
            from_cold = score(cold, task, _submitted(task, patch))
            assert from_pool.status == from_cold.status == status, from_pool.error
            assert from_pool.tiers == from_cold.tiers and len(from_pool.tiers) == 6
            assert from_pool.reward == from_cold.reward
        assert _ours(), "the pool refilled"
    assert not _ours(), "closing the pool removed its containers"


def test_reused_containers_score_exactly_as_cold() -> None:
    from swedojo.sandboxes.pool import SandboxPool

    suite = load_suite("demo")
    task = suite.loaded.instances[1]
    cold = EnvironmentResolver(backend="docker", mirror=suite.mirror).resolve(task)
    expected = {patch: score(cold, task, _submitted(task, patch)) for patch in (task.patch, "")}
    with SandboxPool(size=1) as pool:
        warm = EnvironmentResolver(backend="docker", mirror=suite.mirror, pool=pool).resolve(task)
        served: list[str] = []
        for patch in (task.patch, "", task.patch, task.patch, ""):
            with warm.open(task.base_commit) as sandbox:
                served.append(sandbox.container_id)
            report = score(warm, task, _submitted(task, patch))
            assert (report.status, report.tiers, report.reward) == (
                expected[patch].status, expected[patch].tiers, expected[patch].reward)
        assert len(set(served)) < len(served), "containers were reused"
    assert not _ours(), "closing the pool removed its containers"


def test_a_sandbox_the_warm_containers_do_not_fit_starts_cold() -> None:
    from swedojo.sandboxes.docker import api
    from swedojo.sandboxes.pool import SandboxPool

    with SandboxPool(size=1) as pool:
        assert pool.wait_ready(DEFAULT_PYTHON_IMAGE, timeout=120)
        ready = _ours()
        with pool.acquire(DEFAULT_PYTHON_IMAGE, config=SandboxConfig(memory_mb=1024)) as sandbox:
            assert sandbox.container_id not in ready and ready <= _ours()
            assert api().inspect_container(sandbox.container_id)["HostConfig"]["Memory"] == 1024 * 2**20
        with pool.acquire(DEFAULT_PYTHON_IMAGE, config=SandboxConfig(env={"X": "y"})) as sandbox:
            assert sandbox.container_id in ready, "terminal settings differ per sandbox: the warm one serves"
            assert sandbox.exec("echo $X").output.strip() == "y"
    assert not _ours()
