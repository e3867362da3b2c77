"""Reward tiers on crafted patches for the calc task, scored in real local sandboxes."""

import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import PrivateAttr
from taskrepo import SOURCE, TESTS, git, make_task_repo, source_patch

from swedojo.repos import resolve_repo
from swedojo.rewards.compose import RewardConfig, RewardMode, compose
from swedojo.rewards.score import score
from swedojo.rewards.tiers import TIERS, BaselineCache, Outcome, Tier, Verdict, format_tier, register
from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig
from swedojo.sandboxes.environment import Environment, default_python_env
from swedojo.schema import (
    EvalStatus,
    ExitStatus,
    RewardReport,
    Step,
    TaskInstance,
    TestStatus,
    TierScore,
    Trajectory,
)
from swedojo.testrun.command import suite_command
from swedojo.testrun.run import SuiteRun

EQUAL = {"format": 1.0, "static": 1.0, "tests": 1.0, "verification": 1.0}
GATED = RewardConfig(mode=RewardMode.GATED, weights=EQUAL)
PARTIAL = RewardConfig(mode=RewardMode.PARTIAL, weights=EQUAL)
BINARY = RewardConfig(mode=RewardMode.BINARY)

FIXED = SOURCE.replace("        return low\n", "        return low\n    if value > high:\n        return high\n")
SYNTAX_ERROR = FIXED.replace("if value > high:", "if value > high")
BREAKS_ADD = FIXED.replace("return a + b", "return a - b")
BREAKS_LOW = FIXED.replace("        return low\n", "        return value\n")
HALF_FIX = SOURCE.replace("        return low\n", "        return low\n    if value > high + 1:\n        return high\n")
MALFORMED = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def nothing_here():\n+def x():\n"


