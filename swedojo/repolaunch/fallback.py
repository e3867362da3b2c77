"""The seam for a setup agent: what happens when the rules cannot set a repository up.

The agent (RepoLaunch-style: the loop and tools of `dojo run`, in the half-built environment,
with a budget) lives in a layer above (`swedojo.agent.setup`); the launcher only knows this
contract. The agent gets what the rules found and how they failed, and answers with a plan of
plain commands, which the launcher runs from scratch and records in the `EnvSpec` like any
rule-made plan (and says it came from the agent), so `--rebuild` needs no agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.schema import EnvSpec


class SetupRequest(BaseModel):
    """What a setup agent is told when the rules failed."""

    repo: str
    """Repository as given to launch."""
    source: Path
    """Local git directory holding the repository (sandboxes check the commit out of it)."""
    commit: str
    """Full commit id."""
    backend: str
    """Sandbox backend being launched for: the agent works in a sandbox of it."""
    analysis: RepoAnalysis | None
    """What the rules found (None when they found nothing)."""
    spec: EnvSpec | None = None
    """The environment as last built by the rules (its dependency layer exists), when a failure
    came after a build; None when nothing was built."""
    stage: str
    """Stage that failed: analyse, install, test-discovery or validate."""
    failure: str
    """The failure message."""
    log_path: Path
    """Build log so far."""
    trajectory: Path
    """Where the agent keeps its trajectory (in the launch's out dir)."""


class NoPlanError(Exception):
    """The agent ended without a plan; the message is its outcome (how it ended, after how many steps)."""


class SetupAgent(Protocol):
    """Turns a failed rule-based setup into a plan that works."""

    name: str
    """What runs it (the model spec), recorded in the `EnvSpec`."""

    def propose(self, request: SetupRequest) -> RepoAnalysis:
        """A plan (install, rebuild and test commands, log parser) for the launcher to run from
        scratch; NoPlanError when the agent found none within its budget."""
        ...
