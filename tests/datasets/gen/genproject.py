"""A small pure-Python project with a real history, made in the test (no mocks)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GEOMETRY = '''\
"""Small geometry helpers."""

import math


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return value


def rectangle_area(width, height):
    """Area of a width x height rectangle."""
    if width < 0 or height < 0:
        raise ValueError("negative size")
    return width * height


def perimeter(width, height):
    return 2 * width + 2 * height


def circle_area(radius):
    return math.pi * radius ** 2


def mean(values):
    """Arithmetic mean; empty input is an error."""
    if not values:
        raise ValueError("mean of nothing")
    total = 0
    for v in values:
        total += v
    return total / len(values)


def window(items, size):
    """Consecutive windows of `size` items."""
    return [items[i:i + size] for i in range(len(items) - size + 1)]
'''

TESTS = '''\
import math

import pytest

from shapes.geometry import circle_area, clamp, mean, perimeter, rectangle_area, window


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_rectangle_area():
    assert rectangle_area(3, 4) == 12


def test_rectangle_negative():
    with pytest.raises(ValueError):
        rectangle_area(-1, 2)


def test_perimeter():
    assert perimeter(3, 4) == 14


def test_circle_area():
    assert math.isclose(circle_area(2), 4 * math.pi)


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])


def test_window():
    assert window([1, 2, 3, 4], 2) == [[1, 2], [2, 3], [3, 4]]


def test_window_whole():
    assert window([1, 2], 2) == [[1, 2]]
'''

MORE_TESTS = '''

def test_rectangle_square():
    assert rectangle_area(5, 5) == 25
'''

FIX_TESTS = '''

def test_clamp_high():
    assert clamp(50, 0, 10) == 10
'''

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shapes"
version = "0.1.0"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["shapes"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

ISSUE_7 = "clamp() lets values above the upper bound through\n\nclamp(50, 0, 10) gives 50, I expected 10.\n"


def git(cwd: Path, *args: str, date: str = "2024-01-01T00:00:00Z") -> str:
    env = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid", "GIT_COMMITTER_NAME": "dev",
           "GIT_COMMITTER_EMAIL": "dev@example.invalid", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
           "HOME": str(cwd), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str, day: int) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, date=f"2024-01-{day:02d}T00:00:00Z")
    return git(repo, "rev-parse", "HEAD")


def make_project(root: Path) -> tuple[Path, dict[str, str]]:
    """`root/acme/shapes`: six commits, one of them a real fix; returns (repo, commit name -> SHA)."""
    repo = root / "acme" / "shapes"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = {"initial": _commit(repo, {"pyproject.toml": PYPROJECT, "shapes/__init__.py": "", "shapes/geometry.py": GEOMETRY,
                                      "tests/test_geometry.py": TESTS}, "Initial version", 1)}
    shas["docs"] = _commit(repo, {"README.md": "# shapes\n\nGeometry helpers.\n"}, "Document usage", 2)
    tests = TESTS + MORE_TESTS
    shas["tests_only"] = _commit(repo, {"tests/test_geometry.py": tests}, "Test square areas", 3)
    geometry = GEOMETRY.replace("return 2 * width + 2 * height", "return 2 * (width + height)")
    shas["source_only"] = _commit(repo, {"shapes/geometry.py": geometry}, "Simplify perimeter", 4)
    geometry = geometry.replace("        return low\n    return value",
                                "        return low\n    if value > high:\n        return high\n    return value")
    tests += FIX_TESTS
    shas["fix"] = _commit(repo, {"shapes/geometry.py": geometry, "tests/test_geometry.py": tests},
                          "Fix clamp ignoring the upper bound (fixes #7)\n\nValues above high came back unchanged.", 5)
    geometry = geometry.replace('    if width < 0 or height < 0:\n        raise ValueError("negative size")\n',
                                "    _check(width, height)\n") + (
        '\n\ndef _check(width, height):\n    if width < 0 or height < 0:\n        raise ValueError("negative size")\n')
    tests = tests.replace("def test_rectangle_negative", "def test_rectangle_rejects_negative")
    shas["refactor"] = _commit(repo, {"shapes/geometry.py": geometry, "tests/test_geometry.py": tests},
                               "Move the size check into a helper", 6)
    return repo, shas
