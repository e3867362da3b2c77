"""The environment a `gen` run judges its candidates in, built once per run.

By default RepoLaunch builds it from what the repository declares (its dependencies installed,
its own test command), so a library that needs other packages can be mined; a repository with
no build or dependency file, or `--no-launch`, gets the plain pytest environment. On a pooled
backend (docker) every sandbox of the run comes from warm containers kept ready.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from swedojo.datasets.gen.core import Target
from swedojo.datasets.gen.settings import GenSettings
from swedojo.repolaunch.errors import AnalyseError
from swedojo.repolaunch.launch import environment, launch
from swedojo.sandboxes.environment import Environment, default_python_env
from swedojo.sandboxes.registry import backend


def build_environment(target: Target, commit: str, source: Path, settings: GenSettings) -> Environment:
    """The environment of `target` at `commit`, its repo read from `source`.

    A launch validates on one run of the suite (the run's own baselines run it twice more) and is
    cached by its layers, so a rerun or a resumed run builds nothing. `LaunchError` ends the run:
    candidates judged where the project cannot even be installed would all be wrong.
    """
    if settings.launch:
        out = target.out / "environments" / f"{target.slug}-{commit[:12]}"
        try:
            spec = launch(str(source), out, commit=commit, backend=settings.backend, runs=1,
                          test_timeout=settings.baseline_limit())
        except AnalyseError:
            pass  # no build or dependency file: nothing to install, the plain environment runs it
        else:
            return environment(spec.model_copy(update={"repo": target.repo}), source)
    return default_python_env(target.repo, commit, source, settings.backend)


def commit_environment(target: Target, commit: str, settings: GenSettings, shared: Environment) -> Environment:
    """An environment launched for `commit` alone, for a commit the run's shared environment cannot
    build (its build backend or dependencies changed since), its sandboxes from the same pool."""
    return build_environment(target, commit, target.repo_dir, settings).with_pool(shared.pool)


@contextmanager
def run_environment(target: Target, commit: str, source: Path, settings: GenSettings) -> Iterator[Environment]:
    """`build_environment`, with its sandboxes taken from a pool of `settings.pool` warm containers
    for the run's length where the backend pools them."""
    env = build_environment(target, commit, source, settings)
    if settings.pool == 0 or not backend(settings.backend).pooled:
        yield env
        return
    from swedojo.sandboxes.pool import SandboxPool

    pool = SandboxPool(settings.pool)
    try:
        yield env.with_pool(pool)
    finally:
        pool.close()
