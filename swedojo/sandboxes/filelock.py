"""Locks on files, across threads and processes: one builder of an image or layer at a time, and
builds that leave each other's cached images alone (`repolaunch.images`)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def _flock(path: Path, operation: int) -> Iterator[None]:
    """Hold `flock(operation)` on `path` (made, with its directory, when missing) for the block; a
    non-blocking operation that finds the lock held raises BlockingIOError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, operation)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def file_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive `flock` on `path` for the block."""
    return _flock(path, fcntl.LOCK_EX)


def shared_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold a shared `flock` on `path` for the block: any number of holders at once, none while
    `exclusive_if_free` holds it."""
    return _flock(path, fcntl.LOCK_SH)


@contextlib.contextmanager
def exclusive_if_free(path: Path) -> Iterator[bool]:
    """An exclusive `flock` on `path` for the block if nobody holds one on it now (True), else none
    (False): never waits."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_flock(path, fcntl.LOCK_EX | fcntl.LOCK_NB))
            free = True
        except BlockingIOError:
            free = False
        yield free
