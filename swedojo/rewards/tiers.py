"""Reward tiers for code tasks: each a score in [0, 1], whether it passed, and the evidence behind it.

Registered in order (`TIERS`): 0 format, 1 static, 2 tests, 3 verification, 4 runtime, 5 visual;
a front-end task (`TaskInstance.checks`) is judged by static, runtime and visual in the browser
(`rewards.web`), its test tiers not scored, and a code task's runtime and visual are not scored. `run_tiers` computes
the vector, `compose` the scalar. A tier with nothing to check is not scored, never passed. The
tiers that look at code run in the one fresh
sandbox `score.score_in_sandbox` opens from the task's environment, never in the agent's, so
what the agent left behind (installed tools, edited caches) cannot influence its own reward.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, Field

from swedojo.progress import stage
from swedojo.rewards.grading import graded_limit
from swedojo.rewards.web.assess import WebAssessment
from swedojo.rewards.web.check import Check
from swedojo.sandboxes.base import Sandbox
from swedojo.sandboxes.environment import Environment
from swedojo.schema import (
    EvalStatus,
    ExitStatus,
    RewardReport,
    TaskInstance,
    TaskKind,
    TierScore,
    Trajectory,
)
from swedojo.testrun.diagnose import environment_failure
from swedojo.testrun.patches import apply_patch, patch_files, restore_files
from swedojo.testrun.run import SuiteRun, TestRunError, passed, run_suite

MAX_LISTED = 20
"""Test names listed in evidence before only a count is kept (evidence lands in results.jsonl)."""


class BaselineError(TestRunError):
    """The whole suite at base failed for the environment: nothing to hold a candidate to."""


class Verdict(BaseModel):
    """What a judge thinks of a candidate patch."""

    score: float = Field(ge=0.0, le=1.0)
    """Quality in [0, 1]; multiplies the verification tier's score."""
    passed: bool
    """Whether the judge accepts the patch; the verification tier passes only if it does."""
    reason: str = ""
    """One paragraph on why, kept as evidence."""


class Judge(Protocol):
    """An optional reviewer for tier 3 (a model behind a backend); the harness defines only the hook."""

    def review(self, instance: TaskInstance, patch: str) -> Verdict:
        """Judge `patch` as a fix for `instance`; must not touch any sandbox."""
        ...


class Outcome(NamedTuple):
    """What one tier's check found, before it is placed in the tier vector."""

    score: float
    passed: bool
    evidence: dict[str, Any]
    scored: bool = True
    """False when there was nothing to check: neither passed nor failed (see `compose`)."""


def not_scored(why: str, **evidence: Any) -> Outcome:
    """A tier with nothing to check: it never passes vacuously."""
    return Outcome(0.0, False, {"not_scored": why, **evidence}, scored=False)


@dataclass(frozen=True)
class TierInput:
    """What a tier may look at, all from the one fresh grading sandbox, never the agent's."""

    sandbox: Sandbox
    """The graded work tree: the candidate applied (and the test patch, once grading has run)."""
    env: Environment
    instance: TaskInstance
    trajectory: Trajectory
    report: RewardReport
    """SWE-bench grading of the candidate (status, FAIL_TO_PASS and PASS_TO_PASS statuses)."""
    baseline: SuiteRun | None = None
    """The whole suite at base + test patch (tier 3's reference)."""
    judge: Judge | None = None
    web: WebAssessment | None = None
    """A front-end task's browser checks of the candidate (`rewards.web.assess`)."""


@dataclass(frozen=True)
class Tier:
    """One reward tier: a named check with a default weight; its index is its place in `TIERS`."""

    name: str
    weight: float
    """Default weight in the weighted mean; `RewardConfig.weights` overrides it by name."""
    check: Callable[[TierInput], Outcome]
    needs_patch: bool = True
    """Skipped (score 0, failed) when the patch is empty or does not apply."""


TIERS: list[Tier] = []
"""The registered tiers, lowest (checked first, gating the rest) first."""


def register(tier: Tier) -> Tier:
    """Add a tier above the registered ones: a new tier is one definition plus this call."""
    if any(t.name == tier.name for t in TIERS):
        raise ValueError(f"a tier named {tier.name!r} is registered already")
    TIERS.append(tier)
    return tier


