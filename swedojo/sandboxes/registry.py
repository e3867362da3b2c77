"""One table from a sandbox backend's name to its class.

Every place that turns a backend name into sandboxes (`open_sandbox`, `Environment`, the CLIs,
repolaunch) looks the name up here, so a new backend is one `register` call (and the
conformance suite, tests/sandboxes/test_conformance.py, runs on it by itself).

A backend class implements the `Sandbox` protocol and the class-level `SandboxBackend` below.
Its factory is called on first use, so `import swedojo.sandboxes` needs neither the docker
SDK nor an engine.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from swedojo.sandboxes.base import Isolation, Sandbox, SandboxConfig
    from swedojo.schema import EnvSpec


class UnknownBackendError(ValueError):
    """No backend is registered under the name; the message lists the ones that are."""


class SandboxBackend(Protocol):
    """What the class of a registered backend provides besides the `Sandbox` protocol."""

    pooled: ClassVar[bool]
    """A `SandboxPool` of warm containers can serve its sandboxes (docker only)."""
    serves_standins: ClassVar[bool]
    """It honours `SandboxConfig.standins` (docker only)."""

    @classmethod
    def create(cls, *, image: str, source: Path | None, commit: str | None, config: SandboxConfig,
               workdir: str) -> Sandbox:
        """A new sandbox with `source` at `commit` in its work tree; ValueError when the
        arguments are not enough for this backend (e.g. docker needs an image)."""
        ...

    @classmethod
    def isolation_for(cls, config: SandboxConfig) -> Isolation:
        """What a sandbox made with `config` would be confined by on this machine, and what is
        missing here; SandboxError when the backend cannot be used at all."""
        ...

    @classmethod
    def plain_python(cls, spec: EnvSpec, config: SandboxConfig) -> tuple[EnvSpec, SandboxConfig]:
        """`spec` and `config` made into the plain pytest environment of small pure-Python repos
        on this backend (see `environment.default_python_env`)."""
        ...

    @classmethod
    def with_browser(cls, spec: EnvSpec) -> EnvSpec:
        """`spec` made into one whose sandboxes have Chromium at `browser.CHROMIUM`, for front-end
        tasks (`Environment.with_browser`); BrowserImageError when that cannot be made."""
        ...


_factories: dict[str, Callable[[], type[SandboxBackend]]] = {}


def register(name: str, factory: Callable[[], type[SandboxBackend]]) -> None:
    """Make `name` a backend; `factory()` returns its class and is called on each look-up (imports
    are cached by Python), so the class's module is imported only when the backend is used."""
    _factories[name] = factory


def names() -> tuple[str, ...]:
    """The registered backends, in registration order."""
    return tuple(_factories)


def backend(name: str) -> type[SandboxBackend]:
    """The class of backend `name`; UnknownBackendError when none is registered under it."""
    factory = _factories.get(name)
    if factory is None:
        raise UnknownBackendError(f"unknown sandbox backend {name!r}; choose one of {', '.join(names())}")
    return factory()


def _lazy(module: str, attr: str) -> Callable[[], type[SandboxBackend]]:
    return lambda: getattr(import_module(module), attr)


register("local", _lazy("swedojo.sandboxes.local", "LocalSandbox"))
register("docker", _lazy("swedojo.sandboxes.docker", "DockerSandbox"))
