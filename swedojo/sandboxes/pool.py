"""A warm pool of docker sandboxes: started containers with their terminal ready, per image.

`acquire` takes a ready container (its shell already attached), copies the repository in and
wakes a background thread that starts a replacement. A sandbox is never reused: release removes it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Self

from swedojo.sandboxes.base import SandboxConfig, SandboxError
from swedojo.sandboxes.docker import Container, DockerSandbox

CONTAINER_FIELDS = {"network", "memory_mb", "pids", "cpus", "disk_mb"}
"""`SandboxConfig` fields a container's start fixes (see `Container`); the rest apply per sandbox."""


class PoolClosedError(SandboxError):
    """The pool was used after `close()`."""


class SandboxPool:
    """Keeps `size` started containers ready for every image it has been asked for."""

    def __init__(
        self,
        size: int = 2,
        config: SandboxConfig | None = None,
        workdir: str = "/testbed",
    ) -> None:
        self.size = size
        self.config = config or SandboxConfig()
        self.workdir = workdir
        self._ready: dict[str, list[Container]] = {}
        self._failed: dict[str, SandboxError] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(
            target=self._refill, name="swedojo-sandbox-pool", daemon=True
        )
        self._thread.start()

    def warm(self, image: str) -> None:
        """Start filling the pool for `image` (acquire does this too)."""
        with self._cond:
            self._check_open()
            self._ready.setdefault(image, [])
            self._failed.pop(image, None)
            self._cond.notify_all()

    def wait_ready(self, image: str, timeout: float = 60.0) -> bool:
        """Wait until `size` sandboxes of `image` are ready; False on timeout. Raises what made a start fail."""
        self.warm(image)
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    self._closed
                    or image in self._failed
                    or len(self._ready[image]) >= self.size
                ),
                timeout,
            )
            if image in self._failed:
                raise self._failed[image]
            return len(self._ready.get(image, [])) >= self.size

    def acquire(
        self,
        image: str,
        source: Path | None = None,
        commit: str | None = None,
        config: SandboxConfig | None = None,
        workdir: str | None = None,
    ) -> DockerSandbox:
        """A sandbox of `image` with `source` at `commit` in its work tree: warm if one is ready, else started now.

        `config` and `workdir` (default: the pool's) are the sandbox's; a warm container serves only
        when they match what its start fixed (limits, network, work tree), else one starts now.
        """
        config = config or self.config
        workdir = workdir or self.workdir
        container = None
        with self._cond:
            self._check_open()
            if workdir == self.workdir and config.model_dump(
                include=CONTAINER_FIELDS
            ) == self.config.model_dump(include=CONTAINER_FIELDS):
                ready = self._ready.setdefault(image, [])
                self._failed.pop(image, None)
                container = ready.pop(0) if ready else None
                self._cond.notify_all()
        return DockerSandbox(
            image, source, commit, config, workdir, container=container
        )

    def release(self, sandbox: DockerSandbox) -> None:
        """Give a sandbox back: it is removed (never reused)."""
        sandbox.close()

    def close(self) -> None:
        """Stop refilling and remove every ready sandbox; idempotent."""
        with self._cond:
            self._closed = True
            ready = [c for containers in self._ready.values() for c in containers]
            self._ready.clear()
            self._cond.notify_all()
        self._thread.join()
        for container in ready:
            container.remove()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosedError("the sandbox pool is closed")

    def _next_image(self) -> str | None:
        for image, ready in self._ready.items():
            if image not in self._failed and len(ready) < self.size:
                return image
        return None

    def _refill(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._closed or self._next_image() is not None
                )
                if self._closed:
                    return
                image = self._next_image()
            assert image is not None
            try:
                container: Container | None = Container(
                    image, self.config, self.workdir
                )
            except SandboxError as exc:
                with self._cond:
                    self._failed[image] = exc
                    self._cond.notify_all()
                continue
            with self._cond:
                if not self._closed and image in self._ready:
                    self._ready[image].append(container)
                    self._cond.notify_all()
                    container = None
            if container is not None:
                container.remove()
