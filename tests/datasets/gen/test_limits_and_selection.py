"""Limits relative to the baseline and the reach map's test selection, on a suite that sleeps.

The baseline takes seconds; the candidates are hand-made (a strategy is the generator's input,
not part of what is tested): one makes the tests it breaks slower than at the baseline and
finishes within the relative limit, one loops forever, one changes code only one test calls and
breaks nothing, one changes a function no test calls, one makes twelve quick tests fail slowly.
"""

from __future__ import annotations

from pathlib import Path

from genproject import git

from swedojo.datasets.gen import GenSettings, generate
from swedojo.datasets.gen.journal import Header, Journal
from swedojo.datasets.gen.mutations import Edit, Mutation

CORE = '''\
import time


def add(a, b):
    return a + b


def count_to(n):
    i = 0
    while i < n:
        i += 1
    return i


def pause(seconds):
    time.sleep(seconds)
    return seconds


def unused(x):
    return x * 2


def double(x):
    return x + x
'''

TESTS = '''\
import time

import pytest

from slowcalc.core import add, count_to, double, pause


def test_add():
    time.sleep(1.0)
    assert add(1, 2) == 3


def test_add_negative():
    time.sleep(1.0)
    assert add(-1, -2) == -3


def test_count_to():
    assert count_to(10) == 10


def test_pause():
    assert pause(1.0) == 1.0


@pytest.mark.parametrize("x", range(12))
def test_double(x):
    assert double(x) == 2 * x
'''

SLOWER = ("    return a + b\n", "    time.sleep(1.5)\n    return a - b\n")
"""Breaks both add tests and makes each take 2.5 s instead of 1 s."""
HANG = ("        i += 1\n", "        i += 0\n")
"""`count_to` never returns."""
HARMLESS = ("    time.sleep(seconds)\n", "    time.sleep(seconds / 2)\n")
"""Only test_pause calls it, and it still passes."""
UNREACHED = ("    return x * 2\n", "    return x * 3\n")
"""No test calls `unused`."""
SLOW_FAILING = ("    return x + x\n", "    time.sleep(0.6)\n    return x + x + 1\n")
"""Breaks the twelve quick double tests, each now taking 0.6 s: over their limit, but steadily."""


class HandMade:
    """A strategy of fixed edits to slowcalc/core.py."""

    name = "mutation"
    tag = "mut"

    def sites(self, files: dict[str, bytes]) -> list[Mutation]:
        data = files["slowcalc/core.py"].decode()
        out = []
        for key, function, (old, new) in (("slower", "add", SLOWER), ("hang", "count_to", HANG),
                                              ("harmless", "pause", HARMLESS), ("unreached", "unused", UNREACHED),
                                              ("slow_failing", "double", SLOW_FAILING)):
            start = data.index(old)
            edit = Edit(path="slowcalc/core.py", start=start, end=start + len(old), text=new)
            out.append(Mutation(id=key, operator="hand", path=edit.path, function=function,
                                line=data[:start].count("\n") + 1, edits=[edit]))
        return out

    def realise(self, site: Mutation, files: dict[str, bytes]) -> list[Edit]:
        return site.edits


def _slow_project(root: Path) -> Path:
    repo = root / "acme" / "slowcalc"
    (repo / "slowcalc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "slowcalc" / "__init__.py").write_text("")
    (repo / "slowcalc" / "core.py").write_text(CORE)
    (repo / "tests" / "test_core.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "slowcalc")
    return repo


def test_limits_follow_the_baseline_and_candidates_run_the_tests_that_call_them(tmp_path: Path) -> None:
    repo = _slow_project(tmp_path / "src")
    settings = GenSettings(out=tmp_path / "gen", max_tasks=4, combine=False, timeout_factor=3.0, timeout_margin_s=2.0)
    result = generate(str(repo), "mutations", settings, strategies=[HandMade()])
    journal = Journal(settings.out / "journal" / "acme__slowcalc.mutations.jsonl",
                      Header(repo="acme/slowcalc", mode="mutations", tip=git(repo, "rev-parse", "HEAD"), seed=0,
                             launch=settings.launch))
    entries = journal.entries
    # the two kept mutants are then tried together (singles fell short of max_tasks)
    assert set(entries) == {"slower", "hang", "harmless", "unreached", "slow_failing", "slower+slow_failing"}
    assert journal.baseline is not None and journal.baseline.reach is not None
    assert journal.baseline.reach.reaching({"slowcalc/core.py": [(5, 5)]}) == [
        "tests/test_core.py::test_add", "tests/test_core.py::test_add_negative"]
    # Each broken test takes 2.5 s instead of 1 s: slower than the baseline, within 3x it plus 2 s.
    assert entries["slower"].outcome == "kept", entries["slower"]
    task, slow_failing = entries["slower"].instance, entries["slow_failing"].instance
    assert task is not None and slow_failing is not None and len(result.instances) >= 2
    doubles = [f"tests/test_core.py::test_double[{x}]" for x in range(12)]
    assert task.FAIL_TO_PASS == ["tests/test_core.py::test_add", "tests/test_core.py::test_add_negative"]
    assert task.PASS_TO_PASS == sorted(["tests/test_core.py::test_count_to", "tests/test_core.py::test_pause", *doubles])
    assert entries["hang"].outcome == "timed_out"
    # Its twelve selected tests take 7 s where the limit is a few seconds, but they kept finishing:
    # run again with the limit their pace asks for, it is kept; the hang made no progress and is cut.
    assert entries["slow_failing"].outcome == "kept", entries["slow_failing"]
    assert slow_failing.FAIL_TO_PASS == sorted(doubles)
    # Rejected after the one test that calls it, and without any run.
    assert (entries["harmless"].outcome, entries["harmless"].detail) == ("no_break", "none of the 1 tests calling it broke")
    assert entries["unreached"].outcome == "not_reached"
