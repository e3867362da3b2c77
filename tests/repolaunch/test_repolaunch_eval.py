"""`dojo eval` on a SWE-bench-format file whose instances carry no environment: each (repo, setup
commit) is launched through RepoLaunch and cached, and a failed launch is an infra_error that names
its stage while the other instances go on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from launch_helpers import DATE, PROJECT, commit_all, write_tree
from typer.testing import CliRunner

from swedojo.cli import app

BUGGY = {
    "src/calc/__init__.py": PROJECT["src/calc/__init__.py"] + "\n\ndef sub(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}
FIX = PROJECT["src/calc/__init__.py"] + "\n\ndef sub(a, b):\n    return a - b\n"
NEW_TEST = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"


def _diff(repo: Path, files: dict[str, str]) -> str:
    """The patch that writes `files` in `repo` (left unchanged)."""
    write_tree(repo, files)
    subprocess.run(["git", "add", "-N", "."], cwd=repo, check=True)
    patch = subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True, text=True).stdout
    subprocess.run(["git", "reset", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=repo, check=True)
    return patch


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    repo = write_tree(tmp_path / "calc", {**PROJECT, **BUGGY})
    base = commit_all(repo, "calc with sub", DATE)
    broken = write_tree(tmp_path / "broken", {"setup.py": "raise SystemExit('this setup.py is broken')\n",
                                              "test_x.py": "def test_x():\n    pass\n"})
    broken_base = commit_all(broken, "broken", DATE)
    records = [
        {"instance_id": "calc-1", "repo": str(repo), "base_commit": base, "environment_setup_commit": base,
         "patch": _diff(repo, {"src/calc/__init__.py": FIX}), "test_patch": _diff(repo, {"tests/test_sub.py": NEW_TEST}),
         "problem_statement": "sub adds", "FAIL_TO_PASS": json.dumps(["tests/test_sub.py::test_sub"]),
         "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "version": "0.1"},
        {"instance_id": "broken-1", "repo": str(broken), "base_commit": broken_base, "patch": "", "test_patch": "",
         "problem_statement": "whatever", "FAIL_TO_PASS": json.dumps(["test_x.py::test_x"]), "PASS_TO_PASS": "[]"},
    ]
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _results(out: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_eval_launches_environments(suite: Path, tmp_path: Path, env_cache: Path, backend: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    runner = CliRunner()
    common = ["eval", "--suite", str(suite), "--backend", backend, "--rewards", "resolved", "--workers", "2"]
    gold = runner.invoke(app, [*common, "--policy", "gold", "--out", str(tmp_path / "gold")])
    assert gold.exit_code == 1, gold.output  # broken-1 is an infra_error
    results = _results(tmp_path / "gold")
    assert results["calc-1"]["status"] == "resolved", results["calc-1"]
    broken = results["broken-1"]
    assert broken["status"] == "infra_error" and "\n" not in broken["error"]
    assert broken["error"].startswith("environment: [install] deps layer: `pip install" if backend == "docker"
                                      else "environment: [install] `pip install")
    launched = tmp_path / "gold" / "environments"
    assert sorted(p.name.split("-")[-1] for p in launched.iterdir()) == \
        sorted(r["base_commit"][:12] for r in map(json.loads, suite.read_text().splitlines()))
    assert "this setup.py is broken" in next(launched.glob("*broken*")).joinpath("build.log").read_text()

    empty = runner.invoke(app, [*common, "--policy", "empty", "--out", str(tmp_path / "empty")])
    assert empty.exit_code == 1, empty.output
    results = _results(tmp_path / "empty")
    assert not results["calc-1"]["resolved"] and results["calc-1"]["status"] == "empty_patch"
    assert results["calc-1"]["report"]["fail_to_pass"] == {"tests/test_sub.py::test_sub": "FAILED"}
    assert results["calc-1"]["report"]["pass_to_pass"] == {"tests/test_calc.py::test_add": "PASSED"}
    calc_log = next((tmp_path / "empty" / "environments").glob("*calc*")).joinpath("build.log").read_text()
    assert "validated spec cache hit" in calc_log  # launched once, by the gold run


RUNTESTS = '''import argparse
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
parser = argparse.ArgumentParser()
parser.add_argument("labels", nargs="*")
parser.add_argument("-v", "--verbosity", type=int, default=1)
args = parser.parse_args()
loader = unittest.defaultTestLoader
suite = loader.loadTestsFromNames(args.labels) if args.labels else loader.discover(here, "tests.py", here)
sys.exit(not unittest.TextTestRunner(verbosity=args.verbosity).run(suite).wasSuccessful())
'''
OWN_RUNNER = {
    "setup.py": "from setuptools import setup\nsetup(name='shapes', version='1.0', packages=['shapes'])\n",
    "tox.ini": "[tox]\nenvlist = py3\n[testenv]\nchangedir = tests\ncommands = {envpython} runtests.py {posargs}\n",
    "shapes/__init__.py": "def area(w, h):\n    return w + h\n",
    "tests/runtests.py": RUNTESTS,
    "tests/app/__init__.py": "",
    "tests/app/tests.py": "import unittest\n\nimport shapes\n\n\nclass ShapeTests(unittest.TestCase):\n"
                          "    def test_square(self):\n        self.assertEqual(shapes.area(2, 2), 4)\n",
    "tests/other/__init__.py": "",
    "tests/other/tests.py": "import unittest\n\n\nclass Other(unittest.TestCase):\n"
                            "    def test_broken_elsewhere(self):\n        self.fail('not graded')\n",
}


def test_a_project_with_its_own_unittest_runner(tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository tested by its own runner script (tox: `changedir = tests`, `runtests.py`; no
    pytest anywhere), with ids as `name (module.Class)`: the launch finds the script, grading runs the
    test patch's files as the script's labels and reads unittest's output; gold resolves, empty not."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    repo = write_tree(tmp_path / "shapes", OWN_RUNNER)
    base = commit_all(repo, "shapes", DATE)
    test_file = OWN_RUNNER["tests/app/tests.py"] + "\n    def test_rectangle(self):\n        self.assertEqual(shapes.area(2, 3), 6)\n"
    record = {"instance_id": "shapes-1", "repo": str(repo), "base_commit": base, "environment_setup_commit": base,
              "patch": _diff(repo, {"shapes/__init__.py": "def area(w, h):\n    return w * h\n"}),
              "test_patch": _diff(repo, {"tests/app/tests.py": test_file}), "problem_statement": "area adds",
              "FAIL_TO_PASS": json.dumps(["test_rectangle (app.tests.ShapeTests)"]),
              "PASS_TO_PASS": json.dumps(["test_square (app.tests.ShapeTests)"]), "version": "1.0"}
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(record) + "\n")
    runner = CliRunner()
    common = ["eval", "--suite", str(suite), "--backend", "local", "--rewards", "resolved"]
    gold = runner.invoke(app, [*common, "--policy", "gold", "--out", str(tmp_path / "gold")])
    assert gold.exit_code == 0, gold.output
    result = _results(tmp_path / "gold")["shapes-1"]
    assert result["status"] == "resolved", result
    assert result["report"]["fail_to_pass"] == {"test_rectangle (app.tests.ShapeTests)": "PASSED"}
    spec = json.loads(next((tmp_path / "gold" / "environments").glob("*")).joinpath("envspec.json").read_text())
    assert (spec["test_command"], spec["log_parser"]) == ("python tests/runtests.py --verbosity 2", "unittest")
    assert spec["test_scope"] == ["tests/app/tests.py"]
    assert "test_broken_elsewhere (other.tests.Other)" not in result["report"]["log_tail"]  # only the graded file ran
    empty = runner.invoke(app, [*common, "--policy", "empty", "--out", str(tmp_path / "empty")])
    assert empty.exit_code == 0, empty.output
    assert _results(tmp_path / "empty")["shapes-1"]["report"]["fail_to_pass"] == \
        {"test_rectangle (app.tests.ShapeTests)": "FAILED"}


def test_a_base_commit_whose_dependencies_the_setup_commit_dropped_gets_its_own_environment(
        tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on real SWE-bench tasks: the environment of a later setup commit lacks a dependency the
    base commit's code imports (it was dropped in between), so every patch failed on
    "No module named ...". The evidence (a module no repo file provides) launches an environment
    at the base commit, and gold resolves there."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    setup = "from setuptools import setup\nsetup(name='cfg', version='1.0', py_modules=['cfg'], install_requires={})\n"
    old = "import six\n\n\ndef double(x):\n    return x + x + 1\n"
    repo = write_tree(tmp_path / "cfg", {"setup.py": setup.format("['six==1.16.0']"), "cfg.py": old,
                                         "tests/test_cfg.py": "from cfg import double\n\n\ndef test_one():\n    assert double(0) >= 0\n"})
    base = commit_all(repo, "cfg with six", DATE)
    fixed = old.replace("x + x + 1", "x + x")
    patch = _diff(repo, {"cfg.py": fixed})
    test_patch = _diff(repo, {"tests/test_cfg.py": "from cfg import double\n\n\ndef test_one():\n    assert double(0) >= 0\n"
                                                   "\n\ndef test_two():\n    assert double(2) == 4\n"})
    write_tree(repo, {"setup.py": setup.format("[]"), "cfg.py": fixed.replace("import six\n\n\n", "")})
    later = commit_all(repo, "drop six", DATE)
    record = {"instance_id": "cfg-1", "repo": str(repo), "base_commit": base, "environment_setup_commit": later,
              "patch": patch, "test_patch": test_patch, "problem_statement": "double adds one",
              "FAIL_TO_PASS": json.dumps(["tests/test_cfg.py::test_two"]),
              "PASS_TO_PASS": json.dumps(["tests/test_cfg.py::test_one"]), "version": "1.0"}
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(record) + "\n")
    gold = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--backend", "local", "--rewards", "resolved",
                                    "--policy", "gold", "--out", str(tmp_path / "gold")])
    assert gold.exit_code == 0, gold.output
    result = _results(tmp_path / "gold")["cfg-1"]
    assert result["status"] == "resolved", result
    launched = sorted(p.name.split("-")[-1] for p in (tmp_path / "gold" / "environments").iterdir())
    assert launched == sorted([base[:12], later[:12]])  # the setup commit's, then the base commit's
