"""The rollout service's engine: batches of groups rolled out concurrently, reported as they finish.

Each sample is `rollout.run_instance` (environment, policy, fresh-sandbox grading) on a shared
pool of `max_concurrent` worker threads; its trajectory is written under
`<root>/<batch id>/trajectories/`, and its token record is built from that file by
`rewards.export.token_record`, so a record always re-derives from what is on disk. Every
sandbox a batch opens joins the batch's `SandboxScope`: cancelling the batch stops them all.

On a Ray cluster (`RolloutService(ray=...)`, `dojo serve --executor ray`) each sample's episode and
grading run as a Ray task on a node of the cluster (`run_sample`, its environment built there from
the batch's settings), while the service stays the single writer of batches, groups, weight
versions and samples: the worker thread that launched a sample waits for its task and records it
as before. The nodes share the service's paths (the batch directories, the mirror), and the model
must be one they can all reach (a served or provider model; an in-process one is refused).
Cancelling a batch cancels its running tasks on their nodes (their sandboxes close there) and frees
the worker threads waiting for them.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from swedojo.agent.backends import (
    BackendError,
    ModelBackend,
    SamplingParams,
    load_backend,
)
from swedojo.agent.base import derived_seed
from swedojo.agent.loop import AgentConfig, LoopLimits, ModelPolicy
from swedojo.errors import BadInputError
from swedojo.rewards.advantages import AdvantageConfig, group_advantages
from swedojo.rewards.compose import RewardConfig
from swedojo.rewards.export import (
    Sample,
    TokenMismatchError,
    scored_tiers,
    token_record,
)
from swedojo.rewards.tiers import BaselineCache
from swedojo.rollout import EnvironmentResolver, run_instance
from swedojo.rundir import InstanceResult, file_name
from swedojo.sandboxes.scope import SandboxScope, scoped
from swedojo.schema import (
    EvalStatus,
    ExitStatus,
    RewardReport,
    TaskInstance,
    Trajectory,
)
from swedojo.serve.api import (
    BatchCreated,
    BatchReport,
    BatchRequest,
    BatchState,
    DroppedGroup,
    GroupOut,
    GroupPage,
    SampleOut,
    SampleOutcome,
)
from swedojo.serve.groups import Done, Drop, Refill, decide, is_stale
from swedojo.settings import RunSettings
from swedojo.tools.registry import UnknownToolSetError

if TYPE_CHECKING:
    from swedojo.executors import RaySession
    from swedojo.sandboxes.pool import SandboxPool


class ServiceError(Exception):
    """Base of the errors the service answers a call with."""


class UnknownBatchError(ServiceError):
    """No batch has that id."""


class BadBatchError(ServiceError):
    """The batch cannot be run: unknown suite or instance, or a model that cannot be loaded."""


class VersionRegressionError(ServiceError):
    """A weight version older than the current one: versions only go forward."""


@dataclass
class _Group:
    instance: TaskInstance
    valid: list[SampleOut] = field(default_factory=list)
    in_flight: int = 0
    """Samples launched and not finished (queued or running)."""
    attempts: int = 0
    refills: int = 0
    closed: bool = False


@dataclass(frozen=True)
class SampleWork:
    """One sample as a Ray task gets it (picklable): what `run_instance` needs, the environment named
    by the batch's settings and the policy by its model's spec, each made on the node."""

    instance: TaskInstance
    settings: RunSettings
    model: str
    api_key_env: str
    agent: AgentConfig
    path: Path
    seed: int | None


_ON_NODE: dict[str, EnvironmentResolver | ModelBackend] = {}
"""A worker process's resolvers (by the batch settings that make them: its launched environments
kept) and model clients (by spec), made once."""
_ON_NODE_LOCK = threading.Lock()

CANCEL_POLL_S = 0.5
"""How long a sample's Ray task may wait in C between chances to hear that it is cancelled."""


def _once(key: str, make: Callable[[], EnvironmentResolver | ModelBackend]) -> Any:
    with _ON_NODE_LOCK:
        if key not in _ON_NODE:
            _ON_NODE[key] = make()
        return _ON_NODE[key]


