"""Problem statements: what a user sees in a real pytest log, and never a line of the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from swedojo.datasets.gen.statements import (
    failure_notes,
    guard,
    history_statement,
    issue_text,
    mutation_statement,
)

FAILING = '''\
import pytest


def total(xs):
    return sum(xs[1:])


def test_total():
    assert total([1, 2, 3]) == 6


def test_divide():
    1 / 0


def test_raises():
    with pytest.raises(ValueError):
        total([])


class TestBox:
    def test_size(self):
        assert [1, 2] == [1, 2, 3]
'''

GOLD = """\
diff --git a/m.py b/m.py
--- a/m.py
+++ b/m.py
@@ -1,2 +1,2 @@
 def total(xs):
-    return sum(xs[1:])
+    return sum(xs)
"""


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The log of a real pytest run of FAILING."""
    where = tmp_path_factory.mktemp("failing")
    (where / "test_m.py").write_text(FAILING)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider"], cwd=where,
                          capture_output=True, text=True, env=env, check=False)
    return proc.stdout


TESTS = ["test_m.py::test_total", "test_m.py::test_divide", "test_m.py::test_raises", "test_m.py::TestBox::test_size",
         "test_m.py::test_gone"]


def test_failure_notes_read_what_pytest_shows(log):
    notes = failure_notes(log, TESTS)
    assert notes == {
        "test_m.py::test_total": "`total([1, 2, 3])` returns `5` where `6` was expected",
        "test_m.py::test_divide": "raises `ZeroDivisionError: division by zero`",
        "test_m.py::test_raises": "fails: `Failed: DID NOT RAISE ValueError`",
        "test_m.py::TestBox::test_size": "got `[1, 2]` where `[1, 2, 3]` was expected",
        "test_m.py::test_gone": "fails",
    }


def test_mutation_statement_lists_failures_but_no_line_of_the_fix(log):
    statement = mutation_statement(log, TESTS[:2], GOLD)
    assert statement.startswith("Tests fail: test_total, test_divide\n")
    assert "`total([1, 2, 3])` returns `5` where `6` was expected" in statement
    assert "sum(xs" not in statement
    grouped = mutation_statement(log, ["test_m.py::test_gone", "test_m.py::test_lost"], GOLD)
    assert "- `test_m.py::test_gone`, `test_m.py::test_lost`: fails.\n" in grouped  # one bullet per failure
    leaky = "The helper does `return sum(xs[1:])` now.\nSecond line stays."
    assert guard(leaky, GOLD) == "Second line stays.\n"


def test_history_statement_prefers_the_linked_issue(log, tmp_path):
    issues = tmp_path / "issues"
    issues.mkdir()
    (issues / "12.json").write_text(json.dumps({"title": "total() drops the first item", "body": "total([1, 2]) is 2"}))
    assert issue_text("Fix total (closes #12)", issues) == "total() drops the first item\n\ntotal([1, 2]) is 2"
    assert issue_text("Fix total (closes #13)", issues) == ""
    statement = history_statement("Fix total (closes #13)\n\nIt used `return sum(xs[1:])`.\n\nCloses #13", log,
                                  ["test_m.py::test_total"], GOLD, issues)
    assert statement.startswith("Fix total\n\n")  # the issue is not available: from the commit message
    assert "#13" not in statement
    assert "sum(xs" not in statement and "- `test_m.py::test_total`: `total([1, 2, 3])` returns `5`" in statement
