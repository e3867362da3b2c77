"""A suite whose `pytest -rA` log is over 1 MB, far past the terminal's 64 KB output cap: grading,
the reward tiers and launch validation each find every test in it."""

from __future__ import annotations

from pathlib import Path

import pytest
from taskrepo import git, source_patch, write_tree

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.validate import validate
from swedojo.rewards.grading import grade
from swedojo.rewards.score import score
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, ExitStatus, TaskInstance, TestStatus, Trajectory

COUNT = 6000
PAD = "x" * 170
BUGGY = "def double(x):\n    return x + x + 1\n"
FIXED = "def double(x):\n    return x + x\n"
MANY = f"""import pytest


@pytest.mark.parametrize("i", range({COUNT}), ids=[f"{{i:05d}}-{PAD}" for i in range({COUNT})])
def test_case(i):
    assert i >= 0
"""
FIX_TEST = "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
IDS = [f"test_many.py::test_case[{i:05d}-{PAD}]" for i in range(COUNT)]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TaskInstance]:
    root = tmp_path_factory.mktemp("big")
    repo = write_tree(root / "owner" / "big", {"calc.py": BUGGY, "test_many.py": MANY})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a large suite")
    test_patch = source_patch("test_calc.py", "", FIX_TEST).replace(
        "--- a/test_calc.py", "new file mode 100644\n--- /dev/null")
    task = TaskInstance(
        instance_id="owner__big-1", repo="owner/big", base_commit=git(repo, "rev-parse", "HEAD"),
        patch=source_patch("calc.py", BUGGY, FIXED), test_patch=test_patch, problem_statement="double() is off by one",
        FAIL_TO_PASS=["test_calc.py::test_double"], PASS_TO_PASS=IDS,
    )
    return repo, task


def _env(repo: Path, task: TaskInstance):
    return default_python_env(task.repo, task.base_commit, repo, "local")


def test_grading_finds_every_listed_test_in_a_log_over_1_mb(big) -> None:
    repo, task = big
    report = grade(_env(repo, task), task, task.patch)
    assert report.status == EvalStatus.RESOLVED, report.error or report.log_tail
    assert report.fail_to_pass == {"test_calc.py::test_double": TestStatus.PASSED}
    assert len(report.pass_to_pass) == COUNT and all(s == TestStatus.PASSED for s in report.pass_to_pass.values())
    empty = grade(_env(repo, task), task, "")
    assert empty.fail_to_pass == {"test_calc.py::test_double": TestStatus.FAILED}
    assert all(s == TestStatus.PASSED for s in empty.pass_to_pass.values())


def test_tier_3_watches_every_other_test_of_a_log_over_1_mb(big) -> None:
    repo, task = big
    fewer = task.model_copy(update={"PASS_TO_PASS": IDS[:10]})  # the other 5990 are tier 3's to watch
    trajectory = Trajectory(instance_id=task.instance_id, policy="gold", patch=task.patch, exit_status=ExitStatus.SUBMITTED)
    report = score(_env(repo, task), fewer, trajectory)
    assert report.status == EvalStatus.RESOLVED, report.error
    verification = report.tiers[3]
    assert verification.passed and verification.evidence["other_tests_passing_at_base"] == COUNT - 10
    assert verification.evidence["still_passing"] == COUNT - 10 and verification.evidence["regressed_count"] == 0


def test_launch_validation_keeps_every_test_of_a_log_over_1_mb(big, tmp_path: Path) -> None:
    repo, task = big
    env = _env(repo, task)
    log = BuildLog(tmp_path / "build.log")
    with env.open(task.base_commit) as sandbox:
        baseline = validate(sandbox, env.spec, log, runs=1)
    assert len(baseline.test_status) == COUNT
    assert all(baseline.test_status[t] == TestStatus.PASSED for t in IDS)
    assert baseline.count_problems == [[]]  # the framework's own total agrees with what was parsed
    assert (tmp_path / "build.log").stat().st_size > 1_000_000
