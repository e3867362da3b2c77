"""`dojo eval`: run a policy over a suite into a run directory, resumable and error-isolated.

Outputs (see `RunDir`): `run.json` (what produced the run; a resume must match it), `results.jsonl` (one `InstanceResult` per line, appended as each finishes,
so a killed run resumes where it stopped; one line per instance once a run ends), `summary.json`, `preds.json` (sb-cli format), `trajectories/`, and
SWE-bench's own files beside them: `logs/<instance_id>/` (report.json, test_output.txt, patch.diff) and
the run report `<model>.<run_id>.json` (`rewards.swebench_reports`).

With a predictions file (`dojo eval --predictions`), the instances it has a patch for are graded;
the others are not submitted, as SWE-bench counts them: in the total, not resolved, not run.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from swedojo.agent.base import Policy, derived_seed
from swedojo.datasets.io import RecordError
from swedojo.datasets.predictions import PredictionsFile
from swedojo.errors import output_dir
from swedojo.progress import reporting, stage
from swedojo.rewards.compose import RewardConfig
from swedojo.rewards.swebench_reports import run_report, write_instance_files
from swedojo.rewards.tiers import BaselineCache
from swedojo.rollout import (
    EnvironmentResolver,
    IssueError,
    IssueRun,
    run_instance,
    run_issue,
    spent,
)
from swedojo.rundir import InstanceResult, IssueRunDir, RunDir, write_atomic
from swedojo.sandboxes.scope import SandboxScope, scoped
from swedojo.schema import (
    EnvSpec,
    EvalStatus,
    ExitStatus,
    RewardReport,
    Step,
    TaskInstance,
    Trajectory,
)
from swedojo.settings import Run, RunLimits, RunSettings

if TYPE_CHECKING:
    from swedojo.sandboxes.pool import SandboxPool


class Summary(BaseModel):
    """`summary.json`."""

    suite: str
    """Suite name or path."""
    policy: str
    """Policy name."""
    total: int
    """Instances selected for the run, from the suite's records that loaded (`record_errors` lists the
    others); with predictions, those without one too (`not_submitted`)."""
    resolved: int
    """Instances resolved."""
    resolved_rate: float
    """resolved / (total - not_started): instances a stopped run never started say nothing of the policy."""
    counts: dict[str, int]
    """Instances per EvalStatus."""
    record_errors: list[str] = []
    """Suite records that could not be loaded, one line each."""
    not_started: int = 0
    """Instances without a result because the run was stopped before they started; a resume runs them."""
    stopped_by: str = ""
    """The run limit that stopped the run (`RunLimits`), with what was spent; empty when none did."""
    predictions: str = ""
    """The predictions file graded (`--predictions`), with its content hash; empty for a policy's run."""
    not_submitted: list[str] = []
    """Instances of the run the predictions have no patch for: not graded, not resolved, in `total`."""
    unmatched_predictions: list[str] = []
    """Instance ids of predictions for no instance of the run (not in the suite, or not selected): not graded."""
    prompt_tokens: int = 0
    """Prompt tokens the policy's model used over the run's instances."""
    completion_tokens: int = 0
    """Completion tokens it sampled over them."""
    cost_usd: float | None = None
    """What the model cost in US dollars over the instances whose cost is known (`cost_unknown` are
    left out); None when none is known."""
    cost_unknown: list[str] = []
    """Instances whose model used tokens at no known price: left out of `cost_usd`."""


class _Stop(threading.Event):
    """Set by the run's own limit, and set whenever the caller's stop is: what the executor asks."""

    def __init__(self, caller: threading.Event | None) -> None:
        super().__init__()
        self.caller = caller

    def is_set(self) -> bool:
        return super().is_set() or (self.caller is not None and self.caller.is_set())


