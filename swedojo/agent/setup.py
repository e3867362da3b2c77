"""The setup agent: `dojo run`'s loop and tools, when the rules of `dojo launch` cannot set a
repository up (RepoLaunch-style); `repolaunch.fallback.SetupAgent` is the seam it fills.

It works in a sandbox of the backend being launched, at the commit, with the network on: on the
dependency layer the rules built when they failed after building one (validation), else on the
backend's plain Python environment. Its task prompt holds the failure, what the rules planned and
the build log's tail. It ends by calling `submit_setup` with a plan: install and build commands,
test command, log parser. A declarative plan rather than a record of the commands it ran: those
include dead ends and state the agent made by hand (files edited, variables set), while a plan is
what the launcher can run again from scratch in a clean checkout and validate, which it then
does, recording the plan in the `EnvSpec` like a rule-made one (so `--rebuild` needs no agent).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from swedojo.agent.backends import ModelBackend
from swedojo.agent.base import RunContext
from swedojo.agent.loop import AgentConfig, Episode, LoopLimits, ModelPolicy
from swedojo.repolaunch.analysis import Evidence, RepoAnalysis
from swedojo.repolaunch.fallback import NoPlanError, SetupRequest
from swedojo.repolaunch.recipes import UnsupportedLanguageError, recipe_for
from swedojo.sandboxes.base import SandboxConfig, SandboxError
from swedojo.sandboxes.environment import Environment, default_python_env
from swedojo.schema import ExitStatus, TaskInstance, Trajectory
from swedojo.tools.builtin.submit_setup import SetupPlanParams, SubmitSetupTool

SETUP_SYSTEM_PROMPT = """You are a careful build engineer in a sandboxed checkout of a repository whose automatic setup failed.
You act only through the tools below. Work in three phases:
1. Plan: read the failure and the build log, then write a short numbered plan before acting.
2. Execute: find out how the project installs its dependencies and runs its tests (README, CI files,
   docs, error messages), and try it in the sandbox.
3. Verify: run the whole test suite the way your plan would; then call `submit_setup` with the plan.
Make one or more tool calls per turn.

{tools}"""

SETUP_TASK_PROMPT = """The repository is checked out at {workdir}; the network is on.

{issue}

Start with your plan."""

_ON_LAYER = ("on the dependency layer the rules built ($SWEDOJO_ENV); the project itself is not installed "
             "(Python: `swedojo-overlay` makes a virtualenv in $HOME over the layer, which `pip install` then uses)")
_PLAIN = ("on the plain Python environment of the sandbox (Python with pytest); nothing of the project is "
          "installed (`python -m venv` makes a virtualenv to try installs in)")


class SetupAgentSettings(BaseModel):
    """The setup agent's budget and sandbox."""

    max_steps: int = 30
    """Assistant turns before the agent gives up (`dojo launch --agent-budget`)."""
    max_wall_s: float = 900.0
    """Wall time of the agent's run."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig(
        network=True, command_timeout_s=600.0, memory_mb=8192, pids=4096, disk_mb=8192))
    """Limits of its sandbox: the network on for installs, room for compilers and wheels, an
    install's time per command (its wall time is `max_wall_s` plus one command's)."""
    log_tail_lines: int = 40
    """Lines of the build log's tail in the task prompt."""


class SetupPolicy(ModelPolicy):
    """The model loop with the setup job: its prompts, the `setup` tool set, and a submission that
    is a plan (the launcher checks it by building it; there is no patch to verify)."""

    name = "setup"
    system_prompt = SETUP_SYSTEM_PROMPT
    task_prompt = SETUP_TASK_PROMPT

    def review(self, episode: Episode, patch: str) -> str:
        """Accept the plan: the launcher builds and validates it from scratch."""
        return ""


