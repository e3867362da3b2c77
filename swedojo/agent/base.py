"""What every policy shares: the Policy protocol and the RunContext the rollout hands it.

Kept apart from the policies themselves so the model loop and the tool-only policies depend on
this contract, not on each other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from swedojo.sandboxes.base import Sandbox
from swedojo.schema import EnvSpec, TaskInstance, Trajectory


def _no_checkpoint(trajectory: Trajectory) -> None:
    return None


@dataclass
class RunContext:
    """What the rollout hands a policy besides the task and the sandbox."""

    spec: EnvSpec | None = None
    """The environment (test command and log parser for `run_tests` and verification)."""
    checkpoint: Callable[[Trajectory], None] = _no_checkpoint
    """Called after every step, so a killed run leaves its trajectory so far on disk."""
    group_id: str = ""
    """Rollouts of one task in one batch share it."""
    files_dir: Path | None = None
    """Where the run's tools save files for the trajectory (screenshots): a directory next to it; None: none kept."""
    extra: dict[str, str] = field(default_factory=dict)
    """Free-form labels recorded by the caller."""
    seed: int | None = None
    """The episode's sampling seed: turn t samples with `derived_seed(seed, t)`, so the episode samples
    the same tokens however many others run beside it; None: the backend's own random stream."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a policy's run, carrying its trajectory closed as `interrupted` (steps done,
    the work tree's diff so far, checkpointed). Still a KeyboardInterrupt, so a caller that only
    wants to stop at once (`dojo eval`'s second Ctrl-C) stops as before; one that keeps runs
    (`dojo run`) records the trajectory."""

    def __init__(self, trajectory: Trajectory) -> None:
        super().__init__()
        self.trajectory = trajectory


def derived_seed(*parts: object) -> int:
    """A 63-bit seed from `parts` (stable across runs and machines, unlike `hash`)."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big") >> 1


class Policy(Protocol):
    """Works on one task in a sandbox and returns the trajectory (its `patch` is the submission)."""

    name: str

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        """Act on `sandbox` until done; never raises for agent mistakes."""
        ...
