"""Sandboxes: where commands of an agent or a grader run. `open_sandbox` picks a backend by name
from `registry`.

Backends are imported on use, so that the local backend needs neither the docker SDK nor an engine.
"""

from __future__ import annotations

from pathlib import Path

from swedojo.sandboxes import registry
from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from swedojo.sandboxes.registry import UnknownBackendError

__all__ = [
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
    """A new sandbox of the registered `backend` with `source` at `commit` in its work tree.

    `image` and `workdir` are for docker; the local backend needs `source` and `commit`
    (ValueError when what the backend needs is missing; UnknownBackendError for an unknown name).
    """
    return registry.backend(backend).create(image=image, source=source, commit=commit,
                                            config=config or SandboxConfig(), workdir=workdir)


def docker_available() -> bool:
    """True when a Docker Engine answers (and the docker SDK is installed)."""
    try:
        from swedojo.sandboxes.docker import docker_available as answers
    except ImportError:
        return False
    return answers()
