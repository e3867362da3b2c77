"""SWE-bench's own files for a graded run, written beside swedojo's so that its tools read our runs.

Shapes and names are those of the `swebench` package's harness (5.x: `harness/grading.py`
`get_eval_report`, `harness/reporting.py` `make_run_report`). Per instance, `logs/<instance_id>/`:

- `report.json`: `{instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
  infra_failure, tests_status: {FAIL_TO_PASS, PASS_TO_PASS, FAIL_TO_FAIL, PASS_TO_FAIL: {success,
  failure}}}}`; `resolved` is our verdict, and the lists agree with it: tests we leave out of
  scoring (`needs_network`, `not_tests`, `fails_at_base`, `environment_gaps`) are in neither, and FAIL_TO_FAIL / PASS_TO_FAIL stay
  empty, as SWE-bench leaves them. `tests_status` is there only when the patch applied.
- `test_output.txt`: the grading run's whole log between SWE-bench's start and end markers, the
  test command's exit code after them, so its `get_logs_eval` reads the file as one of its own.
- `patch.diff`: the graded patch.

Where our statuses land, following what SWE-bench does in each case:

| status | report.json | run report |
| --- | --- | --- |
| resolved / unresolved | yes | completed; resolved / unresolved |
| patch_failed | yes, not applied, no tests_status | completed; unresolved |
| needs_network | yes, infra_failure with its reason | completed; unresolved; infra_failure |
| not_scorable (a listed test lacks a module) | yes, infra_failure with its reason | completed; unresolved; infra_failure |
| empty_patch | none (SWE-bench never runs one) | empty_patch |
| infra_error | none (SWE-bench's harness errored) | error; infra_failure with the error |
| timed_out (`--instance-timeout`) | none (its harness timed the instance out) | error |
| not submitted, or not started | none | incomplete |
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from swedojo.rundir import InstanceResult
from swedojo.schema import EvalStatus, RewardReport, TestStatus
from swedojo.testrun.run import SuiteRun, passed

START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
REPORT = "report.json"
TEST_OUTPUT = "test_output.txt"
PATCH = "patch.diff"
SCHEMA_VERSION = 2
"""The run report's `schema_version` as swebench 5.x writes it."""
_ENVIRONMENT_GAPS = (EvalStatus.NEEDS_NETWORK, EvalStatus.NOT_SCORABLE)
"""Graded runs that say the environment lacks what a listed test needs (the network, a module):
completed and unresolved, an infra failure with its reason."""


def swebench_log(run: SuiteRun, timeout_s: float) -> str:
    """`test_output.txt` for a grading run: a timed-out run has no end marker and says so last, as
    SWE-bench's own file does, so its grading reads it as a run that did not finish."""
    log = run.log if run.log.endswith("\n") or not run.log else run.log + "\n"
    text = f"+ {run.command}\n{START_TEST_OUTPUT}\n{log}"
    if run.timed_out:
        return text + f"\n\nTimeout error: {timeout_s:.0f} seconds exceeded.\n"
    text += f"{END_TEST_OUTPUT}\n"
    return text + (f"{TEST_EXIT_CODE}: {run.exit_code}\n" if run.exit_code is not None else "")


def tests_status(report: RewardReport) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's `tests_status` from our per-test statuses, tests left out of scoring in neither list."""
    left_out = (report.needs_network.keys() | report.not_tests.keys() | report.fails_at_base.keys()
                | report.environment_gaps.keys())

    def split(statuses: Mapping[str, TestStatus | None]) -> dict[str, list[str]]:
        scored = [(test, status) for test, status in statuses.items() if test not in left_out]
        return {"success": [t for t, s in scored if passed(s)], "failure": [t for t, s in scored if not passed(s)]}

    return {"FAIL_TO_PASS": split(report.fail_to_pass), "PASS_TO_PASS": split(report.pass_to_pass),
            "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}


def instance_report(result: InstanceResult) -> dict[str, Any] | None:
    """`report.json`'s content for a result; None where SWE-bench writes none (see the table above)."""
    if result.status not in (EvalStatus.RESOLVED, EvalStatus.UNRESOLVED, EvalStatus.PATCH_FAILED, *_ENVIRONMENT_GAPS):
        return None
    applied = result.status != EvalStatus.PATCH_FAILED
    entry: dict[str, Any] = {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": applied,
                             "resolved": result.resolved, "infra_failure": result.status in _ENVIRONMENT_GAPS}
    if result.status in _ENVIRONMENT_GAPS:
        entry["infra_failure_reason"] = result.report.error
    if applied:
        entry["tests_status"] = tests_status(result.report)
    return {result.instance_id: entry}


def write_instance_files(directory: Path, result: InstanceResult) -> None:
    """Write `report.json`, `test_output.txt` and `patch.diff` for `result` into `directory`; a file
    this result has none of is removed, so an earlier attempt's never stands for this one."""
    directory.mkdir(parents=True, exist_ok=True)
    report = instance_report(result)
    contents = {REPORT: json.dumps(report, indent=4) if report is not None else None,
                TEST_OUTPUT: result.report.test_output or None, PATCH: result.patch}
    for name, text in contents.items():
        path = directory / name
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text, encoding="utf-8")


