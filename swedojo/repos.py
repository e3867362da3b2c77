"""Where repositories come from: a URL, a local path, or a local mirror for machines without network."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
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
    raise RepoNotFoundError(f"{repo}: no such repository{_mirror_layout(repo, mirror) if mirror else ''}")


def _mirror_layout(repo: str, mirror: Path) -> str:
    """Why `mirror` did not have `repo`, naming the layout it must have: `MIRROR/owner/name[.git]`."""
    owner, _, name = repo.rpartition("/")
    wanted = "--mirror wants one directory per repository at MIRROR/owner/name or MIRROR/owner/name.git"
    if not mirror.is_dir():
        return f" (mirror {mirror} is not a directory; {wanted})"
    flat = [p for p in (mirror / name, mirror / f"{name}.git", mirror / f"{owner}__{name}") if name and p.is_dir()]
    found = f", but {flat[0]} is there: move it to {mirror / owner / name}" if flat and owner else ""
    return f" (looked for {mirror / repo} and {mirror / repo}.git; {wanted}{found})"


def cache_root() -> Path:
    """Where what is made once is kept (checkouts, stand-in markers): `$SWEDOJO_CACHE`, else ~/.cache/swedojo."""
    return Path(os.environ["SWEDOJO_CACHE"]) if "SWEDOJO_CACHE" in os.environ else Path.home() / ".cache" / "swedojo"


def checkout(source: Path, commit: str, dest: Path) -> None:
    """Make `dest` a clean work tree of `source` at `commit`, with no history after it.

    The clone keeps only what `commit` reaches: no remote, no other branches, and of the tags only
    the nearest one it reaches (version tools such as setuptools_scm read the version from it; an
    ancestor's tag says nothing about the future), so a future fix cannot leak into the environment.

    Fetching a long history costs half a minute on a large repository (the receiving side resolves
    every delta), so each (commit, nearest tag) is fetched once into the checkout cache and copied
    from there: the key is content, so any mirror of the same history shares it.
    """
    source = Path(source).absolute()
    git_in_source = lambda *args: subprocess.run(
        ["git", "-C", str(source), *args], capture_output=True, text=True, check=False)
    resolved = git_in_source("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if resolved.returncode != 0:
        raise CommitNotFoundError(f"{source}: commit {commit} not found")
    sha = resolved.stdout.strip()
    nearest = git_in_source("describe", "--tags", "--abbrev=0", "--match", "*[0-9]*", sha).stdout.strip()
    tagged = git_in_source("rev-parse", f"refs/tags/{nearest}").stdout.strip() if nearest else ""
    cache = cache_root() / "checkouts"  # by content: commit and nearest tag
    entry = cache / hashlib.sha256(f"{sha}\0{nearest}\0{tagged}".encode()).hexdigest()[:24]
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{entry.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch per entry; other workers wait and copy
        if not entry.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=cache))
            try:
                _fetch(source, sha, nearest, staging / "repo")
                (cache / f"{entry.name}.size").write_text(str(_size(staging / "repo")))
                os.replace(staging / "repo", entry)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        os.utime(entry)  # recently used
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(entry, dest, symlinks=True, dirs_exist_ok=True)
    _evict(cache, keep=entry)


def _fetch(source: Path, sha: str, nearest: str, dest: Path) -> None:
    """The checkout itself: `sha` with its history and the `nearest` tag, nothing else."""
    dest.mkdir(parents=True)
    run = lambda *args: subprocess.run(
        ["git", *args], cwd=dest, capture_output=True, text=True, check=False
    )
    tag = [f"refs/tags/{nearest}:refs/tags/{nearest}"] if nearest else []
    proc = run("init", "-q")
    if proc.returncode != 0:
        raise RepoNotFoundError(f"{source}: {proc.stderr.strip()}")
    proc = run("fetch", "-q", "--no-tags", str(source), sha, *tag)
    if proc.returncode != 0 and "unable to read" in proc.stderr:
        # The source lacks objects of older history (a partial mirror): the commit's own tree,
        # without its history, is still the commit.
        proc = run("fetch", "-q", "--depth=1", "--no-tags", str(source), sha, *tag)
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        raise CommitNotFoundError(f"{source}: commit {sha} not found ({err[-1] if err else 'git failed'})")
    for step in (
        ("-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"),
        ("config", "user.email", "sandbox@swedojo.invalid"),
        ("config", "user.name", "swedojo"),
    ):
        proc = run(*step)
        if proc.returncode != 0:
            raise RepoNotFoundError(f"{source}: {proc.stderr.strip()}")


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _evict(cache: Path, keep: Path) -> None:
    """Remove the least recently used entries while the cache is over its bound
    (`$SWEDOJO_CHECKOUT_CACHE_GB`, default 16; each size was noted when it was made); an entry
    being copied from stays."""
    bound = float(os.environ.get("SWEDOJO_CHECKOUT_CACHE_GB", "16")) * 2**30
    entries = sorted((e for e in cache.iterdir() if e.is_dir() and not e.name.startswith(".")),
                     key=lambda e: e.stat().st_mtime)
    sizes = {e: int(n) if (n := _read(cache / f"{e.name}.size")).isdigit() else _size(e) for e in entries}
    total = sum(sizes.values())
    for entry in entries:
        if total <= bound:
            break
        if entry == keep:
            continue
        with open(cache / f"{entry.name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use
            shutil.rmtree(entry, ignore_errors=True)
            (cache / f"{entry.name}.size").unlink(missing_ok=True)
            total -= sizes[entry]


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
