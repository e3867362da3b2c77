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
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from swedojo.agent.base import Policy, derived_seed
from swedojo.datasets.io import RecordError
from swedojo.datasets.predictions import PredictionsFile
from swedojo.executors import Executor, LocalExecutor
from swedojo.progress import reporting
from swedojo.rewards.compose import RewardConfig
from swedojo.rewards.swebench_reports import run_report, write_instance_files
from swedojo.rewards.tiers import BaselineCache
from swedojo.rollout import EnvironmentResolver, run_instance, spent
from swedojo.rundir import InstanceResult, RunDir, RunManifest, write_atomic
from swedojo.sandboxes.scope import SandboxScope, scoped
from swedojo.schema import (
    EvalStatus,
    ExitStatus,
    RewardReport,
    TaskInstance,
    Trajectory,
)


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


class RunLimits(BaseModel):
    """What a whole run may spend (`dojo eval --cost-limit-run`, `--token-limit-run`), over every
    result in its directory (a resumed run's earlier ones too): once its results reach a limit, no
    further instance starts; those running finish (a limit per instance is `LoopLimits`')."""

    max_cost_usd: float | None = None
    """US dollars at the provider's list price over the run's instances; None: no limit."""
    max_total_tokens: int | None = None
    """Prompt plus completion tokens over the run's instances; None: no limit."""

    def reached(self, results: list[InstanceResult]) -> str:
        """The limit `results` reach and what they spent, as `Summary.stopped_by` says it; empty when none."""
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in results)
        cost = sum(r.cost_usd or 0.0 for r in results)
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            return f"{tokens} tokens, prompt and completion, over the run (limit --token-limit-run={self.max_total_tokens})"
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            return f"${cost:.6f} spent over the run (limit --cost-limit-run={self.max_cost_usd:g})"
        return ""


class _Stop(threading.Event):
    """Set by the run's own limit, and set whenever the caller's stop is: what the executor asks."""

    def __init__(self, caller: threading.Event | None) -> None:
        super().__init__()
        self.caller = caller

    def is_set(self) -> bool:
        return super().is_set() or (self.caller is not None and self.caller.is_set())


class InstanceJob:
    """One instance of this run: `evaluate_instance` with the run's resolver, policy, rewards,
    budget and files.

    Sent to another process (a Ray worker) it travels as settings, and that process keeps one
    resolver and one `BaselineCache` per run for all its instances, so launched environments and
    the suite's runs at base are shared there as they are between this process's threads.
    """

    def __init__(self, resolver: EnvironmentResolver, policy_factory: Callable[[], Policy], run_dir: RunDir,
                 rewards: RewardConfig | None, budget_s: float | None = None,
                 baselines: BaselineCache | None = None, seed: int | None = None) -> None:
        self.resolver, self.policy_factory, self.run_dir, self.rewards = resolver, policy_factory, run_dir, rewards
        self.budget_s, self.seed = budget_s, seed
        self.baselines = baselines or (BaselineCache(run_dir.baselines) if rewards else None)

    def __call__(self, instance: TaskInstance, said: Callable[[str], None]) -> InstanceResult:
        seed = None if self.seed is None else derived_seed(self.seed, instance.instance_id)
        return evaluate_instance(instance, self.resolver, self.policy_factory(), self.run_dir.trajectory(instance.instance_id),
                                 self.rewards, self.baselines, self.budget_s, said, seed)

    def lost(self, instance: TaskInstance, error: str) -> InstanceResult:
        report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=error)
        return InstanceResult(instance_id=instance.instance_id, repo=instance.repo, policy=self.policy_factory().name,
                              status=EvalStatus.INFRA_ERROR, resolved=False, exit_status=ExitStatus.INFRA_ERROR,
                              error=error, report=report)

    def paths(self) -> list[Path]:
        return [path for path in (self.resolver.mirror, self.run_dir.root) if path is not None]

    def __reduce__(self) -> tuple[Callable[..., InstanceJob], tuple[Any, ...]]:
        return _job_in_this_process, (self.resolver.model_dump_json(), self.policy_factory, self.run_dir.root, self.rewards,
                                      self.budget_s, self.seed)


_kept: dict[tuple[str, Path], tuple[EnvironmentResolver, BaselineCache]] = {}
"""A worker process's resolver and baselines per (resolver settings, run directory), for `InstanceJob`."""


def _job_in_this_process(resolver: str, policy_factory: Callable[[], Policy], root: Path, rewards: RewardConfig | None,
                         budget_s: float | None, seed: int | None) -> InstanceJob:
    run_dir = RunDir(root)
    if (resolver, root) not in _kept:
        _kept[resolver, root] = (EnvironmentResolver.model_validate_json(resolver), BaselineCache(run_dir.baselines))
    kept, baselines = _kept[resolver, root]
    return InstanceJob(kept, policy_factory, run_dir, rewards, budget_s, baselines if rewards else None, seed)


class RunMismatchError(Exception):
    """The run directory holds results made by other inputs (suite, policy, model, rewards)."""


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