def _env(mirror: Path, task: TaskInstance):
    # The calc repo needs no pytest plugin; loading the venv's (hypothesis) costs seconds per run.
    config = SandboxConfig(env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local", config)


def _run(patch: str, status: ExitStatus = ExitStatus.SUBMITTED, errors: tuple[str, ...] = ()) -> Trajectory:
    steps = [Step(index=i, error=e) for i, e in enumerate(errors)]
    return Trajectory(instance_id="owner__calc-1", policy="crafted", patch=patch, exit_status=status, steps=steps)


def _rescore(report: RewardReport, config: RewardConfig) -> float:
    return compose(report.tiers, report.resolved, config)


def _vector(report: RewardReport) -> list[tuple[float, bool] | None]:
    """(score, passed) per tier; None for a tier that was not scored."""
    return [(t.score, t.passed) if t.scored else None for t in report.tiers]


@pytest.fixture
def calc(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    return _env(mirror, task), task


def test_malformed_patch_fails_format_and_earns_nothing(calc):
    env, task = calc
    report = score(env, task, _run(MALFORMED), GATED)
    assert report.status == EvalStatus.PATCH_FAILED
    assert _vector(report) == [(0.0, False)] * 4 + [None, None]  # runtime and visual: not a front-end task
    assert report.tiers[0].evidence["patch_applies"] is False and "does not apply" in report.tiers[0].evidence["apply_error"]
    assert report.tiers[1].evidence == {"skipped": "patch does not apply"}
    assert report.reward == 0.0 and _rescore(report, PARTIAL) == 0.0


def test_patch_that_does_not_compile_fails_static(calc):
    env, task = calc
    report = score(env, task, _run(source_patch("calc.py", SOURCE, SYNTAX_ERROR)), GATED)
    static = report.tiers[1]
    assert (static.score, static.passed) == (0.0, False)
    assert "SyntaxError" in static.evidence["compile_errors"]["calc.py"]
    assert static.evidence["checked"] == ["python compile()", "no linter configured and runnable"]
    assert report.tiers[2].score == 0.0  # nothing imports
    assert report.reward == 1 / 3  # format only: the gate closes at static; verification is not scored
    assert _rescore(report, PARTIAL) == 1 / 3  # no other test to watch adds nothing, never a vacuous pass


def test_modules_the_patch_adds_cannot_fake_the_compile_check(calc):
    env, task = calc
    fake = 'def dumps(report):\n    return \'{"missing": [], "errors": {}}\'\n'
    new_file = f"diff --git a/json.py b/json.py\nnew file mode 100644\n--- /dev/null\n+++ b/json.py\n@@ -0,0 +1,2 @@\n"
    new_file += "".join(f"+{line}\n" for line in fake.splitlines())
    report = score(env, task, _run(source_patch("calc.py", SOURCE, SYNTAX_ERROR) + new_file), GATED)
    # a module that would be imported in place of the standard library's is refused outright (`testrun.guard`)
    assert report.status == EvalStatus.PATCH_FAILED and "json.py (shadows the module json)" in report.error, report.error
    assert report.reward == 0.0


def test_patch_that_breaks_pass_to_pass_scores_tests_partially(calc):
    env, task = calc
    report = score(env, task, _run(source_patch("calc.py", SOURCE, BREAKS_ADD)), GATED)
    tests = report.tiers[2]
    assert (tests.score, tests.passed) == (0.5, False)
    assert tests.evidence["fail_to_pass"] == "1/1" and tests.evidence["pass_to_pass"] == "1/2"
    assert report.status == EvalStatus.UNRESOLVED
    assert report.reward == 2.5 / 3  # format 1 + static 1 + tests 0.5; verification not scored (every test listed)
    assert _rescore(report, PARTIAL) == 2.5 / 3
    assert _rescore(report, BINARY) == 0.0


def test_partial_fix_of_two_fail_to_pass_tests(calc):
    env, task = calc
    two_tests = TESTS + (
        "\n\ndef test_clamp_high():\n    assert clamp(50, 0, 10) == 10\n"
        "\n\ndef test_clamp_just_above():\n    assert clamp(11, 0, 10) == 10\n"
    )
    task = task.model_copy(update={
        "test_patch": source_patch("test_calc.py", TESTS, two_tests),
        "FAIL_TO_PASS": ["test_calc.py::test_clamp_high", "test_calc.py::test_clamp_just_above"],
    })
    report = score(env, task, _run(source_patch("calc.py", SOURCE, HALF_FIX)), GATED)
    assert report.tiers[2].evidence["fail_to_pass"] == "1/2" and report.tiers[2].evidence["pass_to_pass"] == "2/2"
    assert _vector(report) == [(1.0, True), (1.0, True), (0.5, False), None, None, None]
    assert report.reward == 2.5 / 3 and _rescore(report, PARTIAL) == 2.5 / 3
    full = score(env, task, _run(source_patch("calc.py", SOURCE, FIXED)), GATED)
    assert full.resolved and full.reward == 1.0


def test_full_fix_passes_every_tier(calc):
    env, task = calc
    report = score(env, task, _run(task.patch), GATED)
    assert report.status == EvalStatus.RESOLVED and report.resolved
    assert _vector(report) == [(1.0, True)] * 3 + [None] * 3  # every test is listed: nothing else to watch
    assert report.tiers[1].evidence["python_files"] == ["calc.py"]
    assert report.reward == 1.0 and _rescore(report, PARTIAL) == 1.0 and _rescore(report, BINARY) == 1.0
    assert score(env, task, _run(task.patch)).reward == 1.0  # default config too


def test_scoring_is_deterministic(calc):
    env, task = calc
    run = _run(source_patch("calc.py", SOURCE, BREAKS_ADD))
    first, second = score(env, task, run, PARTIAL), score(env, task, run, PARTIAL)
    assert [t.model_dump() for t in first.tiers] == [t.model_dump() for t in second.tiers]
    assert first.reward == second.reward == 2.5 / 3


def test_empty_patch_and_unsubmitted_runs_fail_format(calc):
    env, task = calc
    empty = score(env, task, _run(""), PARTIAL)
    assert empty.status == EvalStatus.EMPTY_PATCH and empty.reward == 0.0
    assert [t.evidence for t in empty.tiers[1:4]] == [{"skipped": "empty patch"}] * 3
    assert [t.evidence for t in empty.tiers[4:]] == [{"not_scored": "not a front-end task"}] * 2
    unsubmitted = score(env, task, _run(task.patch, ExitStatus.LIMIT_STEPS), GATED)
    assert unsubmitted.tiers[0].evidence["submitted"] is False
    assert unsubmitted.reward == 0.0 and _rescore(unsubmitted, PARTIAL) == 2 / 3


def test_format_errors_count_only_when_not_recovered():
    applied = RewardReport(instance_id="x", status=EvalStatus.RESOLVED)
    recovered = format_tier(_run("diff", errors=("bad call", "")), applied)
    assert recovered.passed and recovered.evidence["format_error_steps"] == [0]
    unrecovered = format_tier(_run("diff", errors=("", "bad call", "bad again")), applied)
    assert not unrecovered.passed and unrecovered.score == 0.0
    assert unrecovered.evidence["unrecovered_steps"] == [1, 2]


def test_verification_catches_regressions_outside_the_listed_tests(calc):
    env, task = calc
    task = task.model_copy(update={"PASS_TO_PASS": ["test_calc.py::test_add"]})  # clamp_low is now "the rest"
    run = _run(source_patch("calc.py", SOURCE, BREAKS_LOW))
    report = score(env, task, run, GATED)
    assert report.resolved
    verification = report.tiers[3]
    assert (verification.score, verification.passed) == (0.0, False)
    assert verification.evidence["regressed"] == ["test_calc.py::test_clamp_low"]
    assert report.reward == 0.75
    env.spec.flaky_tests = ["test_calc.py::test_clamp_low"]
    flaky = score(env, task, run, GATED)
    assert not flaky.tiers[3].scored and not flaky.tiers[3].passed
    assert flaky.tiers[3].evidence["flaky_or_network_excluded"] == ["test_calc.py::test_clamp_low"]
    assert flaky.reward == 1.0


class CountingEnvironment(Environment):
    """The task's environment, noting every test command its sandboxes run."""

    _test_runs: list[str] = PrivateAttr(default_factory=list)
    """Each test command as run, without the redirect of its log into a file."""

    def open(self, commit: str | None = None, prepared: bool = True) -> Sandbox:
        sandbox = super().open(commit, prepared)
        plain_exec = sandbox.exec

        def exec(command: str, timeout: float | None = None) -> ExecResult:
            if command.startswith(self.spec.test_command):
                self._test_runs.append(command.split(" > ")[0])
            return plain_exec(command, timeout)

        sandbox.exec = exec  # type: ignore[method-assign]
        return sandbox


def test_the_suite_reruns_after_the_patch_only_when_an_unlisted_test_passed_at_base(calc):
    env, task = calc
    counting = CountingEnvironment.model_validate(env.model_dump())
    report = score(counting, task, _run(task.patch), GATED)  # every test of the suite is listed
    assert not report.tiers[3].scored and report.tiers[3].evidence["not_scored"] == "no other test passed at base"
    assert "suite_exit_code" not in report.tiers[3].evidence
    assert [run == suite_command(env.spec) for run in counting._test_runs] == [True, False]  # suite at base, graded
    counting._test_runs.clear()
    fewer = task.model_copy(update={"PASS_TO_PASS": ["test_calc.py::test_add"]})
    report = score(counting, fewer, _run(task.patch), GATED)
    assert report.tiers[3].evidence["other_tests_passing_at_base"] == 1 and report.tiers[3].evidence["suite_exit_code"] == 0
    assert [run == suite_command(env.spec) for run in counting._test_runs] == [True, False, True]


class LineBudgetJudge:
    """A rule-based reviewer: patches that add more lines than the budget are marked down."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def review(self, instance: TaskInstance, patch: str) -> Verdict:
        added = sum(1 for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++"))
        return Verdict(score=min(1.0, self.budget / added), passed=added <= self.budget, reason=f"{added} lines added")


def test_judge_hook_weighs_on_verification(calc):
    env, task = calc
    report = score(env, task, _run(task.patch), GATED, judge=LineBudgetJudge(1))
    verification = report.tiers[3]
    assert (verification.score, verification.passed) == (0.5, False)
    assert verification.evidence["judge"] == {"score": 0.5, "passed": False, "reason": "2 lines added"}
    assert report.reward == 0.875


@pytest.mark.skipif(shutil.which("ruff", path=str(Path(sys.executable).parent)) is None, reason="ruff is not installed")
def test_new_lint_errors_fail_static_when_the_repo_configures_ruff(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    repo = mirror / task.repo
    (repo / "pyproject.toml").write_text("[tool.ruff]\nline-length = 120\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ruff config")
    task.base_commit = git(repo, "rev-parse", "HEAD")
    env = _env(mirror, task)
    unused_import = source_patch("calc.py", SOURCE, "import os\n" + FIXED)
    report = score(env, task, _run(unused_import), GATED)
    static = report.tiers[1]
    assert (static.score, static.passed) == (0.0, False)
    counts = static.evidence["ruff"]["calc.py"]
    assert counts["after"] > counts["before"] == 0
    assert "ruff (repo config): error counts before/after" in static.evidence["checked"]
    clean = score(env, task, _run(task.patch), GATED)
    assert clean.tiers[1].passed and clean.tiers[1].evidence["ruff"] == {"calc.py": {"before": 0, "after": 0}}


def test_baseline_cache_serves_the_other_rollouts_of_a_task(calc, tmp_path):
    env, task = calc
    directory = tmp_path / "baselines"
    run = _run(source_patch("calc.py", SOURCE, BREAKS_ADD))
    first = score(env, task, run, PARTIAL, baselines=BaselineCache(directory))
    assert _vector(first) == _vector(score(env, task, run, PARTIAL)), "the same tiers as without a cache"
    stored = directory / f"{BaselineCache.key(env, task)}.json"
    assert [p.name for p in directory.iterdir()] == [stored.name]
    # A test planted in the kept run shows up as regressed: the next score read it instead of rerunning the suite.
    planted = SuiteRun.model_validate_json(stored.read_text())
    planted.statuses["test_calc.py::test_planted"] = TestStatus.PASSED
    stored.write_text(planted.model_dump_json())
    again = score(env, task, _run(task.patch), PARTIAL, baselines=BaselineCache(directory))
    assert again.tiers[3].evidence["regressed"] == ["test_calc.py::test_planted"]
    # What the run depends on is in the key: another test patch or test command is another baseline.
    assert BaselineCache.key(env, task.model_copy(update={"test_patch": task.test_patch + "\n"})) != stored.stem
    other_command = env.model_copy(update={"spec": env.spec.model_copy(update={"test_command": "pytest -x"})})
    assert BaselineCache.key(other_command, task) != stored.stem


def test_a_timed_out_baseline_is_not_kept(tmp_path):
    cache = BaselineCache(tmp_path)
    cache.put("k", SuiteRun(statuses={}, exit_code=None, timed_out=True))
    assert cache.get("k") is None and not list(tmp_path.iterdir())


def test_scores_of_a_group_that_start_together_run_the_baseline_once():
    cache, calls, started = BaselineCache(), [], threading.Event()
    done = SuiteRun(statuses={"test_a": TestStatus.PASSED}, exit_code=0, timed_out=False)

    def slow_run() -> SuiteRun:
        calls.append(threading.get_ident())
        started.set()
        time.sleep(0.3)
        return done

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.get_or_run, "k", slow_run)
        started.wait()
        second = pool.submit(cache.get_or_run, "k", slow_run)  # asks while the first still runs
        assert first.result() == second.result() == done
    assert len(calls) == 1


def test_when_the_first_baseline_fails_a_waiting_score_runs_its_own():
    cache, started = BaselineCache(), threading.Event()

    def failing_run() -> SuiteRun:
        started.set()
        time.sleep(0.2)
        raise RuntimeError("sandbox died")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.get_or_run, "k", failing_run)
        started.wait()
        second = pool.submit(cache.get_or_run, "k", lambda: SuiteRun(statuses={}, exit_code=0, timed_out=False))
        with pytest.raises(RuntimeError):
            first.result()
        assert second.result().exit_code == 0


def test_a_new_tier_is_one_definition_and_one_registration(calc):
    env, task = calc
    size = Tier("size", 1.0, lambda given: Outcome(0.5, True, {"patch_lines": len(given.trajectory.patch.splitlines())}))
    register(size)
    try:
        report = score(env, task, _run(task.patch), RewardConfig(mode=RewardMode.PARTIAL, weights={"size": 3.0}))
    finally:
        TIERS.remove(size)
    assert [(t.tier, t.name) for t in report.tiers][-1] == (6, "size") and report.tiers[6].evidence["patch_lines"] > 0
    # format, static, tests at their default weights (0.1, 0.1, 0.6), verification, runtime and visual not scored,
    # size 0.5 at 3.0
    assert report.reward == pytest.approx((0.1 + 0.1 + 0.6 + 3.0 * 0.5) / (0.1 + 0.1 + 0.6 + 3.0))
    with pytest.raises(ValueError, match="a tier named 'format' is registered already"):
        register(Tier("format", 1.0, lambda given: Outcome(1.0, True, {})))


def test_weights_name_registered_tiers_and_not_scored_tiers_are_left_out():
    with pytest.raises(ValueError, match="no tier named speed"):
        RewardConfig(weights={"speed": 1.0})
    with pytest.raises(ValueError, match="at least one tier weight must be positive"):
        RewardConfig(weights=dict.fromkeys(("format", "static", "tests", "verification", "runtime", "visual"), 0.0))
    scored = [TierScore(tier=0, name="format", score=1.0, passed=True), TierScore(tier=1, name="static", score=0.0, passed=False)]
    unscored = TierScore(tier=1, name="static", score=0.0, passed=False, scored=False)
    tests = TierScore(tier=2, name="tests", score=1.0, passed=True)
    assert compose([scored[0], unscored, tests], True, GATED) == 1.0  # not scored: neither a failure nor a gate
    assert compose([*scored, tests], True, GATED) == 1 / 3  # a failed static closes the gate
    assert compose([unscored], False, GATED) == 0.0