class RunReport(BaseModel):
    """SWE-bench's run report (`<model>.<run_id>.json`), the keys its harness writes without a Docker client."""

    total_instances: int
    """Instances of the run (the selection), with a prediction or not."""
    submitted_instances: int
    """Instances with a patch to grade (a prediction, or the policy's)."""
    completed_instances: int
    """Instances graded with a report.json."""
    resolved_instances: int
    """Instances resolved."""
    unresolved_instances: int
    """Instances completed and not resolved."""
    infra_failure_instances: int
    """Instances whose failure is the environment's (our infra_error, needs_network and not_scorable)."""
    ambiguous_failure_instances: int = 0
    """SWE-bench's failures of unclear cause; ours always have one, so none."""
    empty_patch_instances: int
    """Instances submitted with an empty (or null) patch."""
    error_instances: int
    """Instances whose grading failed (our infra_error)."""
    completed_ids: list[str]
    """Sorted, as every list here."""
    incomplete_ids: list[str]
    """Instances without a prediction, or not started (a stopped run)."""
    empty_patch_ids: list[str]
    submitted_ids: list[str]
    resolved_ids: list[str]
    unresolved_ids: list[str]
    infra_failure_ids: list[str]
    ambiguous_failure_ids: list[str] = []
    failure_reasons: dict[str, str]
    """Instance id -> why the environment failed it, for the infra_failure ids."""
    error_ids: list[str]
    schema_version: int = SCHEMA_VERSION
    """Version of SWE-bench's run report layout."""


def run_report(results: Mapping[str, InstanceResult], total: int, submitted: list[str],
               not_submitted: list[str]) -> RunReport:
    """The run report over `submitted` instances' `results` (a submitted one may have none yet)."""
    groups: dict[str, set[str]] = {k: set() for k in ("completed", "incomplete", "empty", "resolved", "unresolved",
                                                      "infra", "error")}
    reasons: dict[str, str] = {}
    groups["incomplete"].update(not_submitted)
    for instance_id in submitted:
        result = results.get(instance_id)
        if result is None:
            groups["incomplete"].add(instance_id)
        elif result.status == EvalStatus.EMPTY_PATCH:
            groups["empty"].add(instance_id)
        elif result.status == EvalStatus.TIMED_OUT:  # SWE-bench's harness errors out an instance over its timeout
            groups["error"].add(instance_id)
        elif result.status == EvalStatus.INFRA_ERROR:
            groups["error"].add(instance_id)
            groups["infra"].add(instance_id)
            reasons[instance_id] = result.error or result.report.error
        else:
            groups["completed"].add(instance_id)
            groups["resolved" if result.resolved else "unresolved"].add(instance_id)
            if result.status in _ENVIRONMENT_GAPS:
                groups["infra"].add(instance_id)
                reasons[instance_id] = result.report.error
    ids = {k: sorted(v) for k, v in groups.items()}
    return RunReport(
        total_instances=total, submitted_instances=len(submitted), completed_instances=len(ids["completed"]),
        resolved_instances=len(ids["resolved"]), unresolved_instances=len(ids["unresolved"]),
        infra_failure_instances=len(ids["infra"]), empty_patch_instances=len(ids["empty"]),
        error_instances=len(ids["error"]), completed_ids=ids["completed"], incomplete_ids=ids["incomplete"],
        empty_patch_ids=ids["empty"], submitted_ids=sorted(submitted), resolved_ids=ids["resolved"],
        unresolved_ids=ids["unresolved"], infra_failure_ids=ids["infra"], failure_reasons=dict(sorted(reasons.items())),
        error_ids=ids["error"],
    )