def claim(run_dir: RunDir, manifest: RunManifest, restart: bool = False) -> None:
    """Make `run_dir` this run's: take its lock (RunInUseError while another live run has it), write
    its manifest, or check that a resumed run has the same inputs. The lock is held until
    `evaluate` ends (or the process does: a killed run lets go of it).

    `restart`: an earlier run's files are moved to `previous-<time>/` first (nothing is deleted;
    the content-hashed baselines and environments stay, they hold for any inputs).
    """
    run_dir.hold()
    made = run_dir.results.is_file() or run_dir.manifest.is_file()
    if made and not restart:
        if not run_dir.manifest.is_file():
            raise RunMismatchError(f"{run_dir.root} holds results but no {run_dir.manifest.name}, so what made them is "
                                   "unknown: use another --out, or --restart to set them aside")
        differences = RunManifest.model_validate_json(run_dir.manifest.read_text()).differences(manifest)
        if differences:
            raise RunMismatchError(f"{run_dir.root} was made by other inputs ({'; '.join(differences)}): "
                                   "use another --out, or --restart to set the earlier results aside")
    if made and restart:
        aside = run_dir.root / f"previous-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir()
        reports = run_dir.root.glob(run_dir.swebench_report("*").name)
        # The manifest last: a restart killed half way leaves a directory that the same command sets aside again.
        for path in (run_dir.results, run_dir.summary, run_dir.preds, run_dir.trajectories, run_dir.logs, *reports,
                     run_dir.manifest):
            if path.exists():
                path.rename(aside / path.name)
    write_atomic(run_dir.manifest, manifest.model_dump_json(indent=1))


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
    instances: list[TaskInstance],
    policy_factory: Callable[[], Policy],
    resolver: EnvironmentResolver,
    out: Path,
    suite_name: str,
    record_errors: list[RecordError] | None = None,
    workers: int = 1,
    on_result: Callable[[InstanceResult], None] | None = None,
    rewards: RewardConfig | None = None,
    on_stage: Callable[[TaskInstance, str], None] | None = None,
    stop: threading.Event | None = None,
    predictions: PredictionsFile | None = None,
    instance_timeout_s: float | None = None,
    executor: Executor | None = None,
    seed: int | None = None,
    limits: RunLimits | None = None,
) -> Summary:
    """Evaluate every instance without a result in `out/results.jsonl` (or with an infra_error one)
    and write the run's files; `claim` the directory first to have its inputs recorded and checked.

    With `rewards`, every instance is also scored on the reward tiers (three test runs instead of one;
    the suite's run at base is kept in `out/baselines`, so a resumed run does not repeat it).
    Once `stop` is set no further instance starts; those running finish, and the files are written
    over the results so far (`Summary.not_started` counts the rest). `on_stage` hears what each
    instance is doing as it changes (starting, the agent, grading, tier 3's suite runs, ...).
    With `predictions`, only the instances it has a patch for are graded (`to_grade`); the policy
    is the caller's (`predictions`, which submits them). `instance_timeout_s`: each instance's
    wall-clock budget (see `evaluate_instance`). `executor` runs the instances (default: `workers`
    threads here); their results come back here and only this process writes `out`. `seed`: a model
    policy's episode of each instance samples with a seed derived from it and the instance's id, so
    the run samples the same tokens whatever order the workers take the instances in. `limits`:
    what the whole run may spend; reaching one stops it as `stop` does (`Summary.stopped_by` says so).

    Killed at any moment, the same call again ends with every instance once in `results.jsonl`:
    the directory is locked against a second live run, results are appended whole (a line cut by
    the kill is dropped) and the file is compacted to one line per instance.
    """
    out.mkdir(parents=True, exist_ok=True)
    run_dir = RunDir(out)
    run_dir.hold()
    try:
        return _evaluate(instances, policy_factory, resolver, run_dir, suite_name, record_errors, workers, on_result,
                         rewards, on_stage, stop, instance_timeout_s, predictions, executor, seed, limits)
    finally:
        run_dir.release()


def _evaluate(
    instances: list[TaskInstance],
    policy_factory: Callable[[], Policy],
    resolver: EnvironmentResolver,
    run_dir: RunDir,
    suite_name: str,
    record_errors: list[RecordError] | None,
    workers: int,
    on_result: Callable[[InstanceResult], None] | None,
    rewards: RewardConfig | None,
    on_stage: Callable[[TaskInstance, str], None] | None,
    stop: threading.Event | None,
    instance_timeout_s: float | None,
    predictions: PredictionsFile | None,
    executor: Executor | None,
    seed: int | None,
    limits: RunLimits | None,
) -> Summary:
    done = run_dir.compact_results()
    graded = to_grade(instances, predictions)
    todo = _pending(graded, done)
    lock = threading.Lock()
    policy_name = policy_factory().name
    halt = _Stop(stop)
    if limits is not None and limits.reached(list(done.values())):
        halt.set()  # a resumed run whose limit was reached before: nothing starts

    def record(result: InstanceResult) -> None:
        write_instance_files(run_dir.instance_logs(result.instance_id), result)
        with lock:
            run_dir.append_result(result)
            done[result.instance_id] = result
            if limits is not None and limits.reached(list(done.values())):
                halt.set()
            if on_result:
                on_result(result)

    def staged(instance: TaskInstance, what: str) -> None:
        if on_stage:
            on_stage(instance, what)

    work = InstanceJob(resolver, policy_factory, run_dir, rewards, instance_timeout_s, seed=seed)
    (executor or LocalExecutor(workers)).run(todo, work, record, staged, halt)
    return finish_run(run_dir, instances, suite_name, policy_name, record_errors, predictions, limits)


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
