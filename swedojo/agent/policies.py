"""Policies that need no model: `gold` and `empty` validate environments and graders, `replay` re-runs a
trajectory, `predictions` submits patches made elsewhere (a SWE-bench predictions file).

The `model` policy is `loop.ModelPolicy`; `factory.make_policy` builds any of them by name.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from swedojo.agent.base import RunContext
from swedojo.agent.loop import SYSTEM_PROMPT, TASK_PROMPT
from swedojo.rundir import file_name
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import (
    ExitStatus,
    Step,
    TaskInstance,
    TaskKind,
    ToolCall,
    Trajectory,
)
from swedojo.testrun.patches import apply_commands
from swedojo.tools.base import ToolContext
from swedojo.tools.formats import get_format
from swedojo.tools.registry import ToolRegistry, ToolSetConfig


def _finish(trajectory: Trajectory, sandbox: Sandbox, status: ExitStatus) -> Trajectory:
    trajectory.patch = sandbox.diff()
    trajectory.exit_status = status
    trajectory.finished_at = datetime.now(UTC)
    return trajectory


def _tool_registry(tool_set: str = "swe") -> ToolRegistry:
    return ToolSetConfig().build(tool_set)


def _context(run: RunContext | None) -> ToolContext:
    """What the tool calls of one run share (close it when the run ends)."""
    return ToolContext(env=run.spec if run else None, files_dir=run.files_dir if run else None)


def _act(registry: ToolRegistry, trajectory: Trajectory, sandbox: Sandbox, run: RunContext | None, step: Step,
         ctx: ToolContext) -> bool:
    """Dispatch a step's calls through the tools, record what they returned; True when one submitted."""
    results = [registry.dispatch(call, sandbox, ctx) for call in step.tool_calls]
    step.observation = "\n".join(r.output for r in results)
    step.files = [name for result in results for name in result.files]
    trajectory.steps.append(step)
    if run:
        run.checkpoint(trajectory)
    return any(r.submitted for r in results)


def gold_apply_command(patch: str) -> str:
    """A bash command that applies `patch` with SWE-bench's fallbacks, readable in the trajectory.

    The diff goes to a fresh `mktemp` file (in the sandbox's own TMPDIR), never a fixed name: where
    /tmp is shared (a local sandbox without bubblewrap), another sandbox's file must not be applied.
    """
    delimiter = f"SWEDOJO_PATCH_{secrets.token_hex(6)}"
    body = patch if patch.endswith("\n") else patch + "\n"
    fallbacks = " || ".join(f"{{ {command}; }}" for command in apply_commands('"$gold"'))
    return (f"gold=$(mktemp) && cat > \"$gold\" <<'{delimiter}'\n{body}{delimiter}\n"
            f"{{ {fallbacks}; }}; applied=$?; rm -f \"$gold\"; (exit $applied)")


class GoldPolicy:
    """Applies the instance's gold patch through the tools (bash, then submit), like an agent would.

    The trajectory is a real tool trajectory (fingerprints included), so `replay` can re-run it.
    """

    name = "gold"

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        registry = _tool_registry()
        # The prompts an agent would have had, its tools called natively (as the steps record them):
        # a message export of the gold run is a whole conversation, fit for fine-tuning.
        trajectory = Trajectory(instance_id=instance.instance_id, policy=self.name, group_id=run.group_id if run else "",
                                tool_fingerprints=registry.fingerprints(), toolset_fingerprint=registry.fingerprint,
                                system_prompt=SYSTEM_PROMPT.format(tools=get_format("native").render_tools(registry.specs())),
                                task_prompt=TASK_PROMPT.format(workdir=sandbox.workdir, issue=instance.problem_statement.strip()))
        apply = ToolCall(name="bash", arguments={"command": gold_apply_command(instance.patch)})
        ctx = _context(run)
        _act(registry, trajectory, sandbox, run, Step(index=0, phase="execute", tool_calls=[apply]), ctx)
        submit = Step(index=1, phase="submit", tool_calls=[ToolCall(name="submit")])
        _act(registry, trajectory, sandbox, run, submit, ctx)
        trajectory = _finish(trajectory, sandbox, ExitStatus.SUBMITTED)
        if not trajectory.patch.strip() and instance.patch.strip():
            # It did not apply: submit the gold text as it is, so grading reports patch_failed.
            trajectory.steps[0].error = "gold patch did not apply"
            trajectory.patch = instance.patch
        return trajectory


class EmptyPolicy:
    """Submits nothing: the floor every task must fail."""

    name = "empty"

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        trajectory = Trajectory(instance_id=instance.instance_id, policy=self.name, group_id=run.group_id if run else "")
        return _finish(trajectory, sandbox, ExitStatus.SUBMITTED)


class ReplayPolicy:
    """Re-executes a recorded trajectory's tool calls in a fresh sandbox, refusing other tools.

    Replaying reproduces a run's patch exactly without a model, and shows whether the recorded
    actions still hold on this environment.
    """

    name = "replay"

    def __init__(self, trajectories: Path, tool_set: str = "swe", front_end_tool_set: str = "web") -> None:
        self.trajectories = trajectories
        self.tool_set = tool_set
        self.front_end_tool_set = front_end_tool_set
        """The tool set of front-end tasks (as `AgentConfig.front_end_tool_set`)."""

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        path = self.trajectories / f"{file_name(instance.instance_id)}.json"
        if not path.is_file():
            raise ReplayNotFoundError(f"{instance.instance_id}: no recorded trajectory at {path}")
        recorded = Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
        registry = _tool_registry(self.tool_set if instance.kind == TaskKind.CODE else self.front_end_tool_set)
        registry.check_replay(recorded.tool_fingerprints)
        # Replaying samples nothing: the run spends no tokens (its steps keep what the recorded turns cost).
        trajectory = recorded.model_copy(update={"policy": self.name, "steps": [], "patch": "", "prompt_tokens": 0,
                                                 "completion_tokens": 0, "cost_usd": None})
        status = ExitStatus.LIMIT_STEPS
        with contextlib.closing(_context(run)) as ctx:
            for step in recorded.steps:
                if _act(registry, trajectory, sandbox, run, step.model_copy(update={"observation": "", "files": []}), ctx):
                    status = ExitStatus.SUBMITTED
                    break
        return _finish(trajectory, sandbox, status)


class PredictionPolicy:
    """Submits the patch another agent made for the instance, byte for byte, without touching the sandbox.

    Grading applies it in a fresh sandbox as SWE-bench does (one that does not apply is
    patch_failed); going through the tools would rewrite it as `git diff` prints it.
    """

    name = "predictions"

    def __init__(self, patches: Mapping[str, str]) -> None:
        self.patches = patches

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        if instance.instance_id not in self.patches:
            raise PredictionNotFoundError(f"{instance.instance_id}: the predictions hold no patch for it")
        return Trajectory(instance_id=instance.instance_id, policy=self.name, group_id=run.group_id if run else "",
                          patch=self.patches[instance.instance_id], exit_status=ExitStatus.SUBMITTED,
                          finished_at=datetime.now(UTC))


class PredictionNotFoundError(KeyError):
    """The predictions have no patch for this instance (the run should not have asked)."""


class ReplayNotFoundError(FileNotFoundError):
    """The replay directory has no trajectory for this instance."""
