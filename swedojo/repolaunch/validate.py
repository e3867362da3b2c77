"""Validation: run the suite several times at the commit and keep a baseline per test.

Backend-agnostic: it only needs a `Sandbox`. Runs happen in one sandbox one after another, so a
test that depends on what an earlier run left behind shows up as flaky too. The runs have the
network off; when some test fails, one more run of the failing tests in a sandbox with the network
on names the tests that need it (`EnvSpec.network_tests`), kept out of baselines like flaky ones.
Where the runner ran them alone, those that passed are run alone once more with the network off:
a test that passes alone either way failed for the suite around it, not for want of the network.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import DiscoveryError, ValidateError
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import EnvSpec, TestStatus
from swedojo.testrun.command import selection
from swedojo.testrun.errors import SummaryMismatchError
from swedojo.testrun.parsers import WORST_FIRST, check_counts, check_summary
from swedojo.testrun.run import SuiteRun, TestRunError, passed, run_suite, run_tests
from swedojo.testrun.skips import skipped_modules


class Baseline(BaseModel):
    """Per-test statuses at the commit, merged over the validation runs."""

    test_status: dict[str, TestStatus] = Field(default_factory=dict)
    """Worst status each test had in any run (a test failing once counts as failing)."""
    flaky_tests: list[str] = Field(default_factory=list)
    """Tests whose status differed between runs, or that were missing from some run."""
    count_problems: list[list[str]] = Field(default_factory=list)
    """`check_counts` findings per run (empty lists when parse, summary and exit code agree)."""
    skipped_for_modules: dict[str, str] = Field(default_factory=dict)
    """Modules the first run's skips and collection errors say are missing -> the runner's reason."""
    seconds: float = 0.0
    """Wall time of the slowest run."""


def merge_runs(runs: list[dict[str, TestStatus]]) -> tuple[dict[str, TestStatus], list[str]]:
    """Worst status per test over the runs, and the tests whose status was not the same in all."""
    merged: dict[str, TestStatus] = {}
    flaky: list[str] = []
    for test in sorted({t for run in runs for t in run}):
        seen = [run.get(test) for run in runs]
        present = [s for s in seen if s is not None]
        merged[test] = min(present, key=WORST_FIRST.index)
        if len(set(seen)) > 1:
            flaky.append(test)
    return merged, flaky


def _run(sandbox: Sandbox, spec: EnvSpec, log: BuildLog, timeout: float, tests: list[str]) -> SuiteRun:
    """Run the whole suite (or `tests`) once, its whole log copied into the build log."""
    try:
        run = run_tests(sandbox, spec, tests, timeout) if tests else run_suite(sandbox, spec, timeout)
    except TestRunError as exc:
        raise ValidateError(str(exc), log.path) from exc
    log.write(f"$ {run.command}\n{run.log}\n[exit {run.exit_code} after {run.duration_s:.1f}s]\n")
    return run


def validate(sandbox: Sandbox, spec: EnvSpec, log: BuildLog, runs: int = 2, timeout: float = 1800.0,
             tests: list[str] | None = None) -> Baseline:
    """Run the suite (or only `tests`) `runs` times; the first run must yield tests, and some test must pass."""
    results: list[dict[str, TestStatus]] = []
    problems: list[list[str]] = []
    missing: dict[str, str] = {}
    seconds = 0.0
    for index in range(runs):
        log.begin(f"test run {index + 1}/{runs}")
        run = _run(sandbox, spec, log, timeout, list(tests or []))
        if run.build_failure:
            raise ValidateError(f"test run {index + 1}: {run.build_failure}", log.path)
        if run.timed_out:
            raise ValidateError(f"test run {index + 1} timed out after {timeout:.0f}s", log.path)
        if index == 0 and not run.statuses:
            raise DiscoveryError(
                f"`{run.command}` (exit {run.exit_code}) gave no test results for parser {spec.log_parser!r}",
                log.path)
        found = check_counts(spec.log_parser, run.log, run.statuses, run.exit_code)
        for problem in found:
            log.write(f"count check: {problem}\n")
        try:
            check_summary(spec.log_parser, run.log, run.statuses)
        except SummaryMismatchError as exc:
            raise ValidateError(f"test run {index + 1}: {exc}", log.path) from exc
        results.append(run.statuses)
        problems.append(found)
        seconds = max(seconds, run.duration_s)
        if index == 0:
            missing = skipped_modules(run.log, spec.log_parser)
    merged, flaky = merge_runs(results)
    if not any(passed(status) for run in results for status in run.values()):
        raise ValidateError(f"no test passed ({len(merged)} found): the environment looks broken", log.path)
    log.write(f"baseline: {len(merged)} tests, {len(flaky)} flaky"
              + (f"; skipped for want of {', '.join(missing)}" if missing else "") + "\n")
    return Baseline(test_status=merged, flaky_tests=flaky, count_problems=problems, skipped_for_modules=missing,
                    seconds=seconds)


def failing_tests(baseline: Baseline) -> list[str]:
    """Where some test failed: the baseline's tests that did not pass (skipped ones too), flaky ones
    aside, which a run with the network on may explain; none where no test failed."""
    if not any(status in (TestStatus.FAILED, TestStatus.ERROR) for status in baseline.test_status.values()):
        return []
    flaky = set(baseline.flaky_tests)
    return sorted(test for test, status in baseline.test_status.items() if not passed(status) and test not in flaky)


def passing_among(sandbox: Sandbox, spec: EnvSpec, log: BuildLog, tests: list[str], why: str,
                  timeout: float = 1800.0) -> tuple[list[str], bool]:
    """One run of `tests` (the whole suite where the runner cannot be given them): those of them that
    passed, and whether the run was of them alone."""
    log.begin(f"test run {why}")
    run = _run(sandbox, spec, log, timeout, tests)
    found = sorted(test for test in tests if run.passed(test))
    log.write(f"passed: {len(found)} of {len(tests)}\n")
    return found, selection(spec, tests) is not None
