"""Run directories as trainer-ready records: chat messages for SFT, token records for RL.

Input: one or more `dojo eval` run directories (`results.jsonl` of InstanceResult and
`trajectories/<id>.json`). Several run directories over the same suite are several rollouts per
task; rollouts share a group when their `Trajectory.group_id` is equal, or, when it is empty,
their instance id. The reward of a trajectory is its instance's `report.reward` in the run's
results.jsonl, so several runs must have been scored alike (`run.json` rewards), else one patch
would carry two rewards. Runs that ended in infra_error are skipped: not the agent's doing, so no signal;
so are not_scorable ones (a listed test cannot run in the environment, with the reference patch
too: their 0.0 is no verdict), timed_out ones (the budget covers grading too, so the time may not have been the agent's)
and interrupted ones (the operator's Ctrl-C cut them short; nothing was scored).

`tokens` records never re-tokenise text: they are the ids the engine sampled. Field mapping:

| record field        | from the trajectory                                 | slime `Sample`     | verl agent loop     |
|---------------------|-----------------------------------------------------|--------------------|---------------------|
| sample_id           | `<run dir name>/<trajectory file stem>`             | index (an int)     | -                   |
| group_id            | group_id, else instance_id                          | group_index (int)  | uid                 |
| prompt_ids          | initial_prompt_token_ids                            | tokens[:prompt]    | prompt_ids          |
| response_ids        | per step: prompt_token_ids + response_token_ids     | tokens[prompt:]    | response_ids        |
| loss_mask           | 0 on each step's prompt ids, 1 on sampled ids       | loss_mask          | response_mask       |
| rollout_log_probs   | 0.0 on masked ids, each step's response_logprobs    | rollout_log_probs  | response_logprobs   |
| logprob_kind        | the steps' one LogprobKind (placeholders refused)   | -                  | -                   |
| response_length     | len(response_ids)                                   | response_length    | -                   |
| reward              | results.jsonl report.reward                         | reward             | reward_score        |
| reward_tiers        | report.tiers as name -> score                       | (reward dict)      | -                   |
| advantage           | GRPO group advantage (see advantages.py)            | -                  | (advantages)        |
| status              | exit_status mapped to slime's Sample.Status values  | status             | -                   |
| weight_versions     | [policy_version] (empty when unknown)               | weight_versions    | -                   |
| num_turns           | len(steps)                                          | -                  | num_turns           |
| rollout_routed_experts | the steps' routed_experts, concatenated (MoE, when recorded) | rollout_routed_experts | -     |

A record whose tokens do not match its trajectory is refused with the reason, never written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from swedojo.rewards.advantages import AdvantageConfig, group_advantages
from swedojo.rundir import InstanceResult, RunDir, RunManifest
from swedojo.schema import EvalStatus, ExitStatus, LogprobKind, RewardReport, Step, Trajectory


class RunDirError(ValueError):
    """A path given as a run directory is not one, or several cannot be exported together (two share
    a name, so sample ids would clash, or they were scored with different reward settings)."""


class TokenMismatchError(ValueError):
    """A trajectory's tokens do not add up: its record would train on a sequence never sampled."""


SLIME_STATUS: dict[ExitStatus, str] = {
    ExitStatus.SUBMITTED: "completed",
    ExitStatus.LIMIT_STEPS: "truncated",
    ExitStatus.LIMIT_TOKENS: "truncated",
    ExitStatus.LIMIT_TIME: "truncated",
    ExitStatus.LIMIT_COST: "truncated",
    ExitStatus.FORMAT_ERRORS: "failed",
    ExitStatus.TIMEOUTS: "failed",
    ExitStatus.INFRA_ERROR: "aborted",
    ExitStatus.RUNNING: "aborted",
    ExitStatus.INTERRUPTED: "aborted",
}
"""Why a run ended -> slime's `Sample.Status` value."""


class Sample(BaseModel):
    """One trajectory with the result graded for it."""

    sample_id: str
    """`<run dir name>/<trajectory file stem>`."""
    trajectory: Trajectory
    """The run as the policy recorded it."""
    result: InstanceResult
    """Its line in results.jsonl."""

    @property
    def group_id(self) -> str:
        return self.trajectory.group_id or self.trajectory.instance_id


