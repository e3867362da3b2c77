"""What every generator shares: the generated repo, the environment, test runs and validation."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from swedojo.rewards.grading import grade
from swedojo.sandboxes.environment import Environment
from swedojo.schema import EnvSpec, EvalStatus, TaskInstance
from swedojo.testrun.run import SuiteRun, passed

T = TypeVar("T")
GEN_IDENTITY = ("swedojo gen", "gen@swedojo.invalid")
"""Author and committer of task commits; with fixed dates it makes their SHAs reproducible."""
_TEST_DIRS = {"tests", "test", "testing"}
_DOC_SUFFIXES = {".md", ".rst", ".txt", ".adoc"}
_DOC_NAMES = re.compile(r"^(readme|changelog|changes|history|news|license|licence|authors|contributing)\b", re.I)


class GitError(RuntimeError):
    """A git command failed."""


def git_bytes(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    """Run git in `repo` with no user or system config, so results do not depend on the machine."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    full_env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C", TZ="UTC", **(env or {}))
    proc = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, env=full_env, check=False)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])} in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def git(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> str:
    """`git_bytes` decoded as text."""
    return git_bytes(repo, *args, data=data, env=env).decode("utf-8", errors="replace")


def has_commit(repo: Path, sha: str) -> bool:
    """Whether `repo` already holds `sha` (so a resumed run does not fetch again)."""
    try:
        git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
    except GitError:
        return False
    return True


def is_test_file(path: str) -> bool:
    """Test files go into `test_patch`: tests/ dirs, test_*.py, *_test.py, conftest.py."""
    parts = path.split("/")
    name = parts[-1]
    return (bool(_TEST_DIRS & set(parts[:-1])) or name == "conftest.py"
            or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))))


def is_doc_file(path: str) -> bool:
    """Documentation: changing only these does not make a bug fix."""
    parts = path.split("/")
    return parts[0] in ("docs", "doc") or Path(path).suffix.lower() in _DOC_SUFFIXES or bool(_DOC_NAMES.match(parts[-1]))


class Target(BaseModel):
    """The repository a `gen` run works on and where its outputs go."""

    repo: str
    """`owner/name`, as the suite records it."""
    source: Path
    """The original repository."""
    out: Path
    """Output directory (`suite.jsonl`, `repos/`, `envspecs/`, `journal/`, `yield.json`)."""

    @property
    def slug(self) -> str:
        return self.repo.replace("/", "__")

    @property
    def repo_dir(self) -> Path:
        """The generated repo: the original history plus one branch per mutation task."""
        return self.out / "repos" / self.repo


_REMOTE_URL = re.compile(r"^(?:(?:https?|ssh|git)://(?:[^@/]+@)?[^/]+/|[\w.-]+@[\w.-]+:)(?P<path>[^:]+?)(?:\.git)?/*$")
"""An https, ssh or git URL (`https://github.com/o/n.git`, `ssh://git@host:22/o/n`), or scp-like `git@host:o/n.git`."""


def remote_name(source: Path) -> str | None:
    """`owner/name` from the URL of `source`'s `origin` remote; None without one, or for a local path."""
    try:
        url = git(source, "config", "--get", "remote.origin.url").strip()
    except GitError:
        return None
    match = _REMOTE_URL.match(url)
    parts = match["path"].strip("/").split("/") if match else []
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def repo_name(repo: str, source: Path) -> str:
    """`owner/name` for a repo given as `owner/name`, else as its `origin` remote names it (a clone's
    directory says nothing of its project: `~/src/checkout`), else the path's last two directories."""
    if re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and not Path(repo).is_dir():
        return repo.removesuffix(".git")
    return remote_name(source) or f"{source.parent.name}/{source.name.removesuffix('.git')}"


def prepare_repo(target: Target, commits: list[str]) -> Path:
    """Make (or reuse) the generated repo as a bare clone of the source holding `commits`."""
    dest = target.repo_dir
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        git(dest.parent, "clone", "-q", "--bare", "--no-hardlinks", str(target.source), dest.name)
    missing = [c for c in commits if not has_commit(dest, c)]
    if missing:
        git(dest, "fetch", "-q", "--no-tags", str(target.source), *missing)
    return dest


