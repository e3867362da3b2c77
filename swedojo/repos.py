"""Where repositories come from: a URL, a local path, or a local mirror for machines without network."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import git


class RepoNotFoundError(Exception):
    """The repository could not be found or cloned."""


class CommitNotFoundError(Exception):
    """The repository has no such commit."""


def _looks_like_url(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


def resolve_repo(repo: str, mirror: Path | None = None, cache_dir: Path | None = None) -> Path:
    """Return a local git directory (bare or not) holding `repo`.

    `repo` may be a local path, a URL (cloned once into `cache_dir`), or `owner/name`, looked up
    as `mirror/owner/name` or `mirror/owner/name.git`.
    """
    if mirror is not None and not _looks_like_url(repo):
        for candidate in (mirror / repo, mirror / f"{repo}.git"):
            if candidate.is_dir():
                return candidate.resolve()
    path = Path(repo).expanduser()
    if path.is_dir():
        if not (path / ".git").exists() and not (path / "HEAD").is_file():
            raise RepoNotFoundError(f"{repo}: directory is not a git repository")
        return path.resolve()
    if _looks_like_url(repo):
        cache = (cache_dir or Path.home() / ".cache" / "swedojo" / "repos").expanduser()
        target = cache / hashlib.sha256(repo.encode()).hexdigest()[:16]
        if not target.exists():
            try:
                git.Repo.clone_from(repo, target, bare=True)
            except git.GitCommandError as exc:
                raise RepoNotFoundError(f"{repo}: clone failed: {exc.stderr.strip()}") from exc
        return target
    where = f" (looked in mirror {mirror})" if mirror else ""
    raise RepoNotFoundError(f"{repo}: no such repository{where}")


def checkout(source: Path, commit: str, dest: Path) -> None:
    """Make `dest` a clean work tree of `source` at `commit`, with no history after it.

    The clone keeps only what `commit` reaches: no remote, no other branches, and of the tags only
    the nearest one it reaches (version tools such as setuptools_scm read the version from it; an
    ancestor's tag says nothing about the future), so a future fix cannot leak into the environment. git runs in `dest`, so a relative `source` is made
    absolute first (it is relative to where we are, not to `dest`).
    """
    source = Path(source).absolute()
    dest.mkdir(parents=True, exist_ok=True)
    run = lambda *args: subprocess.run(  # noqa: E731
        ["git", *args], cwd=dest, capture_output=True, text=True, check=False
    )
    nearest = subprocess.run(["git", "-C", str(source), "describe", "--tags", "--abbrev=0", "--match", "*[0-9]*",
                              f"{commit}^{{commit}}"], capture_output=True, text=True, check=False).stdout.strip()
    tag = [f"refs/tags/{nearest}:refs/tags/{nearest}"] if nearest else []
    steps = [
        ("init", "-q"),
        ("fetch", "-q", "--no-tags", str(source), commit, *tag),
    ]
    for step in steps:
        proc = run(*step)
        if proc.returncode != 0:
            err = proc.stderr.strip().splitlines()
            msg = err[-1] if err else "git failed"
            if step[0] == "fetch":
                raise CommitNotFoundError(f"{source}: commit {commit} not found ({msg})")
            raise RepoNotFoundError(f"{source}: {msg}")
    for step in (
        ("-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"),
        ("config", "user.email", "sandbox@swedojo.invalid"),
        ("config", "user.name", "swedojo"),
    ):
        proc = run(*step)
        if proc.returncode != 0:
            raise RepoNotFoundError(f"{source}: {proc.stderr.strip()}")
