"""What the rules read and say: a `RepoAnalysis` (with the `Evidence` for each fact), the CI
workflows' findings it draws on, the choices a retry asks of the Python rules, and the small
readers and version helpers every language's rules share."""

from __future__ import annotations

import tomllib
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PythonPlanning(BaseModel):
    """What a launch that retries asks of the Python rules instead of their first choice."""

    model_config = ConfigDict(frozen=True)

    runtime: str = ""
    """The interpreter to plan for when the project admits it (a backend's pick among
    `runtime_allowed`: the resolution date depends on it); empty: the rules' first choice."""
    requirement_files: bool = True
    """Off: the project's metadata and pytest only (requirement files can name tools that no
    longer exist, or pins that no longer install)."""
    undated: tuple[str, ...] = ()
    """Requirements installed first without the date: the index has no release of them before it
    (a project deleted and uploaded again)."""
    loose_pins: bool = False
    """The requirement files' packages without their versions, resolved as of the date (their pins
    may name releases too old for the interpreter, a test runner among them)."""

    demoted: tuple[str, ...] = ()
    """Requirements pip found in conflict with the project itself: installed where they can be,
    after the rest, rather than with it."""
    optional: tuple[str, ...] = ()
    """Distributions the tests named missing at base (skipped, or uncollectable, for want of their
    modules): installed where they can be, beside the optional ones the rules found."""

    def describe(self) -> str:
        return " ".join(filter(None, [f"python {self.runtime}" if self.runtime else "",
                                      f"with {', '.join(self.optional)} installed" if self.optional else "",
                                      f"with {', '.join(self.demoted)} after the rest" if self.demoted else "",
                                      "" if self.requirement_files else "without requirement files",
                                      "with the requirement files' pins loosened" if self.loose_pins else "",
                                      f"with {', '.join(self.undated)} undated" if self.undated else ""]))


class Evidence(BaseModel):
    """One fact a rule read, and where."""

    file: str
    """Path relative to the repository root."""
    says: str
    """What the rule took from it."""


class RepoAnalysis(BaseModel):
    """How to set a repository up, as read from its files."""

    language: str
    """python, javascript, typescript, go, rust, java, c or cpp."""
    build_system: str
    """What the setup is driven by: pyproject, setup.py, npm, cargo, maven, cmake, make, ..."""
    runtime_version: str = ""
    """Chosen interpreter/toolchain version (Python "3.11", Node "20", Go "1.22", Java "17")."""
    runtime_allowed: list[str] = Field(default_factory=list)
    """Every version the metadata accepts, preferred first (the local mode takes the first it has)."""
    runtime_asked: bool = False
    """Whether the project needs a runtime newer than the one its base image ships (`.nvmrc`,
    `engines`, its CI's oldest name one): only then is another fetched."""
    debian_release: str = "bookworm"
    """Debian release for the base image, chosen for the runtime."""
    system_packages: list[str] = Field(default_factory=list)
    """Debian packages the runtime layer adds to the toolchain's: tools a failed step was missing."""
    install_commands: list[str] = Field(default_factory=list)
    """Dependency layer: depends only on dependency files and the date, so commits share it."""
    rebuild_commands: list[str] = Field(default_factory=list)
    """Repo layer: run on every fresh checkout after the dependency layer (install/build the project)."""
    build_command: str = ""
    """Incremental build run before every test run (`EnvSpec.build_command`); empty where the
    test command builds what it tests."""
    work_tree_mb: int = 0
    """Room the work tree of each sandbox needs (`EnvSpec.work_tree_mb`); 0: the sandbox's default."""
    documentation_off: list[str] = Field(default_factory=list)
    """Options of the configure step that turn the project's documentation off (`--disable-docs`,
    `-DBUILD_DOCS=OFF`), read from its build files: used when a step fails on a documentation tool."""
    tests_on: list[str] = Field(default_factory=list)
    """Options of the configure step that turn the project's tests on (`-DFOO_BUILD_TESTS=ON`,
    `-Dtests=true`, `--enable-tests`), read from its build files: used when the runner finds no test."""
    test_command: str = ""
    """Runs the whole suite; test ids may be appended."""
    log_parser: str = ""
    """Parser name in `swedojo.testrun.parsers.PARSERS` for the test command's output."""
    resolution_date: str = ""
    """Dependencies are resolved as of this instant (ISO 8601, UTC); empty = latest."""
    dependency_files: list[str] = Field(default_factory=list)
    """Files whose content decides the dependency layer (its cache key)."""
    requirement_files: list[str] = Field(default_factory=list)
    """Python: the requirement files the install reads (`-r`), which a retry can leave out."""
    requirement_changes: list[str] = Field(default_factory=list)
    """Requirement lines the install does not take as written, each with what it takes instead
    and why (`EnvSpec.requirement_changes`)."""
    ci_commands: list[str] = Field(default_factory=list)
    """Install and test lines found in CI workflows, for reference and for a setup agent."""
    evidence: list[Evidence] = Field(default_factory=list)
    """Which file said what."""

    def note(self, file: str, says: str) -> None:
        self.evidence.append(Evidence(file=file, says=says))


class CiCommand(BaseModel):
    """One shell line from a workflow `run:` step."""

    file: str
    """Workflow path relative to the repository root."""
    kind: str
    """`install` or `test`."""
    command: str
    """The line, continuations joined."""
    workdir: str = ""
    """The step's `working-directory`, relative to the repository root (empty: the root)."""
    job: str = ""
    """The workflow job it is a step of (its key under `jobs:`; empty outside any job)."""
    script: str = ""
    """The repository's shell script the step runs, where the line was read (empty: the step's own line)."""


class CiFindings(BaseModel):
    """What the workflows say about installing, testing and runtime versions."""

    commands: list[CiCommand] = Field(default_factory=list)
    """Install and test lines, in file order."""
    versions: dict[str, list[str]] = Field(default_factory=dict)
    """Runtime -> versions named in matrices and setup steps (`python` -> ["3.10", "3.11"])."""
    unreadable: list[str] = Field(default_factory=list)
    """Workflow files that did not parse."""


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; empty when it is missing or does not parse."""
    try:
        return tomllib.loads(path.read_text(errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def read_text(path: Path) -> str:
    """A file's text; empty when it is missing."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def instant(when: datetime | None) -> str:
    """`when` as an ISO 8601 instant in UTC (a resolution date); empty for None."""
    if when is None:
        return ""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def newest(releases: dict[str, date], when: datetime | None) -> list[str]:
    """Versions out by `when`, newest first."""
    day = when.date() if when else None
    out = [v for v, released in releases.items() if day is None or released <= day]
    return sorted(out, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True)


def version_key(version: str) -> tuple[int, ...]:
    """"1.21.5" -> (1, 21, 5); what is not a number ends the key."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)
