"""Options of one `gen` run and its counters."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field


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
    max_minutes: float | None = None
    """Start no candidate after this much wall time (a rerun continues); None: no limit."""
    timeout_s: float | None = None
    """A fixed limit in seconds on every test run, the baseline's too (how `gen` worked before limits
    were relative: on a loaded machine it cut candidates that were merely slow); None: `limit`."""
    timeout_factor: float = 3.0
    """A candidate's test run may take this many times what the same tests took at the baseline,
    measured in the same environment on the same machine, so a slow machine slows both alike..."""
    timeout_margin_s: float = 10.0
    """...plus this much, for the start of the test runner and the jitter of a loaded machine."""
    baseline_timeout_s: float = 1800.0
    """Limit of the baseline runs themselves (nothing is measured yet): only a suite that hangs at
    the commit itself reaches it."""
    rev_range: str | None = None
    """History: only commits in `A..B` (default: the last `history_commits` of HEAD's first-parent line)."""
    history_commits: int = Field(200, ge=1)
    """History without `rev_range`: how many of HEAD's latest first-parent commits are walked. The
    newest are the ones worth mining (their fixes build in today's environment); from the root, a
    budget went on ancient history that gave no task."""
    issues_dir: Path | None = None
    """History: directory of issue texts named `N.md`, `N.txt` or `N.json`."""
    combine: bool = True
    """Mutations: make a fifth of the tasks from two kept mutants in different functions."""
    workers: int = Field(2, ge=1)
    """Candidates evaluated at once (mutations: each in a work tree of its own kept for the whole
    run; history: commits, each in fresh sandboxes); 1: one at a time, as before. The suite is the
    same at any width."""
    backend: str = "local"
    """Sandbox backend every candidate is judged on (local or docker)."""
    launch: bool = True
    """Build the environment with RepoLaunch from what the repository declares (dependencies, test
    command), once per run; False, or a repository with no build or dependency file: the plain
    pytest environment (the harness's own Python locally)."""
    pool: int = Field(2, ge=0)
    """Warm containers kept ready for the run's sandboxes on a pooled backend (docker); 0: none."""
    select_tests: bool = True
    """Mutations: record which tests call which functions at the baseline, and run a candidate's
    calling tests before its whole suite; False: the whole suite for every candidate (as before)."""

    def baseline_limit(self) -> float:
        """Time limit of a baseline run."""
        return self.baseline_timeout_s if self.timeout_s is None else self.timeout_s

    def limit(self, baseline_s: float) -> float:
        """Time limit of a candidate's run whose tests took `baseline_s` at the baseline: a mutant
        that hangs is cut, one that is only slower is not."""
        return self.timeout_factor * baseline_s + self.timeout_margin_s if self.timeout_s is None else self.timeout_s


class RunCounts(BaseModel):
    """How much work this invocation did versus replayed from the journal."""

    evaluated: int = 0
    """Candidates evaluated now (and journaled)."""
    started: int = 0
    """Candidates begun now: the evaluated ones and those in flight when the run stopped."""
    reused: int = 0
    """Candidates whose verdict came from the journal."""
    limit: int | None = None
    """`max_candidates`."""
    deadline: float | None = None
    """`time.monotonic()` after which no candidate starts (`max_minutes`)."""
    interrupted: bool = False
    """Stopped by `limit` or `deadline` with candidates left."""

    def start(self) -> bool:
        """Whether one more candidate may start (counted if so); a spent budget interrupts the run."""
        if (self.limit is not None and self.started >= self.limit) or (
                self.deadline is not None and time.monotonic() >= self.deadline):
            self.interrupted = True
            return False
        self.started += 1
        return True
