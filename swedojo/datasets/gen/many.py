"""`dojo gen` over many repositories: one unit of work per repository, then one merged suite.

A unit is the single-repo `generate` run into a directory of its own, `OUT/<owner>__<name>` (the
directory `dojo gen REPO` alone would default to under `gen/`), journal and all, unchanged: what
resumes one repository resumes a unit. A unit that ran to its end says so in its `unit-<mode>.json`
and is not run again; an unfinished one (killed, or stopped by --max-candidates / --max-minutes)
is run again and resumes from its journal. Units run anywhere (this process, or Ray tasks given by
the layer that knows the executors); only the driver writes the merged files, from the units'
journals, so the merge is the same however and wherever they ran.

Outputs beside the units: `suite.jsonl` (every kept task of the run's units, sorted by repository
then instance id, each once, with its `provenance`), `yield.json` (over their journals),
`units.json` (each unit's state) and `repos/<owner>/<name>`, links to the units' generated repos,
so `dojo eval --suite OUT/suite.jsonl` finds them as it does for one repository.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel

from swedojo.datasets.gen.core import GitError, repo_name
from swedojo.datasets.gen.journal import (
    Entry,
    JournalMismatchError,
    Outcome,
    read_entries,
)
from swedojo.datasets.gen.run import (
    MODES,
    UnknownModeError,
    YieldReport,
    generate,
    yield_report,
)
from swedojo.datasets.gen.settings import GenSettings
from swedojo.datasets.gen.synthesis import NoMutableSourcesError, NoPassingTestsError
from swedojo.datasets.io import write_suite_file
from swedojo.repolaunch.errors import LaunchError
from swedojo.repos import RepoNotFoundError, resolve_repo
from swedojo.schema import TaskInstance

UNIT_ERRORS = (RepoNotFoundError, JournalMismatchError, NoPassingTestsError, NoMutableSourcesError, GitError,
               LaunchError)
"""A repository's own failures: they end its unit (recorded, tried again on a rerun), not the run."""


class DuplicateRepoError(ValueError):
    """Two of the repositories given would share a unit directory (the same `owner/name`)."""


class GenUnit(BaseModel):
    """One repository's generation: what a worker needs to run it (absolute paths; picklable)."""

    repo: str
    """The repository as given (a path made absolute, a URL, or `owner/name` in `mirror`)."""
    name: str
    """`owner/name`, as its tasks record it."""
    mode: str
    """history or mutations."""
    settings: GenSettings
    """The run's settings, `out` being the unit's directory."""
    mirror: Path | None = None
    """Where `owner/name` repositories are."""

    @property
    def out(self) -> Path:
        return self.settings.out

    @property
    def state_path(self) -> Path:
        return self.out / f"unit-{self.mode}.json"

    @property
    def journal_path(self) -> Path:
        return self.out / "journal" / f"{self.name.replace('/', '__')}.{self.mode}.jsonl"


class UnitState(BaseModel):
    """`unit-<mode>.json`: how a unit's last run ended; `done` units are not run again."""

    repo: str
    """The repository as given."""
    name: str
    """`owner/name`."""
    mode: str
    """history or mutations."""
    done: bool = False
    """It ran to its end (not stopped by a budget, nor failed)."""
    runs: int = 0
    """Runs of it that reached their end (a run killed first counts nothing); a done unit's never grows."""
    kept: int = 0
    """Tasks kept so far."""
    error: str = ""
    """Why its last run failed, if it did."""
    seconds: float = 0.0
    """Wall time of its last run, where it ran (the launch of its environment included)."""


class Provenance(BaseModel):
    """Where a task of a merged suite came from; written into the task as `provenance`."""

    repo: str
    """The repository as given to `dojo gen`."""
    strategy: str
    """The strategy that made it (history, mutation, combined, model_rewrite)."""
    unit: str
    """Its unit's directory, relative to the run's `--out`."""


class UnitsReport(BaseModel):
    """`units.json`: every unit of the run as it stands."""

    units: list[UnitState]
    """In the order the repositories were given."""


class ManyResult(BaseModel):
    """What one multi-repository `gen` did."""

    units: list[UnitState]
    """Each unit's state after the run."""
    ran: list[str]
    """The units (`owner/name`) run by this invocation; the others were done already."""
    instances: list[TaskInstance]
    """The merged suite."""
    report: YieldReport
    """Yield over every unit's journal."""
    suite: Path
    """The merged suite file."""


UnitRunner = Callable[[list[GenUnit]], Iterable[UnitState]]
"""Runs units (anywhere) and yields the state of each as it ends, in any order."""


def read_repo_list(path: Path) -> list[str]:
    """`--repos FILE`: one repository path or URL per line; blank lines and `#` comments are skipped.
    Relative paths are taken from the file's directory, as one would write them in it."""
    repos = []
    for line in path.read_text(encoding="utf-8").splitlines():
        repo = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if repo:
            local = path.parent / repo
            repos.append(str(local.resolve()) if not Path(repo).is_absolute() and local.is_dir() else repo)
    return repos


