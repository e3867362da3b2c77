"""GRPO-style group-normalised advantages over rollouts that share a group id.

A (r - mean) / (std + eps) per group, std unbiased (Bessel) as `torch.std` computes it in verl's
and TRL's GRPO; Dr. GRPO's variant skips the division. A group whose rewards are all equal
(including a group of one, where verl would pass the raw reward instead) teaches nothing under
GRPO: every advantage is 0, and trainers usually drop it (DAPO's dynamic sampling), which
`drop_zero_variance` does.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, Field


class AdvantageConfig(BaseModel):
    """How rewards become advantages."""

    normalize_by_std: bool = True
    """Divide by the group's std (GRPO); False keeps r - mean (Dr. GRPO)."""
    eps: float = Field(1e-6, gt=0.0)
    """Added to the std so equal rewards do not divide by zero."""
    drop_zero_variance: bool = False
    """Give no advantage (None) to samples of groups whose rewards are all equal."""


class LengthMismatchError(ValueError):
    """group_ids and rewards differ in length."""


def group_advantages(group_ids: Sequence[str], rewards: Sequence[float], config: AdvantageConfig) -> list[float | None]:
    """Advantage of each sample, in input order; None for a sample of a dropped group."""
    if len(group_ids) != len(rewards):
        raise LengthMismatchError(f"{len(group_ids)} group ids for {len(rewards)} rewards")
    groups: dict[str, list[float]] = defaultdict(list)
    for group, reward in zip(group_ids, rewards):
        groups[group].append(reward)
    stats: dict[str, tuple[float, float, bool]] = {}
    for group, values in groups.items():
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
        stats[group] = (mean, math.sqrt(var), len(set(values)) == 1)
    advantages: list[float | None] = []
    for group, reward in zip(group_ids, rewards):
        mean, std, flat = stats[group]
        if flat and config.drop_zero_variance:
            advantages.append(None)
        elif config.normalize_by_std:
            advantages.append((reward - mean) / (std + config.eps))
        else:
            advantages.append(reward - mean)
    return advantages
