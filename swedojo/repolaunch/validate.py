"""Validation: run the suite several times at the commit and keep a baseline per test.

Backend-agnostic: it only needs a `Sandbox`. Runs happen in one sandbox one after another, so a
test that depends on what an earlier run left behind shows up as flaky too. The runs have the
network off; when some test fails, one more run in a sandbox with the network on names the tests
that need it (`EnvSpec.network_tests`), kept out of baselines like flaky ones.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, Field

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import DiscoveryError, ValidateError
from swedojo.repolaunch.parsers import WORST_FIRST, check_counts, parse_log
from swedojo.sandboxes.base import ExecResult, Sandbox
from swedojo.schema import TestStatus


class Baseline(BaseModel):
    """Per-test statuses at the commit, merged over the validation runs."""

    test_status: dict[str, TestStatus] = Field(default_factory=dict)
    """Worst status each test had in any run (a test failing once counts as failing)."""
    flaky_tests: list[str] = Field(default_factory=list)
    """Tests whose status differed between runs, or that were missing from some run."""
    count_problems: list[list[str]] = Field(default_factory=list)
    """`check_counts` findings per run (empty lists when parse, summary and exit code agree)."""


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


def _run(sandbox: Sandbox, test_command: str, log: BuildLog, timeout: float) -> tuple[str, ExecResult]:
    """Run the suite once; its whole output (into a file, not through the terminal, whose output
    cap would cut the middle) and the outcome."""
    home = sandbox.exec('printf %s "$HOME"').output.strip() or "/tmp"
    report = f"{home}/.swedojo-test-output"
    log.write(f"$ {test_command}\n")
    outcome = sandbox.exec(f"( {test_command} ) > {shlex.quote(report)} 2>&1", timeout=timeout)
    output = sandbox.read_file(report).decode("utf-8", errors="replace")
    log.write(output + f"\n[exit {outcome.exit_code} after {outcome.duration_s:.1f}s]\n")
    return output, outcome


def validate(sandbox: Sandbox, test_command: str, log_parser: str, log: BuildLog,
             runs: int = 2, timeout: float = 1800.0) -> Baseline:
    """Run `test_command` `runs` times; the first run must yield tests, and some test must pass."""
    results: list[dict[str, TestStatus]] = []
    problems: list[list[str]] = []
    for index in range(runs):
        log.begin(f"test run {index + 1}/{runs}")
        output, outcome = _run(sandbox, test_command, log, timeout)
        if outcome.timed_out:
            raise ValidateError(f"test run {index + 1} timed out after {timeout:.0f}s", log.path)
        parsed = parse_log(log_parser, output)
        if index == 0 and not parsed:
            raise DiscoveryError(
                f"`{test_command}` (exit {outcome.exit_code}) gave no test results for parser {log_parser!r}",
                log.path)
        found = check_counts(log_parser, output, parsed, outcome.exit_code)
        for problem in found:
            log.write(f"count check: {problem}\n")
        results.append(parsed)
        problems.append(found)
    merged, flaky = merge_runs(results)
    if not any(status.counts_as_pass for run in results for status in run.values()):
        raise ValidateError(f"no test passed ({len(merged)} found): the environment looks broken", log.path)
    log.write(f"baseline: {len(merged)} tests, {len(flaky)} flaky\n")
    return Baseline(test_status=merged, flaky_tests=flaky, count_problems=problems)


def has_failures(statuses: dict[str, TestStatus]) -> bool:
    """Whether a baseline is worth one more run with the network on."""
    return any(status in (TestStatus.FAILED, TestStatus.ERROR) for status in statuses.values())


def network_tests(sandbox: Sandbox, test_command: str, log_parser: str, log: BuildLog, baseline: Baseline,
                  timeout: float = 1800.0) -> list[str]:
    """One run in a sandbox with the network on: the tests that pass only there (flaky ones aside)."""
    log.begin("test run with the network on (tests failed with it off)")
    output, _ = _run(sandbox, test_command, log, timeout)
    online = parse_log(log_parser, output)
    found = sorted(test for test, status in baseline.test_status.items()
                   if not status.counts_as_pass and test not in baseline.flaky_tests
                   and test in online and online[test].counts_as_pass)
    log.write(f"network tests: {len(found)}\n")
    return found
