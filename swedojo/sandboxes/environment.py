"""An `Environment`: what it takes to open a fresh sandbox for a task (spec + backend + repo source)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from swedojo.sandboxes import prebuilt, standins
from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from swedojo.sandboxes.registry import backend
from swedojo.sandboxes.scope import adopt
from swedojo.sandboxes.steps import CAP_S, run_step
from swedojo.sandboxes.warm_runner import WarmRunner
from swedojo.schema import EnvSpec

if TYPE_CHECKING:
    from swedojo.sandboxes.pool import SandboxPool

DEFAULT_PYTHON_IMAGE = "swedojo/python:bookworm"


class PrepareError(SandboxError):
    """A repo-layer step (`EnvSpec.rebuild_commands`) failed in a fresh sandbox."""


def prepare(sandbox: Sandbox, spec: EnvSpec, timeout: float | None = None,
            echo: Callable[[str, ExecResult], None] | None = None) -> None:
    """Run the spec's repo layer in a fresh sandbox: the project built at the sandbox's commit.

    Every sandbox needs it (the agent's and the grader's): its work tree is a fresh checkout. Where
    the image kept the layer's outputs (`prebuilt`), they come first: a compiled project's layer
    then builds only what differs, and a layer that writes only the tree is not run at all. Each
    step runs as long as it makes progress (`steps.run_step`), at most `timeout` seconds.
    """
    if prebuilt.kept(spec):
        restored = run_step(sandbox, prebuilt.RESTORE, cap_s=timeout or CAP_S)
        if echo:
            echo("restore the image's build outputs", restored)
        if spec.repo_layer_in_tree and prebuilt.RESTORED in restored.output:  # they stand in for the repo layer
            taken = run_step(sandbox, prebuilt.TAKE_EXCLUDES, cap_s=timeout or CAP_S)
            if not taken.ok:
                raise PrepareError(f"repo layer: the image's exclusions not taken: {taken.output.strip()[-200:]}")
            return
    for command in spec.rebuild_commands:
        result = run_step(sandbox, command, cap_s=timeout or CAP_S)
        if echo:
            echo(command, result)
        if not result.ok:
            tail = " | ".join(result.output.strip().splitlines()[-5:])
            raise PrepareError(f"repo layer: `{command}` exited with {result.exit_code}: {tail}")


class Environment(BaseModel):
    """A recipe for fresh sandboxes of one repo at one commit; every `open()` starts clean."""

    model_config = ConfigDict(extra="forbid")  # e.g. `backend=`: the spec names the backend

    spec: EnvSpec
    """How tests run and are read; its backend, and the image for docker."""
    source: Path
    """Local git directory holding the repo."""
    config: SandboxConfig = Field(default_factory=SandboxConfig)
    """Limits for every sandbox opened from it."""
    _pool: SandboxPool | None = PrivateAttr(default=None)

    @property
    def backend(self) -> str:
        """The sandbox backend, as the spec names it."""
        return self.spec.backend

    @property
    def pool(self) -> SandboxPool | None:
        """The pool its sandboxes come from (`with_pool`), if any."""
        return self._pool

    def with_pool(self, pool: SandboxPool | None) -> Environment:
        """This environment with its sandboxes taken from `pool`'s warm containers (not serialised);
        unchanged when its backend is not pooled."""
        env = self.model_copy()
        env._pool = pool if pool is not None and backend(self.backend).pooled else None
        return env

    def with_browser(self) -> Environment:
        """This environment with Chromium in its sandboxes (for front-end tasks): on docker, its image
        plus the browser (`browser_image`, built on first use); locally, the host's."""
        return self.model_copy(update={"spec": backend(self.backend).with_browser(self.spec)})

    def serving_standins(self) -> Environment | None:
        """This environment with the public test services' stand-ins in every sandbox (fresh
        containers, not the pool's); None where the backend has none or the network is on."""
        if self.config.network or self.config.standins or not backend(self.backend).serves_standins:
            return None
        return Environment(spec=self.spec, source=self.source, config=self.config.model_copy(update={"standins": True}))

    def open(self, commit: str | None = None, prepared: bool = True) -> Sandbox:
        """A new sandbox with the repo checked out at `commit` (default: the spec's commit).

        `prepared`: with the spec's repo layer built in it (`prepare`); else the caller does that.
        """
        sandbox = self._sandbox(commit or self.spec.commit)
        try:
            if prepared:
                prepare(sandbox, self.spec)
            if self.config.standins:
                standins.serve(sandbox)
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def sandbox_config(self) -> SandboxConfig:
        """The limits and variables every sandbox of this environment gets (the spec's variables
        included; the room its work tree needs, with as much memory more, since the work tree may be a tmpfs)."""
        room = max(0, self.spec.work_tree_mb - self.config.disk_mb)
        return self.config.model_copy(update={"env": {**self.spec.env_vars, **self.config.env},
                                              "disk_mb": self.config.disk_mb + room,
                                              "memory_mb": self.config.memory_mb + room})

    def warm_runner(self) -> WarmRunner | None:
        """The test runner a pooled docker sandbox keeps warm for this environment's test command, if any."""
        return WarmRunner.for_command(self.spec.test_command, self.sandbox_config().env)

    def _sandbox(self, target: str) -> Sandbox:
        """A new sandbox, joined to the current `scope` (so that a deadline can stop it)."""
        config = self.sandbox_config()
        if self._pool is not None:
            return adopt(self._pool.acquire(self.spec.image, self.source, target, config, self.spec.workdir,
                                            self.warm_runner()))
        return adopt(backend(self.backend).create(image=self.spec.image, source=self.source, commit=target,
                                                  config=config, workdir=self.spec.workdir))


def default_python_env(repo: str, commit: str, source: Path, backend_name: str,
                       config: SandboxConfig | None = None) -> Environment:
    """A plain pytest environment for small pure-Python repos (the bundled demo suite).

    How the tests get a Python is the backend's (`plain_python`): locally the harness's own
    interpreter (which has pytest), in Docker the locally made Python image.
    """
    spec = EnvSpec(repo=repo, commit=commit, backend=backend_name, build_system="pytest",
                   runtime_version=f"{sys.version_info.major}.{sys.version_info.minor}")
    # The harness's own plugins (hypothesis, timeout) are not the repo's: keep them out of its runs.
    spec.env_vars["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    spec, config = backend(backend_name).plain_python(spec, config or SandboxConfig())
    return Environment(spec=spec, source=source, config=config)
