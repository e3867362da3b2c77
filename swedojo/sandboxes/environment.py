"""An `Environment`: what it takes to open a fresh sandbox for a task (spec + backend + repo source)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, PrivateAttr

from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from swedojo.sandboxes.warm_runner import WarmRunner
from swedojo.schema import EnvSpec

if TYPE_CHECKING:
    from swedojo.sandboxes.pool import SandboxPool

BACKENDS = ("local", "docker")
DEFAULT_PYTHON_IMAGE = "swedojo/python:bookworm"


class UnknownBackendError(ValueError):
    """The backend name is not one of BACKENDS."""


class PrepareError(SandboxError):
    """A repo-layer step (`EnvSpec.rebuild_commands`) failed in a fresh sandbox."""


def prepare(sandbox: Sandbox, spec: EnvSpec, timeout: float | None = None,
            echo: Callable[[str, ExecResult], None] | None = None) -> None:
    """Run the spec's repo layer in a fresh sandbox: the project built at the sandbox's commit.

    Every sandbox needs it (the agent's and the grader's): its work tree is a fresh checkout.
    """
    for command in spec.rebuild_commands:
        result = sandbox.exec(command, timeout=timeout)
        if echo:
            echo(command, result)
        if not result.ok:
            tail = " | ".join(result.output.strip().splitlines()[-5:])
            raise PrepareError(f"repo layer: `{command}` exited with {result.exit_code}: {tail}")


class Environment(BaseModel):
    """A recipe for fresh sandboxes of one repo at one commit; every `open()` starts clean."""

    spec: EnvSpec
    """How tests run and are read; the image for docker."""
    backend: str = "local"
    """`local` or `docker`."""
    source: Path
    """Local git directory holding the repo."""
    config: SandboxConfig = Field(default_factory=SandboxConfig)
    """Limits for every sandbox opened from it."""
    _pool: SandboxPool | None = PrivateAttr(default=None)

    def with_pool(self, pool: SandboxPool | None) -> Environment:
        """This environment with its docker sandboxes taken from `pool`'s warm containers (not serialised)."""
        env = self.model_copy()
        env._pool = pool
        return env

    def open(self, commit: str | None = None, prepared: bool = True) -> Sandbox:
        """A new sandbox with the repo checked out at `commit` (default: the spec's commit).

        `prepared`: with the spec's repo layer built in it (`prepare`); else the caller does that.
        """
        sandbox = self._sandbox(commit or self.spec.commit)
        if prepared:
            try:
                prepare(sandbox, self.spec)
            except BaseException:
                sandbox.close()
                raise
        return sandbox

    def sandbox_config(self) -> SandboxConfig:
        """The limits and variables every sandbox of this environment gets (the spec's variables included)."""
        return self.config.model_copy(update={"env": {**self.spec.env_vars, **self.config.env}})

    def warm_runner(self) -> WarmRunner | None:
        """The test runner a pooled docker sandbox keeps warm for this environment's test command, if any."""
        return WarmRunner.for_command(self.spec.test_command, self.sandbox_config().env)

    def _sandbox(self, target: str) -> Sandbox:
        config = self.sandbox_config()
        if self.backend == "local":
            from swedojo.sandboxes.local import LocalSandbox

            return LocalSandbox(self.source, target, config)
        if self.backend == "docker":
            from swedojo.sandboxes.docker import DockerSandbox

            if self._pool is not None:
                return self._pool.acquire(self.spec.image, self.source, target, config, self.spec.workdir, self.warm_runner())
            return DockerSandbox(self.spec.image, self.source, target, config, workdir=self.spec.workdir)
        raise UnknownBackendError(f"unknown sandbox backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")


def default_python_env(repo: str, commit: str, source: Path, backend: str, config: SandboxConfig | None = None) -> Environment:
    """A plain pytest environment for small pure-Python repos (the bundled demo suite).

    Locally the harness's own interpreter (which has pytest) runs the tests; in Docker, the
    locally made Python image does.
    """
    spec = EnvSpec(repo=repo, commit=commit, build_system="pytest", runtime_version=f"{sys.version_info.major}.{sys.version_info.minor}")
    # The harness's own plugins (hypothesis, timeout) are not the repo's: keep them out of its runs.
    spec.env_vars["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    config = config or SandboxConfig()
    if backend == "docker":
        spec.image = DEFAULT_PYTHON_IMAGE
        spec.test_command = "python3 -m pytest -rA -p no:cacheprovider"
    else:
        spec.workdir = ""
        path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        config = config.model_copy(update={"env": {"PATH": path, **config.env}})
    return Environment(spec=spec, backend=backend, source=source, config=config)
