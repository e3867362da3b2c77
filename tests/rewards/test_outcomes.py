"""Infrastructure vs agent, decided from evidence: each misclassification seen on real runs, on a small repo."""

from __future__ import annotations

from pathlib import Path

from taskrepo import SOURCE, make_task_repo, source_patch

from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.rewards.score import score
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, ExitStatus, TaskInstance, TestStatus, Trajectory


def _env(mirror: Path, task: TaskInstance, **spec):
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")
    env.spec = env.spec.model_copy(update=spec)
    return env


def _trajectory(task: TaskInstance, patch: str) -> Trajectory:
    return Trajectory(instance_id=task.instance_id, policy="test", patch=patch, exit_status=ExitStatus.SUBMITTED)


def test_a_test_command_that_cannot_start_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task, test_command="no-such-python -m pytest -rA")
    report = grade(env, task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR and not report.resolved
    assert report.error.startswith("the test command could not start (exit 127)") and "not found" in report.error
    scored = score(env, task, _trajectory(task, task.patch))  # at base, before the candidate: the suite
    assert scored.status == EvalStatus.INFRA_ERROR and "could not start" in scored.error


def test_a_missing_test_runner_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    report = grade(_env(mirror, task, test_command="/usr/bin/python3 -I -m nosuchrunner"), task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR and report.error == "the test runner is not installed: No module named nosuchrunner"


def test_a_suite_that_collects_no_test_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task, test_command="python -m pytest -rA -p no:cacheprovider --collect-only")  # runs nothing
    report = grade(env, task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR and report.error.startswith("the test command ran no test")
    scored = score(env, task, _trajectory(task, task.patch))
    assert scored.status == EvalStatus.INFRA_ERROR and "ran no test" in scored.error


def test_a_runner_that_the_code_under_test_crashes_is_the_codes_failure_not_infra(tmp_path):
    """Seen on a jest suite: with the empty patch a test's unhandled rejection killed node before
    jest wrote its report, so no test was read, and the run was called infra_error. The reference
    patch's run of the same command reported its tests: the environment works, this code does not."""
    mirror, task = make_task_repo(tmp_path)
    crash = "import os\n\nfrom calc import clamp\n\nif clamp(50, 0, 10) != 10:\n    os._exit(3)  # the runner dies\n"
    new_file = source_patch("conftest.py", "", crash).replace("--- a/conftest.py", "new file mode 100644\n--- /dev/null")
    crashing = task.model_copy(update={"test_patch": task.test_patch + new_file})
    env = _env(mirror, crashing)
    assert grade(env, crashing, crashing.patch).status == EvalStatus.RESOLVED
    report = grade(env, crashing, "")
    assert report.status == EvalStatus.EMPTY_PATCH and not report.resolved, (report.status, report.error)
    assert report.error.startswith("the test command ran no test (exit 3)") and \
        report.error.endswith("the reference patch's run of the same command reported its tests")
    no_fix = grade(env, crashing, source_patch("calc.py", SOURCE, SOURCE + "\n# no fix\n"))
    assert no_fix.status == EvalStatus.UNRESOLVED, (no_fix.status, no_fix.error)  # (the pytest guard sees the crash too)


def test_a_missing_dependency_at_collection_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    extra = "import yaml_that_is_not_installed\n\n\ndef test_loads():\n    assert yaml_that_is_not_installed\n"
    new_file = source_patch("test_extra.py", "", extra).replace("--- a/test_extra.py", "new file mode 100644\n--- /dev/null")
    needs = task.model_copy(update={"test_patch": task.test_patch + new_file,
                                    "FAIL_TO_PASS": [*task.FAIL_TO_PASS, "test_extra.py::test_loads"]})
    report = grade(_env(mirror, needs), needs, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR, report.log_tail
    assert report.error == "a dependency is missing: No module named 'yaml_that_is_not_installed' (not in the repository or any patch)"


def test_a_missing_module_named_in_passing_output_is_not_infra_error(tmp_path):
    """Seen on a test runner's own suite: a passing test prints another run's collection error
    ("No module named 'does_not_work'") and the log holds an ERROR line, but every scored test ran
    and passed: the environment is fine and gold is resolved."""
    mirror, task = make_task_repo(tmp_path)
    extra = ("def test_prints_an_inner_failure():\n"
             "    print(\"ModuleNotFoundError: No module named 'does_not_work'\")\n"
             "    print('ERROR inner/test_x.py - collection failed')\n\n\n"
             "def test_errors_in_setup(missing_fixture):\n    pass\n")
    new_file = source_patch("test_extra.py", "", extra).replace("--- a/test_extra.py", "new file mode 100644\n--- /dev/null")
    noisy = task.model_copy(update={"test_patch": task.test_patch + new_file})
    env = _env(mirror, noisy, test_command="python -m pytest -rA -p no:cacheprovider")
    report = grade(env, noisy, task.patch)
    assert report.status == EvalStatus.RESOLVED, (report.error, report.log_tail)


def test_a_broken_patch_stays_the_agents_failure(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task)
    syntax = grade(env, task, source_patch("calc.py", SOURCE, SOURCE.replace("def clamp", "def clamp(:")))
    assert syntax.status == EvalStatus.UNRESOLVED and syntax.error == ""
    module_gone = grade(env, task, source_patch("calc.py", SOURCE, ""))  # every test module fails to import
    assert module_gone.status == EvalStatus.UNRESOLVED, module_gone.error
    renamed = "diff --git a/calc.py b/calc.py\ndeleted file mode 100644\n" + source_patch("calc.py", SOURCE, "").split("\n", 1)[1]
    assert grade(env, task, renamed).status == EvalStatus.UNRESOLVED  # "No module named 'calc'": the candidate removed it


def test_a_sandbox_that_dies_under_the_tests_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)

    class Dying(type(_env(mirror, task))):
        def open(self, commit=None, prepared=True):
            sandbox = super().open(commit, prepared)
            sandbox.close()  # gone before grading runs a command, as when a container is removed under it
            return sandbox

    env = _env(mirror, task)
    report = grade(Dying.model_validate(env.model_dump()), task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR and report.error.startswith("sandbox died: SandboxError")


def test_tests_this_environment_fails_at_base_are_left_out_where_the_benchmark_saw_them_pass(tmp_path):
    """Seen on Multi-SWE-bench (jest, a time-zone plugin's DST tests an hour off under this
    environment's ICU): tests of a listed file failed at the base commit in the environment, where
    the benchmark's record says its own run passed the file, and gold was graded unresolved. Read
    from the record and the validated baseline, never assumed: those tests are left out and named,
    the listed file's other tests (the test patch's new one among them) and every other test scored."""
    from swedojo.testrun.parsers import IDS_REVISION

    mirror, task = make_task_repo(tmp_path)
    zone = ("from calc import clamp\n\n\ndef test_zone():\n    assert False, 'an hour off under this ICU'\n\n\n"
            "def test_zone_high():\n    assert clamp(50, 0, 10) == 10\n")
    new_file = source_patch("test_zone.py", "", zone).replace("--- a/test_zone.py", "new file mode 100644\n--- /dev/null")
    drifted = "def test_drift():\n    assert False, 'a day off'\n"
    other = source_patch("test_drift.py", "", drifted).replace("--- a/test_drift.py", "new file mode 100644\n--- /dev/null")
    listed = {**task.model_dump(), "test_patch": task.test_patch + new_file + other,
              "FAIL_TO_PASS": [*task.FAIL_TO_PASS, "test_zone.py"], "PASS_TO_PASS": [*task.PASS_TO_PASS, "test_drift.py"]}
    msb = TaskInstance.model_validate({**listed, "passed_at_base": ["test_zone.py", *listed["PASS_TO_PASS"]]})
    baseline = {"test_calc.py::test_add": TestStatus.PASSED, "test_calc.py::test_clamp_low": TestStatus.PASSED,
                "test_zone.py::test_zone": TestStatus.FAILED, "test_drift.py::test_drift": TestStatus.FAILED}
    env = _env(mirror, msb, test_status=baseline, ids_revision=IDS_REVISION)

    report = grade(env, msb, msb.patch)
    assert report.status == EvalStatus.RESOLVED, (report.status, report.error)
    assert report.fails_at_base == {
        "test_zone.py": "1 of its 2 tests fail in this environment's baseline at the base commit, where the "
                        "benchmark's run passed it; left out: test_zone.py::test_zone",
        "test_drift.py": "1 of its 1 tests fail in this environment's baseline at the base commit, where the "
                         "benchmark's run passed it; left out: test_drift.py::test_drift"}
    assert report.fail_to_pass["test_zone.py"] == TestStatus.FAILED  # reported as it ran
    # the listed file's new test is still scored: without the fix it fails
    assert grade(env, msb, "").status == EvalStatus.EMPTY_PATCH
    # a test that passed at base and that the candidate breaks is still the candidate's failure
    fixed = SOURCE.replace("        return low\n", "        return low\n    if value > high:\n        return high\n")
    broken = grade(env, msb, source_patch("calc.py", SOURCE, fixed.replace("a + b", "a - b")))
    assert broken.status == EvalStatus.UNRESOLVED and broken.pass_to_pass["test_calc.py::test_add"] == TestStatus.FAILED
    assert "test_calc.py::test_add" not in broken.fails_at_base
    # a record that does not say (SWE-bench's), or a baseline read with other ids: every listed test is scored
    plain = TaskInstance.model_validate(listed)
    assert grade(env, plain, plain.patch).status == EvalStatus.UNRESOLVED
    stale = _env(mirror, msb, test_status=baseline, ids_revision=IDS_REVISION - 1)
    report = grade(stale, msb, msb.patch)
    assert report.status == EvalStatus.UNRESOLVED and report.fails_at_base == {}
