"""One instance end to end: environment -> agent sandbox -> policy -> fresh-sandbox grading.

`eval`, `gen` and `run` are thin loops over `run_instance`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git
from pydantic import BaseModel, PrivateAttr

from swedojo import __version__
from swedojo.agent.backends import ModelBackend
from swedojo.agent.base import Interrupted, Policy, RunContext
from swedojo.agent.loop import AgentConfig, ModelPolicy
from swedojo.progress import stage
from swedojo.repolaunch.errors import AnalyseError, LaunchError
from swedojo.repos import resolve_repo
from swedojo.rewards.compose import RewardConfig, compose
from swedojo.rewards.grading import grade, graded_paths, in_fresh_sandbox
from swedojo.rewards.score import score
from swedojo.rewards.swebench_reports import write_instance_files
from swedojo.rewards.tiers import TIERS, BaselineCache, TierInput, run_tiers
from swedojo.rundir import (
    InstanceResult,
    IssueRunDir,
    RunManifest,
    suite_sha256,
    write_atomic,
)
from swedojo.sandboxes.base import Sandbox, SandboxConfig
from swedojo.sandboxes.environment import Environment, default_python_env
from swedojo.schema import (
    EnvSpec,
    EvalStatus,
    ExitStatus,
    RewardReport,
    Step,
    TaskInstance,
    TaskKind,
    TierScore,
    Trajectory,
)
from swedojo.testrun.patches import PatchApplyError, apply_patch

if TYPE_CHECKING:
    from swedojo.sandboxes.pool import SandboxPool


class EnvironmentResolver(BaseModel):
    """Finds the repo of an instance and the environment to run it in."""

    backend: str = "local"
    """Sandbox backend for every instance."""
    mirror: Path | None = None
    """Local mirror of repos as owner/name."""
    config: SandboxConfig = SandboxConfig()
    """Sandbox limits."""
    launch: bool = False
    """Launch an environment with RepoLaunch per (repo, environment_setup_commit or base_commit), so
    suites from elsewhere need no hand-written specs; off: the plain pytest environment, enough for
    pure-stdlib repos like the bundled demo suite."""
    launch_dir: Path | None = None
    """Where each launch writes its EnvSpec and build log (default: a directory under the temp dir)."""
    _launched: dict[tuple[str, str], Environment | LaunchError] = PrivateAttr(default_factory=dict)
    _locks: dict[tuple[str, str], threading.Lock] = PrivateAttr(default_factory=dict)
    _guard: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _pool: SandboxPool | None = PrivateAttr(default=None)

    def __init__(self, pool: SandboxPool | None = None, **data: Any) -> None:
        """`pool`: warm containers for every docker sandbox it resolves (scoring too); the caller closes it."""
        super().__init__(**data)
        self._pool = pool

    def resolve(self, instance: TaskInstance, commit: str = "") -> Environment:
        """The instance's environment, launched at `commit` (default: its setup commit); a failed
        launch raises its `LaunchError` (stage named) every time."""
        source = resolve_repo(instance.repo, self.mirror)
        browser = instance.kind == TaskKind.FRONT_END  # graded in Chromium inside the sandbox
        if not self.launch:
            env = default_python_env(instance.repo, instance.setup_commit, source, self.backend, self.config)
            return (env.with_browser() if browser else env).with_pool(self._pool)
        key = (instance.repo, commit or instance.setup_commit)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one launch per key; instances of other keys launch meanwhile
            if key not in self._launched:
                self._launched[key] = self._launch(instance.repo, key[1], source, graded_paths(instance))
            found = self._launched[key]
        if isinstance(found, LaunchError):
            raise type(found)(found.message, found.log_path)
        return (found.with_browser() if browser else found).with_pool(self._pool)

    def _launch(self, repo: str, commit: str, source: Path, tests: list[str]) -> Environment | LaunchError:
        from swedojo.repolaunch.launch import environment, launch

        root = self.launch_dir or Path(tempfile.gettempdir()) / "swedojo-launches"
        out = root / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', repo).strip('_')[-60:]}-{commit[:12]}"
        try:
            spec = launch(repo, out, commit=commit, backend=self.backend, mirror=self.mirror, tests=tests)
        except LaunchError as exc:
            return exc
        return environment(spec, source, self.config)


def spent(trajectory: Trajectory | None) -> dict[str, Any]:
    """The tokens and cost of a trajectory, as `InstanceResult` records them."""
    if trajectory is None:
        return {}
    return {"prompt_tokens": trajectory.prompt_tokens, "completion_tokens": trajectory.completion_tokens,
            "cost_usd": trajectory.cost_usd}


def _infra_result(instance: TaskInstance, policy: Policy, error: str, start: float,
                  trajectory: Trajectory | None = None) -> InstanceResult:
    report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=error)
    return InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo, policy=policy.name, status=EvalStatus.INFRA_ERROR, resolved=False,
        exit_status=ExitStatus.INFRA_ERROR, error=error, report=report, duration_s=time.monotonic() - start,
        **spent(trajectory),
    )


def _checkpointer(path: Path | None) -> Callable[[Trajectory], None]:
    """Write the trajectory to `path` atomically (temp file + rename): a kill never leaves half a file."""

    def save(trajectory: Trajectory) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(trajectory.model_dump_json(indent=1))
        os.replace(tmp, path)

    return save


def run_instance(
    instance: TaskInstance,
    resolver: EnvironmentResolver,
    policy: Policy,
    trajectory_file: Path | None = None,
    rewards: RewardConfig | None = None,
    baselines: BaselineCache | None = None,
    seed: int | None = None,
) -> InstanceResult:
    """Run `policy` on `instance`, then grade (and, with `rewards`, score every tier) in a fresh sandbox. Never raises.

    `trajectory_file`: where the trajectory is saved after every step. `baselines`: the suite's runs
    at base kept between scores (see `BaselineCache`). `seed`: the episode's sampling seed (`RunContext.seed`).
    """
    start = time.monotonic()
    try:
        stage("launching the environment" if resolver.launch else "opening a sandbox")
        env = resolver.resolve(instance)
        sandbox = env.open(instance.base_commit)
    except Exception as exc:
        return _infra_result(instance, policy, f"environment: {exc}".splitlines()[0], start)
    # The rollouts of one task form its group (one per run directory; `dojo export` joins them).
    run = RunContext(spec=env.spec, checkpoint=_checkpointer(trajectory_file), group_id=instance.instance_id,
                     files_dir=trajectory_file.with_name(f"{trajectory_file.stem}.files") if trajectory_file else None,
                     seed=seed)
    try:
        stage(f"the {policy.name} policy at work")
        trajectory = policy.solve(instance, sandbox, run)
    except Exception as exc:
        trajectory = Trajectory(instance_id=instance.instance_id, policy=policy.name,
                                exit_status=ExitStatus.INFRA_ERROR, error=f"{type(exc).__name__}: {exc}")
    finally:
        sandbox.close()
    run.checkpoint(trajectory)
    if trajectory.exit_status == ExitStatus.INFRA_ERROR:
        return _infra_result(instance, policy, f"policy: {trajectory.error}".splitlines()[0], start, trajectory)
    def graded(env: Environment) -> RewardReport:
        stage("grading")
        return score(env, instance, trajectory, rewards, baselines=baselines) if rewards \
            else grade(env, instance, trajectory.patch)

    report = graded(env)
    if report.missing_modules and not report.resolved and resolver.launch and instance.setup_commit != instance.base_commit:
        # The setup commit's environment lacks what the base's code imports (its dependencies
        # changed in between): an environment launched at the base commit has it.
        stage("launching the environment at the base commit (a dependency was missing)")
        try:
            report = graded(resolver.resolve(instance, instance.base_commit))
        except LaunchError:
            pass  # the first report stands, naming the missing module
    return InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo, policy=policy.name, status=report.status, resolved=report.resolved,
        exit_status=trajectory.exit_status, error=report.error, patch=trajectory.patch, report=report,
        duration_s=time.monotonic() - start, **spent(trajectory),
    )


class IssueError(ValueError):
    """The issue text could not be read."""


def read_issue(issue: str) -> str:
    """Issue text from a file, or from the GitHub API for an issue URL (where the network allows)."""
    match = re.match(r"https?://github\.com/([^/]+)/([^/]+)/issues/(\d+)", issue)
    if match:
        owner, name, number = match.groups()
        url = f"https://api.github.com/repos/{owner}/{name}/issues/{number}"
        try:
            with urllib.request.urlopen(url, timeout=20) as response:
                data = json.load(response)
        except (OSError, ValueError) as exc:
            raise IssueError(f"{issue}: could not fetch the issue ({exc}); save its text to a file and pass that") from exc
        return f"{data.get('title', '')}\n\n{data.get('body') or ''}".strip()
    path = Path(issue)
    if not path.is_file():
        raise IssueError(f"{issue}: no such issue file (or GitHub issue URL)")
    return path.read_text(encoding="utf-8")


class IssueRun(BaseModel):
    """What `dojo run` produced."""

    instance: TaskInstance
    """The issue as a task of one instance (no tests)."""
    trajectory: Trajectory
    """The agent's run; `exit_status` `interrupted` when Ctrl-C stopped it."""
    report: RewardReport
    """Format and static tiers scored; the test tiers listed as not scored, with the reason. Nothing
    scored for an interrupted run."""
    result: InstanceResult
    """The run's one line of `results.jsonl`."""
    environment: EnvSpec
    """The environment the agent worked in."""


