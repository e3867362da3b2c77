"""Test ids as suites list them, matched to the ids a runner's log gives.

SWE-bench's FAIL_TO_PASS/PASS_TO_PASS use several forms: pytest node ids
(`tests/test_x.py::Class::test_a`), bare function names (`test_issue_1234`, from a project's own
runner), Django's `test_a (module.Class)`, and parametrized node ids cut at their first space by
SWE-bench's log parser (`tests/test_x.py::test_p[a`). `status_of` finds the tests of the log each
form names; a name that matches several (the same function in two files) takes the worst status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from swedojo.schema import TestStatus
from swedojo.testrun.parsers import WORST_FIRST

_DJANGO = re.compile(r"(\S+) \(([\w.]+)\)")
_PROGRESS = re.compile(r"\[\s*(?:\d+%\]?)?[-=]*")
"""pytest's progress column ("[100%]", "[ 50%]", cut or run into a rule), which a status word may
precede on its own line (live logging): a parser keyed on the word after the status reads it as a test."""


def not_a_test(test: str) -> str:
    """Why `test` (a listed id) names no test; empty when it may name one."""
    if _PROGRESS.fullmatch(test):
        return "not a test id: a fragment of pytest's progress column that the dataset's parser read as one"
    return ""


def _module(path: str) -> str:
    """`tests/forms_tests/test_x.py` -> `tests.forms_tests.test_x`."""
    return path.removesuffix(".py").replace("/", ".")


def matches(statuses: Mapping[str, TestStatus], test: str) -> list[str]:
    """The log's test ids that `test` names (itself when the log has it)."""
    if test in statuses:
        return [test]
    if (django := _DJANGO.fullmatch(test)) is not None:
        name, dotted = django.groups()
        module, _, cls = dotted.rpartition(".")
        found = []
        for key in statuses:
            parts = key.split("::")
            if parts[-2:] == [cls, name] and ("." + _module(parts[0])).endswith("." + module if module else ""):
                found.append(key)
        return found
    if "[" in test and "]" not in test:  # cut at a space inside its parameters
        return [key for key in statuses if key.startswith(test)]
    if "::" not in test and "/" not in test:  # a bare function name
        return [key for key in statuses if key.split("::")[-1].split("[")[0] == test
                or key.split("::")[-1] == test]
    return []


def status_of(statuses: Mapping[str, TestStatus], test: str) -> TestStatus | None:
    """The status of `test` in the log (the worst of the tests it names); None when it names none."""
    found = [statuses[key] for key in matches(statuses, test)]
    return min(found, key=WORST_FIRST.index) if found else None
