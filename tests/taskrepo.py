"""A small real git repository with one task (gold patch, test patch, F2P/P2P), made in the test."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

from swedojo.schema import TaskInstance

SOURCE = '''\
def add(a, b):
    return a + b


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return value
'''

TESTS = '''\
from calc import add, clamp


def test_add():
    assert add(2, 3) == 5


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0
'''

GOLD = '''\
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -6,4 +6,6 @@ def clamp(value, low, high):
     \"\"\"Limit value to [low, high].\"\"\"
     if value < low:
         return low
+    if value > high:
+        return high
     return value
'''

TEST_PATCH = '''\
diff --git a/test_calc.py b/test_calc.py
--- a/test_calc.py
+++ b/test_calc.py
@@ -8,3 +8,7 @@ def test_add():
 
 def test_clamp_low():
     assert clamp(-5, 0, 10) == 0
+
+
+def test_clamp_high():
+    assert clamp(50, 0, 10) == 10
'''


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (relative path -> text) under `root`; returns `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_task_repo(root: Path, name: str = "calc") -> tuple[Path, TaskInstance]:
    """`root/owner/<name>` holds a repo whose HEAD has a clamp bug; returns (mirror root, task)."""
    repo = root / "owner" / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text(SOURCE)
    (repo / "test_calc.py").write_text(TESTS)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with clamp")
    task = TaskInstance(
        instance_id=f"owner__{name}-1", repo=f"owner/{name}", base_commit=git(repo, "rev-parse", "HEAD"),
        patch=GOLD, test_patch=TEST_PATCH, problem_statement="clamp() ignores the upper bound",
        FAIL_TO_PASS=["test_calc.py::test_clamp_high"],
        PASS_TO_PASS=["test_calc.py::test_add", "test_calc.py::test_clamp_low"],
    )
    return root, task


def source_patch(path: str, before: str, after: str) -> str:
    """A git-style diff that turns `before` into `after` in `path`, for crafting candidate patches."""
    hunks = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(hunks)
