"""Policies by name, for `--policy`: the one module that knows both the model loop and the tool-only policies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from swedojo.agent.backends import ModelBackend
from swedojo.agent.base import Policy
from swedojo.agent.loop import AgentConfig, ModelPolicy
from swedojo.agent.policies import (
    EmptyPolicy,
    GoldPolicy,
    PredictionPolicy,
    ReplayPolicy,
)

POLICY_NAMES = ("gold", "empty", "model", "replay", "predictions")


class UnknownPolicyError(ValueError):
    """No policy by that name, or one that lacks what it needs."""


def make_policy(name: str, model: ModelBackend | None = None, trajectories: Path | None = None,
                agent: AgentConfig | None = None, predictions: Mapping[str, str] | None = None) -> Policy:
    """Build a policy by name; `model` is the backend for `model`, `trajectories` a directory for `replay`,
    `predictions` the patches by instance id for `predictions`."""
    if name == "gold":
        return GoldPolicy()
    if name == "empty":
        return EmptyPolicy()
    if name == "model":
        if model is None:
            raise UnknownPolicyError("policy 'model' needs --model (a checkpoint dir, an http(s) URL, tiny:ARCH, "
                                     "scripted:FILE or a provider's model such as openai/gpt-4o)")
        return ModelPolicy(model, agent)
    if name == "replay":
        if trajectories is None:
            raise UnknownPolicyError("policy 'replay' needs --trajectories DIR (a run's trajectories/ directory)")
        return ReplayPolicy(trajectories)
    if name == "predictions":
        if predictions is None:
            raise UnknownPolicyError("policy 'predictions' needs --predictions FILE (a SWE-bench predictions file)")
        return PredictionPolicy(predictions)
    raise UnknownPolicyError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
