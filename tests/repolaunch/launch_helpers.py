"""Helpers for the repolaunch tests: files and real git commits made in the test (`write_tree` re-exported)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from taskrepo import write_tree

from swedojo.repolaunch.launch import environment
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import TestStatus
from swedojo.testrun.parsers import parse_log

# A small pure-Python project (dependencies resolve as of DATE: pytest 8.2.1) and its tests: passing,
# failing, skipped, flaky (fails when an earlier run left a marker), and one that needs the network.
DATE = "2024-06-01T12:00:00Z"
NEEDS_NETWORK = """import socket


def test_needs_network():
    socket.create_connection(("pypi.org", 443), timeout=20).close()
"""
PROJECT = {
    "pyproject.toml": """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = []

[project.optional-dependencies]
test = ["iniconfig"]
""",
    "src/calc/__init__.py": """from importlib.metadata import version

__version__ = version("calc")  # only works when the project is installed


def add(a, b):
    return a + b
""",
}
TESTS = {
    "tests/test_calc.py": """import os

import pytest

from calc import __version__, add

MARKER = os.path.join(os.path.dirname(__file__), ".ran-before")


def test_add():
    assert add(1, 2) == 3


def test_installed_version():
    assert __version__ == "0.1.0"


def test_known_bug():
    assert add(1, 1) == 3


@pytest.mark.skip(reason="later")
def test_later():
    pass


def test_flaky():
    ran_before = os.path.exists(MARKER)
    open(MARKER, "w").close()
    assert not ran_before
""",
    "tests/test_net.py": NEEDS_NETWORK,
}

CALC_STATUSES = {
    "tests/test_calc.py::test_add": TestStatus.PASSED,
    "tests/test_calc.py::test_installed_version": TestStatus.PASSED,
    "tests/test_calc.py::test_known_bug": TestStatus.FAILED,
    "tests/test_calc.py::test_later": TestStatus.SKIPPED,
    "tests/test_calc.py::test_flaky": TestStatus.FAILED,  # failed in run 2: the worst status is kept
    "tests/test_net.py::test_needs_network": TestStatus.FAILED,  # validation runs offline
}
CALC_FLAKY = ["tests/test_calc.py::test_flaky"]
CALC_NETWORK = ["tests/test_net.py::test_needs_network"]  # passes in the run with the network on
C_OK = {"Makefile": "all: runner\nrunner: runner.c\n\t$(CC) -o runner runner.c\ntest: runner\n\t./runner\n.PHONY: all test\n",
        "runner.c": '#include <stdio.h>\nint main(void) { printf("1..1\\nok 1 - fine\\n"); return 0; }\n'}
"""A C project with make and one passing TAP test: launches with nothing from the network."""


def commit_all(root: Path, message: str, date: str) -> str:
    """Commit everything with a fixed author/committer date; returns the commit id."""
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=root, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


def sandbox_at_a_later_commit(launched: dict) -> Sandbox:
    """How eval uses a launched environment: a fresh prepared sandbox at a later commit of the repo,
    whose new and installed tests pass; the caller checks what is backend-specific, then closes it."""
    repo, spec = launched["repo"], launched["spec"]
    write_tree(repo, {"tests/test_more.py": "from calc import add\n\ndef test_more():\n    assert add(2, 2) == 4\n"})
    later = commit_all(repo, "more tests", "2024-06-02T12:00:00Z")
    sandbox = environment(spec, repo).open(later)
    try:
        result = sandbox.exec(f"{spec.test_command} tests/test_more.py tests/test_calc.py::test_installed_version")
        assert parse_log(spec.log_parser, result.output) == {
            "tests/test_more.py::test_more": TestStatus.PASSED,
            "tests/test_calc.py::test_installed_version": TestStatus.PASSED,
        }
    except BaseException:
        sandbox.close()
        raise
    return sandbox
