"""Grade a candidate patch as SWE-bench does, always in a fresh sandbox from the task's environment.

Resolved = every FAIL_TO_PASS and every PASS_TO_PASS test passes, a test missing from the log
counts as failed, and the test command's exit code must agree with the log (a patch that prints
fake PASSED lines does not win). A patch that does not apply is `patch_failed`; a sandbox that
cannot be made is `infra_error`; neither raises.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import time
from collections.abc import Callable

from swedojo.repolaunch.parsers import parse_log
from swedojo.sandboxes.base import Sandbox
from swedojo.sandboxes.environment import Environment
from swedojo.schema import EnvSpec, EvalStatus, RewardReport, TaskInstance, TestStatus

TEST_TIMEOUT_S = 900.0
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


class PatchApplyError(Exception):
    """A patch applied with none of the fallbacks."""


def patch_files(patch: str) -> list[str]:
    """Paths a unified git diff touches (old and new names)."""
    files: list[str] = []
    for a, b in _DIFF_FILE.findall(patch):
        for name in (a, b):
            if name not in files:
                files.append(name)
    return files


def apply_commands(path: str) -> list[str]:
    """SWE-bench's fallbacks for applying the diff at `path`, in order; `patch` only if it applies whole."""
    return [
        f"git apply --verbose {path}",
        f"patch --batch --fuzz=5 -p1 --dry-run -i {path} >/dev/null && patch --batch --fuzz=5 -p1 -i {path}",
    ]


def apply_patch(sandbox: Sandbox, patch: str, what: str = "patch") -> str:
    """Apply a diff in the work tree: `git apply`, then `patch --fuzz=5` (SWE-bench's fallbacks).

    The patch travels base64-encoded through the terminal, so any bytes survive any backend;
    staging, the fallbacks in order and the cleanup are one command. Returns the command that
    worked; raises PatchApplyError with the last error line.
    """
    if not patch.endswith("\n"):
        patch += "\n"
    path = f"/tmp/swedojo-{secrets.token_hex(8)}.diff"
    marker = f"swedojo-applied-{secrets.token_hex(8)}:"
    encoded = base64.b64encode(patch.encode("utf-8", errors="surrogateescape")).decode()
    commands = apply_commands(path)
    steps = [f"printf %s {encoded} | base64 -d > {path} || {{ rm -f {path}; echo {marker}staging; exit 1; }}"]
    steps += [f"{{ {command}; }} && {{ rm -f {path}; echo {marker}{i}; exit 0; }}" for i, command in enumerate(commands)]
    result = sandbox.exec(f"( {'; '.join(steps)}; rm -f {path}; exit 1 )")
    lines = [line for line in result.output.splitlines() if line.strip()]
    said = lines[-1].removeprefix(marker) if lines and lines[-1].startswith(marker) else None
    if result.ok and said is not None and said.isdigit():
        command = commands[int(said)]
        return command.split(" ")[0] + (" apply" if command.startswith("git") else "")
    if said == "staging":
        raise PatchApplyError(f"could not stage the {what}: {' '.join(lines[:-1])[-200:]}")
    raise PatchApplyError(f"{what} does not apply: {lines[-1] if lines else f'exit {result.exit_code}'}")


def restore_files(sandbox: Sandbox, commit: str, files: list[str]) -> None:
    """Put `files` back as they are at `commit` (one command); those that do not exist there are removed."""
    steps = []
    for f in files:
        path, ref = shlex.quote(f), shlex.quote(f"{commit}:{f}")
        restore = f"git checkout -q {shlex.quote(commit)} -- {path}"
        steps.append(f"if git cat-file -e {ref} 2>/dev/null; then {restore}; else rm -f {path}; fi")
    if steps:
        sandbox.exec("\n".join(steps))


def test_command(spec: EnvSpec, tests: list[str]) -> str:
    """The environment's test command with the given test ids appended, each quoted."""
    return " ".join([spec.test_command, *(shlex.quote(t) for t in tests)])


def grade_in_sandbox(sandbox: Sandbox, env: Environment, instance: TaskInstance, candidate: str) -> RewardReport:
    """Apply the candidate and the test patch in `sandbox` (fresh, at base_commit) and grade."""
    report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.UNRESOLVED)
    if not candidate.strip():
        report.status = EvalStatus.EMPTY_PATCH
    else:
        try:
            apply_patch(sandbox, candidate, "candidate patch")
        except PatchApplyError as exc:
            report.status, report.error = EvalStatus.PATCH_FAILED, str(exc)
            return report
    test_files = patch_files(instance.test_patch)
    if test_files:
        # The candidate may have edited the tests: restore them to the base before the test patch.
        restore_files(sandbox, instance.base_commit, test_files)
        try:
            apply_patch(sandbox, instance.test_patch, "test patch")
        except PatchApplyError as exc:
            report.status, report.error = EvalStatus.INFRA_ERROR, f"task is broken: {exc}"
            return report
    tests = list(dict.fromkeys(instance.FAIL_TO_PASS + instance.PASS_TO_PASS))
    result = sandbox.exec(test_command(env.spec, tests), timeout=TEST_TIMEOUT_S)
    statuses = parse_log(env.spec.log_parser, result.output)
    report.test_exit_code = result.exit_code
    report.log_tail = result.output[-2000:]
    report.fail_to_pass = {t: statuses.get(t) for t in instance.FAIL_TO_PASS}
    report.pass_to_pass = {t: statuses.get(t) for t in instance.PASS_TO_PASS}
    all_pass = all(
        s is not None and TestStatus(s).counts_as_pass
        for s in [*report.fail_to_pass.values(), *report.pass_to_pass.values()]
    )
    if result.timed_out:
        report.error = f"tests timed out after {TEST_TIMEOUT_S:.0f}s"
    elif all_pass and result.exit_code != 0:
        report.error = f"log says every test passed but the test command exited {result.exit_code}"
    report.resolved = all_pass and result.exit_code == 0 and not result.timed_out
    if report.resolved:
        report.status = EvalStatus.RESOLVED
    elif report.status != EvalStatus.EMPTY_PATCH:
        report.status = EvalStatus.UNRESOLVED
    report.reward = 1.0 if report.resolved else 0.0
    return report


def in_fresh_sandbox(env: Environment, instance: TaskInstance, work: Callable[[Sandbox], RewardReport]) -> RewardReport:
    """Run `work` in a fresh sandbox at base_commit, timed; a sandbox that cannot be made is infra_error."""
    start = time.monotonic()
    try:
        sandbox = env.open(instance.base_commit)
    except Exception as exc:  # any failure to build the sandbox is infrastructure, not the agent
        return RewardReport(
            instance_id=instance.instance_id,
            status=EvalStatus.INFRA_ERROR,
            error=f"sandbox: {type(exc).__name__}: {exc}".splitlines()[0],
            duration_s=time.monotonic() - start,
        )
    try:
        report = work(sandbox)
    finally:
        sandbox.close()
    report.duration_s = time.monotonic() - start
    return report


def grade(env: Environment, instance: TaskInstance, candidate: str) -> RewardReport:
    """Grade `candidate` for `instance` in a fresh sandbox; infrastructure failures become a status."""
    return in_fresh_sandbox(env, instance, lambda sandbox: grade_in_sandbox(sandbox, env, instance, candidate))
