"""Parity with SWE-bench's own harness: its log parser and grading, run on the test logs our runs
record, read the same per-test statuses and give the same verdicts as ours.

SWE-bench's code is the `swebench` package itself (the `parity` extra, which `make test` installs);
nothing of it is copied here. Without it the tests skip, saying so, except under
SWEDOJO_REQUIRE_PARITY=1 (`make test`, so CI), where they fail: parity is never silently unchecked.

The runs are the demo suite's gold and empty policies through `dojo eval`. Its environment is the
plain pytest one (`EnvSpec`'s default parser, `pytest`), whose SWE-bench counterpart is
`parse_log_pytest`. Known differences, kept on purpose and pinned by the last test; the demo
suite's logs reach none of them (the first two tests would show it if they did):

- our pytest parser also reads `-v` result lines (`path::test PASSED`), which give skipped tests
  their ids; SWE-bench's reads the `-rA` summary only. Grading runs `-rA` without `-v`, so this
  matters only for environments whose test command adds `-v`.
- a test listed twice (a pass, then an error in its teardown; reruns) keeps its worst status with
  us and its last line's with SWE-bench; `-rA` lists errors before passes, so SWE-bench reads a
  test whose teardown failed as passed. A teardown error is a failure of the code under test.
- SWE-bench 5.x counts a skipped PASS_TO_PASS test as kept; we count it as not passed: a patch
  that makes a passing test skip itself (a broken feature probe) has not kept it.
"""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.schema import EnvSpec
from swedojo.testrun.ids import status_of
from swedojo.testrun.parsers import parse_log

if os.environ.get("SWEDOJO_REQUIRE_PARITY") == "1":
    import swebench  # noqa: F401  (an ImportError here fails the run: `make test` installs the parity extra)
else:
    pytest.importorskip("swebench", reason="the `swebench` package is not installed (pip install -e '.[parity]')")

from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
from swebench.harness.grading import (
    get_eval_report,
    get_eval_tests_report,
    get_logs_eval,
    get_resolution_status,
)
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.types import (
    TestSpec as SwebenchSpec,  # renamed: pytest would collect a Test*
)

from swedojo.datasets.registry import load_suite
from swedojo.rewards.swebench_reports import (
    tests_status as our_tests_status,  # renamed: pytest would collect a test*
)
from swedojo.schema import EvalStatus, RewardReport, TestStatus

OUR_PARSER = EnvSpec(repo="", commit="").log_parser
THEIR_PARSER = {"pytest": "parse_log_pytest"}[OUR_PARSER]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The demo suite under gold and empty, with SWE-bench's files written beside ours."""
    root = tmp_path_factory.mktemp("parity")
    for policy in ("gold", "empty"):
        result = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", policy, "--rewards", "resolved",
                                          "--workers", "2", "--out", str(root / policy)])
        assert result.exit_code == 0, result.output
    return root


def _cases(runs):
    """(policy, task, our result, the run's directory) for every graded instance of both runs."""
    tasks = {i.instance_id: i for i in load_suite("demo").loaded.instances}
    for policy in ("gold", "empty"):
        for line in (runs / policy / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            yield policy, tasks[row["instance_id"]], row, runs / policy


def _spec(task) -> SwebenchSpec:
    return SwebenchSpec(instance_id=task.instance_id, image="", eval_script_list=[], repo=task.repo, version=task.version,
                    FAIL_TO_PASS=task.FAIL_TO_PASS, PASS_TO_PASS=task.PASS_TO_PASS, log_parser=THEIR_PARSER,
                    eval_type="pass_and_fail")


def test_swebench_reads_every_test_of_our_logs_as_we_do(runs):
    checked = 0
    for policy, task, row, run in _cases(runs):
        log = run / "logs" / task.instance_id / "test_output.txt"
        theirs, found = get_logs_eval(_spec(task), str(log))
        assert found, f"{policy} {task.instance_id}: SWE-bench finds no usable test output in {log}"
        ours = parse_log(OUR_PARSER, log.read_text().split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0])
        assert {test: status.value for test, status in ours.items()} == theirs, f"{policy} {task.instance_id}"
        for test in task.FAIL_TO_PASS + task.PASS_TO_PASS:
            recorded = {**row["report"]["fail_to_pass"], **row["report"]["pass_to_pass"]}[test]
            assert recorded == theirs.get(test) == getattr(status_of(ours, test), "value", None)
        checked += 1
    assert checked == 20  # 10 tasks, two policies


def test_swebench_grading_of_our_logs_gives_our_verdicts(runs):
    verdicts = {"gold": [], "empty": []}
    for policy, task, row, run in _cases(runs):
        log = str(run / "logs" / task.instance_id / "test_output.txt")
        theirs, _ = get_logs_eval(_spec(task), log)
        tests = get_eval_tests_report(theirs, {"FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS})
        resolved = get_resolution_status(tests) == "RESOLVED_FULL"
        assert resolved == row["resolved"], f"{policy} {task.instance_id}: SWE-bench says resolved={resolved}"
        verdicts[policy].append(resolved)
        report = run / "logs" / task.instance_id / "report.json"
        if row["status"] == "empty_patch":
            assert not report.exists()  # SWE-bench runs no empty patch, so writes no report for one
            continue
        # SWE-bench's own report.json for this prediction and this log is the one we wrote
        prediction = {"instance_id": task.instance_id, "model_patch": row["patch"], "model_name_or_path": policy}
        assert json.loads(report.read_text()) == get_eval_report(_spec(task), prediction, log, include_tests_status=True)
    assert verdicts == {"gold": [True] * 10, "empty": [False] * 10}


def test_the_known_differences_are_as_the_docstring_says():
    """Pinned on a made-up log, so that a change on either side shows here and the docstring is revisited."""
    log = ("t.py::test_verbose PASSED                                                [ 50%]\n"
           "ERROR t.py::test_teardown - RuntimeError: in teardown\n"  # -rA lists errors before passes
           "SKIPPED [1] t.py:9: no network\n"
           "PASSED t.py::test_teardown\n"
           "PASSED t.py::test_ok\n")
    ours = {test: status.value for test, status in parse_log(OUR_PARSER, log).items()}
    theirs = PARSER_REGISTRY[THEIR_PARSER](log, None)
    assert ours == {"t.py::test_verbose": "PASSED", "t.py::test_teardown": "ERROR", "t.py::test_ok": "PASSED"}
    assert theirs == {"t.py::test_teardown": "PASSED", "t.py::test_ok": "PASSED"}

    skipped = {"t.py::test_skipped": "SKIPPED"}
    gold = {"FAIL_TO_PASS": [], "PASS_TO_PASS": ["t.py::test_skipped"]}
    assert get_eval_tests_report(skipped, gold)["PASS_TO_PASS"] == {"success": ["t.py::test_skipped"], "failure": []}
    report = RewardReport(instance_id="x", status=EvalStatus.UNRESOLVED,
                          pass_to_pass={"t.py::test_skipped": TestStatus.SKIPPED})
    assert our_tests_status(report)["PASS_TO_PASS"] == {"success": [], "failure": ["t.py::test_skipped"]}
