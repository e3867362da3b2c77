"""Grade a candidate patch as SWE-bench does, always in a fresh sandbox from the task's environment.

The test patch's files are run whole and each listed id's status read from the log in the forms
suites list them (`testrun.ids`); a listed name in none of these forms (a benchmark's own parser's
names, such as Multi-SWE-bench's) is matched to the log's ids by `testrun.names`, and one that
matches nothing is named in `RewardReport.unmatched_tests`. Resolved = every FAIL_TO_PASS and
every PASS_TO_PASS test passes, a test missing from the log counts as failed (tests that fail for
want of the network with the reference patch as well are left out and named, `needs_network`; so
are listed ids that name no test, `not_tests`, and the tests of a listed name that this
environment's baseline fails at the base commit where the benchmark's record says its own run
passed the name, `fails_at_base`), and the test command's exit code must agree with the log (a
patch that prints fake PASSED lines does not win): 0 when exactly the listed tests ran, else 0 or
some test failed.
A run that says nothing about the code (the tests could not start, a dependency is missing, no
test ran; `testrun.diagnose`) is `infra_error` with that evidence, never the candidate's failure.
A listed test that did not run because the environment lacks a module it needs (skipped for it,
or its file left out: `testrun.skips`; one the sandbox cannot import and no patch provides), or
because its file could not be collected, with the reference patch's run showing the same, makes
the report `not_scorable`, the tests named in `RewardReport.environment_gaps`: an optional test
dependency the environment was built without, or a test file this environment cannot import
even with the reference patch, is neither the patch's failure nor the harness's.
Test infrastructure the candidate changed (`testrun.patches.TEST_INFRASTRUCTURE`) is put back as it
was, and named in `RewardReport.restored`. A patch that does not apply, or whose changes to test
infrastructure cannot be undone, is `patch_failed`; a sandbox that cannot be made, or dies, is
`infra_error`; neither raises. A patch that adds a module shadowing one the tests import is
refused, and a pytest run is guarded against a candidate that forces its verdicts
(`testrun.guard`; `RewardReport.tampering`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from swedojo.rewards.swebench_reports import swebench_log
from swedojo.rewards.web.assess import grade_web
from swedojo.sandboxes import standins
from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.sandboxes.environment import Environment
from swedojo.schema import EnvSpec, EvalStatus, RewardReport, TaskInstance, TaskKind, TestStatus
from swedojo.testrun.command import runnable
from swedojo.testrun.diagnose import RAN_NO_TEST, environment_failure, missing_modules
from swedojo.testrun.guard import Guard, calibration, guardable, shadowing_modules
from swedojo.testrun.ids import matches, not_a_test
from swedojo.testrun.names import match_listed
from swedojo.testrun.network import offline_failures
from swedojo.testrun.parsers import IDS_REVISION, WORST_FIRST
from swedojo.testrun.patches import (
    PatchApplyError,
    apply_patch,
    deleted_files,
    infrastructure,
    patch_files,
    restore_files,
    restore_infrastructure,
)
from swedojo.testrun.run import (
    EXIT_STATUS_PARSERS,
    WHOLE_SUITE,
    LogTooLargeError,
    SuiteRun,
    TestRunError,
    passed,
    run_files,
    run_tests,
    time_limit,
)
from swedojo.testrun.skips import (
    absent_modules,
    collection_errors,
    command_python,
    module_skips,
)

TEST_TIMEOUT_S = 900.0
"""Limit of a graded test run, or more for a suite slower than that at validation (`graded_limit`)."""


def graded_limit(spec: EnvSpec) -> float:
    """Time a graded run of `spec`'s tests may take (`testrun.run.time_limit` over `TEST_TIMEOUT_S`)."""
    return time_limit(spec, TEST_TIMEOUT_S)