ISSUE_REWARD = RewardConfig(weights={"format": 1.0, "static": 1.0})
"""A raw issue has no known tests: the reward covers format and static checks only."""
NO_TESTS = "a raw issue names no test that checks the fix (no FAIL_TO_PASS); evaluate it as a task for that"


def _watched(save: Callable[[Trajectory], None], on_step: Callable[[Step], None] | None) -> Callable[[Trajectory], None]:
    """`save`, and each step the trajectory gained since the last call handed to `on_step` (the
    console's live view of the agent), in order, once."""
    shown = [0]

    def checkpoint(trajectory: Trajectory) -> None:
        save(trajectory)
        if on_step is not None:
            for step in trajectory.steps[shown[0]:]:
                on_step(step)
        shown[0] = len(trajectory.steps)

    return checkpoint


def run_issue(repo: str, text: str, model: ModelBackend, out: Path, *, commit: str = "", backend: str = "local",
              agent: AgentConfig | None = None, mirror: Path | None = None, spec: EnvSpec | None = None,
              launch: bool = True, source: str = "issue", on_step: Callable[[Step], None] | None = None) -> IssueRun:
    """`dojo run`: the model policy on one issue (its text) of one repo, into `out` as a run directory
    of one instance (`IssueRunDir`: run.json first, the trajectory after every step, then the
    result, SWE-bench's files and `patch.diff`); `evaluate.finish_run` adds the run's totals.

    The agent works in the repository's own environment: `spec` (from `dojo launch`), else one
    launched now with RepoLaunch into `out/environment` (a failure raises its `LaunchError`, but a
    repo with no build or dependency file gets the plain pytest environment); without `launch`,
    the plain pytest environment. `source`: where the text came from, the run's suite name.
    `on_step` hears each step as it is done. Ctrl-C while the agent works ends the run as
    `interrupted`, its steps and diff so far kept and recorded, nothing scored; an `out` that holds
    a run already is refused (IssueError).
    """
    start = time.monotonic()
    source_dir = resolve_repo(repo, mirror)
    try:
        sha = git.Repo(source_dir).commit(commit or "HEAD").hexsha
    except (git.BadName, ValueError) as exc:
        raise IssueError(f"{repo}: no commit {commit or 'HEAD'!r}") from exc
    name = source_dir.name.removesuffix(".git")
    instance = TaskInstance(instance_id=f"{name}-{sha[:8]}", repo=str(source_dir), base_commit=sha, problem_statement=text)
    agent = agent or AgentConfig()
    files = IssueRunDir(out)
    files.hold()
    try:
        if files.taken():
            raise IssueError(f"{out} holds a run already: use another --out")
        write_atomic(files.manifest, RunManifest(
            suite=source, suite_sha256=suite_sha256([instance]), policy=ModelPolicy.name, model=model.name,
            rewards=ISSUE_REWARD.model_dump_json(exclude_none=True), temperature=agent.sampling.temperature,
            swedojo_version=__version__).model_dump_json(indent=1))
        trajectory = Trajectory(instance_id=instance.instance_id, policy=ModelPolicy.name, model=model.name)
        env_spec: EnvSpec | None = spec
        try:
            env = _issue_environment(instance, source_dir, out, backend, mirror, spec, launch)
            env_spec = env.spec
            path = files.trajectory(instance.instance_id)
            run = RunContext(spec=env.spec, checkpoint=_watched(_checkpointer(path), on_step),
                             group_id=instance.instance_id, files_dir=path.with_name(f"{path.stem}.files"))
            stage("the agent at work")
            try:
                with env.open(instance.base_commit) as sandbox:
                    trajectory = ModelPolicy(model, agent).solve(instance, sandbox, run)
            except Interrupted as stopped:
                trajectory = stopped.trajectory
            run.checkpoint(trajectory)
            if trajectory.exit_status == ExitStatus.INTERRUPTED:
                report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.NOT_GRADED,
                                      error=f"interrupted ({trajectory.stopped_by}): nothing was scored")
            else:
                stage("format and static checks")
                report = _format_and_static(env, instance, trajectory)
        except KeyboardInterrupt:  # while launching, or while the patch was checked: recorded as interrupted
            doing = "launching the environment" if env_spec is None else \
                "checking the patch" if trajectory.exit_status != ExitStatus.RUNNING else "starting the agent"
            trajectory = trajectory.model_copy(update={"exit_status": ExitStatus.INTERRUPTED,
                                                       "stopped_by": trajectory.stopped_by or f"Ctrl-C while {doing}"})
            report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.NOT_GRADED,
                                  error=f"interrupted while {doing}: nothing was scored")
            _record_issue(files, instance, trajectory, report, start)
            raise
        result = _record_issue(files, instance, trajectory, report, start)
    finally:
        files.release()
    return IssueRun(instance=instance, trajectory=trajectory, report=report, result=result, environment=env.spec)