class InstanceJob:
    """One instance of this run: `evaluate_instance` with the run's resolver, policy, rewards,
    budget and files, as its settings say.

    Sent to another process (a Ray worker) it travels as those settings, and that process builds
    from them one resolver and one `BaselineCache` per run for all its instances, so launched
    environments and the suite's runs at base are shared there as they are between this process's threads.
    """

    def __init__(self, settings: RunSettings, policy_factory: Callable[[], Policy], run_dir: RunDir,
                 resolver: EnvironmentResolver | None = None, baselines: BaselineCache | None = None) -> None:
        self.settings, self.policy_factory, self.run_dir = settings, policy_factory, run_dir
        self.resolver = resolver or settings.resolver(run_dir.environments)
        self.rewards = settings.reward_config()
        self.baselines = baselines or (BaselineCache(run_dir.baselines) if self.rewards else None)

    def __call__(self, instance: TaskInstance, said: Callable[[str], None]) -> InstanceResult:
        seed = self.settings.run_seed
        return evaluate_instance(instance, self.resolver, self.policy_factory(), self.run_dir.trajectory(instance.instance_id),
                                 self.rewards, self.baselines, self.settings.instance_timeout_s, said,
                                 None if seed is None else derived_seed(seed, instance.instance_id))

    def lost(self, instance: TaskInstance, error: str) -> InstanceResult:
        report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=error)
        return InstanceResult(instance_id=instance.instance_id, repo=instance.repo, policy=self.policy_factory().name,
                              status=EvalStatus.INFRA_ERROR, resolved=False, exit_status=ExitStatus.INFRA_ERROR,
                              error=error, report=report)

    def paths(self) -> list[Path]:
        return [path for path in (self.settings.mirror, self.run_dir.root) if path is not None]

    def __reduce__(self) -> tuple[Callable[..., InstanceJob], tuple[Any, ...]]:
        return _job_in_this_process, (self.settings.model_dump_json(), self.policy_factory, self.run_dir.root)


_kept: dict[tuple[str, Path], tuple[EnvironmentResolver, BaselineCache]] = {}
"""A worker process's resolver and baselines per (run settings, run directory), for `InstanceJob`."""


def _job_in_this_process(settings: str, policy_factory: Callable[[], Policy], root: Path) -> InstanceJob:
    run_dir, run = RunDir(root), RunSettings.model_validate_json(settings)
    if (settings, root) not in _kept:
        _kept[settings, root] = (run.resolver(run_dir.environments), BaselineCache(run_dir.baselines))
    resolver, baselines = _kept[settings, root]
    return InstanceJob(run, policy_factory, run_dir, resolver, baselines)


def to_grade(instances: list[TaskInstance], predictions: PredictionsFile | None) -> list[TaskInstance]:
    """The instances a run grades: all of them, or those the predictions have a patch for."""
    if predictions is None:
        return instances
    submitted = set(predictions.match([i.instance_id for i in instances]).submitted)
    return [i for i in instances if i.instance_id in submitted]


def _pending(instances: list[TaskInstance], done: dict[str, InstanceResult]) -> list[TaskInstance]:
    return [i for i in instances if i.instance_id not in done or done[i.instance_id].status == EvalStatus.INFRA_ERROR]


def pending(instances: list[TaskInstance], run_dir: RunDir) -> list[TaskInstance]:
    """The instances a (resumed) run still has to evaluate: those without a result, and those whose
    result is an infra_error (the harness failed, so it is tried again). A timed_out one is kept."""
    return _pending(instances, run_dir.read_results())


TIMEOUT_GRACE_S = 30.0
"""How long an instance whose budget ran out has to return once its sandboxes are stopped; after
that its thread is left behind (its scope refuses any new sandbox) and its result is written."""


def _timed_out(instance: TaskInstance, policy: Policy, trajectory_file: Path | None, budget_s: float,
               elapsed: float) -> InstanceResult:
    """The result of an instance whose budget ran out: the patch and exit status of its trajectory as
    last saved (`limit_time` while the agent was still at work)."""
    trajectory = None
    if trajectory_file is not None and trajectory_file.is_file():
        try:
            trajectory = Trajectory.model_validate_json(trajectory_file.read_text(encoding="utf-8"))
        except ValidationError:
            trajectory = None
    exit_status = trajectory.exit_status if trajectory is not None else ExitStatus.RUNNING
    error = f"over its {budget_s:g} s budget (--instance-timeout, agent and grading): its sandboxes were stopped"
    return InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo, policy=policy.name, status=EvalStatus.TIMED_OUT,
        resolved=False,
        exit_status=ExitStatus.LIMIT_TIME if exit_status == ExitStatus.RUNNING else exit_status, error=error,
        patch=trajectory.patch if trajectory is not None else "",
        report=RewardReport(instance_id=instance.instance_id, status=EvalStatus.TIMED_OUT, error=error),
        duration_s=elapsed, **spent(trajectory),
    )