def grade_in_sandbox(sandbox: Sandbox, env: Environment, instance: TaskInstance, candidate: str,
                     offline_before: Mapping[str, str] | None = None) -> RewardReport:
    """Apply the candidate and the test patch in `sandbox` (fresh, at base_commit) and grade.

    `offline_before`: with stand-ins, the tests a run without them left out for want of the
    network; those the reference patch does not pass with the stand-ins either stay out (the
    stand-in does not answer as the real service did), the others are scored."""
    report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.UNRESOLVED)
    if not candidate.strip():
        report.status = EvalStatus.EMPTY_PATCH
    else:
        try:
            # Nothing the candidate does to how tests run (conftest.py, pytest's configuration,
            # startup hooks) reaches them: such files are put back, or the patch is refused.
            before = infrastructure(sandbox)
            apply_patch(sandbox, candidate, "candidate patch")
            report.restored = restore_infrastructure(sandbox, instance.base_commit, before)
        except PatchApplyError as exc:
            report.status, report.error = EvalStatus.PATCH_FAILED, str(exc)
            return report
    if candidate.strip() and env.spec.language == "python" and (shadows := shadowing_modules(sandbox, candidate)):
        report.status = EvalStatus.PATCH_FAILED
        report.error = f"refused: the patch adds what would be imported in place of the test run's own: {', '.join(shadows)}"
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
    files = test_files_to_run(env.spec, instance)
    try:
        result, guard = _graded_run(sandbox, env.spec, files, tests)
    except LogTooLargeError as exc:  # the candidate's tree printed it: its failure, not the harness's
        report.status, report.error = EvalStatus.UNRESOLVED, str(exc)
        return report
    except TestRunError as exc:
        report.status, report.error = EvalStatus.INFRA_ERROR, str(exc)
        return report
    report.test_exit_code, report.test_duration_s = result.exit_code, result.duration_s
    report.log_tail = result.log[-2000:]
    if result.build_failure:  # the tree as patched does not build: the candidate's failure, never a pass
        report.error = str(result.build_failure)
        report.fail_to_pass = dict.fromkeys(instance.FAIL_TO_PASS)
        report.pass_to_pass = dict.fromkeys(instance.PASS_TO_PASS)
        return report
    if WHOLE_SUITE in tests and WHOLE_SUITE not in result.statuses and env.spec.log_parser in EXIT_STATUS_PARSERS:
        result.statuses[WHOLE_SUITE] = result.whole_suite()  # the command's verdict, asked for by name
    report.test_output = swebench_log(result, graded_limit(env.spec))
    reference = candidate.strip() == instance.patch.strip()
    if guard and candidate.strip() and not reference and (tampering := guard.problems(result)):
        # pytest's own doing, then what the reference's run shows as well (the project's conftest)
        tampering = [problem for problem in tampering if problem not in calibration(sandbox, env.spec)]
        project = _reference_failures(env, instance, files, tests).tampering if tampering else set()
        report.tampering = [problem for problem in tampering if problem not in project]
        if report.tampering:
            report.error = f"the test run was tampered with: {'; '.join(report.tampering[:3])}"
            report.fail_to_pass = dict.fromkeys(instance.FAIL_TO_PASS)
            report.pass_to_pass = dict.fromkeys(instance.PASS_TO_PASS)
            return report
    provided = patch_files(instance.patch) + test_files
    named = _named(result.statuses, tests, env.spec.log_parser)
    report.unmatched_tests = [t for t in tests if not named[t] and not not_a_test(t)]
    report.missing_modules = missing_modules(result, sandbox, patch_files(candidate), provided)
    named_ids = [key for test in tests for key in named[test] or [test]]  # an unmatched name: missing
    if why := environment_failure(result, env.spec, sandbox, patch_files(candidate), provided, named_ids,
                                  report.missing_modules):
        theirs = _reference_failures(env, instance, files, tests).missing \
            if report.missing_modules and candidate.strip() and not reference else None
        if why.startswith(RAN_NO_TEST) and not reference and _reference_failures(env, instance, files, tests).ran:
            # the same command ran tests with the reference patch: this code stopped the runner (a crash)
            report.error = f"{why}; the reference patch's run of the same command reported its tests"
        elif theirs is None or set(report.missing_modules) & theirs:
            report.status, report.error = EvalStatus.INFRA_ERROR, why
            return report
        else:  # the reference's run imports them fine: the candidate's code asks for what no environment has
            report.error = f"the patched code imports what the environment lacks, the reference patch's run does " \
                           f"not: {', '.join(report.missing_modules)}"
    offline = _offline(result, named, env) if candidate.strip() else {}
    if offline and not reference:
        offline = {t: why for t, why in offline.items() if t in _reference_failures(env, instance, files, tests).offline}
    if offline_before and candidate.strip():
        unserved = {t for t in tests if not passed(_status(result.statuses, named[t]))} if reference \
            else _reference_failures(env, instance, files, tests).failing
        offline |= {t: f"not served by the stand-in as by the real service; offline: {why}"
                    for t, why in offline_before.items()
                    if t in unserved and t not in offline and not passed(_status(result.statuses, named[t]))}
    report.needs_network = offline
    report.not_tests = {t: why for t in tests if (why := not_a_test(t))}
    report.fail_to_pass = {t: _status(result.statuses, named[t]) for t in instance.FAIL_TO_PASS}
    report.pass_to_pass = {t: _status(result.statuses, named[t]) for t in instance.PASS_TO_PASS}
    at_base = _failing_at_base(instance, env.spec, named, result.statuses)
    report.fails_at_base = {t: f"{len(ids)} of its {len(named[t])} tests fail in this environment's baseline at the base "
                               f"commit, where the benchmark's run passed it; left out: {', '.join(ids[:3])}"
                               + (" ..." if len(ids) > 3 else "") for t, ids in at_base.items()}
    kept = {t: [i for i in ids if i not in at_base.get(t, ())] for t, ids in named.items()}
    scored = [_status(result.statuses, kept.get(t, [])) for t in [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]
              if t not in offline and t not in report.not_tests and (kept.get(t) or t not in at_base)]
    all_pass = all(passed(s) for s in scored)
    if instance.FAIL_TO_PASS and all(t in offline for t in instance.FAIL_TO_PASS):
        report.status, report.error = EvalStatus.NEEDS_NETWORK, \
            f"every FAIL_TO_PASS test needs the network: {next(iter(offline.values()))}"
        return report
    # A listed test the environment cannot run (a module it lacks, a file it cannot collect): no verdict.
    # Only what the reference's run shows too, so a candidate cannot make a test skip itself out of scoring.
    gaps = _gaps(result, named, [t for t in tests if t not in offline and t not in report.not_tests], sandbox,
                 env.spec, [*patch_files(candidate), *provided]) if candidate.strip() else {}
    if gaps and not reference:
        theirs = _reference_failures(env, instance, files, tests).gaps
        gaps = {t: why for t, why in gaps.items() if theirs.get(t) == why}
    if gaps:
        report.environment_gaps = gaps
        causes = sorted(set(gaps.values()))
        report.status, report.error = EvalStatus.NOT_SCORABLE, (
            f"{len(gaps)} listed test{'s' if len(gaps) != 1 else ''} cannot run in this environment, with the "
            f"reference patch too: {'; '.join(causes[:3])}" + (f" (and {len(causes) - 3} more causes)" if len(causes) > 3 else ""))
        return report
    # The exit code must agree with the log: a run of exactly the listed tests must exit 0; one
    # that also ran other tests (their files, the whole suite) may fail only if the log shows a failure.
    exact = result.exact and not at_base  # a left-out test that failed is a failure the exit code may show
    exit_agrees = result.exit_code == 0 or (not exact and result.exit_code is not None and bool(result.failing()))
    if result.timed_out:
        report.error = f"tests timed out after {graded_limit(env.spec):.0f}s"
    elif all_pass and not exit_agrees:
        report.error = f"log says every test passed but the test command exited {result.exit_code}"
    report.resolved = all_pass and exit_agrees and not result.timed_out
    if report.resolved:
        report.status = EvalStatus.RESOLVED
    elif report.status != EvalStatus.EMPTY_PATCH:
        report.status = EvalStatus.UNRESOLVED
    report.reward = 1.0 if report.resolved else 0.0
    return report


