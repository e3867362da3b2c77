"""Launch failures, one type per stage, each naming the stage and keeping the build log."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from swedojo.repolaunch.buildlog import plain


class LaunchError(Exception):
    """A launch stopped; `stage` says where, `log_path` keeps what the build printed. The message is
    plain text (a tool's colours in it are taken out): it is printed and stored."""

    stage: ClassVar[str] = "launch"

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(plain(message))
        self.message = plain(message)
        self.log_path = log_path

    def __str__(self) -> str:
        where = f" (build log: {self.log_path})" if self.log_path else ""
        return f"[{self.stage}] {self.message}{where}"


class ResolveError(LaunchError):
    """The repository or the commit could not be found."""

    stage = "resolve"


class AnalyseError(LaunchError):
    """The rules could not tell how to build or test the repository."""

    stage = "analyse"


class InstallError(LaunchError):
    """An install or build step failed, or no runtime for the repository is on this host."""

    stage = "install"


class DiscoveryError(LaunchError):
    """The test command ran but no test result could be read from its output."""

    stage = "test-discovery"


class ValidateError(LaunchError):
    """The suite did not run cleanly enough to give a baseline (timeout, nothing passed)."""

    stage = "validate"


class EngineBuildError(InstallError):
    """The container engine failed an image build on its own, no step of it failing: under
    concurrent builds the legacy builder loses a `COPY --from` source ("lstat .../merged/...: no
    such file") or a parent image ("unknown parent image ID"), or commits a `COPY --from` short
    (`cached_copy`: the build cache holds the short copy, so the layer is built again without it).
    The layer is built again (`images.ENGINE_RETRIES` times) before this is raised, and no other
    plan is tried: it would not fare better."""

    def __init__(self, message: str, log_path: Path | None = None, cached_copy: bool = False) -> None:
        super().__init__(message, log_path)
        self.cached_copy = cached_copy


class NoRuntimeError(InstallError):
    """No interpreter or toolchain for the repository: not on this host (local), no recipe (docker)."""


class RebuildMismatchError(LaunchError):
    """`--rebuild` gave other test statuses than the EnvSpec's baseline."""

    stage = "rebuild"
