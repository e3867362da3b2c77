"""The reach map: which of the repo's functions each test calls, recorded once at the baseline.

A mutant then runs only the tests that call the function it changed; a mutant no test calls is
rejected without a run. Recording is a pytest plugin of ours (below) loaded with `-p` from the
work tree's `.git/`, so nothing is installed into the project or its environment. It sets a
global trace function that only notes the code object of each Python call and returns None (no
line events), which costs far less than line coverage; what it records per test is the set of
functions (code objects of the work tree, by path and line span) called from its setup to its
teardown. Calls made outside every test (imports, collection) are kept apart: a mutant there may
break any test, so it runs the whole suite. What the map misses (calls in subprocesses, under a
test's own trace function, or skipped by a cache an earlier test filled) can only lose a candidate
(rejected as not reached or as breaking nothing), never make a wrong task: FAIL_TO_PASS and
PASS_TO_PASS always come from the whole suite.
"""

from __future__ import annotations

import json
import shlex

from pydantic import BaseModel, Field

from swedojo.datasets.gen.mutations import Edit
from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.schema import EnvSpec
from swedojo.testrun.command import selects_tests, suite_command
from swedojo.testrun.run import SuiteRun, run_command

PLUGIN_DIR = ".git/swedojo_reach"
"""Where the plugin goes in the work tree (inside `.git/`: out of every diff)."""
MAP_FILE = ".git/swedojo-reach.json"
"""Where the plugin writes the map."""

PLUGIN = '''\
"""swedojo's reach map: the work tree's functions each test calls (see swedojo/datasets/gen/reach.py)."""
import dis
import json
import os
import sys
import threading
import time

import pytest

_ROOT = os.getcwd() + os.sep
_OUTSIDE = set()
_current = [_OUTSIDE]
_tests = {}
_seconds = {}


def _trace(frame, event, arg):
    _current[0].add(frame.f_code)  # a global trace function sees "call" events only


def pytest_configure(config):
    threading.settrace(_trace)
    sys.settrace(_trace)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    called = set()
    _current[0] = called
    start = time.perf_counter()
    yield
    _seconds[item.nodeid] = round(time.perf_counter() - start, 4)
    _tests[item.nodeid] = called
    _current[0] = _OUTSIDE


def pytest_unconfigure(config):
    sys.settrace(None)
    threading.settrace(None)
    index = {}  # the work tree's functions (CO_OPTIMIZED: not modules or class bodies), this file aside

    def ids(codes):
        out = []
        for code in codes:
            if not code.co_filename.startswith(_ROOT) or code.co_filename == __file__ or not code.co_flags & 1:
                continue
            if code not in index:
                lines = [line for _, line in dis.findlinestarts(code) if line]
                index[code] = (len(index), code.co_filename[len(_ROOT):], code.co_firstlineno,
                               max(lines, default=code.co_firstlineno))
            out.append(index[code][0])
        return sorted(out)

    tests = {test: ids(codes) for test, codes in _tests.items()}
    outside = ids(_OUTSIDE)
    functions = [list(entry[1:]) for entry in sorted(index.values())]
    with open(os.environ["SWEDOJO_REACH_OUT"], "w") as fh:
        json.dump({"functions": functions, "tests": tests, "outside": outside, "seconds": _seconds}, fh)
'''


class ReachMap(BaseModel):
    """Which of the repo's functions each test calls (the baseline's traced run)."""

    functions: list[tuple[str, int, int]]
    """Functions called by some test or outside every test: path, first line (decorators
    included), last line."""
    tests: dict[str, list[int]]
    """Test id -> indices into `functions` of what it called, from setup to teardown."""
    outside: list[int] = Field(default_factory=list)
    """Functions called outside every test (imports, collection, hooks)."""
    seconds: dict[str, float] = Field(default_factory=dict)
    """Test id -> wall time in the traced run (setup to teardown), for the limit of runs that select it."""

    def reaching(self, spans: dict[str, list[tuple[int, int]]]) -> list[str] | None:
        """The tests that call a function overlapping `spans` (path -> line ranges), sorted; None
        when code called outside every test overlaps them (any test may break: run them all)."""
        hit = {i for i, (path, first, last) in enumerate(self.functions)
               if any(first <= high and low <= last for low, high in spans.get(path, ()))}
        if hit & set(self.outside):
            return None
        return sorted(test for test, called in self.tests.items() if hit.intersection(called))


def edited_lines(edits: list[Edit], files: dict[str, bytes]) -> dict[str, list[tuple[int, int]]]:
    """Path -> the original lines each edit replaces (1-based, inclusive)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for edit in edits:
        data = files[edit.path]
        first = data.count(b"\n", 0, edit.start) + 1
        spans.setdefault(edit.path, []).append((first, first + data.count(b"\n", edit.start, max(edit.start, edit.end - 1))))
    return spans


def record(sandbox: Sandbox, spec: EnvSpec, timeout_s: float) -> tuple[SuiteRun, ReachMap | None]:
    """Run the whole suite with the plugin loaded: the run, and its map (None for a runner other
    than pytest, or when the plugin wrote nothing readable)."""
    if not selects_tests(spec) or spec.log_parser not in ("pytest", "pytest-junit"):
        return run_command(sandbox, spec, suite_command(spec), timeout_s), None
    sandbox.write_file(f"{PLUGIN_DIR}/swedojo_reach.py", PLUGIN.encode())
    path = f"{sandbox.workdir}/{MAP_FILE}"
    prefix = (f"SWEDOJO_REACH_OUT={shlex.quote(path)} "
              f"PYTHONPATH={shlex.quote(f'{sandbox.workdir}/{PLUGIN_DIR}')}${{PYTHONPATH:+:$PYTHONPATH}} ")
    run = run_command(sandbox, spec, f"{prefix}{suite_command(spec)} -p swedojo_reach", timeout_s)
    try:
        reach = ReachMap.model_validate(json.loads(sandbox.read_file(MAP_FILE)))
    except (OSError, SandboxError, ValueError):
        return run, None
    return run, reach if set(reach.tests) & set(run.statuses) else None