def _graded_run(sandbox: Sandbox, spec: EnvSpec, files: list[str], tests: list[str]) -> tuple[SuiteRun, Guard | None]:
    """The test patch's files run whole (else the listed tests), guarded where the runner is pytest."""
    guard = Guard.install(sandbox) if guardable(spec) else None
    guarded, rearm = (guard.spec(spec), lambda: guard.arm(sandbox)) if guard else (spec, None)
    limit = graded_limit(spec)
    run = run_files(sandbox, guarded, files, limit) if files \
        else run_tests(sandbox, guarded, tests, limit, before_retry=rearm)
    return run, guard


def graded_paths(instance: TaskInstance) -> list[str]:
    """The files SWE-bench runs for `instance`: those its test patch touches and leaves in place,
    with the files of any listed node id (before a runner says which of them it takes)."""
    kept = [f for f in patch_files(instance.test_patch) if f not in deleted_files(instance.test_patch)]
    named = [t.split("::")[0] for t in instance.FAIL_TO_PASS + instance.PASS_TO_PASS if "::" in t]
    return list(dict.fromkeys(kept + named))


def test_files_to_run(spec: EnvSpec, instance: TaskInstance) -> list[str]:
    """`graded_paths` as far as the spec's runner takes files; empty: the runner is given test ids
    (or runs the whole suite)."""
    return runnable(spec, graded_paths(instance))


