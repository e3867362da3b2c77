"""Test commands for the whole suite, for some test files, or for some test ids.

A runner whose command line takes files and ids gets them appended: pytest (or a wrapper read by
the pytest parser) as SWE-bench appends them; unittest and the runner scripts built on it (read
by the unittest parser) as dotted labels, `tests/a/test_b.py` -> `a.test_b` below the script's
directory and `test_x (a.test_b.Case)` -> `a.test_b.Case.test_x`, as Django's runner takes them. For any other
command the whole suite runs and the wanted tests are read from its log, which is slower but
never wrong. A compound command (`a; b`, `a && b`) is never extended: there is no telling which
part the arguments would reach.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence

from swedojo.schema import EnvSpec

_PYTEST = re.compile(r"(^|[\s/])(py\.test|pytest)(\s|$)")
_PYTEST_PARSERS = ("pytest", "pytest-junit")
_UNITTEST_ID = re.compile(r"(\w+) \(([\w.]+)\)")
_SHELL_OPERATORS = set(";&|()<>\n")
MAX_SELECTION_BYTES = 32_000
"""Longest list of test ids appended to a command line (one argument may not pass 128 KiB, all of
them together the kernel's ARG_MAX); past it the ids' files are run instead."""


def is_simple(command: str) -> bool:
    """Whether `command` is one simple command: no unquoted operators, so appended words reach it."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return False
    return not any(set(word) <= _SHELL_OPERATORS for word in words) and "\n" not in command


def selects_tests(spec: EnvSpec) -> bool:
    """Whether test files and ids can be appended to the spec's command: a simple command read by
    a pytest parser (pytest itself, or a wrapper that passes its arguments on), or by the unittest
    parser when it is not a discovery (which takes no labels)."""
    if not is_simple(spec.test_command):
        return False
    return spec.log_parser in _PYTEST_PARSERS or (spec.log_parser == "unittest" and "discover" not in spec.test_command)


def label_root(spec: EnvSpec) -> str:
    """Where a unittest-style runner's dotted labels start: the directory of the script it runs
    (`python tests/runtests.py`), else the working directory (`python -m unittest`)."""
    script = next((w for w in shlex.split(spec.test_command) if w.endswith(".py")), "")
    return posixpath.dirname(script.removeprefix("./"))


def _argument(spec: EnvSpec, item: str) -> str | None:
    """`item` (a test file or id) as the runner takes it; None when it cannot take it."""
    if spec.log_parser != "unittest":
        return item
    if match := _UNITTEST_ID.fullmatch(item):
        return f"{match.group(2)}.{match.group(1)}"
    root = label_root(spec)
    if root and not item.startswith(root + "/"):
        return None
    module = item[len(root) + 1:] if root else item
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def suite_command(spec: EnvSpec) -> str:
    """The whole suite; pytest goes on past a module that fails to import, so one broken file
    does not hide every other test."""
    if selects_tests(spec) and _PYTEST.search(spec.test_command):
        return f"{spec.test_command} --continue-on-collection-errors"
    return spec.test_command


def selection(spec: EnvSpec, tests: Sequence[str]) -> list[str] | None:
    """What to append to run `tests`: the ids themselves; their files when the ids would make a
    command line over `MAX_SELECTION_BYTES` (as SWE-bench runs the test patch's files); None for
    the whole suite (no tests given, a runner that cannot be told, ids that name no file)."""
    if not tests or not selects_tests(spec):
        return None
    if sum(len(shlex.quote(t)) + 1 for t in tests) <= MAX_SELECTION_BYTES:
        return list(tests)
    files = files_of(spec, tests)
    if files is not None and sum(len(shlex.quote(f)) + 1 for f in files) <= MAX_SELECTION_BYTES:
        return files
    return None


def files_of(spec: EnvSpec, tests: Sequence[str]) -> list[str] | None:
    """The test files `tests` (pytest node ids) lie in, for a run of whole files; None when not node ids."""
    if not tests or not selects_tests(spec) or not all("::" in t for t in tests):
        return None
    return list(dict.fromkeys(t.split("::", 1)[0] for t in tests))


def runnable(spec: EnvSpec, paths: Sequence[str]) -> list[str]:
    """The paths (a patch's files) the spec's runner takes as test files: Python files for pytest;
    none for a runner that cannot be given files (it runs the whole suite)."""
    if not selects_tests(spec):
        return []
    return [p for p in dict.fromkeys(paths) if p.endswith(".py") and _argument(spec, p) is not None]


def appended(spec: EnvSpec, items: Sequence[str]) -> str:
    """The spec's command with test files or ids appended in the runner's form, each quoted."""
    arguments = [a for a in (_argument(spec, item) for item in items) if a is not None]
    return " ".join([spec.test_command, *(shlex.quote(a) for a in dict.fromkeys(arguments))])


def selected_command(spec: EnvSpec, tests: Sequence[str]) -> str:
    """The command that runs `tests` (see `selection`): it may run more than them, never fewer."""
    chosen = selection(spec, tests)
    return suite_command(spec) if chosen is None else appended(spec, chosen)
