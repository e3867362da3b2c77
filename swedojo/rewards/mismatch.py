"""Training/inference mismatch: recompute the sampled tokens' logprobs in one full forward pass.

A trainer computes p_train over the whole sequence at once; the rollout sampled token by token
through the retained KV cache. Their per-token ratio k = p_train / p_infer should be 1; IcePop
masks tokens with k outside [alpha, beta]. This report says how far a run is from that.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from pydantic import BaseModel

from swedojo.rundir import IssueRunDir
from swedojo.schema import LogprobKind, Trajectory

ICEPOP_ALPHA, ICEPOP_BETA = 0.5, 5.0


class MismatchError(Exception):
    """The run cannot be checked: no trajectories, no tokens, or not an in-process model."""


class MismatchReport(BaseModel):
    """Distribution of p_train / p_infer over every sampled token of a run."""

    trajectories: int
    """Trajectories checked."""
    tokens: int
    """Sampled tokens compared."""
    ratio_min: float
    """Smallest ratio."""
    ratio_max: float
    """Largest ratio."""
    quantiles: dict[str, float]
    """Ratio quantiles (p01 ... p99)."""
    max_abs_logprob_diff: float
    """Largest |logp_train - logp_infer|."""
    icepop_masked_fraction: float
    """Fraction of tokens outside [0.5, 5] that IcePop would mask."""


def load_trajectories(run_dir: Path) -> list[Trajectory]:
    """Trajectories of a run (`trajectories/*.json`, `dojo eval`'s or `dojo run`'s), or of a `dojo run`
    made before it wrote a run directory (`trajectory.json`)."""
    run = IssueRunDir(run_dir)
    paths = run.trajectory_files() or [p for p in [run.legacy_trajectory] if p.is_file()]
    if not paths:
        raise MismatchError(f"{run_dir}: no trajectories (expected {run.trajectories.name}/*.json)")
    return [Trajectory.model_validate_json(p.read_text(encoding="utf-8")) for p in paths]


def checkable(trajectories: list[Trajectory]) -> list[Trajectory]:
    """The trajectories a model sampled; MismatchError naming why when none can be checked
    (a gold or empty run samples nothing; replayed text has placeholder logprobs, not a model's)."""
    sampled = [t for t in trajectories if any(step.response_token_ids for step in t.steps)]
    if not sampled:
        policies = ", ".join(sorted({t.policy for t in trajectories}))
        raise MismatchError(f"no sampled tokens: policy {policies} ran no model, so there is nothing to compare")
    kinds = {step.logprob_kind for t in sampled for step in t.steps if step.response_token_ids}
    placeholders = sorted(k.value for k in kinds if k in (LogprobKind.REPLAYED, LogprobKind.NONE))
    if placeholders:
        raise MismatchError(f"the rollout logprobs are placeholders ({', '.join(placeholders)}): no model sampled "
                            "these tokens, so a ratio to them means nothing")
    return sampled


class Segment(BaseModel):
    """A stretch of context that one forward pass covers, and the sampled tokens inside it."""

    ids: list[int]
    """Context token ids."""
    positions: list[int]
    """Indexes of sampled tokens in `ids`."""
    logprobs: list[float]
    """Rollout logprob of each sampled token."""
    temperatures: list[float]
    """Sampling temperature of each sampled token (0: greedy, raw distribution)."""


def segments(trajectory: Trajectory) -> list[Segment]:
    """The trajectory's token sequence; a step whose prompt did not extend the context starts a new one."""
    current = Segment(ids=list(trajectory.initial_prompt_token_ids), positions=[], logprobs=[], temperatures=[])
    found = [current]
    for step in trajectory.steps:
        if step.usage.get("prompt_reset"):
            current = Segment(ids=[], positions=[], logprobs=[], temperatures=[])
            found.append(current)
        current.ids += step.prompt_token_ids
        current.positions += range(len(current.ids), len(current.ids) + len(step.response_token_ids))
        current.ids += step.response_token_ids
        current.logprobs += step.response_logprobs
        current.temperatures += [step.usage.get("temperature", 1.0)] * len(step.response_token_ids)
        if len(current.logprobs) != len(current.positions):
            raise MismatchError(f"{trajectory.instance_id}: step {step.index} has {len(step.response_logprobs)} logprobs for {len(step.response_token_ids)} tokens")
    return [segment for segment in found if segment.positions]


@torch.inference_mode()
def recompute(model: torch.nn.Module, ids: list[int], positions: list[int], temperatures: list[float]) -> list[float]:
    """Logprob of each sampled token from one forward pass over the whole sequence."""
    device = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
    out = []
    for position, temperature in zip(positions, temperatures):
        row = logits[position - 1]
        scaled = row if temperature == 0 else row / temperature
        out.append(float(torch.log_softmax(scaled, dim=-1)[ids[position]]))
    return out


def mismatch_report(trajectories: list[Trajectory], model: torch.nn.Module) -> MismatchReport:
    """Compare rollout logprobs with a full recompute, over every sampled token."""
    train: list[float] = []
    infer: list[float] = []
    for trajectory in trajectories:
        for segment in segments(trajectory):
            train += recompute(model, segment.ids, segment.positions, segment.temperatures)
            infer += segment.logprobs
    if not train:
        raise MismatchError("no sampled tokens with logprobs in these trajectories")
    diffs = torch.tensor(train, dtype=torch.float64) - torch.tensor(infer, dtype=torch.float64)
    ratios = diffs.exp()
    levels = {"p01": 0.01, "p05": 0.05, "p50": 0.5, "p95": 0.95, "p99": 0.99}
    masked = ((ratios < ICEPOP_ALPHA) | (ratios > ICEPOP_BETA)).double().mean()
    return MismatchReport(
        trajectories=len(trajectories),
        tokens=len(train),
        ratio_min=float(ratios.min()),
        ratio_max=float(ratios.max()),
        quantiles={k: float(torch.quantile(ratios, q)) for k, q in levels.items()},
        max_abs_logprob_diff=float(diffs.abs().max()),
        icepop_masked_fraction=float(masked) if not math.isnan(float(masked)) else 0.0,
    )
