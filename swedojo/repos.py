"""Where repositories come from: a URL, a local path, or a local mirror for machines without network."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
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
            if candidate.is_dir():  # its place in the mirror kept (not its link's target): submodules are looked for beside it
                return candidate.absolute()
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


def checkout(source: Path, commit: str, dest: Path) -> list[str]:
    """Make `dest` a clean work tree of `source` at `commit`, with no history after it; its git
    submodules filled from local repositories where one holds their commit (`fill_submodules`,
    whose notes it returns).

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
    return fill_submodules(source, dest)


def fill_submodules(source: Path, tree: Path) -> list[str]:
    """Check out each git submodule of `tree` (a work tree of `source`) at the commit its superproject
    records, from the first local repository that holds that commit; one note per submodule says
    where from, or where it was looked for. Nothing is fetched from the network: the URL is a key.

    Looked in, in order: `source`'s own `modules/<name>` (a clone made with its submodules); the URL
    itself where it is a path (a relative one against `source`, as git takes it against the remote);
    and beside `source` in a mirror's layout: `<mirror>/<owner>/<name>[.git]` for a URL ending in
    `owner/name`, where `source` is `<mirror>/<owner>/<repo>`.
    """
    listed = _git(tree, "config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$")
    if not (tree / ".gitmodules").is_file() or listed.returncode != 0:
        return []
    fields: dict[str, dict[str, str]] = {}
    for line in listed.stdout.splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key.removeprefix("submodule.").rpartition(".")
        fields.setdefault(name, {})[field] = value.strip()
    notes = []
    for name, found in fields.items():
        path, url = found.get("path", ""), found.get("url", "")
        entry = _git(tree, "ls-tree", "HEAD", "--", path).stdout.split()
        if not path or len(entry) < 3 or entry[1] != "commit":
            continue  # not a gitlink at this commit
        sha = entry[2]
        looked = _submodule_sources(source, name, url)
        holder = next((c for c in looked if c.is_dir() and _git(c, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0),
                      None)
        if holder is None:
            notes.append(f"submodule {path}: no local repository holds {sha[:12]} (looked in "
                         f"{', '.join(map(str, looked)) or 'nothing: its URL names none'}); left empty")
            continue
        where = tree / path
        where.mkdir(parents=True, exist_ok=True)
        steps = [("init", "-q"), ("fetch", "-q", "--no-tags", str(holder), sha),
                 ("-c", "advice.detachedHead=false", "checkout", "-q", sha)]
        failed = next((p for step in steps if (p := _git(where, *step)).returncode != 0), None)
        if failed is not None:
            notes.append(f"submodule {path}: {sha[:12]} from {holder} failed: {failed.stderr.strip()[-200:]}")
            continue
        notes.append(f"submodule {path}: {sha[:12]} from {holder}")
        notes += fill_submodules(holder, where)
    return notes


def _submodule_sources(source: Path, name: str, url: str) -> list[Path]:
    """Local git directories that may hold submodule `name` (see `fill_submodules`), there or not."""
    git_dir = _git(source, "rev-parse", "--absolute-git-dir").stdout.strip()
    candidates = [Path(git_dir) / "modules" / name] if git_dir else []
    parts = [p for p in re.split(r"[/:]", url.rstrip("/")) if p]
    if url.startswith(("./", "../")):
        candidates.append(Path(os.path.normpath(source / url)))
    elif url.startswith(("/", "file://")):
        candidates.append(Path(url.removeprefix("file://")))
    elif len(parts) >= 2 and len(source.parts) >= 3:
        owner, repo = parts[-2], parts[-1].removesuffix(".git")
        mirror = source.parent.parent
        candidates += [mirror / owner / repo, mirror / owner / f"{repo}.git"]
    return list(dict.fromkeys(candidates))


def _git(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=False)


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
