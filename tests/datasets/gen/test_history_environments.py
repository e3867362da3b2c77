"""History mode across a change of build backend: the walk's environment is its last commit's, and a
commit the project does not build at there (here: flit_core before, setuptools after) gets an
environment launched for it (real pip installs from the index), so its fix still becomes a task."""

from __future__ import annotations

from pathlib import Path

from genproject import git

from swedojo.datasets.gen import GenSettings, generate
from swedojo.datasets.gen.journal import Outcome, read_entries

FLIT = """[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tally"
version = "0.1.0"
description = "Counting helpers."
requires-python = ">=3.9"
"""
SETUPTOOLS = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tally"
version = "0.1.0"
description = "Counting helpers."
requires-python = ">=3.9"

[tool.setuptools]
packages = ["tally"]
"""
CODE = '''"""Counting helpers."""


def count_even(values):
    return len([v for v in values if v % 2 == 1])


def total(values):
    return sum(values)
'''
TESTS = """from tally import total


def test_total():
    assert total([1, 2, 3]) == 6
"""
FIX_TESTS = TESTS + """

def test_count_even():
    from tally import count_even

    assert count_even([1, 2, 4]) == 2
"""


def _commit(repo: Path, files: dict[str, str], message: str, day: int) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, date=f"2024-03-{day:02d}T00:00:00Z")
    return git(repo, "rev-parse", "HEAD")


def test_a_commit_that_does_not_build_in_the_walks_environment_gets_its_own(tmp_path: Path) -> None:
    repo = tmp_path / "src" / "acme" / "tally"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    first = _commit(repo, {"pyproject.toml": FLIT, "tally/__init__.py": CODE, "tests/test_tally.py": TESTS}, "Start", 1)
    fix = _commit(repo, {"tally/__init__.py": CODE.replace("v % 2 == 1", "v % 2 == 0"),
                         "tests/test_tally.py": FIX_TESTS}, "Count even values, not odd ones", 2)
    _commit(repo, {"pyproject.toml": SETUPTOOLS}, "Build with setuptools", 3)
    out = tmp_path / "gen"
    result = generate(str(repo), "history", GenSettings(out=out, timeout_s=120, rev_range=f"{first}..HEAD"))
    (task,) = result.instances
    assert task.base_commit == first and task.FAIL_TO_PASS == ["tests/test_tally.py::test_count_even"]
    entries = {e.key: e for e in read_entries(out / "journal" / "acme__tally.history.jsonl")}
    assert entries[fix].outcome == Outcome.KEPT
    launched = sorted(p.name for p in (out / "environments").iterdir())
    assert len(launched) == 2 and any(name.endswith(first[:12]) for name in launched), launched