class Refusal(BaseModel):
    """A sample that was not written, and why."""

    sample_id: str
    """Which one."""
    reason: str
    """One line."""

    def __str__(self) -> str:
        return f"{self.sample_id}: {self.reason}"


class TokenRecord(BaseModel):
    """One RL sample (see the module docstring for where each field comes from)."""

    sample_id: str
    """`<run dir name>/<trajectory file stem>`; unique within an export."""
    instance_id: str
    """Task id."""
    group_id: str
    """Rollouts of one task in one batch share it; advantages are normalised within it."""
    prompt_ids: list[int]
    """Prompt before the first assistant turn."""
    response_ids: list[int]
    """Everything after the prompt: observations/role markers and sampled tokens, in order."""
    loss_mask: list[int]
    """1 on sampled tokens, 0 on the rest; aligned with response_ids."""
    rollout_log_probs: list[float]
    """Rollout policy log-probability of each sampled token, 0.0 where loss_mask is 0."""
    logprob_kind: str
    """Which distribution the rollout logprobs come from (temperature, raw or server); never a placeholder."""
    response_length: int
    """len(response_ids)."""
    reward: float
    """Scalar reward from the run's report."""
    reward_tiers: dict[str, float]
    """Tier name -> score, of the tiers that were scored (one not scored is absent, never 0.0)."""
    resolved: bool
    """Resolved per SWE-bench."""
    eval_status: str
    """Grading outcome (EvalStatus value)."""
    advantage: float
    """GRPO-normalised advantage within the group."""
    status: str
    """slime status: completed, truncated, failed or aborted."""
    exit_status: str
    """Why the agent stopped (ExitStatus value)."""
    num_turns: int
    """Assistant turns."""
    policy: str
    """Policy name."""
    model: str
    """Model identifier."""
    weight_versions: list[str]
    """Weights version(s) the tokens were sampled with."""
    tool_fingerprints: dict[str, str]
    """Tool name -> signature fingerprint of every tool the run could call."""
    toolset_fingerprint: str
    """Hash over all tool fingerprints."""
    rollout_routed_experts: list[list[list[int]]] | None = None
    """MoE routing replay: [len(prompt_ids) + response_length - 1, num_layers, top_k] expert ids each
    token was routed to when fed (the last token never is), -1 on dense layers; None when not recorded."""


TOKEN_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("instance_id", pa.string()),
        ("group_id", pa.string()),
        ("prompt_ids", pa.list_(pa.int64())),
        ("response_ids", pa.list_(pa.int64())),
        ("loss_mask", pa.list_(pa.int8())),
        ("rollout_log_probs", pa.list_(pa.float64())),
        ("logprob_kind", pa.string()),
        ("response_length", pa.int64()),
        ("reward", pa.float64()),
        ("reward_tiers", pa.map_(pa.string(), pa.float64())),
        ("resolved", pa.bool_()),
        ("eval_status", pa.string()),
        ("advantage", pa.float64()),
        ("status", pa.string()),
        ("exit_status", pa.string()),
        ("num_turns", pa.int64()),
        ("policy", pa.string()),
        ("model", pa.string()),
        ("weight_versions", pa.list_(pa.string())),
        ("tool_fingerprints", pa.map_(pa.string(), pa.string())),
        ("toolset_fingerprint", pa.string()),
        ("rollout_routed_experts", pa.list_(pa.list_(pa.list_(pa.int32())))),
    ]
)
"""Parquet schema of TokenRecord, stated so column types never depend on the rows written."""


class MessageRecord(BaseModel):
    """One trajectory as an SFT conversation."""

    sample_id: str
    """`<run dir name>/<trajectory file stem>`."""
    instance_id: str
    """Task id."""
    messages: list[dict[str, Any]]
    """system, user, then per turn an assistant message (content, reasoning_content, tool_calls)
    and the observation as a `tool` message (or `user` when the turn called no tool)."""
    reward: float
    """Scalar reward from the run's report."""
    reward_tiers: dict[str, float]
    """Tier name -> score, of the tiers that were scored (one not scored is absent, never 0.0)."""
    resolved: bool
    """Resolved per SWE-bench."""
    metadata: dict[str, Any]
    """Policy, model, weights version, group, statuses and tool fingerprints."""