def commit_files(repo: Path, parent: str, files: dict[str, bytes], message: str, branch: str) -> str:
    """Commit `parent`'s tree with `files` (path -> new content) as a root commit; returns the SHA.

    A root commit, not a child of `parent`: with the clean code one `git diff HEAD~1` away, an
    agent could read the fix out of history. Identity and date are fixed (the parent's date), so
    the same content always gives the same SHA.
    """
    date = git(repo, "show", "-s", "--format=%cI", parent).strip()
    with tempfile.TemporaryDirectory(prefix="swedojo-gen-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, env=env)
        for path, data in sorted(files.items()):
            blob = git(repo, "hash-object", "-w", "--stdin", data=data).strip()
            mode = git(repo, "ls-tree", parent, "--", path).split(" ", 1)[0] or "100644"
            git(repo, "update-index", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    who = {"GIT_AUTHOR_NAME": GEN_IDENTITY[0], "GIT_AUTHOR_EMAIL": GEN_IDENTITY[1], "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": GEN_IDENTITY[0], "GIT_COMMITTER_EMAIL": GEN_IDENTITY[1], "GIT_COMMITTER_DATE": date}
    sha = git(repo, "commit-tree", tree, "-m", message, env=who).strip()
    git(repo, "update-ref", f"refs/heads/{branch}", sha)
    return sha


def diff(repo: Path, old: str, new: str, paths: list[str]) -> str:
    """`git diff old new -- paths` as a patch that `git apply` takes."""
    if not paths:
        return ""
    return git(repo, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary", old, new, "--", *paths)


def write_envspec(target: Target, spec: EnvSpec) -> None:
    """`out/envspecs/<owner>__<name>-<commit>.json`: the environment a group of tasks was validated in."""
    path = target.out / "envspecs" / f"{target.slug}-{spec.commit[:12]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.model_dump_json(indent=1))


def flaky_between(a: SuiteRun, b: SuiteRun) -> set[str]:
    """Tests whose outcome (passed or not) differs between two runs of the same state."""
    return {t for t in set(a.statuses) | set(b.statuses) if a.passed(t) != b.passed(t)}


class InvalidTaskError(Exception):
    """The generated task failed end-to-end validation (gold must resolve, empty must not)."""


def prove_task(env: Environment, instance: TaskInstance) -> None:
    """Prove the task in fresh sandboxes: the gold patch resolves it and the empty patch does not.

    The empty patch is graded on FAIL_TO_PASS alone: one of them failing is what "not resolved"
    means, and on a real suite PASS_TO_PASS is nearly all of it, a whole run more per task.
    """
    gold = grade(env, instance, instance.patch)
    if not gold.resolved:
        failing = [t for t, s in {**gold.fail_to_pass, **gold.pass_to_pass}.items() if not passed(s)]
        raise InvalidTaskError(f"gold patch: {gold.status.value} {gold.error} {failing[:3]}".strip())
    empty = grade(env, instance.model_copy(update={"PASS_TO_PASS": []}), "")
    if empty.resolved or empty.status == EvalStatus.INFRA_ERROR:
        raise InvalidTaskError(f"empty patch: {empty.status.value} {empty.error}".strip())


def in_order(pool: ThreadPoolExecutor, width: int, jobs: Iterator[T | Callable[[], T]],
             may_start: Callable[[], bool], drop: Callable[[T], None]) -> Iterator[tuple[T, bool]]:
    """Results of `jobs` in their order, up to `width` of them worked on at once: (result, new).

    A job is a result already known (replayed from a journal) or a callable run on `pool`. No new
    job starts once `may_start()` says no. Results still in flight when the caller stops go to
    `drop`, so what a run keeps never depends on how many workers it had.
    """
    pending: deque[Future[T] | tuple[T]] = deque()
    stopped = False
    try:
        while True:
            while not stopped and sum(isinstance(p, Future) for p in pending) < width:
                job = next(jobs, None)
                if job is None or (callable(job) and not may_start()):
                    stopped = True
                else:
                    pending.append(pool.submit(job) if callable(job) else (job,))
            if not pending:
                return
            item = pending.popleft()
            yield (item.result(), True) if isinstance(item, Future) else (item[0], False)
    finally:
        for item in pending:
            if isinstance(item, Future):
                drop(item.result())
