"""Options of one `gen` run and its counters."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel


class GenSettings(BaseModel):
    """What `dojo gen` was asked to do."""

    out: Path
    """Output directory."""
    seed: int = 0
    """Seed of the candidate sampling; the same seed gives the same suite."""
    max_tasks: int = 20
    """Stop once this many tasks are kept (per repo and mode)."""
    max_candidates: int | None = None
    """Stop after evaluating this many new candidates (a rerun continues); None: no limit."""
    timeout_s: float = 90.0
    """Per test-suite run; mutants that hang are dropped."""
    rev_range: str | None = None
    """History: only commits in `A..B` (default: all of HEAD's first-parent history)."""
    issues_dir: Path | None = None
    """History: directory of issue texts named `N.md`, `N.txt` or `N.json`."""
    combine: bool = True
    """Mutations: make a fifth of the tasks from two kept mutants in different functions."""


class RunCounts(BaseModel):
    """How much work this invocation did versus replayed from the journal."""

    evaluated: int = 0
    """Candidates evaluated now."""
    reused: int = 0
    """Candidates whose verdict came from the journal."""
    limit: int | None = None
    """`max_candidates`."""
    interrupted: bool = False
    """Stopped by `limit` with candidates left."""

    def budget_spent(self) -> bool:
        return self.limit is not None and self.evaluated >= self.limit