class ExportSummary(BaseModel):
    """What an export wrote and what it left out."""

    written: int
    """Records written."""
    files: list[Path]
    """Files written."""
    refused: list[Refusal]
    """Samples that do not add up (tokens, missing result, unreadable file)."""
    skipped: list[Refusal]
    """Samples left out on purpose (infrastructure failures)."""
    dropped: list[str]
    """Samples of groups with zero reward variance, when asked to drop them."""


def _reward_settings(root: Path) -> str:
    """The reward settings a run was scored with, from its manifest."""
    manifest = RunDir(root).manifest
    if not manifest.is_file():
        raise RunDirError(f"{root}: no {manifest.name}, so the reward settings it was scored with are unknown "
                          "and cannot be checked against the other runs; export it alone")
    try:
        return RunManifest.model_validate_json(manifest.read_text(encoding="utf-8")).rewards
    except ValidationError as exc:
        raise RunDirError(f"{manifest}: unreadable: {exc.errors()[0]['msg']}") from None


def _check_scored_alike(run_dirs: Sequence[Path]) -> None:
    """Several runs' rewards are compared by a trainer only if the same settings made them."""
    if len(run_dirs) < 2:
        return
    first, *others = run_dirs
    settings = _reward_settings(first)
    for root in others:
        theirs = _reward_settings(root)
        if theirs != settings:
            raise RunDirError(f"{first} and {root} were scored with different reward settings "
                              f"(rewards: {settings} vs {theirs}); export runs scored alike")


def load_samples(run_dirs: Sequence[Path]) -> tuple[list[Sample], list[Refusal], list[Refusal]]:
    """(samples, refused, skipped) of the run directories, in order and by trajectory file name."""
    names = [d.name for d in run_dirs]
    if len(set(names)) != len(names):
        raise RunDirError(f"run directories must have distinct names (sample ids use them): {', '.join(names)}")
    for root in run_dirs:
        if not RunDir(root).results.is_file():
            raise RunDirError(f"{root}: no {RunDir(root).results.name}; not a run directory of `dojo eval` or `dojo run`")
    _check_scored_alike(run_dirs)
    samples: list[Sample] = []
    refused: list[Refusal] = []
    skipped: list[Refusal] = []
    for root in run_dirs:
        run_dir = RunDir(root)
        results = run_dir.read_results()
        for path in run_dir.trajectory_files():
            sample_id = f"{root.name}/{path.stem}"
            try:
                trajectory = Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError as exc:
                refused.append(Refusal(sample_id=sample_id, reason=f"unreadable trajectory: {exc.errors()[0]['msg']}"))
                continue
            result = results.get(trajectory.instance_id)
            if result is None:
                refused.append(Refusal(sample_id=sample_id, reason=f"no result for {trajectory.instance_id} in {run_dir.results}"))
            elif result.status == EvalStatus.INFRA_ERROR or trajectory.exit_status == ExitStatus.INFRA_ERROR:
                skipped.append(Refusal(sample_id=sample_id, reason=f"infra_error: {result.error or trajectory.error}"))
            elif result.status == EvalStatus.NOT_SCORABLE:
                skipped.append(Refusal(sample_id=sample_id, reason=f"not_scorable: {result.error}"))
            elif result.status == EvalStatus.TIMED_OUT:
                skipped.append(Refusal(sample_id=sample_id, reason=f"timed_out: {result.error}"))
            elif trajectory.exit_status == ExitStatus.INTERRUPTED:
                skipped.append(Refusal(sample_id=sample_id, reason=f"interrupted: {trajectory.stopped_by}, not the "
                                                                   "agent's ending, so its reward is no verdict"))
            else:
                samples.append(Sample(sample_id=sample_id, trajectory=trajectory, result=result))
    return samples, refused, skipped


PLACEHOLDER_KINDS = (LogprobKind.REPLAYED, LogprobKind.NONE)
"""Logprobs that no model computed for these tokens: a trainer's importance ratio would be made up."""


