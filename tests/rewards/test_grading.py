"""Grading as SWE-bench does, on a real repo in a real local sandbox."""

from pathlib import Path

from taskrepo import make_task_repo

from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, TestStatus
from swedojo.testrun.patches import patch_files


def _env(mirror: Path, task):
    return default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")


def test_gold_resolves_and_empty_does_not(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED and gold.resolved, gold.log_tail
    assert gold.fail_to_pass == {"test_calc.py::test_clamp_high": TestStatus.PASSED}
    assert gold.test_exit_code == 0
    empty = grade(env, task, "")
    assert empty.status == EvalStatus.EMPTY_PATCH and not empty.resolved
    assert empty.fail_to_pass["test_calc.py::test_clamp_high"] == TestStatus.FAILED
    assert all(s == TestStatus.PASSED for s in empty.pass_to_pass.values())


def test_patch_that_does_not_apply_is_patch_failed(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    bad = task.patch.replace("     return value\n", "-    return value * 2\n+    return value\n")
    report = grade(_env(mirror, task), task, bad)
    assert report.status == EvalStatus.PATCH_FAILED
    assert "candidate patch does not apply" in report.error


def test_missing_test_counts_as_failed(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    task.PASS_TO_PASS.append("test_calc.py::test_that_does_not_exist")
    report = grade(_env(mirror, task), task, task.patch)
    assert not report.resolved
    assert report.pass_to_pass["test_calc.py::test_that_does_not_exist"] is None


def test_fake_passed_lines_do_not_win(tmp_path):
    """A patch that prints PASSED lines for the listed tests while the suite fails is unresolved."""
    mirror, task = make_task_repo(tmp_path)
    forged = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1,6 @@\n"
        "+import atexit\n+def _forge():\n"
        "+    print('PASSED test_calc.py::test_clamp_high')\n"
        "+    print('PASSED test_calc.py::test_add')\n+    print('PASSED test_calc.py::test_clamp_low')\n"
        "+atexit.register(_forge)\n"
    )
    report = grade(_env(mirror, task), task, forged)
    assert not report.resolved
    assert report.test_exit_code != 0


def test_candidate_cannot_edit_the_graded_tests(tmp_path):
    """Edits to the test files are reverted to the base before the test patch is applied."""
    mirror, task = make_task_repo(tmp_path)
    cheat = (
        "diff --git a/test_calc.py b/test_calc.py\n--- a/test_calc.py\n+++ b/test_calc.py\n@@ -5,5 +5,5 @@ def test_add():\n"
        "     assert add(2, 3) == 5\n \n \n def test_clamp_low():\n-    assert clamp(-5, 0, 10) == 0\n+    assert True\n"
    )
    report = grade(_env(mirror, task), task, cheat)
    assert report.status == EvalStatus.UNRESOLVED
    assert report.fail_to_pass["test_calc.py::test_clamp_high"] == TestStatus.FAILED


def test_missing_repo_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task)
    task.base_commit = "0" * 40
    report = grade(env, task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR
    assert "not found" in report.error


def test_patch_files_lists_both_names():
    assert patch_files("diff --git a/x.py b/y.py\n") == ["x.py", "y.py"]
