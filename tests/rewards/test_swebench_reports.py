"""Where each of our grading outcomes lands in SWE-bench's report.json and run report, and its test log's layout."""

from swedojo.rewards.swebench_reports import instance_report, run_report, swebench_log
from swedojo.rundir import InstanceResult
from swedojo.schema import EvalStatus, ExitStatus, RewardReport, TestStatus
from swedojo.testrun.run import SuiteRun

F2P = {"t.py::a": TestStatus.PASSED, "t.py::b": None, "t.py::net": TestStatus.FAILED}
P2P = {"t.py::c": TestStatus.XFAIL, "t.py::d": TestStatus.ERROR, "[100%]": None}


def _result(instance_id, status, resolved=False, error="", **report):
    return InstanceResult(instance_id=instance_id, policy="predictions", status=status, resolved=resolved,
                          exit_status=ExitStatus.SUBMITTED, error=error, patch="diff",
                          report=RewardReport(instance_id=instance_id, status=status, resolved=resolved, error=error, **report))


def test_tests_status_splits_the_scored_tests_and_leaves_out_what_we_do_not_score():
    result = _result("o__r-1", EvalStatus.UNRESOLVED, fail_to_pass=F2P, pass_to_pass=P2P,
                     needs_network={"t.py::net": "ConnectionError"}, not_tests={"[100%]": "progress column"})
    entry = instance_report(result)["o__r-1"]
    assert entry == {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "infra_failure": False,
        "tests_status": {"FAIL_TO_PASS": {"success": ["t.py::a"], "failure": ["t.py::b"]},
                         "PASS_TO_PASS": {"success": ["t.py::c"], "failure": ["t.py::d"]},
                         "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}}


def test_each_outcome_lands_where_swebench_puts_it():
    results = {r.instance_id: r for r in [
        _result("ok", EvalStatus.RESOLVED, resolved=True),
        _result("no", EvalStatus.UNRESOLVED),
        _result("bad-patch", EvalStatus.PATCH_FAILED, error="patch does not apply"),
        _result("offline", EvalStatus.NEEDS_NETWORK, error="every FAIL_TO_PASS test needs the network: DNS"),
        _result("empty", EvalStatus.EMPTY_PATCH),
        _result("broken", EvalStatus.INFRA_ERROR, error="environment: no such repository"),
    ]}
    assert instance_report(results["bad-patch"]) == {"bad-patch": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": False, "resolved": False,
        "infra_failure": False}}
    offline = instance_report(results["offline"])["offline"]
    assert offline["infra_failure"] and offline["infra_failure_reason"].startswith("every FAIL_TO_PASS test needs")
    assert instance_report(results["empty"]) is None and instance_report(results["broken"]) is None

    report = run_report(results, total=8, submitted=[*results, "not-started"], not_submitted=["nobody"])
    assert report.total_instances == 8 and report.submitted_instances == 7
    assert report.completed_ids == ["bad-patch", "no", "offline", "ok"]
    assert report.resolved_ids == ["ok"] and report.unresolved_ids == ["bad-patch", "no", "offline"]
    assert report.empty_patch_ids == ["empty"] and report.error_ids == ["broken"]
    assert report.infra_failure_ids == ["broken", "offline"]
    assert report.failure_reasons == {"broken": "environment: no such repository",
                                      "offline": "every FAIL_TO_PASS test needs the network: DNS"}
    assert report.incomplete_ids == ["nobody", "not-started"]
    assert (report.completed_instances, report.resolved_instances, report.unresolved_instances, report.error_instances,
            report.empty_patch_instances, report.infra_failure_instances) == (4, 1, 3, 1, 1, 2)


def test_the_test_log_has_swebenchs_markers_and_a_timed_out_run_no_end():
    run = SuiteRun(command="python -m pytest -rA t.py", statuses={}, exit_code=1, log="PASSED t.py::a\nFAILED t.py::b")
    assert swebench_log(run, 900) == ("+ python -m pytest -rA t.py\n>>>>> Start Test Output\nPASSED t.py::a\nFAILED t.py::b\n"
                                     ">>>>> End Test Output\n>>>>> Test Exit Code: 1\n")
    timed_out = run.model_copy(update={"timed_out": True, "exit_code": None})
    text = swebench_log(timed_out, 900)
    assert ">>>>> End Test Output" not in text and text.endswith("Timeout error: 900 seconds exceeded.\n")


def test_a_not_scorable_result_is_completed_unresolved_and_the_environments_failure():
    """Like needs_network: graded, so completed; a listed test lacks a module, so an infra failure
    with the reason, its gap tests in neither list."""
    gaps = {"t.py::d": "dask: requires dask"}
    result = _result("gap", EvalStatus.NOT_SCORABLE, error="1 listed test cannot run in this environment for want of dask",
                     fail_to_pass={"t.py::a": TestStatus.PASSED}, pass_to_pass={"t.py::c": TestStatus.PASSED, "t.py::d": None},
                     environment_gaps=gaps)
    entry = instance_report(result)["gap"]
    assert entry["infra_failure"] and entry["infra_failure_reason"].endswith("for want of dask") and not entry["resolved"]
    assert entry["tests_status"]["PASS_TO_PASS"] == {"success": ["t.py::c"], "failure": []}
    report = run_report({"gap": result}, total=1, submitted=["gap"], not_submitted=[])
    assert report.completed_ids == report.unresolved_ids == report.infra_failure_ids == ["gap"]
    assert report.error_ids == [] and report.failure_reasons == {"gap": result.report.error}
