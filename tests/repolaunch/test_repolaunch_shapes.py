"""Launches of the issue's real-world-shaped repositories, each with per-test results: a setup.py
project with requirements files, a tox project, a Node project with npm tests (a dependency from
the npm registry) and a C project with make and a TAP test runner; pure-Python with pyproject is
in test_repolaunch_launch / test_repolaunch_docker. Python shapes launch locally, Node and C on
both backends, with the same test ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_helpers import DATE

from swedojo.repolaunch.launch import launch
from swedojo.schema import TestStatus

P, F = TestStatus.PASSED, TestStatus.FAILED

SETUP_PY = {
    "setup.py": """from setuptools import setup
setup(name="legacy", version="1.0", py_modules=["legacy"], python_requires=">=3.9",
      classifiers=["Programming Language :: Python :: 3.11"])
""",
    "requirements.txt": "iniconfig==2.0.0\n",
    "requirements-test.txt": "pytest\n",
    "legacy.py": "import iniconfig\n\n\ndef parse(text):\n    return iniconfig.IniConfig('x', data=text)\n",
    "tests/test_legacy.py": """import importlib.metadata

from legacy import parse


def test_parse():
    assert parse("[a]\\nb = 1\\n")["a"]["b"] == "1"


def test_installed():
    assert importlib.metadata.version("legacy") == "1.0"
""",
}
TOX = {
    "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ndeps =\n    pytest\n    iniconfig\ncommands = pytest {posargs}\n",
    "mod.py": "def half(x):\n    return x / 2\n",
    "test_mod.py": "from mod import half\n\n\ndef test_half():\n    assert half(4) == 2\n\n\n"
                   "def test_wrong():\n    assert half(4) == 3\n",
}
NODE = {
    "package.json": '{"name": "nodeapp", "version": "1.0.0", "scripts": {"test": "node --test"}, '
                    '"dependencies": {"is-number": "7.0.0"}}\n',
    "index.js": "const isNumber = require('is-number');\n"
                "exports.double = (x) => { if (!isNumber(x)) throw new TypeError('nan'); return 2 * x; };\n",
    "test/double.test.js": """const test = require('node:test');
const assert = require('node:assert');
const { double } = require('..');
test('doubles', () => { assert.strictEqual(double(2), 4); });
test('rejects text', () => { assert.throws(() => double('x')); });
test.describe('edge', () => { test.it('known bug', () => { assert.strictEqual(double(2), 5); }); });
""",
}
C = {
    "Makefile": "all: runner\nrunner: runner.c calc.c calc.h\n\t$(CC) -O0 -Wall -o runner runner.c calc.c\n"
                "test: runner\n\t./runner\n.PHONY: all test\n",
    "calc.h": "int add(int a, int b);\nint mul(int a, int b);\n",
    "calc.c": '#include "calc.h"\nint add(int a, int b) { return a + b; }\nint mul(int a, int b) { return a + b; }\n',
    "runner.c": """#include <stdio.h>
#include "calc.h"
static int run, failed;
static void check(int ok, const char *name) {
    run++;
    failed += !ok;
    printf("%sok %d - %s\\n", ok ? "" : "not ", run, name);
}
int main(void) {
    printf("TAP version 13\\n1..3\\n");
    check(add(2, 2) == 4, "add");
    check(add(-1, 1) == 0, "add negative");
    check(mul(2, 3) == 6, "mul");
    printf("# tests %d\\n# pass %d\\n# fail %d\\n", run, run - failed, failed);
    return failed != 0;
}
""",
}
SHAPES = {
    "setup-py": (SETUP_PY, ("python", "setup.py"), {"tests/test_legacy.py::test_parse": P,
                                                    "tests/test_legacy.py::test_installed": P}),
    "tox": (TOX, ("python", "tox"), {"test_mod.py::test_half": P, "test_mod.py::test_wrong": F}),
    "node": (NODE, ("javascript", "npm"), {"doubles": P, "rejects text": P, "edge > known bug": F}),
    "c-make": (C, ("c", "make"), {"add": P, "add negative": P, "mul": F}),
}
CASES = [("setup-py", "local"), ("tox", "local"), ("node", "local"), ("c-make", "local"),
         pytest.param("node", "docker", marks=pytest.mark.docker), pytest.param("c-make", "docker", marks=pytest.mark.docker)]


@pytest.mark.parametrize(("shape", "backend"), CASES)
def test_shape_launches_with_per_test_results(make_repo, tmp_path: Path, env_cache: Path, shape: str,
                                              backend: str) -> None:
    files, kind, statuses = SHAPES[shape]
    repo = make_repo(shape, files, DATE)
    spec = launch(str(repo), tmp_path / "out", backend=backend, cache_dir=env_cache / "envs")
    assert (spec.language, spec.build_system) == kind
    assert spec.test_status == statuses
    assert (spec.flaky_tests, spec.network_tests) == ([], [])
    if shape == "node":
        assert spec.resolved_dependencies == {"is-number": "7.0.0"}  # from the npm registry, as of DATE
        assert spec.install_commands == [f"npm install --before={DATE}"]
    if shape == "setup-py":
        assert spec.resolved_dependencies["iniconfig"] == "2.0.0" and "legacy" not in spec.resolved_dependencies
    assert spec.backend == backend and bool(spec.image) == (backend == "docker")
