"""Sandboxes: where commands of an agent or a grader run. `open_sandbox` picks a backend by name.

Backends are imported on use, so that the local backend needs neither the docker SDK nor an engine.
"""

from __future__ import annotations

from pathlib import Path

from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from swedojo.sandboxes.environment import BACKENDS, UnknownBackendError

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "UnknownBackendError",
    "docker_available",
    "open_sandbox",
]


def open_sandbox(
    backend: str,
    *,
    image: str = "",
    source: Path | None = None,
    commit: str | None = None,
    config: SandboxConfig | None = None,
    workdir: str = "/testbed",
) -> Sandbox:
    """A new sandbox of `backend` ("local" or "docker") with `source` at `commit` in its work tree.

    `image` and `workdir` are for docker; the local backend needs `source` and `commit`.
    """
    if backend == "local":
        from swedojo.sandboxes.local import LocalSandbox

        if source is None or commit is None:
            raise ValueError("the local backend needs a repository and a commit")
        return LocalSandbox(source, commit, config)
    if backend == "docker":
        from swedojo.sandboxes.docker import DockerSandbox

        if not image:
            raise ValueError("the docker backend needs an image")
        return DockerSandbox(image, source, commit, config, workdir)
    raise UnknownBackendError(
        f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}"
    )


def docker_available() -> bool:
    """True when a Docker Engine answers (and the docker SDK is installed)."""
    try:
        from swedojo.sandboxes.docker import docker_available as answers
    except ImportError:
        return False
    return answers()