def evaluate_instance(
    instance: TaskInstance,
    resolver: EnvironmentResolver,
    policy: Policy,
    trajectory_file: Path | None = None,
    rewards: RewardConfig | None = None,
    baselines: BaselineCache | None = None,
    budget_s: float | None = None,
    on_stage: Callable[[str], None] | None = None,
    seed: int | None = None,
) -> InstanceResult:
    """One instance's unit of work, whatever runs it (this module's threads, or a remote executor):
    `run_instance` within `budget_s` seconds of wall clock (None: unbounded). `on_stage` hears what
    it is doing (`progress.stage`). `seed`: the episode's sampling seed (`RunContext.seed`).

    With a budget the instance runs in a thread of its own and its sandboxes in a `SandboxScope`:
    when the budget runs out they are stopped and the result is `timed_out`.
    """
    scope = SandboxScope()
    outcome: list[InstanceResult | BaseException] = []

    def run() -> None:
        try:
            with scoped(scope), reporting(on_stage or (lambda what: None)):
                outcome.append(run_instance(instance, resolver, policy, trajectory_file, rewards, baselines, seed))
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
            outcome.append(exc)

    if budget_s is None:
        run()
    else:
        start = time.monotonic()
        thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                                  name=f"swedojo-instance-{instance.instance_id}")
        thread.start()
        thread.join(budget_s)
        if not outcome:
            scope.close(f"{instance.instance_id} ran out of its {budget_s:g} s budget")
            thread.join(TIMEOUT_GRACE_S)
            return _timed_out(instance, policy, trajectory_file, budget_s, time.monotonic() - start)
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def evaluate(
    run: Run,
    on_result: Callable[[InstanceResult], None] | None = None,
    on_stage: Callable[[TaskInstance, str], None] | None = None,
    stop: threading.Event | None = None,
) -> Summary:
    """Evaluate every instance of `run` (`RunSettings.prepare`, which claimed its directory) without a
    result in its `results.jsonl` (or with an infra_error one) and write the run's files.

    With rewards `tiers`, every instance is also scored on the reward tiers (three test runs instead
    of one; the suite's run at base is kept in the run's `baselines/`, so a resumed run does not repeat it).
    Once `stop` is set no further instance starts; those running finish, and the files are written
    over the results so far (`Summary.not_started` counts the rest); the run's `limits` stop it the
    same way when its results reach one (`Summary.stopped_by` says so). `on_result` hears each
    result as it is recorded, `on_stage` what each instance is doing as it changes (starting, the
    agent, grading, tier 3's suite runs, ...). With predictions, only the instances they have a
    patch for are graded (`to_grade`). The run's executor runs the instances; their results come
    back here and only this process writes the run directory. A model policy's episode of each
    instance samples with a seed derived from the run's and the instance's id, so the run samples
    the same tokens whatever order the workers take the instances in.

    Killed at any moment, the same run again ends with every instance once in `results.jsonl`:
    the directory is locked against a second live run, results are appended whole (a line cut by
    the kill is dropped) and the file is compacted to one line per instance.
    """
    run.run_dir.hold()
    pool = run.settings.sandbox_pool()
    try:
        return _evaluate(run, on_result, on_stage, stop, pool)
    finally:
        if pool is not None:
            pool.close()
        run.run_dir.release()


def _evaluate(
    run: Run,
    on_result: Callable[[InstanceResult], None] | None,
    on_stage: Callable[[TaskInstance, str], None] | None,
    stop: threading.Event | None,
    pool: SandboxPool | None,
) -> Summary:
    run_dir, settings, limits = run.run_dir, run.settings, run.settings.limits
    done = run_dir.compact_results()
    todo = _pending(to_grade(run.instances, run.predictions), done)
    lock = threading.Lock()
    policy_name = run.policy_factory().name
    halt = _Stop(stop)
    if limits.reached(list(done.values())):
        halt.set()  # a resumed run whose limit was reached before: nothing starts

    def record(result: InstanceResult) -> None:
        write_instance_files(run_dir.instance_logs(result.instance_id), result)
        with lock:
            run_dir.append_result(result)
            done[result.instance_id] = result
            if limits.reached(list(done.values())):
                halt.set()
            if on_result:
                on_result(result)

    def staged(instance: TaskInstance, what: str) -> None:
        if on_stage:
            on_stage(instance, what)

    work = InstanceJob(settings, run.policy_factory, run_dir, settings.resolver(run_dir.environments, pool))
    run.executor.run(todo, work, record, staged, halt)
    return finish_run(run_dir, run.instances, settings.suite, policy_name, run.record_errors, run.predictions, limits)


