"""`generate`: one `dojo gen` run, then the output directory's suite and yield, rebuilt from journals.

Outputs under `out/`: `suite.jsonl` (every kept task of every journal in `out/journal/`, so
several repos and both modes can share one directory), `repos/<owner>/<name>` (git repos holding
every base commit), `envspecs/*.json`, `yield.json`, and the journals themselves.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from swedojo.datasets.gen.core import Target, repo_name
from swedojo.datasets.gen.history import STRATEGY as HISTORY
from swedojo.datasets.gen.history import generate_history
from swedojo.datasets.gen.journal import Entry, Outcome, read_entries
from swedojo.datasets.gen.settings import GenSettings, RunCounts
from swedojo.datasets.gen.strategies import ProceduralMutations, Strategy
from swedojo.datasets.gen.synthesis import generate_mutations
from swedojo.datasets.io import write_suite_file
from swedojo.repos import resolve_repo
from swedojo.schema import TaskInstance

MODES = ("history", "mutations")


class UnknownModeError(ValueError):
    """`--from` is not one of MODES."""


class StrategyYield(BaseModel):
    """How one strategy fared: the funnel from candidates to kept tasks, and its cost."""

    candidates: int = 0
    """Candidates evaluated (mutants, pairs, or commits walked)."""
    compiled: int = 0
    """Compiled (history: patches applied and the suite ran)."""
    broke_tests: int = 0
    """Broke at least one passing test (history: had a FAIL_TO_PASS test)."""
    kept: int = 0
    """Validated tasks written to the suite."""
    timed_out: int = 0
    """Dropped because a suite run hit the timeout."""
    duplicates: int = 0
    """Dropped for failing the same tests as a kept task."""
    invalid: int = 0
    """Dropped by end-to-end validation."""
    seconds: float = 0.0
    """Wall time over all its candidates."""
    seconds_per_kept: float | None = None
    """seconds / kept."""


class YieldReport(BaseModel):
    """`yield.json`."""

    strategies: dict[str, StrategyYield]
    """Per strategy (history, mutation, combined, model_rewrite)."""
    kept_by_repo: dict[str, int]
    """Tasks per repository."""
    kept: int
    """Tasks in the suite."""
    seconds: float
    """Wall time over all candidates."""
    tasks_per_min: float
    """kept / minutes."""


class GenResult(BaseModel):
    """What one `generate` call did."""

    repo: str
    """`owner/name`."""
    mode: str
    """history or mutations."""
    counts: RunCounts
    """Evaluated now vs replayed."""
    instances: list[TaskInstance]
    """Tasks kept for this repo and mode (so far)."""
    report: YieldReport
    """Yield of the whole output directory."""
    suite: Path
    """The suite file."""


def yield_report(entries: list[Entry], kept: list[TaskInstance]) -> YieldReport:
    per: dict[str, StrategyYield] = defaultdict(StrategyYield)
    for e in entries:
        y = per[e.strategy]
        y.candidates += 1
        y.compiled += e.compiled
        y.broke_tests += e.broke
        y.kept += e.outcome == Outcome.KEPT
        y.timed_out += e.outcome == Outcome.TIMED_OUT
        y.duplicates += e.outcome == Outcome.DUPLICATE
        y.invalid += e.outcome == Outcome.INVALID
        y.seconds = round(y.seconds + e.seconds, 3)
    for y in per.values():
        y.seconds_per_kept = round(y.seconds / y.kept, 3) if y.kept else None
    seconds = round(sum(y.seconds for y in per.values()), 3)
    by_repo: dict[str, int] = defaultdict(int)
    for instance in kept:
        by_repo[instance.repo] += 1
    return YieldReport(strategies=dict(per), kept_by_repo=dict(by_repo), kept=len(kept), seconds=seconds,
                       tasks_per_min=round(len(kept) / (seconds / 60), 2) if seconds else 0.0)


def write_outputs(out: Path) -> YieldReport:
    """Rebuild `suite.jsonl` and `yield.json` from every journal in `out/journal/`."""
    entries = [e for path in sorted((out / "journal").glob("*.jsonl")) for e in read_entries(path)]
    kept = [e.instance for e in entries if e.outcome == Outcome.KEPT and e.instance is not None]
    write_suite_file(kept, out / "suite.jsonl")
    report = yield_report(entries, kept)
    (out / "yield.json").write_text(report.model_dump_json(indent=1))
    return report


def generate(repo: str, mode: str, settings: GenSettings, mirror: Path | None = None,
             strategies: list[Strategy] | None = None) -> GenResult:
    """Generate validated tasks from `repo` (a path, or `owner/name` in `mirror`) into `settings.out`."""
    if mode not in MODES:
        raise UnknownModeError(f"unknown --from {mode!r}; choose one of {', '.join(MODES)}")
    source = resolve_repo(repo, mirror)
    target = Target(repo=repo_name(repo, source), source=source, out=settings.out)
    counts = RunCounts(limit=settings.max_candidates,
                       deadline=None if settings.max_minutes is None else time.monotonic() + 60 * settings.max_minutes)
    if mode == HISTORY:
        generate_history(target, settings, counts)
    else:
        generate_mutations(target, settings, strategies or [ProceduralMutations()], counts)
    report = write_outputs(settings.out)
    journal = settings.out / "journal" / f"{target.slug}.{mode}.jsonl"
    instances = [e.instance for e in read_entries(journal) if e.outcome == Outcome.KEPT and e.instance is not None]
    return GenResult(repo=target.repo, mode=mode, counts=counts, instances=instances, report=report,
                     suite=settings.out / "suite.jsonl")