def plan_units(repos: list[str], mode: str, settings: GenSettings, mirror: Path | None = None) -> list[GenUnit]:
    """One unit per repository, under `settings.out`; paths made absolute so any worker can follow them."""
    if mode not in MODES:
        raise UnknownModeError(f"unknown --from {mode!r}; choose one of {', '.join(MODES)}")
    out = settings.out.resolve()
    absolute = settings.model_copy(update={"issues_dir": settings.issues_dir.resolve() if settings.issues_dir else None})
    mirror = mirror.resolve() if mirror else None
    units: dict[str, GenUnit] = {}
    for repo in repos:
        local = Path(repo).expanduser()
        given = str(local.resolve()) if local.is_dir() else repo
        name = repo_name(given, resolve_repo(given, mirror))
        if name in units:
            raise DuplicateRepoError(f"{units[name].repo} and {given} are both {name}: give each repository once")
        units[name] = GenUnit(repo=given, name=name, mode=mode, mirror=mirror,
                              settings=absolute.model_copy(update={"out": out / name.replace("/", "__")}))
    return list(units.values())


def read_state(unit: GenUnit) -> UnitState:
    """The unit's state file, or a fresh state for a unit never run."""
    if unit.state_path.is_file():
        return UnitState.model_validate_json(unit.state_path.read_text(encoding="utf-8"))
    return UnitState(repo=unit.repo, name=unit.name, mode=unit.mode)


def run_unit(unit: GenUnit) -> UnitState:
    """Run one unit to its end or its budget (resuming its journal), and record how it ended.

    Written last, after the unit's own outputs: a unit killed before this stays not done, and its
    rerun replays the journal rather than redoing the work."""
    state = read_state(unit)
    if state.done:
        return state
    state = state.model_copy(update={"runs": state.runs + 1, "error": ""})
    started = time.monotonic()
    try:
        result = generate(unit.repo, unit.mode, unit.settings, unit.mirror)
        state = state.model_copy(update={"done": not result.counts.interrupted, "kept": len(result.instances)})
    except UNIT_ERRORS as exc:
        why = f"{exc.stage}: {exc.message}" if isinstance(exc, LaunchError) else str(exc)
        state = state.model_copy(update={"done": False, "error": f"{type(exc).__name__}: {why}"})
    state.seconds = round(time.monotonic() - started, 1)
    _write_atomically(unit.state_path, state.model_dump_json(indent=1))
    return state


def run_here(units: list[GenUnit]) -> Iterator[UnitState]:
    """The local executor: one unit after another in this process (each evaluates its candidates
    `--workers` at a time already)."""
    for unit in units:
        yield run_unit(unit)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def merge(out: Path, units: list[GenUnit]) -> tuple[list[TaskInstance], YieldReport]:
    """Write the merged `suite.jsonl`, `yield.json`, `units.json` and `repos/` links from the units'
    journals: deterministic (sorted by repository, then instance id), each task once."""
    entries: list[Entry] = []
    tasks: dict[str, TaskInstance] = {}
    for unit in sorted(units, key=lambda u: u.name):
        found = read_entries(unit.journal_path) if unit.journal_path.is_file() else []
        entries += found
        where = Provenance(repo=unit.repo, strategy="", unit=unit.out.name)
        for e in found:
            if e.outcome == Outcome.KEPT and e.instance is not None and e.instance.instance_id not in tasks:
                tagged = where.model_copy(update={"strategy": e.strategy})
                tasks[e.instance.instance_id] = e.instance.model_copy(update={"provenance": tagged.model_dump()})
        generated = unit.out / "repos" / unit.name
        link = out / "repos" / unit.name
        if generated.is_dir() and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(generated, link.parent), target_is_directory=True)
    kept = sorted(tasks.values(), key=lambda t: (t.repo, t.instance_id))
    write_suite_file(kept, out / "suite.jsonl")
    report = yield_report(entries, kept)
    _write_atomically(out / "yield.json", report.model_dump_json(indent=1))
    _write_atomically(out / "units.json", UnitsReport(units=[read_state(u) for u in units]).model_dump_json(indent=1))
    return kept, report


def generate_many(units: list[GenUnit], out: Path, runner: UnitRunner = run_here) -> ManyResult:
    """Run the units not done yet on `runner`, then merge every unit's tasks into `out/suite.jsonl`."""
    todo = [u for u in units if not read_state(u).done]
    out.mkdir(parents=True, exist_ok=True)  # before any worker looks for it
    for _ in runner(todo) if todo else ():
        pass
    instances, report = merge(out.resolve(), units)
    return ManyResult(units=[read_state(u) for u in units], ran=[u.name for u in todo], instances=instances,
                      report=report, suite=out / "suite.jsonl")