def _record_issue(files: IssueRunDir, instance: TaskInstance, trajectory: Trajectory, report: RewardReport,
                  start: float) -> InstanceResult:
    """The run's trajectory, `patch.diff`, result line and SWE-bench files."""
    _checkpointer(files.trajectory(instance.instance_id))(trajectory)
    files.patch.write_text(trajectory.patch, encoding="utf-8")
    result = InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo, policy=ModelPolicy.name, status=report.status,
        resolved=False, exit_status=trajectory.exit_status, error=report.error, patch=trajectory.patch, report=report,
        duration_s=time.monotonic() - start, **spent(trajectory))
    write_instance_files(files.instance_logs(instance.instance_id), result)
    files.append_result(result)
    return result


def _issue_environment(instance: TaskInstance, source: Path, out: Path, backend: str, mirror: Path | None,
                       spec: EnvSpec | None, launch: bool) -> Environment:
    """The environment `run_issue` puts the agent in (see there)."""
    if spec is not None:
        from swedojo.repolaunch.launch import environment

        return environment(spec, source)
    stage("launching the environment (RepoLaunch)" if launch else "opening a sandbox")
    resolver = EnvironmentResolver(backend=backend, mirror=mirror, launch=launch, launch_dir=out / "environment")
    try:
        return resolver.resolve(instance)
    except AnalyseError:  # no build or dependency file: nothing to install, the plain environment runs it
        return EnvironmentResolver(backend=backend, mirror=mirror).resolve(instance)


def _format_and_static(env: Environment, instance: TaskInstance, trajectory: Trajectory) -> RewardReport:
    """Tiers 0 and 1 in a fresh sandbox: does the patch apply, and do the changed files compile;
    the other tiers are in the report as not scored, saying why."""

    def work(sandbox: Sandbox) -> RewardReport:
        report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.NOT_GRADED)
        skip = ""
        if not trajectory.patch.strip():
            report.status, skip = EvalStatus.EMPTY_PATCH, "empty patch"
        else:
            try:
                apply_patch(sandbox, trajectory.patch, "patch")
            except PatchApplyError as exc:
                report.status, report.error, skip = EvalStatus.PATCH_FAILED, str(exc), "patch does not apply"
        tiers = run_tiers(TierInput(sandbox, env, instance, trajectory, report), skip, names=tuple(ISSUE_REWARD.weights))
        report.tiers = tiers + [TierScore(tier=index, name=tier.name, score=0.0, passed=False, scored=False,
                                          evidence={"not_scored": NO_TESTS})
                                for index, tier in enumerate(TIERS) if tier.name not in ISSUE_REWARD.weights]
        report.reward = compose(tiers, False, ISSUE_REWARD)
        return report

    return in_fresh_sandbox(env, instance, work)
