"""Run tests in a sandbox with the log written to a file there and read back whole.

The terminal keeps only the head and tail of a command's output (`SandboxConfig.max_output_bytes`);
a real suite's `pytest -rA` log is often larger, and a test whose line fell in the cut middle
would read as missing, hence failed. So the command's output goes to a file inside the sandbox
and the whole file is read back; a log over `MAX_LOG_BYTES` is an error, never a silent cut.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.sandboxes.steps import run_step
from swedojo.schema import EnvSpec, TestStatus
from swedojo.testrun.command import (
    appended,
    files_of,
    is_simple,
    selected_command,
    selection,
    suite_command,
)
from swedojo.testrun.errors import TestRunError
from swedojo.testrun.parsers import parse_log

MAX_LOG_BYTES = 64 << 20
"""Largest test log read back (64 MiB); a larger one is a `LogTooLargeError`."""
INLINE_LOG_BYTES = 16_000
"""A log up to this size comes back with the command's own output (under every terminal cap we set)."""
LOG_NAME = "swedojo-tests.log"
"""The test log's file in the work tree's `.git/` (out of every diff)."""
BUILD_EVIDENCE_BYTES = 4_000
"""How much of a failed build's output is kept as its evidence (the compiler's last lines)."""
DEFAULT_TIMEOUT_S = 900.0
"""Time one test command may take unless the caller says otherwise."""
WHOLE_SUITE = "all tests"
"""The id of the test command itself, passed when it exits 0: the one result of a harness whose
runs print no per-test line (`make test` running programs that only exit non-zero on failure), and
what a listed name of this form asks for whatever else the log holds (Multi-SWE-bench's name)."""
SUITE_TIME_FACTOR = 3.0
"""A graded run may take this many times the environment's slowest validation run (`EnvSpec.suite_seconds`)..."""
SUITE_TIME_MARGIN_S = 60.0
"""...plus this much (a sandbox's start and a loaded machine's jitter), where that is more than its fixed limit."""
EXIT_STATUS_PARSERS = frozenset({"make"})
"""Parsers of harnesses whose exit status is a result of its own when no per-test line was printed."""


class LogTooLargeError(TestRunError):
    """The test log is over `MAX_LOG_BYTES`."""


class LogUnreadableError(TestRunError):
    """The test log file could not be read back from the sandbox."""


def passed(status: TestStatus | None) -> bool:
    """Whether a test counts as passed: the one definition; a test missing from the log (None) failed."""
    return status is not None and TestStatus(status).counts_as_pass


class BuildFailure(BaseModel):
    """The build step (`EnvSpec.build_command`) failed, so no test ran: after a candidate's patch
    that is the candidate's failure; at launch, the environment's."""

    command: str
    """The build command as run."""
    exit_code: int | None
    """Its exit code; None when it timed out."""
    evidence: str
    """The end of its output, where the compiler names what failed."""

    def __str__(self) -> str:
        how = "timed out" if self.exit_code is None else f"exited {self.exit_code}"
        lines = self.evidence.splitlines()
        compiler = [line for line in lines if re.search(r"\berror:|undefined reference", line)]  # gcc, clang, ld
        other = [line for line in lines if re.search(r"error", line, re.IGNORECASE)]
        return f"the build (`{self.command}`) {how}: " + (" | ".join((compiler or other)[-3:]) or self.evidence[-300:].strip())