def _named(statuses: Mapping[str, TestStatus], tests: list[str], parser: str) -> dict[str, list[str]]:
    """Each listed test -> the ids of the log it names (none: it names no test there): in the forms
    suites list them (`testrun.ids`), else by `testrun.names`' rules for the log's parser."""
    named = {test: matches(statuses, test) for test in tests}
    translated = match_listed([t for t, keys in named.items() if not keys], statuses, parser)
    return named | {test: found.ids for test, found in translated.matched.items()}


def _status(statuses: Mapping[str, TestStatus], keys: Iterable[str]) -> TestStatus | None:
    """The worst status of the tests `keys` name; None when there are none (missing from the log)."""
    return min((statuses[key] for key in keys), key=WORST_FIRST.index, default=None)


def _failing_at_base(instance: TaskInstance, spec: EnvSpec, named: Mapping[str, list[str]],
                     statuses: Mapping[str, TestStatus]) -> dict[str, list[str]]:
    """Listed test -> those of the ids it names that did not pass in this run and that the
    environment's validated baseline fails at the base commit, where the benchmark's record says its
    own run passed the listed test there (`TaskInstance.passed_at_base`). The environment cannot
    reproduce that baseline, so those ids are no patch's failure; the listed test's other ids (a test
    patch's new tests among them) are scored. Both are read, never assumed: a record that does not
    say (SWE-bench's) or a baseline read with other ids (`EnvSpec.ids_revision`) leaves every id scored."""
    if spec.ids_revision != IDS_REVISION:
        return {}
    recorded = set(instance.passed_at_base)
    found = {}
    for test in (t for t in named if t in recorded):
        failing = [i for i in named[test] if not passed(statuses.get(i)) and i in spec.test_status
                   and not passed(spec.test_status[i])]
        if failing:
            found[test] = failing
    return found


def _gaps(run: SuiteRun, named: Mapping[str, list[str]], tests: Iterable[str], sandbox: Sandbox, spec: EnvSpec,
          provided: Iterable[str]) -> dict[str, str]:
    """Listed tests (of `tests`) this run could not run at all -> why, in words:
    - for want of a module the environment lacks: each id of the log it names that did not pass
      (itself where it names none, absent) was skipped, or left out with its whole file, for want
      of a module (`testrun.skips`) that neither the work tree nor `provided` (paths patches add)
      provides and the sandbox's interpreter cannot import (`module: reason`);
    - pytest: absent from the log, its file not collected (`not collected: file: error`).
    Which of them are the environment's, not the candidate's, is the reference patch's run to say."""
    if spec.language != "python":
        return {}
    failing: dict[str, list[str]] = {}
    for test in tests:
        if not passed(_status(run.statuses, named[test])):
            failing[test] = [key for key in named[test] if not passed(run.statuses.get(key))] or [test]
    skips = module_skips(run.log, [key for keys in failing.values() for key in keys], run.statuses, spec.log_parser)
    found = {test: [skips[key] for key in keys] for test, keys in failing.items() if all(key in skips for key in keys)}
    absent = absent_modules(sandbox, command_python(spec.test_command),
                            {skip.module for said in found.values() for skip in said}, provided)
    gaps = {test: f"{said[0].module}: {said[0].reason}" for test, said in found.items()
            if all(skip.module in absent for skip in said)}
    uncollected = collection_errors(run.log) if spec.log_parser == "pytest" else {}
    for test, keys in failing.items():
        files = {key.split("::")[0] for key in keys if key not in run.statuses}
        if test not in gaps and len(files) == len(keys) and files <= uncollected.keys():
            gaps[test] = "; ".join(f"not collected: {file}: {uncollected[file]}" for file in sorted(files))
    return gaps


def _offline(result: SuiteRun, named: Mapping[str, list[str]], env: Environment) -> dict[str, str]:
    """Listed tests (-> the log's ids they name) that did not pass and whose failure the runner put
    down to a missing network."""
    reasons = offline_failures(result.log, result.statuses, standins.HOSTS if env.config.standins else ())
    found: dict[str, str] = {}
    for test, keys in named.items():
        if not passed(_status(result.statuses, keys)):
            why = [reasons[key] for key in keys if key in reasons]
            if why:
                found[test] = why[0]
    return found


