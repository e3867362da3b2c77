"""Time limits relative to the baseline: a slow suite is not cut for being slow, a hang is cut.

The suite sleeps, so its baseline takes seconds; the candidates are two hand-made bugs (a
strategy is the generator's input, not part of what is tested): one makes the tests it breaks
slower than at the baseline and finishes within the relative limit, the other loops forever.
"""

from __future__ import annotations

from pathlib import Path

from genproject import git

from swedojo.datasets.gen import GenSettings, generate
from swedojo.datasets.gen.journal import read_entries
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
'''

TESTS = '''\
import time

from slowcalc.core import add, count_to, pause


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
'''

SLOWER = ("    return a + b\n", "    time.sleep(1.5)\n    return a - b\n")
"""Breaks both add tests and makes each take 2.5 s instead of 1 s."""
HANG = ("        i += 1\n", "        i += 0\n")
"""`count_to` never returns."""


class HandMade:
    """A strategy of fixed edits to slowcalc/core.py."""

    name = "mutation"
    tag = "mut"

    def sites(self, files: dict[str, bytes]) -> list[Mutation]:
        data = files["slowcalc/core.py"].decode()
        out = []
        for key, function, (old, new) in (("slower", "add", SLOWER), ("hang", "count_to", HANG)):
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


def test_a_slower_candidate_is_kept_and_a_hanging_one_is_cut(tmp_path: Path) -> None:
    repo = _slow_project(tmp_path / "src")
    settings = GenSettings(out=tmp_path / "gen", max_tasks=2, combine=False, timeout_factor=3.0, timeout_margin_s=2.0)
    result = generate(str(repo), "mutations", settings, strategies=[HandMade()])
    entries = {e.key: e for e in read_entries(settings.out / "journal" / "acme__slowcalc.mutations.jsonl")}
    assert set(entries) == {"slower", "hang"}
    # Each broken test takes 2.5 s instead of 1 s: slower than the baseline, within 3x it plus 2 s.
    assert entries["slower"].outcome == "kept", entries["slower"]
    (task,) = result.instances
    assert task.FAIL_TO_PASS == ["tests/test_core.py::test_add", "tests/test_core.py::test_add_negative"]
    assert task.PASS_TO_PASS == ["tests/test_core.py::test_count_to", "tests/test_core.py::test_pause"]
    assert entries["hang"].outcome == "timed_out"
