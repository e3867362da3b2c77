"""Turn the tier vector into one scalar reward, as configuration rather than code.

`binary` is DeepSWE's (and slime's SWE example's) resolved-or-not; `gated` and `partial` give
partial credit as a weighted mean of tier scores, `gated` counting a tier only when every tier
below it passed (so a malformed patch earns nothing however its tests went).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

from swedojo.rewards.tiers import TIERS
from swedojo.schema import TierScore


class RewardMode(str, Enum):
    """How tiers become a scalar."""

    BINARY = "binary"
    GATED = "gated"
    PARTIAL = "partial"


class RewardConfig(BaseModel):
    """How a reward report's tiers are composed into `RewardReport.reward`."""

    mode: RewardMode = RewardMode.GATED
    """binary (1 if resolved else 0), gated or partial (weighted mean of tier scores)."""
    weights: dict[str, float] = Field(default_factory=dict)
    """Weight per tier name for gated and partial; a tier not named keeps its default (`Tier.weight`).
    Only the ratios matter."""
    perceptual_model: Path | None = None
    """Local image-classification checkpoint that tier visual of a front-end task rates each frame
    with (`rewards.web.perceptual`); None: the frames are not rated."""

    @model_validator(mode="after")
    def _known_and_some_positive(self) -> RewardConfig:
        known = {tier.name: tier.weight for tier in TIERS}
        unknown = sorted(set(self.weights) - set(known))
        if unknown:
            raise ValueError(f"no tier named {', '.join(unknown)}; tiers: {', '.join(known)}")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("tier weights must not be negative")
        if sum({**known, **self.weights}.values()) <= 0:
            raise ValueError("at least one tier weight must be positive")
        return self

    def weight(self, name: str) -> float:
        return self.weights.get(name, next(tier.weight for tier in TIERS if tier.name == name))


def compose(tiers: list[TierScore], resolved: bool, config: RewardConfig) -> float:
    """The scalar reward in [0, 1]; a pure function of its inputs, hence deterministic.

    A tier that was not scored (nothing to check) is left out: it adds no weight and neither
    opens nor closes the gate.
    """
    if config.mode == RewardMode.BINARY:
        return 1.0 if resolved else 0.0
    total = weight = 0.0
    gate_open = True
    for tier in sorted(tiers, key=lambda t: t.tier):
        if not tier.scored:
            continue
        weight += config.weight(tier.name)
        if gate_open or config.mode == RewardMode.PARTIAL:
            total += config.weight(tier.name) * tier.score
        gate_open = gate_open and tier.passed
    return total / weight if weight else 0.0
