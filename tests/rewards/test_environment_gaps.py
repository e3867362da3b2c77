"""A listed test the environment cannot run for want of a module is never the patch's failure:
graded on a real repo in real sandboxes, the reference patch of such a task is `not_scorable`, with
the evidence, and a candidate cannot make a test skip itself out of scoring."""

from __future__ import annotations

import pytest
from taskrepo import SOURCE, git, make_task_repo, source_patch, write_tree

from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, TestStatus

ABSENT = "swedojo_absent_dep"
"""A module no environment has."""

OPTIONAL = f'''import pytest

pytest.importorskip("{ABSENT}")


def test_uses_dep():
    assert True
'''
"""A test file skipped as a whole where its optional dependency is missing."""

MARKED = f'''import importlib.util

import pytest

HAS_DEP = importlib.util.find_spec("{ABSENT}") is not None


@pytest.mark.skipif(not HAS_DEP, reason="requires {ABSENT}")
def test_marked():
    assert True


def test_plain():
    assert True
'''
"""One test skipped for the optional dependency, one that runs."""

FIXED = SOURCE.replace("    return value\n", "    if value > high:\n        return high\n    return value\n")
GAPS = {"test_optional.py::test_uses_dep", "test_marks.py::test_marked"}


def new_file(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}" for line in lines))


def _env(mirror, task, backend: str = "local", verbose: bool = False):
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), backend)
    if verbose:  # as launched environments run pytest: each skipped test on a line with its reason
        env.spec.test_command += " -v"
    return env


def _task_with_optional_tests(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    task.test_patch += new_file("test_optional.py", OPTIONAL) + new_file("test_marks.py", MARKED)
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, *sorted(GAPS), "test_marks.py::test_plain"]
    return mirror, task


@pytest.mark.parametrize(("backend", "verbose"), [
    ("local", False), ("local", True), pytest.param("docker", True, marks=pytest.mark.docker)])
def test_the_reference_patch_is_not_scorable_where_listed_tests_lack_a_module(tmp_path, backend, verbose):
    mirror, task = _task_with_optional_tests(tmp_path)
    env = _env(mirror, task, backend, verbose)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.NOT_SCORABLE, (gold.status, gold.error, gold.log_tail)
    assert not gold.resolved and gold.reward == 0.0
    assert set(gold.environment_gaps) == GAPS
    assert all(why.startswith(f"{ABSENT}: ") for why in gold.environment_gaps.values()), gold.environment_gaps
    assert gold.environment_gaps["test_marks.py::test_marked"] == f"{ABSENT}: requires {ABSENT}"
    assert f"No module named '{ABSENT}'" in gold.environment_gaps["test_optional.py::test_uses_dep"]
    assert ABSENT in gold.error and gold.error.startswith("2 listed tests cannot run") and "\n" not in gold.error
    assert gold.fail_to_pass == {"test_calc.py::test_clamp_high": TestStatus.PASSED}  # the fix itself works
    assert gold.pass_to_pass["test_marks.py::test_plain"] == TestStatus.PASSED
    # No candidate is scored on such a task, right or wrong; the empty patch stays what it is.
    assert grade(env, task, source_patch("calc.py", SOURCE, FIXED)).status == EvalStatus.NOT_SCORABLE
    wrong = grade(env, task, source_patch("calc.py", SOURCE, SOURCE.replace("a + b", "a - b")))
    assert wrong.status == EvalStatus.NOT_SCORABLE and set(wrong.environment_gaps) == GAPS and wrong.reward == 0.0
    empty = grade(env, task, "")
    assert empty.status == EvalStatus.EMPTY_PATCH and empty.environment_gaps == {}


def test_a_skip_naming_a_module_the_environment_has_or_the_repository_provides_is_the_patchs(tmp_path):
    """`requires json` (installed) and `requires srcpkg` (the repository's own, under src/, not on
    the path) name no gap of the environment: the skipped tests count as failed, as they always did."""
    mirror, task = make_task_repo(tmp_path)
    repo = mirror / "owner" / "calc"
    write_tree(repo, {"src/srcpkg/__init__.py": "VALUE = 1\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a package under src")
    task.base_commit = git(repo, "rev-parse", "HEAD")
    skipping = ('import pytest\n\n\n@pytest.mark.skipif(True, reason="requires json")\ndef test_json():\n    pass\n\n\n'
                '@pytest.mark.skipif(True, reason="requires srcpkg")\ndef test_srcpkg():\n    pass\n')
    task.test_patch += new_file("test_installed.py", skipping)
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, "test_installed.py::test_json", "test_installed.py::test_srcpkg"]
    gold = grade(_env(mirror, task, verbose=True), task, task.patch)
    assert gold.status == EvalStatus.UNRESOLVED and gold.environment_gaps == {}, (gold.status, gold.error)
    assert gold.pass_to_pass["test_installed.py::test_json"] == TestStatus.SKIPPED


