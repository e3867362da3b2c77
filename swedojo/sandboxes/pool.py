"""A warm pool of docker sandboxes: started containers with their terminal ready, per image.

`acquire` takes a ready container (its shell already attached, its warm test runner started when
one is asked for), copies the repository in and wakes a background thread that starts a
replacement. Closing a sandbox hands its container to a second background thread, so neither
the start nor the disposal is on the caller's path. That thread resets the container
(`Container.reset`: every process of the sandbox killed, every writable place emptied, and
checked) and puts it back as ready when it is wanted, which saves a container start (~0.7
core-seconds); one that is not wanted, has served `max_uses` sandboxes, or fails its check is
removed. With `reuse=False` every container serves one sandbox.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Self

from swedojo.sandboxes.base import SandboxConfig, SandboxError
from swedojo.sandboxes.docker import Container, DockerSandbox
from swedojo.sandboxes.warm_runner import WarmRunner

Key = tuple[str, WarmRunner | None]
"""What a ready container is for: its image, and the test runner warm in it."""

CONTAINER_FIELDS = {"network", "memory_mb", "pids", "cpus", "disk_mb"}
"""`SandboxConfig` fields a container's start fixes (see `Container`); the rest apply per sandbox."""


class PoolClosedError(SandboxError):
    """The pool was used after `close()`."""


RESET_WAIT_S = 30.0
"""How long `acquire` waits for a container being reset before it starts one itself."""
RUNNER_WAIT_S = 10.0
"""How long the pool's thread waits for a container's test runner to listen before it counts it ready."""


def start_container(
    image: str, config: SandboxConfig, workdir: str, runner: WarmRunner | None, wait_s: float = 0.0
) -> Container:
    """A started container of `image`, with `runner` warm in it (waited for up to `wait_s`); removed again if the runner fails."""
    container = Container(image, config, workdir)
    if runner is not None:
        try:
            container.start_runner(runner, wait_s)
        except BaseException:
            container.remove()
            raise
    return container