def _check_step(step: Step) -> None:
    sampled, logprobs = len(step.response_token_ids), len(step.response_logprobs)
    if step.logprob_kind is None:
        raise TokenMismatchError(f"step {step.index}: the kind of its logprobs was not recorded")
    if step.logprob_kind in PLACEHOLDER_KINDS:
        raise TokenMismatchError(f"step {step.index}: its logprobs are placeholders ({step.logprob_kind.value}: "
                                 "no model sampled these tokens)")
    if not sampled:
        raise TokenMismatchError(f"step {step.index}: empty response (a sampled turn has at least one token)")
    if logprobs != sampled:
        raise TokenMismatchError(f"step {step.index}: {logprobs} logprobs for {sampled} response tokens")
    bad = next((lp for lp in step.response_logprobs if not math.isfinite(lp) or lp > 0.0), None)
    if bad is not None:
        raise TokenMismatchError(f"step {step.index}: logprob {bad} is not a log-probability")


def response_tokens(trajectory: Trajectory) -> tuple[list[int], list[int], list[float]]:
    """(response_ids, loss_mask, rollout_log_probs) of a trajectory; TokenMismatchError if they do not add up."""
    if not trajectory.initial_prompt_token_ids:
        raise TokenMismatchError(f"no prompt token ids: policy {trajectory.policy!r} did not record sampled tokens")
    if not trajectory.steps:
        raise TokenMismatchError("no steps: nothing was sampled")
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    for step in trajectory.steps:
        _check_step(step)
    kinds = sorted({step.logprob_kind.value for step in trajectory.steps if step.logprob_kind is not None})
    if len(kinds) > 1:
        raise TokenMismatchError(f"logprobs of different kinds in one trajectory: {', '.join(kinds)}")
    for step in trajectory.steps:
        ids += step.prompt_token_ids + step.response_token_ids
        mask += [0] * len(step.prompt_token_ids) + [1] * len(step.response_token_ids)
        logprobs += [0.0] * len(step.prompt_token_ids) + step.response_logprobs
    return ids, mask, logprobs


def routed_experts(trajectory: Trajectory) -> list[list[list[int]]] | None:
    """The trajectory's `rollout_routed_experts`, None when no step recorded routes; TokenMismatchError
    when some steps did and others did not, or the rows do not cover every token but the last."""
    recorded = [bool(step.routed_experts) for step in trajectory.steps]
    if not any(recorded):
        return None
    if not all(recorded):
        missing = [step.index for step in trajectory.steps if not step.routed_experts]
        raise TokenMismatchError(f"routed experts recorded for some steps only (missing: steps {missing})")
    rows = [row for step in trajectory.steps for row in step.routed_experts]
    tokens = len(trajectory.initial_prompt_token_ids) + sum(
        len(step.prompt_token_ids) + len(step.response_token_ids) for step in trajectory.steps
    )
    if len(rows) != tokens - 1:
        raise TokenMismatchError(f"{len(rows)} rows of routed experts for {tokens} tokens (expected one per token but the last)")
    return rows


def scored_tiers(report: RewardReport) -> dict[str, float]:
    """Tier name -> score of the tiers that were scored: a tier with nothing to judge (no browser for
    a code task) is absent, not a 0.0 a trainer would read as failed."""
    return {t.name: t.score for t in sorted(report.tiers, key=lambda t: t.tier) if t.scored}


def _tiers(sample: Sample) -> dict[str, float]:
    return scored_tiers(sample.result.report)


def token_record(sample: Sample, advantage: float) -> TokenRecord:
    """The RL record of one sample; TokenMismatchError if its tokens do not add up."""
    trajectory, report = sample.trajectory, sample.result.report
    ids, mask, logprobs = response_tokens(trajectory)
    routes = routed_experts(trajectory)
    return TokenRecord(
        sample_id=sample.sample_id,
        instance_id=trajectory.instance_id,
        group_id=sample.group_id,
        prompt_ids=trajectory.initial_prompt_token_ids,
        response_ids=ids,
        loss_mask=mask,
        rollout_log_probs=logprobs,
        logprob_kind=trajectory.steps[0].logprob_kind.value,
        response_length=len(ids),
        reward=report.reward,
        reward_tiers=_tiers(sample),
        resolved=report.resolved,
        eval_status=report.status.value,
        advantage=advantage,
        status=SLIME_STATUS[trajectory.exit_status],
        exit_status=trajectory.exit_status.value,
        num_turns=len(trajectory.steps),
        policy=trajectory.policy,
        model=trajectory.model,
        weight_versions=[trajectory.policy_version] if trajectory.policy_version else [],
        tool_fingerprints=trajectory.tool_fingerprints,
        toolset_fingerprint=trajectory.toolset_fingerprint,
        rollout_routed_experts=routes,
    )


