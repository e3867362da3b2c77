"""The sandboxes one unit of work opened, so that another thread can stop them all at once.

`dojo eval --instance-timeout` gives each instance a wall-clock budget; when it runs out, the
instance's thread may be deep in an agent step or a test run. Closing its sandboxes from outside
ends what runs in them (the commands' reads fail, so the thread returns), and the closed scope
refuses any sandbox opened after that. Every sandbox of an `Environment` joins the scope current
in the thread that opens it (a `ContextVar`: copy the context into a thread to keep it there).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from swedojo.sandboxes.base import Sandbox, SandboxError


class ScopeClosedError(SandboxError):
    """A sandbox was opened in a scope already closed (its unit of work ran out of time)."""


class SandboxScope:
    """A set of sandboxes that `close` stops together; once closed, new ones are closed on arrival."""

    def __init__(self) -> None:
        self._sandboxes: list[Sandbox] = []
        self._stops: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self.closed_because = ""
        """Why `close` was called; empty while the scope is open."""

    def adopt(self, sandbox: Sandbox) -> Sandbox:
        """`sandbox`, now one of the scope's; closed at once (ScopeClosedError) when the scope is."""
        with self._lock:
            if not self.closed_because:
                self._sandboxes.append(sandbox)
                return sandbox
        sandbox.close()
        raise ScopeClosedError(f"no new sandbox: {self.closed_because}")

    def on_close(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Have `close` call `stop` (at once when the scope is closed already), for work of the unit
        that is no sandbox (a model server's request in flight); returns what unregisters it."""
        with self._lock:
            if not self.closed_because:
                self._stops.append(stop)
                return lambda: self._forget(stop)
        stop()
        return lambda: None

    def _forget(self, stop: Callable[[], None]) -> None:
        with self._lock:
            if stop in self._stops:
                self._stops.remove(stop)

    def close(self, because: str) -> None:
        """Close every sandbox of the scope and stop its other work (idempotent); errors of a sandbox
        in use are ignored."""
        with self._lock:
            self.closed_because = self.closed_because or because
            sandboxes, self._sandboxes = self._sandboxes, []
            stops, self._stops = self._stops, []
        for sandbox in sandboxes:
            with contextlib.suppress(Exception):  # closed under a running command: whatever it raises, it is closed
                sandbox.close()
        for stop in stops:
            with contextlib.suppress(Exception):
                stop()


_current: ContextVar[SandboxScope | None] = ContextVar("swedojo_sandbox_scope", default=None)


@contextmanager
def scoped(scope: SandboxScope) -> Iterator[SandboxScope]:
    """Sandboxes opened in this block (in this context) join `scope`."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def current() -> SandboxScope | None:
    """The scope current in this context, if any: once it is closed, nobody waits for the work in it."""
    return _current.get()


def adopt(sandbox: Sandbox) -> Sandbox:
    """`sandbox`, joined to the current scope if there is one."""
    scope = _current.get()
    return scope.adopt(sandbox) if scope is not None else sandbox