class _Reference(NamedTuple):
    """What the reference patch's run shows, once per task, environment and stand-in setting."""

    offline: set[str]
    """Listed tests that fail for want of the network."""
    failing: set[str]
    """Listed tests it does not pass at all."""
    tampering: set[str]
    """What the guard reports of it: the project's own changes to pytest, not a candidate's."""
    gaps: dict[str, str]
    """Listed tests it cannot run at all (`_gaps`) -> why."""
    missing: set[str]
    """Modules its log says could not be imported that no patch provides (`missing_modules`)."""
    ran: bool
    """It reported tests: the environment runs the command."""


_REFERENCE: dict[str, _Reference] = {}
"""By everything the run depends on: two tasks of one id (or one task in two environments) are two runs."""
_REFERENCE_LOCK = threading.Lock()


def _reference_failures(env: Environment, instance: TaskInstance, files: list[str], tests: list[str]) -> _Reference:
    """The reference patch's run, guarded as a candidate's is: only tests that fail for want of the
    network with it too may leave scoring, so a candidate cannot opt a test out by making it look up
    a host; only what the guard reports of it too is not a candidate's tampering; only a test it
    cannot run either, for the same reason, makes a candidate's report not scorable."""
    key = hashlib.sha256("\0".join([instance.instance_id, instance.base_commit, instance.patch, instance.test_patch,
                                     *files, "\0", *tests, env.spec.model_dump_json(), str(env.config.standins)])
                         .encode("utf-8", "surrogateescape")).hexdigest()
    with _REFERENCE_LOCK:
        if key in _REFERENCE:
            return _REFERENCE[key]
    sandbox = env.open(instance.base_commit)
    try:
        for patch, what in ((instance.patch, "reference patch"), (instance.test_patch, "test patch")):
            if patch.strip():
                apply_patch(sandbox, patch, what)
        run, guard = _graded_run(sandbox, env.spec, files, tests)
        named = _named(run.statuses, tests, env.spec.log_parser)
        provided = [*patch_files(instance.patch), *patch_files(instance.test_patch)]
        found = _Reference(set(_offline(run, named, env)), {t for t in tests if not passed(_status(run.statuses, named[t]))},
                           set(guard.problems(run)) if guard else set(),
                           _gaps(run, named, tests, sandbox, env.spec, provided),
                           set(missing_modules(run, sandbox, patch_files(instance.patch), provided)), bool(run.statuses))
    except (PatchApplyError, TestRunError):
        found = _Reference(set(), set(), set(), {}, set(), False)
    finally:
        sandbox.close()
    with _REFERENCE_LOCK:
        _REFERENCE[key] = found
    return found


def in_fresh_sandbox(env: Environment, instance: TaskInstance, work: Callable[[Sandbox], RewardReport]) -> RewardReport:
    """Run `work` in a fresh sandbox at base_commit, timed; a sandbox that cannot be made, or dies, is infra_error."""
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
    except SandboxError as exc:  # the sandbox died under the tests: nothing was learned about the patch
        report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR,
                              error=f"sandbox died: {type(exc).__name__}: {exc}".splitlines()[0])
    finally:
        sandbox.close()
    report.duration_s = time.monotonic() - start
    return report


def with_standins_when_offline(env: Environment,
                               run: Callable[[Environment, Mapping[str, str]], RewardReport]) -> RewardReport:
    """`run(env, {})`; when listed tests failed for want of the network, once more in sandboxes with
    the public test services' stand-ins (`sandboxes.standins`, where the backend has them), told
    which tests the first run left out: what a stand-in serves is then scored, what it does not
    stays `needs_network`. A stand-in that cannot be had leaves the first report, saying why."""
    report = run(env, {})
    served = env.serving_standins() if report.needs_network else None
    if served is None:
        return report
    again = run(served, report.needs_network)
    if again.status == EvalStatus.INFRA_ERROR:
        report.standins = f"not used: {again.error}"
        return report
    again.standins = f"served {', '.join(standins.HOSTS)} in the sandbox"
    return again


def grade(env: Environment, instance: TaskInstance, candidate: str) -> RewardReport:
    """Grade `candidate` for `instance` in a fresh sandbox; infrastructure failures become a status.
    A front-end task is judged in the browser (`rewards.web`): resolved when every browser tier passes."""
    if instance.kind == TaskKind.FRONT_END:
        return in_fresh_sandbox(env, instance, lambda sandbox: grade_web(sandbox, instance, candidate)[0])
    return with_standins_when_offline(env, lambda served, before: in_fresh_sandbox(
        served, instance, lambda sandbox: grade_in_sandbox(sandbox, served, instance, candidate, before)))
