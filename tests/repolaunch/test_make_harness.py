"""A plain Makefile's `make test` runs programs the project wrote. Their "PASS: name" lines are
tests; a run that prints no per-test line is one test, the command itself (`WHOLE_SUITE`), and a
benchmark that lists that name (Multi-SWE-bench's "all tests") is graded on the command's exit
status whatever else the log holds. Where a Makefile has both `check` and `test`, `test` runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from launch_helpers import DATE, commit_all, write_tree
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.repolaunch.detect import analyse
from swedojo.repolaunch.launch import launch
from swedojo.rewards import grading
from swedojo.schema import EnvSpec
from swedojo.testrun import run
from swedojo.testrun.run import WHOLE_SUITE

CALC = "int add(int a, int b) { return a + b; }\nint sub(int a, int b) { return a + b; }\n"
SELFTEST = ('#include <stdio.h>\nint add(int a, int b);\nint sub(int a, int b);\n'
            'int main(void) {\n  if (add(1, 2) != 3) return 1;\n  printf("SUCCESS: add\\n");\n  return 0;\n}\n')
POOL = '#include <stdio.h>\nint main(void) { printf("PASS: testOrder\\n"); return 0; }\n'
MAKEFILE = ("all: selftest pool\nselftest: selftest.c calc.c\n\t$(CC) -o selftest selftest.c calc.c\npool: pool.c\n\t$(CC) -o pool pool.c\n"
            "check: selftest\n\t@echo quick check only\ntest: all\n\t./pool\n\t./selftest\n.PHONY: all check test\n")
GITIGNORE = "selftest\npool\n"


def _diff(repo: Path, files: dict[str, str]) -> str:
    write_tree(repo, files)
    patch = subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True, text=True).stdout
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    return patch


def _sub_adds(tmp_path: Path, instance_id: str, makefile: str) -> tuple[Path, Path]:
    """A project whose `sub` adds, committed, and a one-instance suite of it: the test patch makes the
    silent self-test check `sub` (only the command's exit status tells), the fix makes it subtract;
    FAIL_TO_PASS is the command itself, PASS_TO_PASS `testOrder`. (repository, suite file)."""
    repo = write_tree(tmp_path / instance_id, {"Makefile": makefile, "selftest.c": SELFTEST, "calc.c": CALC,
                                               "pool.c": POOL, ".gitignore": GITIGNORE})
    base = commit_all(repo, "sub adds", DATE)
    test_patch = _diff(repo, {"selftest.c": SELFTEST.replace("  return 0;\n}", "  if (sub(3, 1) != 2) return 1;\n  return 0;\n}")})
    fix = _diff(repo, {"calc.c": CALC.replace("int sub(int a, int b) { return a + b; }",
                                              "int sub(int a, int b) { return a - b; }")})
    record = {"instance_id": instance_id, "repo": str(repo), "base_commit": base, "patch": fix, "test_patch": test_patch,
              "problem_statement": "sub adds", "FAIL_TO_PASS": json.dumps([WHOLE_SUITE]),
              "PASS_TO_PASS": json.dumps(["testOrder"])}
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(record) + "\n")
    return repo, suite


def test_the_test_target_is_preferred_to_a_quick_check(tmp_path: Path) -> None:
    repo = write_tree(tmp_path, {"Makefile": MAKEFILE, "selftest.c": SELFTEST, "calc.c": CALC, "pool.c": POOL})
    a = analyse(repo)
    assert (a.test_command, a.log_parser) == ("make test", "make")


@pytest.mark.tools("make", "gcc")
def test_a_run_without_per_test_lines_is_one_test_the_command(tmp_path: Path, env_cache: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    silent = MAKEFILE.replace("\t./pool\n", "")
    repo = write_tree(tmp_path / "silent", {"Makefile": silent, "selftest.c": SELFTEST, "calc.c": CALC, "pool.c": POOL,
                                            ".gitignore": GITIGNORE})
    commit_all(repo, "silent", DATE)
    spec = launch(str(repo), tmp_path / "launch", backend="local", cache_dir=env_cache / "envs")
    assert spec.test_status == {WHOLE_SUITE: "PASSED"}


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.tools("make", "gcc")),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_the_listed_whole_suite_is_graded_on_the_commands_exit_status(tmp_path: Path, env_cache: Path, backend: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    _, suite = _sub_adds(tmp_path, "calc-1", MAKEFILE)
    runner = CliRunner()
    common = ["eval", "--suite", str(suite), "--backend", backend, "--rewards", "resolved", "--workers", "1"]
    for policy, status, verdict in [("gold", "resolved", "PASSED"), ("empty", "empty_patch", "FAILED")]:
        result = runner.invoke(app, [*common, "--policy", policy, "--out", str(tmp_path / policy)])
        assert result.exit_code == 0, result.output
        row = json.loads((tmp_path / policy / "results.jsonl").read_text().splitlines()[0])
        assert row["status"] == status, row
        assert row["report"]["fail_to_pass"] == {WHOLE_SUITE: verdict}
        assert row["report"]["pass_to_pass"] == {"testOrder": "PASSED"}
        assert not row["report"]["unmatched_tests"]


@pytest.mark.tools("make", "gcc")
def test_a_suite_slower_than_the_graded_limit_runs_for_a_multiple_of_its_validated_time(
        tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `make test` that takes longer than a graded run's fixed limit (zstd's builds and fuzzes for
    many minutes) is given a multiple of its slowest validation run: the reference patch resolves
    instead of being cut and graded unresolved, and a patch that hangs is still cut."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    monkeypatch.setattr(grading, "TEST_TIMEOUT_S", 1.0)  # the fixed limit, below the suite's 2 s
    monkeypatch.setattr(run, "SUITE_TIME_MARGIN_S", 0.0)  # so the hang below is cut in seconds
    repo, suite = _sub_adds(tmp_path, "slow-1", MAKEFILE.replace("test: all\n", "test: all\n\tsleep 2\n"))
    hang = _diff(repo, {"calc.c": CALC.replace("int sub(int a, int b) { return a + b; }", "int sub(int a, int b) { for (;;); }")})
    predictions = tmp_path / "hang.json"
    predictions.write_text(json.dumps([{"instance_id": "slow-1", "model_patch": hang, "model_name_or_path": "hang"}]))
    common = ["eval", "--suite", str(suite), "--backend", "local", "--rewards", "resolved", "--workers", "1"]
    runner = CliRunner()
    rows = {}
    for name, how in [("gold", ["--policy", "gold"]), ("hang", ["--predictions", str(predictions)])]:
        result = runner.invoke(app, [*common, *how, "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        rows[name] = json.loads((tmp_path / name / "results.jsonl").read_text().splitlines()[0])
    spec = EnvSpec.model_validate_json(next((tmp_path / "gold").rglob("envspec.json")).read_text())
    assert spec.suite_seconds >= 2.0  # its slowest validation run, the sleep in it
    assert rows["gold"]["status"] == "resolved", rows["gold"]
    limit = run.SUITE_TIME_FACTOR * spec.suite_seconds
    assert rows["hang"]["status"] == "unresolved", rows["hang"]
    assert rows["hang"]["report"]["error"] == f"tests timed out after {limit:.0f}s"
