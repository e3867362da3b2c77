"""An `Environment`: what it takes to open a fresh sandbox for a task (spec + backend + repo source)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from swedojo.sandboxes.base import Sandbox, SandboxConfig
from swedojo.schema import EnvSpec

BACKENDS = ("local", "docker")
DEFAULT_PYTHON_IMAGE = "swedojo/python:bookworm"


class UnknownBackendError(ValueError):
    """The backend name is not one of BACKENDS."""


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

    def open(self, commit: str | None = None) -> Sandbox:
        """A new sandbox with the repo checked out at `commit` (default: the spec's commit)."""
        config = self.config.model_copy(update={"env": {**self.spec.env_vars, **self.config.env}})
        target = commit or self.spec.commit
        if self.backend == "local":
            from swedojo.sandboxes.local import LocalSandbox

            return LocalSandbox(self.source, target, config)
        if self.backend == "docker":
            from swedojo.sandboxes.docker import DockerSandbox

            return DockerSandbox(self.spec.image, self.source, target, config, workdir=self.spec.workdir)
        raise UnknownBackendError(f"unknown sandbox backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")


def default_python_env(repo: str, commit: str, source: Path, backend: str, config: SandboxConfig | None = None) -> Environment:
    """A plain pytest environment for small pure-Python repos (the bundled demo suite).

    Locally the harness's own interpreter (which has pytest) runs the tests; in Docker, the
    locally made Python image does.
    """
    spec = EnvSpec(repo=repo, commit=commit, build_system="pytest", runtime_version=f"{sys.version_info.major}.{sys.version_info.minor}")
    config = config or SandboxConfig()
    if backend == "docker":
        spec.image = DEFAULT_PYTHON_IMAGE
        spec.test_command = "python3 -m pytest -rA -p no:cacheprovider"
    else:
        spec.workdir = ""
        path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        config = config.model_copy(update={"env": {"PATH": path, **config.env}})
    return Environment(spec=spec, backend=backend, source=source, config=config)
