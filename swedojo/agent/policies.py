"""Policies: what acts in the agent's sandbox. `gold` and `empty` validate environments and graders."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Protocol

from swedojo.rewards.grading import PatchApplyError, apply_patch
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import ExitStatus, Step, TaskInstance, ToolCall, Trajectory


class Policy(Protocol):
    """Works on one task in a sandbox and returns the trajectory (its `patch` is the submission)."""

    name: str

    def solve(self, instance: TaskInstance, sandbox: Sandbox) -> Trajectory:
        """Act on `sandbox` until done; never raises for agent mistakes."""
        ...


def _finish(trajectory: Trajectory, sandbox: Sandbox, status: ExitStatus) -> Trajectory:
    trajectory.patch = sandbox.diff()
    trajectory.exit_status = status
    trajectory.finished_at = datetime.now(timezone.utc)
    return trajectory


class GoldPolicy:
    """Applies the instance's gold patch in the sandbox and submits the resulting diff."""

    name = "gold"

    def solve(self, instance: TaskInstance, sandbox: Sandbox) -> Trajectory:
        trajectory = Trajectory(instance_id=instance.instance_id, policy=self.name)
        step = Step(index=0, phase="submit", tool_calls=[ToolCall(name="apply_patch", arguments={"patch": instance.patch})])
        trajectory.steps.append(step)
        try:
            apply_patch(sandbox, instance.patch, "gold patch")
        except PatchApplyError as exc:
            # Submit the gold text as it is, so grading reports patch_failed with its own evidence.
            step.error = str(exc)
            trajectory.exit_status, trajectory.patch = ExitStatus.SUBMITTED, instance.patch
            trajectory.finished_at = datetime.now(timezone.utc)
            return trajectory
        return _finish(trajectory, sandbox, ExitStatus.SUBMITTED)


class EmptyPolicy:
    """Submits nothing: the floor every task must fail."""

    name = "empty"

    def solve(self, instance: TaskInstance, sandbox: Sandbox) -> Trajectory:
        return _finish(Trajectory(instance_id=instance.instance_id, policy=self.name), sandbox, ExitStatus.SUBMITTED)


POLICIES: dict[str, type] = {"gold": GoldPolicy, "empty": EmptyPolicy}


class UnknownPolicyError(ValueError):
    """No policy by that name."""


def make_policy(name: str) -> Policy:
    """Build a policy by name."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise UnknownPolicyError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}") from None
