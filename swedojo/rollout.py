"""One instance end to end: environment -> agent sandbox -> policy -> fresh-sandbox grading.

`eval`, `gen` and `run` are thin loops over `run_instance`.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from swedojo.agent.policies import Policy
from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.environment import Environment, default_python_env
from swedojo.schema import EvalStatus, ExitStatus, RewardReport, TaskInstance, Trajectory


class InstanceResult(BaseModel):
    """One line of `results.jsonl`."""

    instance_id: str
    """Task id."""
    policy: str
    """Policy that produced the patch."""
    status: EvalStatus
    """Grading outcome; infra_error is never the agent's fault."""
    resolved: bool
    """Resolved per SWE-bench."""
    exit_status: ExitStatus
    """Why the agent stopped."""
    error: str = ""
    """One-line reason for a non-resolved status, if there is one."""
    patch: str = ""
    """The submitted patch."""
    report: RewardReport
    """Full grading report."""
    duration_s: float = 0.0
    """Wall time for agent plus grading."""


class EnvironmentResolver(BaseModel):
    """Finds the repo of an instance and the environment to run it in."""

    backend: str = "local"
    """Sandbox backend for every instance."""
    mirror: Path | None = None
    """Local mirror of repos as owner/name."""
    config: SandboxConfig = SandboxConfig()
    """Sandbox limits."""

    def resolve(self, instance: TaskInstance) -> Environment:
        source = resolve_repo(instance.repo, self.mirror)
        return default_python_env(instance.repo, instance.setup_commit, source, self.backend, self.config)


def _infra_result(instance: TaskInstance, policy: Policy, error: str, start: float) -> InstanceResult:
    report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=error)
    return InstanceResult(
        instance_id=instance.instance_id, policy=policy.name, status=EvalStatus.INFRA_ERROR, resolved=False,
        exit_status=ExitStatus.INFRA_ERROR, error=error, report=report, duration_s=time.monotonic() - start,
    )


def run_instance(instance: TaskInstance, resolver: EnvironmentResolver, policy: Policy, traj_dir: Path | None = None) -> InstanceResult:
    """Run `policy` on `instance` and grade its patch in a fresh sandbox. Never raises."""
    start = time.monotonic()
    try:
        env = resolver.resolve(instance)
        sandbox = env.open(instance.base_commit)
    except Exception as exc:
        return _infra_result(instance, policy, f"environment: {exc}".splitlines()[0], start)
    try:
        trajectory = policy.solve(instance, sandbox)
    except Exception as exc:
        trajectory = Trajectory(instance_id=instance.instance_id, policy=policy.name,
                                exit_status=ExitStatus.INFRA_ERROR, error=f"{type(exc).__name__}: {exc}")
    finally:
        sandbox.close()
    if traj_dir is not None:
        traj_dir.mkdir(parents=True, exist_ok=True)
        (traj_dir / f"{instance.instance_id}.json").write_text(trajectory.model_dump_json(indent=1))
    if trajectory.exit_status == ExitStatus.INFRA_ERROR:
        return _infra_result(instance, policy, f"policy: {trajectory.error}".splitlines()[0], start)
    report = grade(env, instance, trajectory.patch)
    return InstanceResult(
        instance_id=instance.instance_id, policy=policy.name, status=report.status, resolved=report.resolved,
        exit_status=trajectory.exit_status, error=report.error, patch=trajectory.patch, report=report,
        duration_s=time.monotonic() - start,
    )
