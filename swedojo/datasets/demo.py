"""The bundled suites: `demo` (small pure-Python projects) and `web-demo` (front-end pages judged
in a browser), each a set of projects with real histories and tasks over them.

The projects ship as `git format-patch` series rather than git repositories, so they fit in the
package data and diff well in review. `materialise_demo` replays them with fixed identities, dates
and no user git config, which yields the same commit SHAs on every machine; that is what lets
`tasks.jsonl` name real `base_commit`s.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from swedojo.schema import TaskInstance

__all__ = ["DEMO", "DEMO_DIR", "DEMO_ORG", "WEB_DEMO", "Bundle", "demo_projects", "load_demo_tasks", "materialise_demo"]


@dataclass(frozen=True)
class Bundle:
    """A bundled suite: `<directory>/projects/<project>/*.patch` and `<directory>/tasks.jsonl`."""

    directory: Path
    org: str
    """Owner part of every task's `repo` (`<org>/<project>`)."""

    @property
    def projects(self) -> Path:
        return self.directory / "projects"

    @property
    def tasks(self) -> Path:
        return self.directory / "tasks.jsonl"


_BUNDLED = Path(__file__).resolve().parent / "bundled"
DEMO = Bundle(_BUNDLED / "demo", "swedojo-demo")
"""Small pure-Python projects graded by their tests."""
WEB_DEMO = Bundle(_BUNDLED / "web-demo", "swedojo-web")
"""Front-end pages (slides, a form, a responsive layout, interactive lists) judged in a browser."""
DEMO_ORG = DEMO.org
DEMO_DIR = DEMO.directory
_FORMAT = "demo-mirror-v1"
"""Mixed into the cache key: bump it when the replay procedure changes the resulting repos."""
_COMMITTER = ("swedojo demo", "demo@swedojo.invalid")


class DemoBuildError(RuntimeError):
    """Replaying a bundled patch series failed (corrupt package data or an unusable git)."""


def demo_projects(bundle: Bundle = DEMO) -> list[str]:
    """Names of the bundled projects (one patch series directory each)."""
    return sorted(p.name for p in bundle.projects.iterdir() if p.is_dir())


def _content_hash(bundle: Bundle) -> str:
    """Key of the mirror: changes whenever any bundled patch changes."""
    digest = hashlib.sha256(f"{_FORMAT}\0{bundle.org}".encode())
    for path in sorted(p for p in bundle.projects.rglob("*") if p.is_file()):
        digest.update(b"\0" + path.relative_to(bundle.projects).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _git_env(home: Path) -> dict[str, str]:
    """An environment in which nothing of the user's git setup can change the commits made."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_COMMITTER_NAME=_COMMITTER[0],
        GIT_COMMITTER_EMAIL=_COMMITTER[1],
        GIT_AUTHOR_NAME=_COMMITTER[0],
        GIT_AUTHOR_EMAIL=_COMMITTER[1],
        TZ="UTC",
        LC_ALL="C",
        LANG="C",
    )
    return env


def _git(cwd: Path, env: dict[str, str], *args: str) -> None:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise DemoBuildError(f"git {args[0]} failed in {cwd}: {(proc.stderr or proc.stdout).strip()}")


def _replay(series: Path, dest: Path, env: dict[str, str]) -> None:
    """Build a non-bare repo at `dest` from the patch series in `series`."""
    patches = sorted(series.glob("*.patch"))
    if not patches:
        raise DemoBuildError(f"no patches in {series}")
    dest.mkdir(parents=True)
    _git(dest, env, "init", "--quiet", "--template=", "--initial-branch=main")
    # Committer date = author date (from the patch headers): the SHAs depend on nothing local.
    _git(dest, env, "am", "--quiet", "--committer-date-is-author-date", "--whitespace=nowarn",
         *(str(p) for p in patches))


def _default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "swedojo" / "demo"


def materialise_demo(cache_root: Path | None = None, bundle: Bundle = DEMO) -> Path:
    """Return a mirror root holding `<root>/<org>/<project>` git repos of `bundle`, building it once.

    The mirror lives at `<cache_root>/<content hash>` (default cache root
    `~/.cache/swedojo/demo`). It is built in a temporary directory and renamed into place, so a
    concurrent or killed build never leaves a half-made repo where a reader would find it.
    """
    root = Path(cache_root) if cache_root is not None else _default_cache_root()
    mirror = root / _content_hash(bundle)
    if mirror.is_dir():
        return mirror
    root.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        env = _git_env(build)
        for name in demo_projects(bundle):
            _replay(bundle.projects / name, build / bundle.org / name, env)
        try:
            os.rename(build, mirror)
        except OSError:
            if not mirror.is_dir():
                raise
            # Another process finished first; its mirror is identical, keep it.
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return mirror


def load_demo_tasks(bundle: Bundle = DEMO) -> list[TaskInstance]:
    """The bundle's tasks, in file order; `repo` is `<org>/<project>` inside the mirror."""
    lines = bundle.tasks.read_text(encoding="utf-8").splitlines()
    return [TaskInstance.model_validate_json(line) for line in lines if line.strip()]
