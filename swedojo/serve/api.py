"""What crosses the rollout service's HTTP boundary: requests, samples, groups and the batch report.

Published as OpenAPI (`/openapi.json`), so a trainer in any language can generate its client.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swedojo.rewards.export import TokenRecord


class Sampling(BaseModel):
    """How the policy samples, and how long an episode may run."""

    temperature: float = Field(default=1.0, ge=0.0)
    """0 is greedy (logprobs of the raw distribution); above, logprobs of the tempered one."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus mass; 1.0 turns it off."""
    top_k: int = Field(default=0, ge=0)
    """Keep the k most likely tokens; 0 turns it off."""
    max_new_tokens: int = Field(default=512, ge=1)
    """Tokens per assistant turn."""
    max_steps: int = Field(default=40, ge=1)
    """Assistant turns per episode."""
    seed: int | None = None
    """Sample k of an instance (refills continue k) samples with a seed derived from (seed, instance
    id, k), each turn its own: the same batch submitted again samples the same tokens from the same
    weights, however the samples interleave. None: the model backend's own random stream."""


class BatchRequest(BaseModel):
    """A batch of tasks to roll out: `group_size` samples of each instance. Fields it does not
    know are refused (a batch names no environment variable of the service's)."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    """A registered suite name (e.g. demo) or a suite file on the service's machine."""
    instance_ids: list[str] = []
    """The instances to roll out; empty: every instance of the suite."""
    group_size: int = Field(default=4, ge=1)
    """Samples per instance; a group is reported only when it holds this many valid samples."""
    model: str
    """The policy, as `dojo eval --model` takes it: one of the service's endpoints (`dojo serve
    --endpoint`: the trainer's inference engine, http(s)://host/v1[#served-model], whose key the
    service holds), an in-process checkpoint directory, `tiny:ARCH` or `scripted:FILE`."""
    sampling: Sampling = Sampling()
    """Sampling settings for every turn."""
    tool_set: str = "swe"
    """The agent's tools, a named tool set: swe (bash, editor, search, tests, submit) or minimal
    (bash and submit, as mini-swe-agent trains); it fixes the system prompt and the tool fingerprints."""
    weight_version: int | None = Field(default=None, ge=0)
    """The trainer's current weight version; when newer than the service's, it becomes current
    (as `POST /weights` does)."""
    max_staleness: int | None = Field(default=None, ge=0)
    """A sample that started more than this many weight versions behind the current one is dropped
    (and its group refilled by the same rule as an infrastructure failure); None: no bound."""
    max_refill_rounds: int = Field(default=2, ge=0)
    """How many times a group may be refilled before it is dropped."""
    rewards: Literal["tiers", "resolved"] = "tiers"
    """tiers: every reward tier (gated); resolved: SWE-bench grading only (faster)."""
    launch: bool | None = None
    """Build environments with RepoLaunch (default: on, except for bundled suites, which need none)."""


class BatchCreated(BaseModel):
    """The answer to a submitted batch."""

    batch_id: str
    """Names the batch in every later call, and its directory under the service's root."""
    groups: int
    """Groups the batch will report or drop."""
    samples: int
    """Samples started for it (refills come on top)."""


class SampleOutcome(str, Enum):
    """What became of a finished sample."""

    VALID = "valid"
    """Graded; it counts towards its group."""
    INFRA_ERROR = "infra_error"
    """The harness or environment failed, not the policy (grading's infra_error, or not_scorable: a listed
    test cannot run in the environment): never a zero reward, the group is refilled or dropped."""
    STALE = "stale"
    """Started more than `max_staleness` weight versions behind the current one: dropped."""


class SampleOut(BaseModel):
    """One rollout with its reward and, where the policy sampled tokens, its token record."""

    sample_id: str
    """`<batch id>/<trajectory file stem>`, as `dojo export` names a sample."""
    instance_id: str
    """Task id."""
    group_id: str
    """The group it belongs to (the instance id)."""
    outcome: SampleOutcome
    """Whether it counts, and if not why."""
    status: str
    """Grading outcome (EvalStatus value)."""
    exit_status: str
    """Why the agent stopped (ExitStatus value)."""
    reward: float
    """Scalar reward from the report."""
    reward_tiers: dict[str, float] = {}
    """Tier name -> score, of the tiers that were scored (one not scored is absent, never 0.0)."""
    resolved: bool = False
    """Resolved per SWE-bench."""
    advantage: float = 0.0
    """Group-normalised (GRPO) advantage within its reported group."""
    weight_version_start: int
    """The service's weight version when the sample started."""
    weight_version_end: int
    """The service's weight version when it finished."""
    trajectory_path: str = ""
    """The trajectory as written to disk; the token record re-derives from it."""
    error: str = ""
    """Why an infra_error sample failed."""
    record: TokenRecord | None = None
    """The RL record, built from the trajectory on disk exactly as `dojo export --format tokens` does."""
    record_error: str = ""
    """Why there is no record (e.g. a scripted policy's placeholder logprobs)."""


class GroupOut(BaseModel):
    """A finished group: `group_size` valid samples of one instance."""

    group_id: str
    """Group id (the instance id)."""
    instance_id: str
    """Task id."""
    samples: list[SampleOut]
    """Its valid samples, in the order they finished."""
    refilled: int = 0
    """Samples started in place of dropped ones."""


class GroupPage(BaseModel):
    """Groups finished since a cursor."""

    groups: list[GroupOut]
    """In the order they finished."""
    next_cursor: int
    """Pass it as `cursor` to get the groups after these."""
    done: bool
    """The batch will report no more groups (finished or cancelled)."""


class BatchState(str, Enum):
    """Where a batch is."""

    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class DroppedGroup(BaseModel):
    """A group that was not reported."""

    group_id: str
    """Group id."""
    reason: str
    """One line."""


class BatchReport(BaseModel):
    """Counts of a batch so far."""

    batch_id: str
    """Batch id."""
    state: BatchState
    """running, finished or cancelled."""
    groups_total: int
    """Groups asked for."""
    groups_done: int
    """Groups reported."""
    groups_dropped: int
    """Groups dropped (too few valid samples)."""
    samples_started: int
    """Samples started, refills included."""
    samples_running: int
    """Samples started and not finished."""
    samples_refilled: int
    """Samples started to refill a group."""
    infra_failures: int
    """Samples that failed for infrastructure reasons (never turned into zero rewards)."""
    stale_drops: int
    """Samples dropped for starting more than `max_staleness` versions behind."""
    dropped: list[DroppedGroup]
    """Each dropped group and why."""
    directory: str
    """Where its trajectories are written."""


class WeightVersion(BaseModel):
    """The trainer's weight version."""

    version: int = Field(ge=0)
    """Monotonic: a version older than the current one is refused."""