class SuiteRun(BaseModel):
    """One test command run in a sandbox: per-test statuses and how the command ended."""

    __test__ = False

    command: str = ""
    """The command as run (before the redirect to the log file)."""
    statuses: dict[str, TestStatus]
    """Test id -> status, as the environment's log parser reads the whole log."""
    exit_code: int | None
    """Exit code of the test command; None when it timed out or was killed."""
    timed_out: bool = False
    """The run hit its timeout; tests it never reached count as failed."""
    duration_s: float = 0.0
    """Wall time of the command."""
    exact: bool = False
    """The command ran exactly the tests asked for, so its exit code speaks for them alone (a run
    of their files or of the whole suite also ran others, which may fail on their own)."""
    log: str = Field("", exclude=True)
    """The whole log, work-tree paths made relative (not written out: baselines keep statuses)."""
    build_failure: BuildFailure | None = None
    """The build before the tests failed: no test ran, and `log` is the build's output."""

    def passed(self, test: str) -> bool:
        return passed(self.statuses.get(test))

    def whole_suite(self) -> TestStatus:
        """The command's own verdict (`WHOLE_SUITE`): passed when it finished with exit 0."""
        return TestStatus.PASSED if self.exit_code == 0 and not self.timed_out else TestStatus.FAILED

    def failing(self) -> list[str]:
        """Tests that ran and did not pass (skipped ones aside), sorted."""
        return sorted(t for t, s in self.statuses.items() if not passed(s) and s != TestStatus.SKIPPED)


ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""ANSI escape sequences (colour, cursor), taken out of every log before it is read: a project's
own runner settings may force colour (pytest's `addopts = --color=yes`), which no parser reads."""


def run_command(sandbox: Sandbox, spec: EnvSpec, command: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                *, agent_shell: bool = False, exact: bool = False) -> SuiteRun:
    """Run `command` (one of `command.py`'s) with its whole log read back and parsed by the spec's parser.

    `agent_shell`: the terminal is the agent's, whose working directory and variables may have
    changed; the run then sets both in a subshell and leaves the agent's shell as it was. In a
    fresh sandbox a simple command runs as it is, redirected (so a pooled sandbox's warm runner
    still recognises it), a compound one in a subshell.
    """
    if spec.build_command and (failure := _build(sandbox, spec, timeout_s, agent_shell)):
        return SuiteRun(command=command, statuses={}, exit_code=failure.exit_code,
                        timed_out=failure.exit_code is None, exact=exact, log=failure.evidence, build_failure=failure)
    log_path = f"{sandbox.workdir}/.git/{LOG_NAME}"  # one per sandbox: each run overwrites the last
    target = shlex.quote(log_path)
    line = _redirected(sandbox, spec, command, target, agent_shell)
    # The log's size, and the log itself when it is small, come back in the test command's own exec
    # (its exit code kept); a larger log costs one more read. A log the terminal altered is read too.
    marker = f"swedojo-log-{secrets.token_hex(6)}:"
    result = sandbox.exec(f"{line}; __sd_rc=$?; __sd_size=$(stat -c %s {target} 2>&1); "
                          f"printf '\\n{marker}%s\\n' \"$__sd_size\"; "
                          f"[ \"$__sd_size\" -le {INLINE_LOG_BYTES} ] 2>/dev/null && cat {target}; (exit $__sd_rc)",
                          timeout=timeout_s)
    head, found, rest = result.output.partition(f"\n{marker}")
    size_text, _, inline = rest.partition("\n")
    if not found:  # a timeout abandoned the rest of the line
        size_text = sandbox.exec(f"stat -c %s {target} 2>&1").output.strip()
    if not size_text.isdigit():
        raise LogUnreadableError(f"the test log was not written ({size_text[-200:]}); the command said: {head.strip()[-300:]}")
    size = int(size_text)
    if size > MAX_LOG_BYTES:
        raise LogTooLargeError(f"the test log is {size} bytes, over the {MAX_LOG_BYTES >> 20} MiB bound: `{command}`")
    data = inline.encode("utf-8", errors="surrogateescape")
    if not found or result.truncated or len(data) != size:
        try:
            data = sandbox.read_file(log_path)
        except (OSError, SandboxError) as exc:
            raise LogUnreadableError(f"the test log could not be read: {exc}") from exc
    log = ANSI_ESCAPE.sub("", data.decode("utf-8", errors="replace")).replace(f"{sandbox.workdir}/", "")
    run = SuiteRun(command=command, statuses=parse_log(spec.log_parser, log), exit_code=result.exit_code,
                   timed_out=result.timed_out, duration_s=result.duration_s, exact=exact, log=log)
    if not run.statuses and spec.log_parser in EXIT_STATUS_PARSERS:
        run.statuses = {WHOLE_SUITE: run.whole_suite()}
    return run


def _in_work_tree(sandbox: Sandbox, spec: EnvSpec, command: str) -> str:
    """`command` with the spec's variables and in the work tree: the agent's shell may be elsewhere,
    with other variables."""
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(spec.env_vars.items()))
    return f"{exports}cd {shlex.quote(sandbox.workdir)} && {command}"