def run_sample(work: SampleWork) -> InstanceResult:
    """A sample's episode and grading, on whichever node runs it (`SampleWork`)."""
    settings = work.settings
    resolver = _once(settings.model_dump_json(), lambda: settings.resolver(settings.out.parent / "environments"))
    remote = work.model.startswith(("http://", "https://"))
    model = _once(f"{work.model}\0{work.api_key_env}",
                  lambda: load_backend(work.model, **({"api_key_env": work.api_key_env} if remote else {})))
    rewards = settings.reward_config()
    baselines = BaselineCache(settings.out / "baselines") if rewards else None
    scope = SandboxScope()

    def episode() -> InstanceResult:
        with scoped(scope):
            return run_instance(work.instance, resolver, ModelPolicy(model, work.agent), work.path, rewards, baselines,
                                seed=work.seed)

    # The episode runs in a thread so that this one stays free to hear `ray.cancel` (a KeyboardInterrupt
    # raised here between bytecodes, which a command waited for in C would never reach).
    with ThreadPoolExecutor(1, thread_name_prefix="swedojo-sample") as pool:
        future = pool.submit(episode)
        try:
            while True:
                with contextlib.suppress(FutureTimeoutError):
                    return future.result(timeout=CANCEL_POLL_S)
        except KeyboardInterrupt:  # the batch was cancelled: its sandboxes close, and the episode unwinds
            scope.close("the sample's batch was cancelled")
            raise


def _lost(work: SampleWork, why: str) -> InstanceResult:
    """A sample whose Ray task was given up on: the harness's failure, refilled as any infra failure."""
    return _infra_result(work.instance, ModelPolicy.name, why)


def _infra_result(instance: TaskInstance, policy: str, error: str) -> InstanceResult:
    return InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo, policy=policy, status=EvalStatus.INFRA_ERROR,
        resolved=False, exit_status=ExitStatus.INFRA_ERROR, error=error,
        report=RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=error))


@dataclass
class _Batch:
    batch_id: str
    request: BatchRequest
    directory: Path
    settings: RunSettings
    resolver: EnvironmentResolver
    policy: ModelPolicy
    rewards: RewardConfig | None
    baselines: BaselineCache | None
    groups: dict[str, _Group]
    scope: SandboxScope = field(default_factory=SandboxScope)
    cond: threading.Condition = field(default_factory=threading.Condition)
    state: BatchState = BatchState.RUNNING
    feed: list[GroupOut] = field(default_factory=list)
    dropped: list[DroppedGroup] = field(default_factory=list)
    started: int = 0
    running: int = 0
    refilled: int = 0
    infra_failures: int = 0
    stale_drops: int = 0


NO_VERDICT = (EvalStatus.INFRA_ERROR, EvalStatus.NOT_SCORABLE)
"""Grading outcomes that say nothing of the policy (the harness failed; a listed test cannot run in
the environment, with the reference patch too): the sample is an infra failure, never a zero reward."""

IN_PROCESS_OPTIONS = {"record_routing": True}
"""In-process models record the experts each token was routed to (`rollout_routed_experts`), and
batch the decode steps of up to `max_concurrent` samples into one forward (`decode_batch`)."""


def checkpoint_stamp(directory: Path) -> tuple:
    """Name, size and modification time of each weight and config file of a checkpoint directory."""
    files = [f for f in directory.iterdir() if f.suffix in (".safetensors", ".bin") or f.name == "config.json"]
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


class ServiceLimits(BaseModel):
    """What callers of the service may ask for, fixed when it starts: a batch chooses among these,
    never names a model server or a variable of the service's environment of its own."""

    endpoints: list[str] = Field(default_factory=list)
    """OpenAI-compatible model servers (http(s)://host/v1[#served-model]) a batch may name as its model."""
    api_key_env: str = "OPENAI_API_KEY"
    """The service's environment variable whose value is sent to those servers as their API key."""
    max_group_size: int = Field(default=64, ge=1)
    """Samples per instance a batch may ask for."""
    max_batch_samples: int = Field(default=1024, ge=1)
    """Samples one batch may ask for (instances times group size)."""
    max_queued_samples: int = Field(default=4096, ge=1)
    """Samples not yet finished, over every running batch, the new one included."""


