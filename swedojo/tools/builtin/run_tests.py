"""`run_tests`: named tests through the environment's own test command and log parser.

The model sees per-test statuses (what the grader will see) and the tail of the log.
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from swedojo.sandboxes.base import Sandbox
from swedojo.testrun.parsers import UnknownParserError
from swedojo.testrun.run import TestRunError, run_tests
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult, error

LOG_TAIL_BYTES = 3_000
MAX_LISTED = 50


class RunTestsParams(ToolParams):
    tests: list[str] = Field(default_factory=list)
    """Test ids to run, as the test framework names them (e.g. `tests/test_a.py::test_b`); empty runs the whole suite."""


def _tail(log: str, limit: int) -> str:
    data = log.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return log
    return "[... start of log cut ...]\n" + data[-limit:].decode("utf-8", errors="replace")


class RunTestsTool(Tool[RunTestsParams]):
    """Run tests with the repository's test command and report the status of each test."""

    name = "run_tests"
    returns = (
        "Counts per status, the tests that did not pass, requested tests missing from the log, and the log's tail."
    )
    params = RunTestsParams

    def run(self, sandbox: Sandbox, params: RunTestsParams, ctx: ToolContext) -> ToolResult:
        if ctx.env is None:
            return error("No test command is configured for this environment; run the tests with bash.")
        try:
            result = run_tests(sandbox, ctx.env, params.tests, ctx.test_timeout_s, agent_shell=True)
        except UnknownParserError as exc:
            return error(f"Cannot read the test log: {exc}")
        except TestRunError as exc:
            return error(f"The tests ran but their results cannot be read: {exc}")
        if result.build_failure:
            failure = result.build_failure
            return error(f"$ {failure.command}\n{failure}\nNo test ran. The build's output ends:\n{failure.evidence}")
        statuses = result.statuses
        counts = Counter(s.value for s in statuses.values())
        lines = [f"$ {result.command}"]
        if result.timed_out:
            lines.append(f"[timed out after {result.duration_s:.0f}s]")
        else:
            lines.append(f"[exit code: {result.exit_code}]")
        lines.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "No test results found in the log.")
        bad = result.failing()
        lines += [f"{statuses[t].value} {t}" for t in bad[:MAX_LISTED]]
        if len(bad) > MAX_LISTED:
            lines.append(f"[{len(bad) - MAX_LISTED} more tests did not pass]")
        missing: list[str] = []
        for test in (t for t in params.tests if t not in statuses):  # a file or class id: the tests under it
            under = Counter(status.value for t, status in statuses.items() if t.startswith(f"{test}::"))
            if under:
                lines.append(f"{test}: " + ", ".join(f"{n} {status}" for status, n in sorted(under.items())))
            else:
                missing.append(test)
        if missing:
            lines.append(f"Not found in the log (counted as failed; check the ids): {', '.join(missing[:MAX_LISTED])}")
        lines.append(f"--- log tail ---\n{_tail(result.log, LOG_TAIL_BYTES)}")
        return ToolResult(output="\n".join(lines), is_error=result.timed_out, timed_out=result.timed_out)