class SandboxPool:
    """Keeps `size` started containers ready for every (image, runner) it has been asked for."""

    def __init__(
        self,
        size: int = 2,
        config: SandboxConfig | None = None,
        workdir: str = "/testbed",
        runners: bool = True,
        reuse: bool = True,
        max_uses: int = 100,
    ) -> None:
        """`runners`: keep the test runner warm in sandboxes that ask for one (see warm_runner.py).
        `reuse`: reset released containers and hand them out again, each up to `max_uses` times."""
        self.size = size
        self.runners = runners
        self.reuse = reuse
        self.max_uses = max_uses
        self.config = config or SandboxConfig()
        self.workdir = workdir
        self._ready: dict[Key, list[Container]] = {}
        self._failed: dict[Key, SandboxError] = {}
        self._resetting: dict[Key, int] = {}
        """Released containers of each key on their way back (counted as ready by the refill)."""
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(
            target=self._refill, name="swedojo-sandbox-pool", daemon=True
        )
        self._thread.start()
        self._removals: queue.SimpleQueue[tuple[Container, Key | None] | None] = queue.SimpleQueue()
        self._remover = threading.Thread(
            target=self._remove_released, name="swedojo-sandbox-pool-remover", daemon=True
        )
        self._remover.start()

    def warm(self, image: str, runner: WarmRunner | None = None) -> None:
        """Start filling the pool for `image` with `runner` (acquire does this too)."""
        runner = runner if self.runners else None
        with self._cond:
            self._check_open()
            self._ready.setdefault((image, runner), [])
            self._failed.pop((image, runner), None)
            self._cond.notify_all()

    def wait_ready(self, image: str, timeout: float = 60.0, runner: WarmRunner | None = None) -> bool:
        """Wait until `size` sandboxes of `image` (with `runner`) are ready; False on timeout. Raises what made a start fail."""
        key = (image, runner if self.runners else None)
        self.warm(image, runner)
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    self._closed
                    or key in self._failed
                    or len(self._ready[key]) >= self.size
                ),
                timeout,
            )
            if key in self._failed:
                raise self._failed[key]
            return len(self._ready.get(key, [])) >= self.size

    def acquire(
        self,
        image: str,
        source: Path | None = None,
        commit: str | None = None,
        config: SandboxConfig | None = None,
        workdir: str | None = None,
        runner: WarmRunner | None = None,
    ) -> DockerSandbox:
        """A sandbox of `image` with `source` at `commit` in its work tree: warm if one is ready, else started now.

        `config` and `workdir` (default: the pool's) are the sandbox's; a warm container serves only
        when they match what its start fixed (limits, network, work tree), else one starts now.
        `runner`: the test runner kept warm in it (started now too when no warm one is ready).
        """
        config = config or self.config
        workdir = workdir or self.workdir
        runner = runner if self.runners else None
        container = None
        with self._cond:
            self._check_open()
            if workdir == self.workdir and config.model_dump(
                include=CONTAINER_FIELDS
            ) == self.config.model_dump(include=CONTAINER_FIELDS):
                ready = self._ready.setdefault((image, runner), [])
                self._failed.pop((image, runner), None)
                # A reset in flight ends sooner than a start, and leaves the runner warm.
                self._cond.wait_for(lambda: ready or not self._resetting.get((image, runner)), RESET_WAIT_S)
                container = ready.pop(0) if ready else None
                self._cond.notify_all()
        if container is None:
            container = start_container(image, config, workdir, runner)
        return DockerSandbox(
            image, source, commit, config, workdir, container=container, remove=self._dispose
        )

    def release(self, sandbox: DockerSandbox) -> None:
        """Give a sandbox back: its container is removed in the background (never reused)."""
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
        self._removals.put(None)
        self._remover.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosedError("the sandbox pool is closed")

    def _ready_or_resetting(self, key: Key) -> int:
        return len(self._ready.get(key, [])) + self._resetting.get(key, 0)

    def _next_key(self) -> Key | None:
        for key in self._ready:
            if key not in self._failed and self._ready_or_resetting(key) < self.size:
                return key
        return None

    def _reusable(self, container: Container) -> Key | None:
        """The key `container` is ready for again after a reset, if it is wanted there (lock held)."""
        key = (container.image, container.runner)
        fits = container.workdir == self.workdir and container.config.model_dump(
            include=CONTAINER_FIELDS
        ) == self.config.model_dump(include=CONTAINER_FIELDS)
        # Up to twice `size`: whoever released it usually acquires again right away.
        wanted = key in self._ready and self._ready_or_resetting(key) < 2 * self.size
        if self.reuse and fits and wanted and container.uses + 1 < self.max_uses:
            return key
        return None

    def _dispose(self, container: Container) -> None:
        with self._cond:
            if not self._closed:
                key = self._reusable(container)
                if key is not None:
                    self._resetting[key] = self._resetting.get(key, 0) + 1
                self._removals.put((container, key))
                return
        container.remove()

    def _remove_released(self) -> None:
        while (item := self._removals.get()) is not None:
            container, key = item
            if key is not None:
                try:
                    container.reset(RUNNER_WAIT_S)
                    fresh = True
                except Exception:  # not provably fresh (or the daemon failed): it goes
                    fresh = False
                with self._cond:
                    self._resetting[key] -= 1
                    kept = fresh and not self._closed
                    if kept:
                        self._ready[key].append(container)
                    self._cond.notify_all()
                if kept:
                    continue
            try:
                container.remove()
            except SandboxError:
                pass  # the daemon lost it; its exit hooks and `dojo sandbox prune` still find it by label

    def _refill(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._closed or self._next_key() is not None
                )
                if self._closed:
                    return
                key = self._next_key()
            assert key is not None
            try:
                container: Container | None = start_container(key[0], self.config, self.workdir, key[1], RUNNER_WAIT_S)
            except SandboxError as exc:
                with self._cond:
                    self._failed[key] = exc
                    self._cond.notify_all()
                continue
            with self._cond:
                if not self._closed and key in self._ready:
                    self._ready[key].append(container)
                    self._cond.notify_all()
                    container = None
            if container is not None:
                container.remove()
