"""`dojo launch --repos FILE`: one environment per repository and commit, each a unit of work.

A unit is the single launch (`launch.launch`) into a directory of its own, `OUT/<unit>`
(envspec.json, build.log, ...), unchanged: what one launch writes, a unit writes. A unit that built
and validated its environment says so in its `unit.json` and is not launched again; a failed or
unfinished one (killed with its node or driver) is launched again on a rerun, and the launch's own
caches (checkouts, image layers, dependency layers) make the second attempt cheap. Units run
anywhere (one after another here, or a Ray task each, given by the layer that knows the executors);
only the driver writes `OUT/launches.json`, from the units' files, so the report is the same however
and wherever they ran.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel

from swedojo.errors import BadInputError
from swedojo.repolaunch.errors import LaunchError
from swedojo.repolaunch.launch import launch
from swedojo.rundir import write_atomic


class LaunchUnit(BaseModel):
    """One environment to launch: what a worker needs (absolute paths; picklable)."""

    repo: str
    """The repository as given (a path made absolute, a URL, or `owner/name` in `mirror`)."""
    commit: str = ""
    """The commit as given; empty: HEAD."""
    backend: str
    """docker or local."""
    mirror: Path | None = None
    """Where `owner/name` repositories are."""
    out: Path
    """The unit's directory (the launch's `--out`)."""

    @property
    def state_path(self) -> Path:
        return self.out / "unit.json"


class LaunchState(BaseModel):
    """`unit.json`: how a unit's last launch ended; `done` units are not launched again."""

    repo: str
    """The repository as given."""
    commit: str = ""
    """The commit as given."""
    unit: str
    """Its directory, relative to the run's `--out`."""
    done: bool = False
    """Its environment was built and validated."""
    runs: int = 0
    """Launches of it that reached their end (a launch killed first counts nothing)."""
    sha: str = ""
    """The commit the environment is of."""
    image: str = ""
    """The docker image (empty on the local backend)."""
    tests: int = 0
    """Tests the validation found."""
    passed: int = 0
    """Of them, those that passed."""
    seconds: float = 0.0
    """How long the last launch took."""
    error: str = ""
    """Why its last launch failed (`stage: message`), if it did."""


class LaunchesReport(BaseModel):
    """`launches.json`: every unit of the run as it stands."""

    units: list[LaunchState]
    """In the order the list gave them."""

    @property
    def ready(self) -> int:
        return sum(u.done for u in self.units)


LaunchRunner = Callable[[list[LaunchUnit]], Iterable[LaunchState]]
"""Runs units (anywhere) and yields the state of each as it ends, in any order."""


def read_launch_list(path: Path) -> list[tuple[str, str]]:
    """`--repos FILE`: `REPO [COMMIT]` per line (a local path, URL or owner/name; HEAD without a
    commit); blank lines and `#` comments are skipped. Relative paths are taken from the file's
    directory, as one would write them in it."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        if not fields:
            continue
        if len(fields) > 2:
            raise BadInputError(f"--repos {path}:{number}: expected `REPO [COMMIT]`, got {line.strip()!r}")
        local = path.parent / fields[0]
        repo = str(local.resolve()) if not Path(fields[0]).is_absolute() and local.is_dir() else fields[0]
        entries.append((repo, fields[1] if len(fields) == 2 else ""))
    return entries


def _unit_name(repo: str, commit: str) -> str:
    """`owner__name` (a path's or URL's last two parts), with `@commit` where one was given."""
    parts = [p for p in re.split(r"[/:]", repo.removesuffix(".git").rstrip("/")) if p][-2:]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "__".join(parts)) or "repo"
    return f"{name}@{re.sub(r'[^A-Za-z0-9_.-]+', '-', commit)}" if commit else name


def plan_launches(entries: list[tuple[str, str]], out: Path, backend: str, mirror: Path | None = None) -> list[LaunchUnit]:
    """One unit per (repository, commit), under `out`; the same pair twice is an error."""
    units: dict[str, LaunchUnit] = {}
    for repo, commit in entries:
        local = Path(repo).expanduser()
        given = str(local.resolve()) if local.is_dir() else repo
        name = _unit_name(given, commit)
        if name in units:
            raise BadInputError(f"--repos: {units[name].repo} {commit} and {given} {commit} share the unit {name}: "
                                "give each repository and commit once")
        units[name] = LaunchUnit(repo=given, commit=commit, backend=backend, mirror=mirror.resolve() if mirror else None,
                                 out=out.resolve() / name)
    return list(units.values())


def read_state(unit: LaunchUnit) -> LaunchState:
    """The unit's state file, or a fresh state for a unit never launched."""
    if unit.state_path.is_file():
        return LaunchState.model_validate_json(unit.state_path.read_text(encoding="utf-8"))
    return LaunchState(repo=unit.repo, commit=unit.commit, unit=unit.out.name)


def run_launch(unit: LaunchUnit) -> LaunchState:
    """Launch one unit (unless done) and record how it ended, last: a unit killed before that is not done."""
    state = read_state(unit)
    if state.done:
        return state
    start = time.monotonic()
    try:
        spec = launch(unit.repo, unit.out, commit=unit.commit, backend=unit.backend, mirror=unit.mirror)
        state = state.model_copy(update={
            "done": True, "error": "", "sha": spec.commit, "image": spec.image, "tests": len(spec.test_status),
            "passed": sum(1 for s in spec.test_status.values() if s.counts_as_pass)})
    except LaunchError as exc:
        state = state.model_copy(update={"done": False, "error": f"{exc.stage}: {exc.message}"})
    state = state.model_copy(update={"runs": state.runs + 1, "seconds": round(time.monotonic() - start, 1)})
    unit.out.mkdir(parents=True, exist_ok=True)  # a launch refused before it made its directory
    write_atomic(unit.state_path, state.model_dump_json(indent=1))
    return state


def run_here(units: list[LaunchUnit]) -> Iterable[LaunchState]:
    """The local executor: one launch after another in this process."""
    for unit in units:
        yield run_launch(unit)


def launch_many(units: list[LaunchUnit], out: Path, runner: LaunchRunner = run_here,
                on_state: Callable[[LaunchState], None] | None = None) -> LaunchesReport:
    """Launch the units not done yet on `runner` (`on_state` hears each as it ends), then write
    `out/launches.json` over every unit."""
    todo = [u for u in units if not read_state(u).done]
    out.mkdir(parents=True, exist_ok=True)  # before any worker looks for it
    for state in runner(todo) if todo else ():
        if on_state:
            on_state(state)
    report = LaunchesReport(units=[read_state(u) for u in units])
    write_atomic(out / "launches.json", report.model_dump_json(indent=1))
    return report

