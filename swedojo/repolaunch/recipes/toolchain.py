"""What Go and Rust share: the toolchain a Debian release ships, the oldest release whose toolchain
satisfies the project chosen (each newer one is another runtime to try)."""

from __future__ import annotations

from typing import ClassVar

from swedojo.repolaunch.analysis import RepoAnalysis, version_key
from swedojo.repolaunch.errors import NoRuntimeError
from swedojo.repolaunch.recipes.base import ADD_SANDBOX_USER, LanguageRecipe, apt


class DebianToolchainRecipe(LanguageRecipe):
    """A language whose toolchain comes from Debian's packages, picked by the oldest version the project asks for."""

    shipped: ClassVar[dict[str, str]]
    """The toolchain each Debian release ships, oldest release first."""
    toolchain_name: ClassVar[str]
    """How messages name it: "Go"."""
    packages: ClassVar[tuple[str, ...]]
    """The Debian packages of the toolchain."""

    def shipped_toolchains(self, minimum: str) -> list[str]:
        """The versions Debian releases ship that are at least `minimum` (major.minor), oldest first:
        the first is the oldest release that satisfies the project."""
        wanted = version_key(minimum)[:2]
        return [v for v in self.shipped.values() if version_key(v) >= wanted]

    def choose_toolchain(self, out: RepoAnalysis, minimum: str) -> None:
        """The Debian toolchains that satisfy `minimum` (empty: any) into `out`, the oldest chosen."""
        out.runtime_allowed = self.shipped_toolchains(minimum or "0")
        out.runtime_version = out.runtime_allowed[0] if out.runtime_allowed else minimum
        out.debian_release = self.debian_release(out.runtime_version)

    def debian_release(self, version: str) -> str:
        return next((r for r, v in self.shipped.items() if version_key(v) >= version_key(version)[:2]), "trixie")

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """The oldest release whose toolchain is at least the analysis's."""
        release = self.debian_release(analysis.runtime_version)
        shipped = self.shipped[release]
        if version_key(shipped) < version_key(analysis.runtime_version)[:2]:
            have = ", ".join(f"{r} {v}" for r, v in self.shipped.items())
            raise NoRuntimeError(f"no Debian release ships {self.toolchain_name} "
                                 f"{analysis.runtime_version} or newer ({have})")
        return release, shipped

    def docker_runtimes(self, analysis: RepoAnalysis) -> list[str]:
        """The toolchains of the releases that satisfy the project, oldest first."""
        return analysis.runtime_allowed or super().docker_runtimes(analysis)

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        return [apt(*self.packages, "ca-certificates", "git", "patch", "procps"), ADD_SANDBOX_USER]