def chat_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The conversation in OpenAI chat form with `reasoning_content`; tool-call arguments stay
    objects, as Hugging Face chat templates expect. A turn's tool results are one observation."""
    messages: list[dict[str, Any]] = []
    if trajectory.system_prompt:
        messages.append({"role": "system", "content": trajectory.system_prompt})
    if trajectory.task_prompt:
        messages.append({"role": "user", "content": trajectory.task_prompt})
    for step in trajectory.steps:
        calls = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in step.tool_calls
        ]
        messages.append({"role": "assistant", "content": step.content, "reasoning_content": step.reasoning, "tool_calls": calls})
        answer = step.observation or step.error
        if answer and calls:
            messages.append({"role": "tool", "tool_call_id": step.tool_calls[0].call_id, "content": answer})
        elif answer:
            messages.append({"role": "user", "content": answer})
    return messages


def message_record(sample: Sample) -> MessageRecord:
    """The SFT record of one sample."""
    trajectory, report = sample.trajectory, sample.result.report
    return MessageRecord(
        sample_id=sample.sample_id,
        instance_id=trajectory.instance_id,
        messages=chat_messages(trajectory),
        reward=report.reward,
        reward_tiers=_tiers(sample),
        resolved=report.resolved,
        metadata={
            "policy": trajectory.policy,
            "model": trajectory.model,
            "policy_version": trajectory.policy_version,
            "group_id": sample.group_id,
            "exit_status": trajectory.exit_status.value,
            "eval_status": report.status.value,
            "tool_fingerprints": trajectory.tool_fingerprints,
            "toolset_fingerprint": trajectory.toolset_fingerprint,
        },
    )


def _write_jsonl(path: Path, records: Sequence[BaseModel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")


def export_messages(run_dirs: Sequence[Path], out: Path) -> ExportSummary:
    """Write one chat record per trajectory to `out` (JSONL)."""
    samples, refused, skipped = load_samples(run_dirs)
    records = [message_record(s) for s in samples]
    _write_jsonl(out, records)
    return ExportSummary(written=len(records), files=[out], refused=refused, skipped=skipped, dropped=[])


def export_tokens(run_dirs: Sequence[Path], out: Path, config: AdvantageConfig | None = None) -> ExportSummary:
    """Write token records to `out` with suffix .jsonl and .parquet.

    Refused samples are left out before advantages are computed, so a group's baseline is made
    only of the samples a trainer will see.
    """
    config = config or AdvantageConfig()
    samples, refused, skipped = load_samples(run_dirs)
    built: list[TokenRecord] = []
    for sample in samples:
        try:
            built.append(token_record(sample, advantage=0.0))
        except TokenMismatchError as exc:
            refused.append(Refusal(sample_id=sample.sample_id, reason=str(exc)))
    advantages = group_advantages([r.group_id for r in built], [r.reward for r in built], config)
    records = [r.model_copy(update={"advantage": a}) for r, a in zip(built, advantages) if a is not None]
    dropped = [r.sample_id for r, a in zip(built, advantages) if a is None]
    jsonl, parquet = out.with_suffix(".jsonl"), out.with_suffix(".parquet")
    _write_jsonl(jsonl, records)
    table = pa.Table.from_pylist([r.model_dump() for r in records], schema=TOKEN_SCHEMA)
    pq.write_table(table, parquet)
    return ExportSummary(written=len(records), files=[jsonl, parquet], refused=refused, skipped=skipped, dropped=dropped)


def read_token_records(path: Path) -> list[TokenRecord]:
    """Token records back from a .jsonl or .parquet export (Parquet maps come back as pairs)."""
    if path.suffix == ".parquet":
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            row["reward_tiers"] = dict(row["reward_tiers"])
            row["tool_fingerprints"] = dict(row["tool_fingerprints"])
        return [TokenRecord.model_validate(row) for row in rows]
    return [TokenRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