def _redirected(sandbox: Sandbox, spec: EnvSpec, command: str, target: str, agent_shell: bool) -> str:
    """`command` with its output sent to the file `target` (quoted)."""
    if agent_shell:
        return f"( {_in_work_tree(sandbox, spec, command)}\n) > {target} 2>&1"
    if is_simple(command):
        return f"{command} > {target} 2>&1"
    return f"( {command}\n) > {target} 2>&1"  # a subshell keeps every part's output, and an `exit` in it, to itself


def _build(sandbox: Sandbox, spec: EnvSpec, timeout_s: float, agent_shell: bool) -> BuildFailure | None:
    """Build the tree as it is now (`EnvSpec.build_command`, incremental), so tests never run a
    build older than the code: None when it succeeded, else what failed. The build runs as long
    as it makes progress (`steps.run_step`), at most `timeout_s`."""
    command = spec.build_command
    if agent_shell:
        command = _in_work_tree(sandbox, spec, command)
    result = run_step(sandbox, command, cap_s=timeout_s)
    if result.ok:
        return None
    evidence = result.output.replace(f"{sandbox.workdir}/", "")[-BUILD_EVIDENCE_BYTES:]
    return BuildFailure(command=spec.build_command, exit_code=None if result.timed_out else result.exit_code,
                        evidence=evidence)

def time_limit(spec: EnvSpec, floor_s: float = DEFAULT_TIMEOUT_S) -> float:
    """Time a test run in `spec`'s environment may take: `floor_s`, or more for a suite that took
    longer at validation (a C project's `make test` that builds and fuzzes for many minutes), so a
    slow suite's run is not cut and graded as the patch's failure; a hang is still cut."""
    return max(floor_s, SUITE_TIME_FACTOR * spec.suite_seconds + SUITE_TIME_MARGIN_S)


def run_suite(sandbox: Sandbox, spec: EnvSpec, timeout_s: float = DEFAULT_TIMEOUT_S, *,
              agent_shell: bool = False) -> SuiteRun:
    """The whole suite."""
    return run_command(sandbox, spec, suite_command(spec), timeout_s, agent_shell=agent_shell, exact=True)


def run_files(sandbox: Sandbox, spec: EnvSpec, files: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> SuiteRun:
    """Whole test files (`command.runnable` ones), as SWE-bench runs a test patch's files: never exact,
    their other tests may fail on their own."""
    return run_command(sandbox, spec, appended(spec, files), timeout_s)


def run_tests(sandbox: Sandbox, spec: EnvSpec, tests: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S, *,
              agent_shell: bool = False, before_retry: Callable[[], None] | None = None) -> SuiteRun:
    """These test files or ids; maybe more (see `command.selection`), never fewer.

    pytest runs nothing when one id is unknown ("not found"); a run of exact ids that reports no
    test at all is then made again over their files, so the other tests are still read.
    `before_retry`: called before that second run (the grading guard writes its plugin again).
    """
    exact = selection(spec, tests) == list(tests) or not tests
    run = run_command(sandbox, spec, selected_command(spec, tests), timeout_s, agent_shell=agent_shell, exact=exact)
    files = files_of(spec, tests)
    if exact and tests and not run.statuses and not run.timed_out and files is not None and files != list(tests):
        if before_retry:
            before_retry()
        run = run_command(sandbox, spec, appended(spec, files), timeout_s, agent_shell=agent_shell)
    return run