class RolloutService:
    """Runs submitted batches; thread-safe, one per process (`dojo serve`)."""

    def __init__(self, root: Path, *, backend: str = "local", max_concurrent: int = 4,
                 pool: SandboxPool | None = None, mirror: Path | None = None,
                 limits: ServiceLimits | None = None, ray: RaySession | None = None) -> None:
        """`root`: where each batch's directory goes. `pool`: warm docker sandboxes (the caller closes it).
        `mirror`: local repos as owner/name for every suite. `limits`: what callers may ask for.
        `ray`: run each sample on that cluster (the caller closes it)."""
        self.root = root.absolute() if ray else root
        self.ray = ray
        self.limits = limits or ServiceLimits()
        self.backend = backend
        self.max_concurrent = max(1, max_concurrent)
        self.mirror = mirror
        self.pool = pool
        self._executor = ThreadPoolExecutor(max_workers=self.max_concurrent, thread_name_prefix="swedojo-serve")
        self._lock = threading.Lock()
        self._version = 0
        self._batches: dict[str, _Batch] = {}
        self._models: dict[str, ModelBackend] = {}
        self._stamps: dict[str, tuple] = {}
        """Per checkpoint directory: its weight files as last loaded (`checkpoint_stamp`)."""
        self._models_lock = threading.Lock()

    @property
    def version(self) -> int:
        """The current weight version."""
        return self._version

    def set_version(self, version: int) -> int:
        """Make `version` current; VersionRegressionError when it is older than the current one."""
        with self._lock:
            if version < self._version:
                raise VersionRegressionError(f"weight version {version} is older than the current {self._version}")
            self._version = version
            return version

    def submit(self, request: BatchRequest) -> BatchCreated:
        """Start `group_size` samples of every selected instance; BadBatchError when it cannot run
        or asks for more than the service's limits."""
        limits = self.limits
        if request.group_size > limits.max_group_size:
            raise BadBatchError(f"group_size {request.group_size} is over the service's bound max_group_size="
                                f"{limits.max_group_size}")
        # Only the operator's endpoints are called: a URL, or a provider's model name (its key is the service's).
        local = request.model.startswith(("tiny:", "scripted:")) or Path(request.model).is_dir()
        if self.ray and (request.model.startswith("tiny:") or Path(request.model).is_dir()):
            raise BadBatchError(f"model {request.model!r} runs in this process: the samples of a service on Ray run on the "
                                "cluster's nodes, which need a served model (an --endpoint)")
        if not local and request.model not in limits.endpoints:
            raise BadBatchError(f"model {request.model!r} is not one of the service's endpoints (dojo serve --endpoint): "
                                f"{', '.join(limits.endpoints) or 'none'}")
        batch_id = f"batch-{secrets.token_hex(4)}"
        directory = self.root / batch_id
        try:
            settings = RunSettings.checked(suite=request.suite, instance_ids=request.instance_ids, backend=self.backend,
                                           mirror=self.mirror, launch=request.launch, rewards=request.rewards,
                                           out=directory)
            suite, instances = settings.load_suite()
        except (BadInputError, OSError) as exc:
            raise BadBatchError(str(exc)) from exc
        if not instances:
            raise BadBatchError(f"suite {request.suite} holds no instance to roll out")
        samples = len(instances) * request.group_size
        if samples > limits.max_batch_samples:
            raise BadBatchError(f"{samples} samples ({len(instances)} instances x group_size {request.group_size}) is over "
                                f"the service's bound max_batch_samples={limits.max_batch_samples}")
        if (queued := self._queued()) + samples > limits.max_queued_samples:
            raise BadBatchError(f"{queued} samples are queued and this batch adds {samples}: over the service's bound "
                                f"max_queued_samples={limits.max_queued_samples}")
        model = self._model(request.model, limits.api_key_env)
        sampling = request.sampling
        agent = AgentConfig(
            tool_set=request.tool_set,
            limits=LoopLimits(max_steps=sampling.max_steps),
            sampling=SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                                    max_new_tokens=sampling.max_new_tokens),
        )
        try:
            policy = ModelPolicy(model, agent)
        except UnknownToolSetError as exc:
            raise BadBatchError(exc.args[0]) from exc
        if request.weight_version is not None:
            with self._lock:
                self._version = max(self._version, request.weight_version)
        directory.mkdir(parents=True)
        settings = settings.model_copy(update={"mirror": suite.mirror})
        resolver = settings.resolver(self.root / "environments", self.pool)
        rewards = settings.reward_config()
        batch = _Batch(
            batch_id=batch_id, request=request, directory=directory, settings=settings, resolver=resolver,
            policy=policy, rewards=rewards,
            baselines=BaselineCache(directory / "baselines") if rewards else None,
            groups={i.instance_id: _Group(instance=i) for i in instances},
        )
        with self._lock:
            self._batches[batch_id] = batch
        with batch.cond:
            for group in batch.groups.values():
                self._launch(batch, group, request.group_size)
        return BatchCreated(batch_id=batch_id, groups=len(instances), samples=len(instances) * request.group_size)

    def report(self, batch_id: str) -> BatchReport:
        """The batch's counts so far."""
        batch = self._batch(batch_id)
        with batch.cond:
            return BatchReport(
                batch_id=batch_id, state=batch.state, groups_total=len(batch.groups), groups_done=len(batch.feed),
                groups_dropped=len(batch.dropped), samples_started=batch.started, samples_running=batch.running,
                samples_refilled=batch.refilled, infra_failures=batch.infra_failures, stale_drops=batch.stale_drops,
                dropped=list(batch.dropped), directory=str(batch.directory),
            )

    def groups(self, batch_id: str, cursor: int = 0, wait_s: float = 0.0) -> GroupPage:
        """Groups reported after `cursor`; waits up to `wait_s` for one when there is none yet."""
        batch = self._batch(batch_id)
        with batch.cond:
            batch.cond.wait_for(lambda: len(batch.feed) > cursor or batch.state != BatchState.RUNNING, timeout=wait_s)
            page = batch.feed[cursor:]
            return GroupPage(groups=page, next_cursor=cursor + len(page),
                             done=batch.state != BatchState.RUNNING and cursor + len(page) >= len(batch.feed))

    def cancel(self, batch_id: str) -> BatchReport:
        """Stop the batch: its sandboxes are closed, no queued sample starts, nothing more is reported."""
        batch = self._batch(batch_id)
        with batch.cond:
            if batch.state == BatchState.RUNNING:
                batch.state = BatchState.CANCELLED
            batch.cond.notify_all()
        batch.scope.close(f"batch {batch_id} was cancelled")
        return self.report(batch_id)

    def close(self) -> None:
        """Cancel every running batch and let the workers go."""
        for batch_id in list(self._batches):
            self.cancel(batch_id)
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._models_lock:
            for model in self._models.values():
                close = getattr(model, "close", None)  # an in-process model's decode scheduler thread
                if close is not None:
                    close()

    def _batch(self, batch_id: str) -> _Batch:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            raise UnknownBatchError(f"no batch {batch_id!r}")
        return batch

    def _model(self, spec: str, api_key_env: str) -> ModelBackend:
        """The policy's backend, loaded once per spec (a checkpoint or tiny model is kept in memory).

        A checkpoint directory whose weight files changed since (the trainer saved its step there)
        has its new weights copied into the loaded model, so a batch samples from the checkpoint as
        it is when the batch is submitted."""
        with self._models_lock:
            checkpoint = Path(spec).is_dir()
            stamp = checkpoint_stamp(Path(spec)) if checkpoint else ()
            try:
                if spec not in self._models:
                    remote = spec.startswith(("http://", "https://"))
                    options = {"api_key_env": api_key_env} if remote else {}
                    if spec.startswith("tiny:") or checkpoint:
                        options.update(IN_PROCESS_OPTIONS, decode_batch=self.max_concurrent)
                    self._models[spec] = load_backend(spec, **options)
                elif checkpoint and stamp != self._stamps[spec]:
                    from swedojo.agent.backends.inprocess import InProcessBackend

                    model = self._models[spec]
                    if isinstance(model, InProcessBackend):
                        model.load_weights(spec)
            except (BackendError, OSError, ValueError) as exc:
                raise BadBatchError(f"model {spec!r}: {exc}") from exc
            self._stamps[spec] = stamp
            return self._models[spec]

    def _queued(self) -> int:
        """Samples launched and not finished, over every running batch."""
        with self._lock:
            batches = [b for b in self._batches.values() if b.state == BatchState.RUNNING]
        return sum(g.in_flight for b in batches for g in b.groups.values())

    def _launch(self, batch: _Batch, group: _Group, samples: int) -> None:
        """Queue `samples` new samples of `group` (the batch's lock held)."""
        for _ in range(samples):
            attempt = group.attempts
            group.attempts += 1
            group.in_flight += 1
            self._executor.submit(self._run, batch, group, attempt)

    def _run(self, batch: _Batch, group: _Group, attempt: int) -> None:
        """One sample, on a worker thread."""
        with batch.cond:
            if batch.state != BatchState.RUNNING:
                return
            start = self._version
            batch.started += 1
            batch.running += 1
        instance = group.instance
        path = batch.directory / "trajectories" / f"{file_name(instance.instance_id)}__s{attempt}.json"
        seed = batch.request.sampling.seed
        seed = None if seed is None else derived_seed(seed, instance.instance_id, attempt)
        try:
            if self.ray:
                work = SampleWork(instance=instance, settings=batch.settings, model=batch.request.model,
                                  api_key_env=self.limits.api_key_env, agent=batch.policy.config, path=path, seed=seed)
                shared = [batch.directory, *([batch.settings.mirror] if batch.settings.mirror else [])]
                result = self.ray.call(run_sample, work, shared, _lost,
                                       stopped=lambda: batch.state != BatchState.RUNNING)
            else:
                with scoped(batch.scope):
                    result = run_instance(instance, batch.resolver, batch.policy, path, batch.rewards, batch.baselines,
                                          seed=seed)
        except Exception as exc:  # noqa: BLE001 (the harness failed, e.g. the trajectory could not be written)
            cause = getattr(exc, "cause", None) or exc  # a Ray task's own exception
            result = _infra_result(instance, batch.policy.name,
                                   f"harness: {type(cause).__name__}: {cause}".splitlines()[0])
        sample = self._sample(batch, result, path, start, self._version)
        with batch.cond:
            if batch.state != BatchState.RUNNING:
                return  # cancelled meanwhile: never reported
            batch.running -= 1
            group.in_flight -= 1
            if sample.outcome == SampleOutcome.INFRA_ERROR:
                batch.infra_failures += 1
            elif is_stale(start, self._version, batch.request.max_staleness):
                sample.outcome = SampleOutcome.STALE
                batch.stale_drops += 1
            else:
                group.valid.append(sample)
            with (batch.directory / "samples.jsonl").open("a", encoding="utf-8") as log:
                log.write(sample.model_dump_json(exclude={"record"}) + "\n")
            if group.in_flight == 0:
                self._settle(batch, group)

    def _sample(self, batch: _Batch, result: InstanceResult, path: Path, start: int, end: int) -> SampleOut:
        """The finished sample, with its token record built from the trajectory file."""
        report = result.report
        sample = SampleOut(
            sample_id=f"{batch.batch_id}/{path.stem}", instance_id=result.instance_id, group_id=result.instance_id,
            outcome=SampleOutcome.INFRA_ERROR if result.status in NO_VERDICT else SampleOutcome.VALID,
            status=result.status.value, exit_status=result.exit_status.value, reward=report.reward,
            reward_tiers=scored_tiers(report),
            resolved=result.resolved, weight_version_start=start, weight_version_end=end,
            trajectory_path=str(path) if path.is_file() else "", error=result.error,
        )
        if sample.outcome == SampleOutcome.VALID:
            trajectory = Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
            try:
                sample.record = token_record(Sample(sample_id=sample.sample_id, trajectory=trajectory, result=result),
                                             advantage=0.0)
                sample.group_id = sample.record.group_id
            except TokenMismatchError as exc:
                sample.record_error = str(exc)
        return sample

    def _settle(self, batch: _Batch, group: _Group) -> None:
        """A round of the group has finished: report it, refill it or drop it (the batch's lock held)."""
        request = batch.request
        fresh = [s for s in group.valid if not is_stale(s.weight_version_start, self._version, request.max_staleness)]
        batch.stale_drops += len(group.valid) - len(fresh)
        group.valid = fresh
        decision = decide(request.group_size, len(fresh), group.refills, request.max_refill_rounds)
        if isinstance(decision, Refill):
            group.refills += 1
            batch.refilled += decision.samples
            self._launch(batch, group, decision.samples)
            return
        group.closed = True
        if isinstance(decision, Done):
            batch.feed.append(self._reported(group, request.group_size))
        elif isinstance(decision, Drop):
            batch.dropped.append(DroppedGroup(group_id=group.instance.instance_id, reason=decision.reason))
        if all(g.closed for g in batch.groups.values()):
            batch.state = BatchState.FINISHED
        batch.cond.notify_all()

    @staticmethod
    def _reported(group: _Group, size: int) -> GroupOut:
        """The group with GRPO advantages over its valid samples' rewards."""
        samples = group.valid
        advantages = group_advantages([s.group_id for s in samples], [s.reward for s in samples], AdvantageConfig())
        reported = []
        for sample, advantage in zip(samples, advantages):
            value = advantage or 0.0
            record = sample.record.model_copy(update={"advantage": value}) if sample.record else None
            reported.append(sample.model_copy(update={"advantage": value, "record": record}))
        return GroupOut(group_id=group.instance.instance_id, instance_id=group.instance.instance_id, samples=reported,
                        refilled=group.attempts - size)
