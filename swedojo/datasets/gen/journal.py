"""The progress journal: every evaluated candidate and kept task, appended as it is decided.

A killed `gen` reruns with the same arguments and replays the journal instead of redoing work;
since candidate order is fixed by the seed, the resumed run ends with the same suite.
"""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from swedojo.datasets.gen.mutations import Edit
from swedojo.datasets.gen.reach import ReachMap
from swedojo.schema import TaskInstance, TestStatus


class Outcome(str, Enum):
    """What became of one candidate."""

    KEPT = "kept"
    NOT_QUALIFIED = "not_qualified"
    """History: the commit does not change both source and tests (or is the root commit)."""
    NOT_COMPILED = "not_compiled"
    """The mutant does not compile, or changes nothing."""
    PATCH_FAILED = "patch_failed"
    """History: the split patches do not apply at the parent."""
    TIMED_OUT = "timed_out"
    NOT_REACHED = "not_reached"
    """No test calls the mutated code (the baseline's reach map): rejected without a run."""
    NO_BREAK = "no_break"
    """No test that passed before fails now (history: no FAIL_TO_PASS)."""
    NONE_LEFT = "none_left"
    """Every passing test broke: nothing left to guard against regressions."""
    DUPLICATE = "duplicate"
    """Same set of failing tests as a task already kept."""
    INVALID = "invalid"
    """End-to-end validation failed (gold does not resolve, or empty does)."""
    NO_ENVIRONMENT = "no_environment"
    """History: the project does not build at the parent, in the walk's environment nor in one
    launched for that commit."""


class Entry(BaseModel):
    """One journal line: a candidate and its outcome."""

    key: str
    """Candidate id (mutation id, pair of ids, or commit SHA)."""
    strategy: str
    """Strategy that proposed it."""
    outcome: Outcome
    """What became of it."""
    seconds: float = 0.0
    """Wall time spent on it."""
    compiled: bool = False
    """It compiled (history: its patches applied and its tests ran)."""
    broke: bool = False
    """It broke at least one passing test (history: had a FAIL_TO_PASS test)."""
    failing: list[str] = Field(default_factory=list)
    """The tests it broke (used to deduplicate)."""
    detail: str = ""
    """One line on why it was not kept."""
    edits: list[Edit] = Field(default_factory=list)
    """The mutation's edits (so kept ones can be combined without realising them again)."""
    functions: list[str] = Field(default_factory=list)
    """`path:qualname` of the functions mutated (combined mutants must not share one)."""
    instance: TaskInstance | None = None
    """The task, when kept."""


class Baseline(BaseModel):
    """The suite's state at the commit bugs are injected into, run twice."""

    statuses: dict[str, TestStatus]
    """Statuses of the first run."""
    passing: list[str]
    """Tests that passed in both runs."""
    flaky: list[str]
    """Tests whose outcome differed between the runs."""
    seconds: float = 0.0
    """Wall time of the untraced run (a candidate's runs may take a bounded multiple of it)."""
    reach: ReachMap | None = None
    """Which functions each test calls; None where it could not be recorded (every candidate runs
    the whole suite)."""


class Header(BaseModel):
    """What the journal was made for; a rerun must match it to reuse the work."""

    repo: str
    """`owner/name`."""
    mode: str
    """`history` or `mutations`."""
    tip: str
    """Commit mutated (mutations) or last commit walked (history)."""
    seed: int
    """RNG seed of the sampling."""
    backend: str = "local"
    """Sandbox backend the candidates were judged on."""
    launch: bool = False
    """Whether RepoLaunch built the environment (journals from before it did: the plain one)."""


class JournalMismatchError(Exception):
    """The output directory holds a journal from a run with other settings."""


def _read(lines: list[str]) -> tuple[Baseline | None, dict[str, Entry]]:
    baseline, entries = None, {}
    for line in lines:
        try:
            record = json.loads(line)
            if "baseline" in record:
                baseline = Baseline.model_validate(record["baseline"])
            else:
                entry = Entry.model_validate(record)
                entries[entry.key] = entry
        except (ValueError, ValidationError):
            continue  # a line cut by a kill: that candidate is evaluated again
    return baseline, entries


def read_entries(path: Path) -> list[Entry]:
    """The entries of a journal, finished or partial."""
    return list(_read(path.read_text(encoding="utf-8").splitlines()[1:])[1].values())


class Journal:
    """An append-only JSONL file: a header, then the baseline and entries as they are decided."""

    def __init__(self, path: Path, header: Header) -> None:
        self.path = path
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if not lines:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append({"header": header.model_dump()})
        elif (found := Header.model_validate(json.loads(lines[0])["header"])) != header:
            raise JournalMismatchError(
                f"{path} was written for {found.model_dump()}, not {header.model_dump()}; use another --out")
        elif not path.read_bytes().endswith(b"\n"):
            self._append_raw("\n")  # end a line cut by a kill, so the next record starts clean
        self.baseline, self.entries = _read(lines[1:])

    def _append(self, record: dict[str, Any]) -> None:
        self._append_raw(json.dumps(record) + "\n")

    def _append_raw(self, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, entry: Entry) -> None:
        self.entries[entry.key] = entry
        self._append(entry.model_dump(mode="json", exclude_defaults=True) | {"key": entry.key})

    def record_baseline(self, baseline: Baseline) -> None:
        self.baseline = baseline
        self._append({"baseline": baseline.model_dump(mode="json")})