def run_tiers(given: TierInput, skip: str = "", names: Sequence[str] | None = None) -> list[TierScore]:
    """The tier vector: every registered tier (or those in `names`) in order; with `skip` (why there
    is no patch to look at), the tiers that need one score 0 with that reason."""
    scores: list[TierScore] = []
    for index, tier in enumerate(TIERS):
        if names is not None and tier.name not in names:
            continue
        outcome = Outcome(0.0, False, {"skipped": skip}) if skip and tier.needs_patch else tier.check(given)
        scores.append(TierScore(tier=index, name=tier.name, score=outcome.score, passed=outcome.passed,
                                scored=outcome.scored, evidence=outcome.evidence))
    return scores


def format_tier(trajectory: Trajectory, report: RewardReport) -> Outcome:
    """Tier 0: submitted, no unrecovered format error, a non-empty patch that applies to the base.

    A format error followed by a good turn was recovered; errors on the last turns were not.
    Binary, because a run that fails any of these produced nothing a trainer should credit.
    """
    steps = trajectory.steps
    last_good = max((i for i, step in enumerate(steps) if not step.error), default=-1)
    unrecovered = [step.index for step in steps[last_good + 1 :]]
    empty = not trajectory.patch.strip()
    checks = {
        "submitted": trajectory.exit_status == ExitStatus.SUBMITTED,
        "format_errors_recovered": not unrecovered,
        "patch_non_empty": not empty,
        "patch_applies": not empty and report.status != EvalStatus.PATCH_FAILED,
    }
    evidence: dict[str, Any] = {
        **checks,
        "exit_status": trajectory.exit_status.value,
        "format_error_steps": [step.index for step in steps if step.error],
        "unrecovered_steps": unrecovered,
    }
    if report.status == EvalStatus.PATCH_FAILED:
        evidence["apply_error"] = report.error
    ok = all(checks.values())
    return Outcome(1.0 if ok else 0.0, ok, evidence)


@dataclass(frozen=True)
class Linter:
    """A linter the static tier runs when the repo configures it and the environment has it."""

    name: str
    configured: str
    """Shell test, run at the repo root, that succeeds when the repo has this linter's config."""
    commands: tuple[str, ...]
    """Ways to invoke it, tried in order (`{python}` is the environment's interpreter)."""
    stdin_args: str
    """Arguments that lint stdin as `{path}` and print `path:line:col: ...` per error, exit 0."""


LINTERS: tuple[Linter, ...] = (
    Linter(
        "ruff",
        "test -f ruff.toml || test -f .ruff.toml || grep -qs '^\\[tool\\.ruff' pyproject.toml",
        ("ruff", "{python} -m ruff"),
        "check --no-fix --exit-zero --output-format=concise --stdin-filename {path} -",
    ),
    Linter(
        "flake8",
        "test -f .flake8 || grep -qs '^\\[flake8\\]' setup.cfg tox.ini",
        ("{python} -m flake8", "flake8"),
        "--exit-zero --stdin-display-name {path} -",
    ),
)


def environment_python(env: Environment) -> str:
    """The interpreter the tests run with (first word of the test command), else `python3`."""
    words = shlex.split(env.spec.test_command)
    first = words[0] if words else ""
    return first if re.fullmatch(r"(\S*/)?python[\d.]*", first) else "python3"


_COMPILE_SCRIPT = """
import json, sys, traceback
report = {"missing": [], "errors": {}}
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except FileNotFoundError:
        report["missing"].append(path)
        continue
    try:
        compile(source, path, "exec", dont_inherit=True)
    except Exception as exc:
        report["errors"][path] = traceback.format_exception_only(type(exc), exc)[-1].strip()
print(json.dumps(report))
"""
"""Compiles each file as `py_compile` does (bytes in, the source encoding honoured), writing nothing."""


