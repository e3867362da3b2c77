"""Turn the tier vector into one scalar reward, as configuration rather than code.

`binary` is DeepSWE's (and slime's SWE example's) resolved-or-not; `gated` and `partial` give
partial credit as a weighted mean of tier scores, `gated` counting a tier only when every tier
below it passed (so a malformed patch earns nothing however its tests went).
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field, model_validator

from swedojo.schema import TierScore


class RewardMode(str, Enum):
    """How tiers become a scalar."""

    BINARY = "binary"
    GATED = "gated"
    PARTIAL = "partial"


class TierWeights(BaseModel):
    """Weight of each tier in the weighted mean; only their ratios matter."""

    format: float = Field(0.1, ge=0.0)
    """Tier 0: submitted, well-formed, patch applies."""
    static: float = Field(0.1, ge=0.0)
    """Tier 1: changed files compile, no new lint errors."""
    tests: float = Field(0.6, ge=0.0)
    """Tier 2: FAIL_TO_PASS fixed, PASS_TO_PASS kept."""
    verification: float = Field(0.2, ge=0.0)
    """Tier 3: the rest of the suite still passes (and the judge, if any, agrees)."""

    @model_validator(mode="after")
    def _some_weight(self) -> TierWeights:
        if self.total() <= 0:
            raise ValueError("at least one tier weight must be positive")
        return self

    def total(self) -> float:
        return self.format + self.static + self.tests + self.verification

    def of(self, tier: TierScore) -> float:
        return float(getattr(self, tier.name))


class RewardConfig(BaseModel):
    """How a reward report's tiers are composed into `RewardReport.reward`."""

    mode: RewardMode = RewardMode.GATED
    """binary (1 if resolved else 0), gated or partial (weighted mean of tier scores)."""
    weights: TierWeights = Field(default_factory=TierWeights)
    """Per-tier weights for gated and partial."""


def compose(tiers: list[TierScore], resolved: bool, config: RewardConfig) -> float:
    """The scalar reward in [0, 1]; a pure function of its inputs, hence deterministic."""
    if config.mode == RewardMode.BINARY:
        return 1.0 if resolved else 0.0
    total = 0.0
    gate_open = True
    for tier in sorted(tiers, key=lambda t: t.tier):
        if gate_open or config.mode == RewardMode.PARTIAL:
            total += config.weights.of(tier) * tier.score
        gate_open = gate_open and tier.passed
    return total / config.weights.total()