SKIP_ITSELF = f'''

def _optional():
    import pytest

    pytest.skip("requires {ABSENT}")
'''
"""What a candidate adds to make a test that calls it skip, naming a module the environment lacks."""


def test_a_candidate_cannot_make_a_listed_test_skip_itself_out_of_scoring(tmp_path):
    """The reference patch runs test_add; a candidate that fixes clamp but makes add skip "for want
    of" a missing module is unresolved: only tests the reference cannot run either are gaps."""
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task, verbose=True)
    cheat = source_patch("calc.py", SOURCE, FIXED.replace("    return a + b\n", "    _optional()\n    return a + b\n")
                         + SKIP_ITSELF)
    report = grade(env, task, cheat)
    assert report.pass_to_pass["test_calc.py::test_add"] == TestStatus.SKIPPED, report.log_tail
    assert f"test_calc.py::test_add SKIPPED (requires {ABSENT})" in report.test_output
    assert report.status == EvalStatus.UNRESOLVED and report.environment_gaps == {}, (report.status, report.error)
    assert not report.resolved and report.reward == 0.0
    assert grade(env, task, task.patch).status == EvalStatus.RESOLVED


def test_a_candidate_importing_what_no_environment_has_is_unresolved_not_infra_error(tmp_path):
    """`import {ABSENT}` added to the source fails collection with "No module named": were that the
    environment's failure (infra_error, left out of exports and retried), a policy would learn to
    escape a zero reward by it. The reference patch's run imports everything: it is the candidate's."""
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task, verbose=True)
    report = grade(env, task, source_patch("calc.py", SOURCE, f"import {ABSENT}\n" + FIXED))
    assert report.missing_modules == [ABSENT], report.log_tail
    assert report.status == EvalStatus.UNRESOLVED and report.reward == 0.0, (report.status, report.error)
    assert "the reference patch's run does not" in report.error


def test_scored_on_every_tier_a_not_scorable_report_earns_nothing_and_has_no_tiers(tmp_path):
    """Partial credit (format, static) would make a 0.0-or-more reward of no verdict: none is given."""
    from swedojo.rewards.compose import RewardConfig, RewardMode
    from swedojo.rewards.score import score
    from swedojo.schema import ExitStatus, Trajectory

    mirror, task = _task_with_optional_tests(tmp_path)
    trajectory = Trajectory(instance_id=task.instance_id, policy="crafted", patch=source_patch("calc.py", SOURCE, FIXED),
                            exit_status=ExitStatus.SUBMITTED)
    report = score(_env(mirror, task), task, trajectory, RewardConfig(mode=RewardMode.PARTIAL))
    assert report.status == EvalStatus.NOT_SCORABLE and set(report.environment_gaps) == GAPS, report.error
    assert report.reward == 0.0 and report.tiers == []


LEGACY = "from collections import Mapping\n\n\ndef test_mapping():\n    assert Mapping\n"
"""A test file written for an interpreter older than the environment's: it cannot be collected."""


def test_a_listed_test_file_the_environment_cannot_collect_with_the_reference_patch_either_is_not_scorable(tmp_path):
    """Gold was graded unresolved where the environment's interpreter could not import a listed
    test file (a name the standard library has since dropped): no patch can make it run there. A
    candidate whose own change keeps a file from being collected stays unresolved."""
    mirror, task = make_task_repo(tmp_path)
    task.test_patch += new_file("test_legacy.py", LEGACY)
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, "test_legacy.py::test_mapping"]
    env = _env(mirror, task, verbose=True)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.NOT_SCORABLE, (gold.status, gold.error, gold.log_tail)
    assert list(gold.environment_gaps) == ["test_legacy.py::test_mapping"]
    assert gold.environment_gaps["test_legacy.py::test_mapping"].startswith(
        "not collected: test_legacy.py: ImportError: cannot import name 'Mapping' from 'collections'")
    assert gold.error.startswith("1 listed test cannot run in this environment, with the reference patch too: "
                                 "not collected: test_legacy.py: "), gold.error
    wrong = grade(env, task, source_patch("calc.py", SOURCE, SOURCE.replace("a + b", "a - b")))
    assert wrong.status == EvalStatus.NOT_SCORABLE and wrong.reward == 0.0
    task.test_patch = task.test_patch.replace(new_file("test_legacy.py", LEGACY), "")
    task.PASS_TO_PASS.remove("test_legacy.py::test_mapping")
    task.test_patch += new_file("test_extra.py", "from calc import add\n\n\ndef test_extra():\n    assert add(1, 1) == 2\n")
    task.PASS_TO_PASS.append("test_extra.py::test_extra")
    broken = grade(env, task, source_patch("calc.py", SOURCE, FIXED.replace("def add(", "def plus(")))
    assert broken.status == EvalStatus.UNRESOLVED and broken.environment_gaps == {}, (broken.status, broken.error)