def _compile_errors(sandbox: Sandbox, python: str, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """(files of `names` that exist, {file: last line of its compile error}), in one process.

    `-I -S`: neither the work tree nor site-packages is on the path, so nothing the patch added
    runs (a `json.py` at the repo root would otherwise be imported by the check itself). When
    the interpreter cannot run the check, every file fails with its complaint, as a failed
    `py_compile` would.
    """
    result = sandbox.exec(shlex.join([python, "-I", "-S", "-c", _COMPILE_SCRIPT, *names]))
    lines = result.output.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if result.ok and lines else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        complaint = lines[-1].strip() if lines else f"exit {result.exit_code}"
        return names, dict.fromkeys(names, f"the compile check did not run: {complaint}")
    missing = set(report["missing"])
    return [f for f in names if f not in missing], report["errors"]


def _linter_command(sandbox: Sandbox, linter: Linter, python: str) -> str | None:
    for template in linter.commands:
        command = template.format(python=python)
        if sandbox.exec(f"{command} --version >/dev/null 2>&1").ok:
            return command
    return None


def _lint_count(sandbox: Sandbox, linter: Linter, command: str, source: str, path: str) -> int | None:
    """Errors the linter reports for `path` with the text `source` prints; None if it failed.

    Counted inside the sandbox, so a long report cut by the output cap still counts right.
    """
    args = linter.stdin_args.format(path=shlex.quote(path))
    prefix = shlex.quote(f"{path}:")
    counter = (
        f"awk -v p={prefix} "
        "'index($0, p) == 1 && substr($0, length(p) + 1) ~ /^[0-9]+:[0-9]+:/ {n++} END {print n + 0}'"
    )
    result = sandbox.exec(f'(out=$({source} | {command} {args}); rc=$?; printf "%s\\n" "$out" | {counter}; exit $rc)')
    last = result.output.strip().splitlines()[-1:] if result.output.strip() else []
    if not result.ok or not last or not last[0].isdigit():
        return None
    return int(last[0])


def static_tier(sandbox: Sandbox, env: Environment, instance: TaskInstance, candidate: str) -> Outcome:
    """Tier 1: the changed Python files compile, and the repo's linters find no new errors in them.

    Runs after the candidate is applied. The linter's count at the base comes from the base
    text (`git show`) linted under the same name, so no second checkout is needed. Files the
    test patch owns are the task's, not the candidate's, and are left out.
    """
    owned_by_tests = set(patch_files(instance.test_patch))
    names = [f for f in patch_files(candidate) if f.endswith(".py") and f not in owned_by_tests]
    python = environment_python(env)
    files, compile_errors = _compile_errors(sandbox, python, names) if names else ([], {})
    if not files:
        return not_scored("no Python file changed outside the tests", python_files=[])
    bad: set[str] = set(compile_errors)
    evidence: dict[str, Any] = {"python_files": files, "checked": [f"{python} compile()"], "compile_errors": compile_errors}
    for linter in LINTERS:
        if not sandbox.exec(linter.configured).ok:
            continue
        command = _linter_command(sandbox, linter, python)
        if command is None:
            evidence.setdefault("linters_not_runnable", []).append(linter.name)
            continue
        counts: dict[str, dict[str, int | None]] = {}
        for f in files:
            base = f"git show {shlex.quote(f'{instance.base_commit}:{f}')} 2>/dev/null"
            before = _lint_count(sandbox, linter, command, base, f)
            after = _lint_count(sandbox, linter, command, f"cat {shlex.quote(f)}", f)
            counts[f] = {"before": before, "after": after}
            if before is not None and after is not None and after > before:
                bad.add(f)
        evidence["checked"].append(f"{linter.name} (repo config): error counts before/after")
        evidence[linter.name] = counts
    if len(evidence["checked"]) == 1:
        evidence["checked"].append("no linter configured and runnable")
    evidence["failing_files"] = sorted(bad)
    return Outcome((len(files) - len(bad)) / len(files), not bad, evidence)


def tests_tier(report: RewardReport) -> Outcome:
    """Tier 2 from the SWE-bench grading: F2P fraction passing times P2P fraction kept.

    A product, so that a patch which changes nothing (every P2P kept, no F2P) earns nothing.
    When the log claims every listed test passed but the command disagrees (exit code,
    timeout), the log cannot be trusted and the tier scores 0.
    """
    f2p = [passed(s) for s in report.fail_to_pass.values()]
    p2p = [passed(s) for s in report.pass_to_pass.values()]
    f2p_fraction = sum(f2p) / len(f2p) if f2p else 1.0
    p2p_fraction = sum(p2p) / len(p2p) if p2p else 1.0
    evidence: dict[str, Any] = {
        "fail_to_pass": f"{sum(f2p)}/{len(f2p)}",
        "pass_to_pass": f"{sum(p2p)}/{len(p2p)}",
        "fail_to_pass_fraction": f2p_fraction,
        "pass_to_pass_fraction": p2p_fraction,
        "resolved": report.resolved,
        "test_exit_code": report.test_exit_code,
    }
    score = f2p_fraction * p2p_fraction
    if all(f2p + p2p) and not report.resolved:
        evidence["log_untrusted"] = report.error
        score = 0.0
    return Outcome(score, report.resolved, evidence)


def suite_at_base(sandbox: Sandbox, env: Environment, instance: TaskInstance) -> SuiteRun:
    """The whole suite at base + test patch, run before the candidate touches the tree.

    Run first so that nothing the candidate's code does at test time can shrink the set of
    tests it is later held to. Leaves the work tree at the base; PatchApplyError if the test
    patch does not apply (the task is broken), TestRunError if the log cannot be read or the run
    says nothing about the code (`BaselineError`: no test ran, the runner is missing, ...).
    """
    if instance.test_patch.strip():
        apply_patch(sandbox, instance.test_patch, "test patch")
    run = run_suite(sandbox, env.spec, graded_limit(env.spec))
    if why := environment_failure(run, env.spec, sandbox, [], patch_files(instance.patch),
                                  instance.FAIL_TO_PASS + instance.PASS_TO_PASS):
        raise BaselineError(why)
    restore_files(sandbox, instance.base_commit, patch_files(instance.test_patch))
    return run


class BaselineCache:
    """Whole-suite runs at base + test patch, kept per task and environment (in memory, and on disk if given).

    Every rollout of a task (an RL group, a rerun) is held to the same baseline, so a warm scorer
    runs it once. The key hashes everything the run depends on: the repo at `base_commit` (a git
    content hash), the test patch, and the environment's image, work tree, setup, test command,
    log parser and variables. A run that timed out is not kept.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._runs: dict[str, SuiteRun] = {}
        self._running: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(env: Environment, instance: TaskInstance) -> str:
        spec = env.spec
        inputs = {
            "backend": env.backend, "network": env.config.network, "image": spec.image, "workdir": spec.workdir,
            "rebuild_commands": spec.rebuild_commands, "test_command": spec.test_command, "log_parser": spec.log_parser,
            "env_vars": {**spec.env_vars, **env.config.env}, "repo": instance.repo, "base_commit": instance.base_commit,
            "test_patch": instance.test_patch,
        }
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> SuiteRun | None:
        with self._lock:
            run = self._runs.get(key)
        if run is None and self.directory is not None and (path := self.directory / f"{key}.json").is_file():
            run = SuiteRun.model_validate_json(path.read_text())
            with self._lock:
                self._runs[key] = run
        return run

    def get_or_run(self, key: str, run: Callable[[], SuiteRun]) -> SuiteRun:
        """The kept run for `key`, else `run()`'s (kept); scores of one group that start together
        wait for the first one's run instead of repeating it (when it is not kept, one of them runs)."""
        while (found := self.get(key)) is None:
            with self._lock:
                running = self._running.get(key)
                if running is None:
                    mine = self._running[key] = threading.Event()
            if running is not None:
                running.wait()
                continue
            try:
                result = run()
                self.put(key, result)
                return result
            finally:
                with self._lock:
                    del self._running[key]
                mine.set()
        return found

    def put(self, key: str, run: SuiteRun) -> None:
        if run.timed_out:
            return
        with self._lock:
            self._runs[key] = run
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = self.directory / f".{key}.{os.getpid()}.{threading.get_ident()}"
            partial.write_text(run.model_dump_json())
            partial.replace(self.directory / f"{key}.json")


def verification_tier(
    sandbox: Sandbox,
    env: Environment,
    instance: TaskInstance,
    baseline: SuiteRun,
    candidate: str,
    judge: Judge | None = None,
) -> Outcome:
    """Tier 3: every other test that passed at base + test patch still passes; flaky tests excluded.

    Runs the whole suite on the graded tree (candidate + test patch). The listed F2P/P2P tests
    are tier 2's; a test missing from the new log counts as failed. When no other test passed at
    base (every test is listed, as in tasks whose PASS_TO_PASS is the whole suite) there is
    nothing to watch: the suite is not run again and, without a judge, the tier is not scored. A
    judge, if given, multiplies the score by its own and must accept the patch for the tier to pass.
    """
    listed = set(instance.FAIL_TO_PASS) | set(instance.PASS_TO_PASS)
    flaky = set(env.spec.flaky_tests) | set(env.spec.network_tests)  # sandboxes have no network
    passing_at_base = sorted(t for t, s in baseline.statuses.items() if passed(s) and t not in listed)
    watched = [t for t in passing_at_base if t not in flaky]
    excluded = sorted(flaky.intersection(passing_at_base))
    if not watched and judge is None:
        return not_scored("no other test passed at base", suite_not_rerun=True, flaky_or_network_excluded=excluded)
    try:
        stage("suite run after the patch for tier 3")
        after = run_suite(sandbox, env.spec, graded_limit(env.spec)) if watched else None
    except TestRunError as exc:  # e.g. a log the candidate's tree made too large: nothing is known to pass
        return Outcome(0.0, False, {"other_tests_passing_at_base": len(watched), "suite_error": str(exc)})
    regressed = [t for t in watched if after is not None and not after.passed(t)]
    score = (len(watched) - len(regressed)) / len(watched) if watched else 1.0
    accepted = not regressed
    evidence: dict[str, Any] = {
        "other_tests_passing_at_base": len(watched),
        "still_passing": len(watched) - len(regressed),
        "regressed": regressed[:MAX_LISTED],
        "regressed_count": len(regressed),
        "flaky_or_network_excluded": excluded,
    }
    if after is None:
        evidence["suite_not_rerun"] = "no other test passed at base"
    else:
        evidence |= {"suite_exit_code": after.exit_code, "suite_timed_out": after.timed_out}
    if judge is not None:
        verdict = judge.review(instance, candidate)
        score *= verdict.score
        accepted = accepted and verdict.passed
        evidence["judge"] = verdict.model_dump()
    return Outcome(score, accepted, evidence)


NO_TESTS = "a front-end task has no tests: the browser tiers (static, runtime, visual) judge it"


def browser_tier(given: TierInput, pick: Callable[[WebAssessment], Check], code: Callable[[TierInput], Outcome]) -> Outcome:
    """A front-end task's browser check `pick`ed from its assessment (0 when there is none: no patch to
    look at), else the code task's `code`."""
    if given.instance.kind == TaskKind.CODE:
        return code(given)
    if given.web is None:
        return Outcome(0.0, False, {"skipped": "the pages were not assessed: no patch that applies"})
    return Outcome(*pick(given.web))


def _for_code(check: Callable[[TierInput], Outcome]) -> Callable[[TierInput], Outcome]:
    """A test tier: not scored for a front-end task."""
    return lambda given: not_scored(NO_TESTS) if given.instance.kind == TaskKind.FRONT_END else check(given)


def _not_for_code(given: TierInput) -> Outcome:
    return not_scored("not a front-end task")


register(Tier("format", 0.1, lambda given: format_tier(given.trajectory, given.report), needs_patch=False))
register(Tier("static", 0.1, lambda given: browser_tier(given, lambda web: web.static, lambda given: static_tier(
    given.sandbox, given.env, given.instance, given.trajectory.patch))))
register(Tier("tests", 0.6, _for_code(lambda given: tests_tier(given.report))))
register(Tier("verification", 0.2, _for_code(lambda given: verification_tier(
    given.sandbox, given.env, given.instance, given.baseline, given.trajectory.patch, given.judge))))
# needs_patch=False: without a patch a code task's runtime and visual stay not scored, a front-end task's score 0.
register(Tier("runtime", 0.4, lambda given: browser_tier(given, lambda web: web.runtime, _not_for_code), needs_patch=False))
register(Tier("visual", 0.2, lambda given: browser_tier(given, lambda web: web.visual, _not_for_code), needs_patch=False))
