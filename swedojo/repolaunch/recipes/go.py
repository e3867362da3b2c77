"""Go: modules fetched into the layer's module cache (`gomod/`, `GOMODCACHE`); sandboxes run offline
(`GOPROXY=off`) with the Go Debian ships (`GOTOOLCHAIN=local`). Modules vendored in the repo are
used as they are."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    read_text,
    version_key,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.host import Runtime, host_tool, no_host_runtime
from swedojo.repolaunch.recipes.toolchain import DebianToolchainRecipe
from swedojo.repolaunch.registries import Registry


def _go_requirements(root: Path) -> int:
    text = (root / "go.mod").read_text(errors="replace") if (root / "go.mod").is_file() else ""
    blocks = re.findall(r"^require\s*\((.*?)^\)", text, re.MULTILINE | re.DOTALL)
    single = re.findall(r"^require\s+[^\s(]+\s+v\S+", text, re.MULTILINE)
    return len(single) + sum(len(re.findall(r"^\s*[^\s/][^\s]*\s+v\S+", block, re.MULTILINE)) for block in blocks)


_IMPORT_COMMENT = re.compile(r'^package \w+\s*//\s*import\s+"([^"]+)"', re.MULTILINE)
"""An import comment: the path a package from before modules is imported by."""


def _imported_as(root: Path) -> str:
    """The path the package's external tests (`package errors_test`) import it by: the import whose
    last element is the package's name; "" where none does."""
    for file in sorted(root.glob("*_test.go")):
        text = read_text(file)
        if (own := re.search(r"^package (\w+)_test\b", text, re.MULTILINE)) and \
                (found := re.search(rf'"([\w.\-/]+/{own.group(1)})"', text)):
            return found.group(1)
    return ""


class GoRecipe(DebianToolchainRecipe):
    """go.mod, or Go files at the root (a package from before modules)."""

    languages = ("go",)
    family = "go"
    priority = 30
    ci_version_keys = ("go-version", "go", "go_version")
    ci_minor_versions = True
    registry = Registry("the Go module proxy", ("proxy.golang.org",), "the module's", count=_go_requirements)
    shipped: ClassVar[dict[str, str]] = {"bullseye": "1.15", "bookworm": "1.19", "trixie": "1.24"}
    toolchain_name = "Go"
    packages = ("golang-go", "gcc", "libc6-dev")  # Go builds cgo packages (net, os/user) with gcc

    def detect(self, root: Path) -> int | None:
        """go.mod, or Go files at the root of a package from before modules (no go.mod)."""
        return self.priority if (root / "go.mod").is_file() or any(root.glob("*.go")) else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        """go.mod's `go` line is the oldest Go the module builds with (`toolchain` only a preference).
        Modules in `vendor/` (its modules.txt) are used as they are: nothing to download."""
        if not (root / "go.mod").is_file():
            return self._before_modules(root, ci)
        out = RepoAnalysis(language="go", build_system="go modules", dependency_files=["go.mod"],
                           install_commands=["go mod download"], test_command="go test -json ./...",
                           log_parser="gotest")
        text = read_text(root / "go.mod")
        if (root / "go.sum").is_file():
            out.dependency_files.append("go.sum")
        minimum = ""
        if directive := re.search(r"^go (\d+\.\d+)", text, re.MULTILINE):
            minimum = directive.group(1)
            out.note("go.mod", f"go directive {minimum}: Go {minimum} or newer")
        elif versions := ci.versions.get("go"):
            minimum = min(versions, key=version_key)
            out.note(".github/workflows", f"CI runs go {', '.join(versions)}")
        if toolchain := re.search(r"^toolchain go(\S+)", text, re.MULTILINE):
            out.note("go.mod", f"toolchain go{toolchain.group(1)} preferred; the local Go runs (GOTOOLCHAIN=local)")
        if (root / "vendor" / "modules.txt").is_file():
            out.install_commands, out.test_command = [], "go test -mod=vendor -json ./..."
            out.dependency_files.append("vendor/modules.txt")
            out.note("vendor/modules.txt", "dependencies vendored: go test -mod=vendor, nothing to download")
        self.choose_toolchain(out, minimum)
        return out

    def _before_modules(self, root: Path, ci: CiFindings) -> RepoAnalysis:
        """A package from before modules (GOPATH): go.mod is written in the work tree, naming the
        module by the package's import comment (`package errors // import "github.com/pkg/errors"`),
        else by the path its external tests import it by; only the standard library is there to import."""
        path = next((m.group(1) for file in sorted(root.glob("*.go"))
                     if (m := _IMPORT_COMMENT.search(read_text(file)))), "") or _imported_as(root) \
            or f"example.invalid/{root.name}"
        out = RepoAnalysis(language="go", build_system="go (no go.mod)", dependency_files=[],
                           rebuild_commands=[f"[ -f go.mod ] || go mod init {path}"],
                           test_command="go test -json ./...", log_parser="gotest")
        out.note("(root)", f"Go files and no go.mod: a package from before modules, made the module {path} "
                           "in the work tree (its dependencies other than the standard library are not fetched)")
        self.choose_toolchain(out, min(versions, key=version_key) if (versions := ci.versions.get("go")) else "")
        return out

    def toolchain_env(self, root: str, sandbox: bool) -> dict[str, str]:
        """Installs keep the module cache removable; sandboxes are offline, so a module the layer
        lacks fails at once, naming itself."""
        return {"GOMODCACHE": f"{root}/gomod", "GOTOOLCHAIN": "local",
                **({"GOPROXY": "off"} if sandbox else {"GOFLAGS": "-modcacherw"})}

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = host_tool("go", ["env", "GOVERSION"], "go")
        if found is None:
            raise no_host_runtime("go", log)
        return found