def finish_run(run_dir: RunDir, instances: list[TaskInstance], suite_name: str, policy_name: str,
               record_errors: list[RecordError] | None = None, predictions: PredictionsFile | None = None,
               limits: RunLimits | None = None) -> Summary:
    """The run's totals over its results so far: `summary.json`, `preds.json` and SWE-bench's run
    report, with `results.jsonl` compacted to one line per instance (a retried infra_error's earlier
    line goes). `dojo eval` ends with it, and so does `dojo run`, whose one-instance run is then read
    like any other. `limits`: the run's, named in the summary when one stopped it."""
    done = run_dir.compact_results()
    graded = to_grade(instances, predictions)
    ordered = [done[i.instance_id] for i in graded if i.instance_id in done]
    not_started = len(graded) - len(ordered)
    started = len(instances) - not_started
    counts = Counter(r.status.value for r in ordered)
    resolved = sum(r.resolved for r in ordered)
    match = predictions.match([i.instance_id for i in instances]) if predictions else None
    priced = [r.cost_usd for r in ordered if r.cost_usd is not None]
    summary = Summary(
        suite=suite_name, policy=policy_name, total=len(instances), resolved=resolved,
        resolved_rate=resolved / started if started else 0.0,
        counts={s.value: counts.get(s.value, 0) for s in EvalStatus},
        record_errors=[str(e) for e in record_errors or []], not_started=not_started,
        stopped_by=limits.reached(list(done.values())) if limits is not None and not_started else "",
        predictions=predictions.fingerprint if predictions else "",
        not_submitted=match.not_submitted if match else [], unmatched_predictions=match.unmatched if match else [],
        prompt_tokens=sum(r.prompt_tokens for r in ordered), completion_tokens=sum(r.completion_tokens for r in ordered),
        cost_usd=sum(priced) if priced else None,
        cost_unknown=[r.instance_id for r in ordered if r.cost_usd is None and r.prompt_tokens + r.completion_tokens],
    )
    write_atomic(run_dir.summary, summary.model_dump_json(indent=2))
    model = {p.instance_id: p.model_name_or_path for p in predictions.predictions} if predictions else {}
    preds = [{"instance_id": r.instance_id, "model_name_or_path": model.get(r.instance_id, policy_name),
              "model_patch": r.patch} for r in ordered]
    write_atomic(run_dir.preds, json.dumps(preds, indent=1))
    report = run_report(done, len(instances), [i.instance_id for i in graded], summary.not_submitted)
    write_atomic(run_dir.swebench_report(predictions.model_name if predictions else policy_name),
                 report.model_dump_json(indent=4))
    return summary


def evaluate_issue(settings: RunSettings, repo: str, text: str, *, commit: str = "", spec: EnvSpec | None = None,
                   on_step: Callable[[Step], None] | None = None) -> IssueRun:
    """`dojo run` as its settings say: the model policy on one issue (`text`, from `settings.suite`)
    of `repo` into the run directory `settings.out` (`rollout.run_issue`), then the run's totals
    (`finish_run`), so that it reads as any run. A directory that holds a run already is refused
    (IssueError) before the model loads."""
    files = IssueRunDir(output_dir(settings.out))
    if files.taken():
        raise IssueError(f"{settings.out} holds a run already: use another --out")
    stage(f"loading model {settings.model}")
    issue = run_issue(repo, text, settings.load_model(), settings.out, commit=commit, backend=settings.backend,
                      agent=settings.agent, mirror=settings.mirror, spec=spec, launch=settings.launching,
                      source=settings.suite, on_step=on_step)
    finish_run(files, [issue.instance], settings.suite, issue.result.policy)
    return issue
