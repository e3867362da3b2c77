"""The bundled demo suite is real: its repos rebuild to the same SHAs and every task validates.

Everything runs for real: git replays the patch series, pytest runs each project's suite in a
temporary clone, and `parse_log` reads the `-rA` summary, as the harness will.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from swedojo.datasets.demo import (
    DEMO_ORG,
    demo_projects,
    load_demo_tasks,
    materialise_demo,
)
from swedojo.schema import TaskInstance
from swedojo.testrun.parsers import parse_log

TASKS = load_demo_tasks()
_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTEST_"))}
_ENV.update(
    GIT_CONFIG_GLOBAL=os.devnull,
    GIT_CONFIG_NOSYSTEM="1",
    PYTHONDONTWRITEBYTECODE="1",
    PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # the demo projects need no plugins; saves ~2 s a run
    TZ="UTC",
)


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=_ENV, input=input, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def heads(mirror: Path) -> dict[str, str]:
    return {name: git(mirror / DEMO_ORG / name, "rev-parse", "HEAD").strip() for name in demo_projects()}


def touched(patch: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.MULTILINE)


def is_test_path(path: str) -> bool:
    return path.startswith("tests/") or Path(path).name.startswith("test_")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return materialise_demo(tmp_path_factory.mktemp("demo-a"))


def test_suite_shape() -> None:
    assert len(demo_projects()) >= 3
    assert len(TASKS) >= 8
    ids = [t.instance_id for t in TASKS]
    assert len(set(ids)) == len(ids)
    for task in TASKS:
        owner, name = task.repo.split("/")
        assert owner == DEMO_ORG and name in demo_projects()
        assert task.instance_id.startswith(f"{DEMO_ORG}__{name}-")
        assert re.fullmatch(r"[0-9a-f]{40}", task.base_commit)
        assert task.FAIL_TO_PASS and task.PASS_TO_PASS
        assert not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS)
        assert task.version == "0.1" and task.created_at
    assert {t.repo.split("/")[1] for t in TASKS} == set(demo_projects())


def test_materialise_is_deterministic_and_cached(mirror: Path, tmp_path: Path) -> None:
    other = materialise_demo(tmp_path / "b")
    assert other != mirror
    assert heads(other) == heads(mirror)
    fmt = "--format=%H %T %an %ad %cn %cd"
    for name in demo_projects():
        assert git(other / DEMO_ORG / name, "log", fmt) == git(mirror / DEMO_ORG / name, "log", fmt)
        assert git(other / DEMO_ORG / name, "status", "--porcelain") == ""
    marker = other / "marker"
    marker.write_text("kept")
    assert materialise_demo(tmp_path / "b") == other and marker.exists()  # built once, then reused


def test_concurrent_builds_agree_and_leave_no_partial_dirs(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        roots = list(pool.map(lambda _: materialise_demo(tmp_path), range(2)))
    assert roots[0] == roots[1]
    assert [p.name for p in tmp_path.iterdir()] == [roots[0].name]
    assert sorted(p.name for p in (roots[0] / DEMO_ORG).iterdir()) == demo_projects()


def test_base_commits_exist(mirror: Path) -> None:
    for task in TASKS:
        repo = mirror / task.repo
        assert git(repo, "cat-file", "-t", task.base_commit).strip() == "commit", task.instance_id


def test_history_has_source_and_test_fix_commit(mirror: Path) -> None:
    for name in demo_projects():
        repo = mirror / DEMO_ORG / name
        commits = git(repo, "rev-list", "--reverse", "HEAD").split()
        assert len(commits) >= 4
        mixed = []
        for sha in commits[1:]:
            files = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split()
            if any(is_test_path(f) for f in files) and any(f.endswith(".py") and not is_test_path(f) for f in files):
                mixed.append(sha)
        assert mixed, f"{name}: no commit changes both source and tests"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.instance_id)
def test_patches_split_source_and_tests(task: TaskInstance) -> None:
    assert touched(task.patch) and not any(is_test_path(p) for p in touched(task.patch))
    assert touched(task.test_patch) and all(is_test_path(p) for p in touched(task.test_patch))
    added = [line[1:].strip() for line in task.patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    leaked = [line for line in added if len(line) >= 8 and line in task.problem_statement]
    assert not leaked, f"problem statement contains the fix: {leaked}"


def run_tests(work: Path, node_ids: list[str] | None = None) -> dict[str, bool]:
    """Run the project's suite (or just `node_ids`, as the grader does) and read `-rA` results."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *(node_ids or [])],
        cwd=work, env=_ENV, capture_output=True, text=True, timeout=300, check=False,
    )
    results = parse_log("pytest", proc.stdout)
    assert results, f"no test results parsed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return {test: status.counts_as_pass for test, status in results.items()}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.instance_id)
def test_task_validates(task: TaskInstance, mirror: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    git(tmp_path, "clone", "--quiet", "--no-checkout", str(mirror / task.repo), str(work))
    git(work, "-c", "advice.detachedHead=false", "checkout", "--quiet", task.base_commit)

    git(work, "apply", "-", input=task.test_patch)
    before = run_tests(work)
    still_passing = [t for t in task.FAIL_TO_PASS if before.get(t, False)]
    assert not still_passing, f"FAIL_TO_PASS already pass with only the test patch: {still_passing}"
    broken = [t for t in task.PASS_TO_PASS if not before.get(t, False)]
    assert not broken, f"PASS_TO_PASS not passing before the fix: {broken}"

    assert set(before) == set(task.FAIL_TO_PASS) | set(task.PASS_TO_PASS), "test lists miss some of the suite"

    git(work, "apply", "-", input=task.patch)
    after = run_tests(work, task.FAIL_TO_PASS + task.PASS_TO_PASS)  # the ids must round-trip on a command line
    failing = [t for t in task.FAIL_TO_PASS + task.PASS_TO_PASS if not after.get(t, False)]
    assert not failing, f"not passing with the gold patch: {failing}"