class ModelSetupAgent:
    """A `SetupAgent` that runs `SetupPolicy` with a model backend (any `dojo run --model`)."""

    def __init__(self, backend: ModelBackend, settings: SetupAgentSettings | None = None, name: str = "") -> None:
        self.backend = backend
        self.settings = settings or SetupAgentSettings()
        self.name = name or backend.name

    def propose(self, request: SetupRequest) -> RepoAnalysis:
        """Run the agent in a sandbox of the half-built environment; its submitted plan as an analysis."""
        limits = LoopLimits(max_steps=self.settings.max_steps, max_wall_s=self.settings.max_wall_s)
        policy = SetupPolicy(self.backend, AgentConfig(tool_set="setup", limits=limits))
        instance = TaskInstance(instance_id=f"setup-{request.commit[:12]}", repo=request.repo,
                                base_commit=request.commit, problem_statement=task(request, self.settings))
        sandbox_config = self.settings.sandbox.model_copy(
            update={"total_time_s": self.settings.max_wall_s + self.settings.sandbox.command_timeout_s})
        env = Environment(spec=request.spec, source=request.source, config=sandbox_config) if request.spec \
            else default_python_env(request.repo, request.commit, request.source, request.backend, sandbox_config)
        try:
            sandbox = env.open(request.commit, prepared=False)
        except SandboxError as exc:
            raise NoPlanError(f"no sandbox to work in: {exc}") from exc
        save = _saver(request.trajectory)
        try:
            trajectory = policy.solve(instance, sandbox, RunContext(spec=request.spec, checkpoint=save))
        finally:
            sandbox.close()
        save(trajectory)
        plan = submitted_plan(trajectory)
        if plan is None:
            raise NoPlanError(outcome(trajectory, request.trajectory))
        return plan_analysis(plan, request)


def task(request: SetupRequest, settings: SetupAgentSettings) -> str:
    """The problem statement: the failure, the rules' plan, where the agent is, the log's tail."""
    rules = request.analysis.model_dump_json(indent=1, include={
        "language", "build_system", "runtime_version", "install_commands", "rebuild_commands", "test_command",
        "log_parser", "ci_commands"}) if request.analysis else "(none: they found no build or dependency file)"
    return f"""Its automatic setup failed at stage {request.stage}:
{request.failure}

What the rules planned:
{rules}

Your sandbox is {_ON_LAYER if request.spec else _PLAIN}.

The end of the build log:
<log>
{log_tail(request.log_path, settings.log_tail_lines)}
</log>

Find a plan that installs the dependencies, builds the project and runs its whole test suite with
per-test results, and submit it with `submit_setup`. The plan is run again from scratch in a clean
checkout: what you change here is not kept, so its commands must do all that is needed."""


def log_tail(path: Path, lines: int, max_bytes: int = 32_768) -> str:
    """The last `lines` lines of the build log."""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - max_bytes))
        return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])


def submitted_plan(trajectory: Trajectory) -> SetupPlanParams | None:
    """The plan of the run's `submit_setup` call; None when it submitted none."""
    if trajectory.exit_status != ExitStatus.SUBMITTED or not trajectory.steps:
        return None
    calls = [c for c in trajectory.steps[-1].tool_calls if c.name == SubmitSetupTool.name]
    return SetupPlanParams.model_validate(calls[-1].arguments) if calls else None


def outcome(trajectory: Trajectory, path: Path) -> str:
    """How a run without a plan ended, in one line."""
    if trajectory.stopped_by:
        how = f"it stopped at {trajectory.stopped_by} without submitting one"
    else:
        error = trajectory.error.splitlines()[0] if trajectory.error else ""
        how = f"it ended ({trajectory.exit_status.value}) after {len(trajectory.steps)} step(s)" + \
            (f": {error}" if error else "")
    return f"{how} (trajectory: {path})"


def plan_analysis(plan: SetupPlanParams, request: SetupRequest) -> RepoAnalysis:
    """The plan as the launcher's analysis: the rules' language, runtimes and dependency files where
    the plan keeps their language; no resolution date (the agent's installs are not date-bound)."""
    rules = request.analysis
    language = plan.language or (rules.language if rules else "python")
    same = rules is not None and rules.language == language
    if plan.runtime_version:
        allowed = [plan.runtime_version]
    elif same and rules is not None:
        allowed = rules.runtime_allowed
    else:
        try:
            allowed = recipe_for(language).known_runtimes()
        except UnsupportedLanguageError:
            allowed = []  # the launcher refuses the plan, naming the languages it has recipes for
    return RepoAnalysis(
        language=language, build_system=rules.build_system if same and rules else "agent", runtime_allowed=allowed,
        debian_release=rules.debian_release if same and rules else "bookworm",
        install_commands=plan.install_commands, rebuild_commands=plan.rebuild_commands,
        test_command=plan.test_command, log_parser=plan.log_parser,
        dependency_files=rules.dependency_files if rules else [],
        evidence=[Evidence(file=str(request.trajectory), says="the setup agent's plan")])


def _saver(path: Path) -> Callable[[Trajectory], None]:
    """Write the trajectory to `path` atomically after every step, so a killed launch leaves it."""

    def save(trajectory: Trajectory) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(trajectory.model_dump_json(indent=1))
        os.replace(tmp, path)

    return save
