"""The hook for an agent fallback: what happens when the rules cannot set a repository up.

The agent (RepoLaunch-style: the same loop and tools as `dojo run`, in the half-built
environment, with a budget) lands with the agent issue. Its contract is fixed here: it gets what
the rules found and how they failed, and answers with a revised plan of plain commands, which the
launcher runs and records in the `EnvSpec` like any rule-made plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from swedojo.repolaunch.detect import RepoAnalysis


class SetupRequest(BaseModel):
    """What a setup agent is told when the rules failed."""

    repo: str
    """Repository as given to launch."""
    commit: str
    """Full commit id."""
    workdir: Path
    """A checkout of the commit the agent may explore and change."""
    analysis: RepoAnalysis | None
    """What the rules found (None when they found nothing)."""
    stage: str
    """Stage that failed: analyse or install."""
    failure: str
    """The failure message."""
    log_path: Path
    """Build log so far."""
    budget_s: float = 900.0
    """Wall-clock budget for the agent."""


class SetupAgent(Protocol):
    """Turns a failed rule-based setup into a plan that works."""

    def propose(self, request: SetupRequest) -> RepoAnalysis:
        """Return a plan (install, rebuild and test commands, log parser) for the launcher to run."""
        ...
