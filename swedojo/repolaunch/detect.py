"""Analysis, rules first: language, build system, runtime version, install and test commands.

`analyse(root, date)` reads a work tree (and its CI workflows) and returns a `RepoAnalysis` that
says which file said what. It never runs the project: building is the launcher's job. `date` is
the commit date: it bounds the runtime versions (no Python 3.12 for a 2021 commit) and pins
Python dependency resolution to packages uploaded before it.
"""

from __future__ import annotations

import configparser
import json
import posixpath
import re
import shlex
import tomllib
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field

from swedojo.repolaunch.ci import CiFindings, read_workflows
from swedojo.repolaunch.runner import graded_command

PYTHON_RELEASES = {
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14),
    "3.9": date(2020, 10, 5), "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24),
    "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7), "3.14": date(2025, 10, 7),
}
NODE_LTS = {"12": date(2019, 4, 23), "14": date(2020, 4, 21), "16": date(2021, 4, 20),
            "18": date(2022, 4, 19), "20": date(2023, 4, 18), "22": date(2024, 4, 24),
            "24": date(2025, 5, 6)}
JAVA_LTS = {"8": date(2014, 3, 18), "11": date(2018, 9, 25), "17": date(2021, 9, 14),
            "21": date(2023, 9, 19), "25": date(2025, 9, 16)}
TEST_EXTRAS = ("test", "tests", "testing")
DEV_EXTRAS = ("dev", "develop", "development")


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

    def describe(self) -> str:
        return " ".join(filter(None, [f"python {self.runtime}" if self.runtime else "",
                                      "" if self.requirement_files else "without requirement files",
                                      "with the requirement files' pins loosened" if self.loose_pins else "",
                                      f"with {', '.join(self.undated)} undated" if self.undated else ""]))


class NoBuildSystemError(Exception):
    """No file the rules know says how to build or test the repository."""


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
    debian_release: str = "bookworm"
    """Debian release for the base image, chosen for the runtime."""
    install_commands: list[str] = Field(default_factory=list)
    """Dependency layer: depends only on dependency files and the date, so commits share it."""
    rebuild_commands: list[str] = Field(default_factory=list)
    """Repo layer: run on every fresh checkout after the dependency layer (install/build the project)."""
    build_command: str = ""
    """Incremental build run before every test run (`EnvSpec.build_command`); empty where the
    test command builds what it tests."""
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
    ci_commands: list[str] = Field(default_factory=list)
    """Install and test lines found in CI workflows, for reference and for a setup agent."""
    evidence: list[Evidence] = Field(default_factory=list)
    """Which file said what."""

    def note(self, file: str, says: str) -> None:
        self.evidence.append(Evidence(file=file, says=says))


# --- small readers -------------------------------------------------------------------------------

def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(errors="replace"))
    except configparser.Error:
        pass
    return parser


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def _instant(when: datetime | None) -> str:
    if when is None:
        return ""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _python_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _newest(releases: dict[str, date], when: datetime | None) -> list[str]:
    """Versions out by `when`, newest first."""
    day = when.date() if when else None
    out = [v for v, released in releases.items() if day is None or released <= day]
    return sorted(out, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True)


DEBIAN_TOOLCHAINS = {
    "go": {"bullseye": "1.15", "bookworm": "1.19", "trixie": "1.24"},
    "rust": {"bullseye": "1.48", "bookworm": "1.63", "trixie": "1.85"},
}
"""The Go (golang-go) and Rust (rustc, cargo) each Debian release ships, oldest release first."""


def version_key(version: str) -> tuple[int, ...]:
    """"1.21.5" -> (1, 21, 5); what is not a number ends the key."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def shipped_toolchains(language: str, minimum: str) -> list[str]:
    """The Go or Rust versions Debian releases ship that are at least `minimum` (major.minor), oldest
    first: the first is the oldest release that satisfies the project."""
    wanted = version_key(minimum)[:2]
    return [v for v in DEBIAN_TOOLCHAINS[language].values() if version_key(v) >= wanted]


def debian_release(language: str, version: str) -> str:
    """Debian release whose libraries match the runtime's era (and ship its toolchain)."""
    if language in DEBIAN_TOOLCHAINS:
        shipped = DEBIAN_TOOLCHAINS[language]
        return next((r for r, v in shipped.items() if version_key(v) >= version_key(version)[:2]), "trixie")
    try:
        parts = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return "bookworm"
    if language == "python" and parts:
        return "bullseye" if parts <= (3, 9) else "bookworm" if parts <= (3, 11) else "trixie"
    if language == "java" and parts:
        return "bullseye" if parts[0] <= 11 else "bookworm" if parts[0] <= 17 else "trixie"
    return "bookworm"


# --- Python --------------------------------------------------------------------------------------

def _poetry_constraint(value: str) -> str:
    """Poetry's "^3.8" / "~3.8" as a PEP 440 specifier."""
    value = value.strip()
    if value.startswith("^"):
        major = value[1:].split(".")[0]
        return f">={value[1:]},<{int(major) + 1}"
    if value.startswith("~") and not value.startswith("~="):
        parts = value[1:].split(".")
        return f">={value[1:]},<{parts[0]}.{int(parts[1]) + 1}" if len(parts) > 1 else f">={value[1:]}"
    if re.fullmatch(r"[\d.]+", value):
        return f"=={value}.*"
    return "" if value == "*" else value


def _requirement_name(item: str) -> str:
    try:
        return Requirement(item).name.lower()
    except InvalidRequirement:
        return ""


def _spec_allows(spec: str, version: str) -> bool:
    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    return any(specifier.contains(f"{version}.{patch}", prereleases=True) for patch in (0, 99))


def _expand_braces(text: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    return [out for choice in match.group(1).split(",")
            for out in _expand_braces(text[:match.start()] + choice + text[match.end():])]


def _tox_versions(envlist: str) -> list[str]:
    versions = []
    for expanded in _expand_braces(envlist):
        for env in re.split(r"[,\s]+", expanded):
            for factor in env.split("-"):
                match = re.fullmatch(r"py3(\d+)", factor)
                if match and f"3.{match.group(1)}" not in versions:
                    versions.append(f"3.{match.group(1)}")
    return versions


_OTHER_JOB = re.compile(r"doc|lint|style|typing|mypy|release|publish|bench|build|(^|[-_./])(min|minimum|oldest|lowest)([-_.]|$)")
"""Requirement file names for jobs other than the tests (min: a project's minimum-versions set)."""


def _tox_substituted(line: str) -> str:
    """A tox deps line with tox's substitutions made as a plain testenv would: `{env:X:default}` and
    `{posargs:default}` become the default, `{toxinidir}` the root; a line with any other
    substitution (it names another env's setting) becomes empty."""
    line = line.replace("{toxinidir}/", "").replace("{toxinidir}", ".")
    line = re.sub(r"\{(?:env:[^:{}]+|posargs)(?::([^{}]*))?\}", lambda m: m.group(1) or "", line).strip()
    return "" if "{" in line else line


def _unpinned(path: Path) -> list[str]:
    """The requirements a requirement file names, without their versions (extras and markers kept);
    options, nested files, paths and URLs left out."""
    found = []
    for line in _text(path).splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-", ".", "/")) or "://" in line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        found.append(f"{req.name}{extras}" + (f"; {req.marker}" if req.marker else ""))
    return found


class _PythonPlan:
    """Collects what the Python files say; `build()` turns it into a RepoAnalysis."""

    def __init__(self, root: Path, ci: CiFindings, when: datetime | None, out: RepoAnalysis,
                 requirement_files: bool = True, undated: tuple[str, ...] = (), loose_pins: bool = False) -> None:
        self.root, self.ci, self.when, self.out = root, ci, when, out
        self.use_requirement_files = requirement_files
        self.loose_pins = loose_pins
        self.undated = undated
        self.requirement_files: list[str] = []
        self.packages: list[str] = []
        self.extras: list[str] = []
        self.groups: list[str] = []
        self.build_requires: list[str] = []
        self.install_project = False  # pip has to build "." to learn its dependencies
        self.editable = False
        self.requires_python: list[tuple[str, str]] = []  # (file, specifier)
        self.listed: dict[str, list[str]] = {}  # file -> versions it names
        self.test_commands: list[tuple[str, str, str]] = []  # (file, working directory, command) from tox and CI

    def _add(self, items: list[str], item: str) -> None:
        if item and item not in items:
            items.append(item)

    def read(self) -> None:
        self._pyproject()
        self._setup_py()
        self._setup_cfg()
        self._tox()
        self._nox()
        self._pipfile()
        self._ci()
        self._requirements()
        pin = self.root / ".python-version"
        if pin.is_file() and (match := re.match(r"(\d+\.\d+)", _text(pin).strip())):
            self.listed[".python-version"] = [match.group(1)]
            self.out.note(".python-version", f"python {match.group(1)}")

    def _pyproject(self) -> None:
        path = self.root / "pyproject.toml"
        if not path.is_file():
            return
        data = _toml(path)
        self.out.dependency_files.append("pyproject.toml")
        build = data.get("build-system", {})
        project = data.get("project", {})
        poetry = data.get("tool", {}).get("poetry", {})
        if not (build or project or poetry):
            self.out.note("pyproject.toml", "tool configuration only, no project table")
            return
        self.editable = True
        requires = build.get("requires", ["setuptools>=40.8.0", "wheel"])
        for item in requires:
            self._add(self.build_requires, item)
        if any(re.match(r"setuptools\b", r) for r in requires) and not any(re.match(r"wheel\b", r) for r in requires):
            self._add(self.build_requires, "wheel")  # setuptools < 70.1 asks for it at build time
        self.out.note("pyproject.toml", f"build-system requires {', '.join(requires)}")
        if project.get("requires-python"):
            self.requires_python.append(("pyproject.toml", project["requires-python"]))
        self._classifiers("pyproject.toml", "\n".join(project.get("classifiers", [])))
        optional = project.get("optional-dependencies", {})
        wanted = [e for e in TEST_EXTRAS if e in optional] or [e for e in DEV_EXTRAS if e in optional]
        if project and "dependencies" not in project.get("dynamic", []) and "optional-dependencies" not in project.get("dynamic", []):
            name = project.get("name", "")
            for item in self._expand_extras(project.get("dependencies", []), optional, name):
                self._add(self.packages, item)
            for extra in wanted:
                for item in self._expand_extras(optional.get(extra, []), optional, name):
                    self._add(self.packages, item)
            self.out.note("pyproject.toml", f"static dependencies{' + extras ' + ', '.join(wanted) if wanted else ''}")
        else:
            self.install_project = True
            self.extras.extend(wanted)
        groups = data.get("dependency-groups", {})
        for group in [g for g in TEST_EXTRAS if g in groups] or [g for g in DEV_EXTRAS if g in groups]:
            self._add(self.groups, group)
            self.out.note("pyproject.toml", f"dependency group {group}")
        if poetry:
            self._poetry(poetry)

    def _expand_extras(self, items: list[str], optional: dict[str, list[str]], name: str,
                       seen: frozenset[str] = frozenset()) -> list[str]:
        """Requirements with self-references ("pkg[test]") replaced by those extras' contents."""
        out = []
        for item in items:
            try:
                req = Requirement(item)
            except InvalidRequirement:
                continue
            if name and req.name.lower().replace("_", "-") == name.lower().replace("_", "-"):
                for extra in sorted(req.extras - seen):
                    out.extend(self._expand_extras(optional.get(extra, []), optional, name, seen | req.extras))
            else:
                out.append(item)
        return out

    def _poetry(self, poetry: dict[str, Any]) -> None:
        python = poetry.get("dependencies", {}).get("python")
        if isinstance(python, str) and (spec := _poetry_constraint(python)):
            self.requires_python.append(("pyproject.toml", spec))
        tables = [poetry.get("dev-dependencies", {})]
        groups = poetry.get("group", {})
        tables += [groups[g].get("dependencies", {}) for g in (*TEST_EXTRAS, *DEV_EXTRAS) if g in groups]
        for table in tables:
            for name, value in table.items():
                constraint = _poetry_constraint(value) if isinstance(value, str) else ""
                self._add(self.packages, f"{name}{constraint}" if constraint and constraint[0] in "<>=!~" else name)
        if poetry.get("dependencies"):
            self.install_project = True
            self.out.note("pyproject.toml", "poetry project: dependencies come from building it")

    def _classifiers(self, file: str, text: str) -> None:
        versions = sorted(set(re.findall(r"Programming Language :: Python :: (3\.\d+)", text)),
                          key=lambda v: int(v.split(".")[1]))
        if versions:
            self.listed[file] = versions
            self.out.note(file, f"classifiers name python {', '.join(versions)}")

    def _setup_py(self) -> None:
        path = self.root / "setup.py"
        if not path.is_file():
            return
        text = _text(path)
        self.out.dependency_files.append("setup.py")
        self.editable = True
        self.install_project = True
        if not self.build_requires:
            self.build_requires = ["setuptools", "wheel"]
        if match := re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", text):
            self.requires_python.append(("setup.py", match.group(1)))
        self._classifiers("setup.py", text)
        block = re.search(r"extras_require\s*=\s*(?:dict\()?\{?(.*?)[})]", text, re.DOTALL)
        keys = re.findall(r"['\"]?(\w+)['\"]?\s*[:=]", block.group(1)) if block else []
        for extra in [e for e in TEST_EXTRAS if e in keys] or [e for e in DEV_EXTRAS if e in keys]:
            self._add(self.extras, extra)
        self.out.note("setup.py", "setuptools project" + (f"; extras {', '.join(self.extras)}" if self.extras else ""))

    def _setup_cfg(self) -> None:
        path = self.root / "setup.cfg"
        if not path.is_file():
            return
        cfg = _ini(path)
        self.out.dependency_files.append("setup.cfg")
        if cfg.has_option("options", "python_requires"):
            self.requires_python.append(("setup.cfg", cfg.get("options", "python_requires")))
        if cfg.has_option("metadata", "classifiers"):
            self._classifiers("setup.cfg", cfg.get("metadata", "classifiers"))
        if cfg.has_section("options.extras_require"):
            keys = cfg.options("options.extras_require")
            for extra in [e for e in TEST_EXTRAS if e in keys] or [e for e in DEV_EXTRAS if e in keys]:
                self._add(self.extras, extra)
                self.out.note("setup.cfg", f"extra {extra}")

    def _requirement_file(self, rel: str, file: str) -> None:
        """Take `rel` (named by `file`) unless it is for another job: docs, lint, release, minimum versions."""
        if not (self.root / rel).is_file():
            return
        if not self.use_requirement_files:
            self.out.note(file, f"names {rel}: left out (an install with the requirement files failed)")
            return
        if _OTHER_JOB.search(rel.lower()):
            self.out.note(file, f"names {rel}: not for the tests, left out")
            return
        if rel not in self.requirement_files:
            self.requirement_files.append(rel)
            self._add(self.out.dependency_files, rel)
            self.out.note(file, f"requirements file {rel}")

    def _requirements(self) -> None:
        """When no tox, nox or CI file names requirement files: the ones whose names say tests (else
        dev, else the plain requirements.txt), one set, never every file found (a project's minimum
        versions and its dev pins conflict)."""
        if self.requirement_files:
            return
        found = sorted(str(p.relative_to(self.root)) for p in
                       {*self.root.glob("*requirements*.txt"), *self.root.glob("requirements/*.txt")})
        usable = [rel for rel in found if not _OTHER_JOB.search(rel.lower())]
        tests = [rel for rel in usable if "test" in rel.lower()]
        dev = [rel for rel in usable if re.search(r"dev|ci\b", rel.lower())]
        base = [rel for rel in usable if rel == "requirements.txt" or re.search(r"base|requirements/(main|common)", rel.lower())]
        for rel in base + (tests or dev):
            self._requirement_file(rel, rel)

    def _tox(self) -> None:
        path = self.root / "tox.ini"
        if not path.is_file():
            return
        cfg = _ini(path)
        self.out.dependency_files.append("tox.ini")
        if cfg.has_option("tox", "envlist"):
            versions = _tox_versions(cfg.get("tox", "envlist"))
            if versions:
                self.listed["tox.ini"] = versions
                self.out.note("tox.ini", f"envlist names python {', '.join(versions)}")
        if cfg.has_option("testenv", "deps"):
            for line in _lines(cfg.get("testenv", "deps")):
                if re.match(r"^[\w,{}\-]+:\s", line):
                    continue  # factor-conditional: belongs to one env only
                line = _tox_substituted(line)
                if line.startswith("-r"):
                    self._requirement_file(line[2:].strip(), "tox.ini")
                elif line and not line.startswith("-"):
                    self._add(self.packages, line)
            self.out.note("tox.ini", "testenv deps")
        if cfg.has_option("testenv", "commands"):
            self.out.note("tox.ini", f"testenv commands: {'; '.join(_lines(cfg.get('testenv', 'commands')))}")
            where = _tox_substituted(cfg.get("testenv", "changedir", fallback="")).removeprefix("./").rstrip("/")
            for line in _lines(cfg.get("testenv", "commands")):
                self.test_commands.append(("tox.ini", where, _tox_substituted(line.replace("{envpython}", "python"))))
        if cfg.has_option("testenv", "extras"):
            for extra in re.split(r"[,\s]+", cfg.get("testenv", "extras").strip()):
                self._add(self.extras, extra)

    def _nox(self) -> None:
        path = self.root / "noxfile.py"
        if not path.is_file():
            return
        self.out.dependency_files.append("noxfile.py")
        for call in re.findall(r"session\.install\(([^)]*)\)", _text(path)):
            args = re.findall(r"['\"]([^'\"]+)['\"]", call)
            for i, arg in enumerate(args):
                if arg == "-r" and i + 1 < len(args):
                    self._requirement_file(args[i + 1], "noxfile.py")
                elif match := re.fullmatch(r"\.\[([\w,]+)\]", arg):
                    for extra in match.group(1).split(","):
                        self._add(self.extras, extra)
                elif not arg.startswith("-") and arg != "." and (i == 0 or args[i - 1] != "-r"):
                    self._add(self.packages, arg)
        self.out.note("noxfile.py", "session.install calls")

    def _pipfile(self) -> None:
        path = self.root / "Pipfile"
        if not path.is_file():
            return
        data = _toml(path)
        self.out.dependency_files.append("Pipfile")
        sections = ["dev-packages"] + ([] if self.editable else ["packages"])
        for section in sections:
            for name, value in data.get(section, {}).items():
                version = value if isinstance(value, str) else value.get("version", "*") if isinstance(value, dict) else "*"
                self._add(self.packages, name if version == "*" else f"{name}{version}")
        if python := data.get("requires", {}).get("python_version"):
            self.listed["Pipfile"] = [str(python)]
        self.out.note("Pipfile", f"{' and '.join(sections)}")

    def _ci(self) -> None:
        for cmd in self.ci.commands:
            if not re.search(r"\bpip3? install\b", cmd.command):
                continue
            try:
                words = shlex.split(cmd.command)
            except ValueError:
                continue
            for i, word in enumerate(words):
                if word in ("-r", "--requirement") and i + 1 < len(words):
                    self._requirement_file(words[i + 1], cmd.file)
                elif match := re.fullmatch(r"(?:-e)?\.\[([\w,\-]+)\]", word):
                    for extra in match.group(1).split(","):
                        self._add(self.extras, extra)
                    self.out.note(cmd.file, f"installs extras {match.group(1)}")
        self.test_commands += [(cmd.file, cmd.workdir, cmd.command) for cmd in self.ci.commands if cmd.kind == "test"]
        if versions := self.ci.versions.get("python"):
            self.listed["ci"] = versions
            self.out.note(".github/workflows", f"CI runs python {', '.join(versions)}")

    def choose_runtime(self, wanted: str = "") -> None:
        """Every known Python the project's requires-python admits, in the order to try them: those
        out by the commit date (the ones its files name first, then newest first), then the newer
        ones, nearest first (old code runs on the nearest newer interpreter far more often than on
        none). `wanted` (one of them) goes first: a backend that has only some takes its pick.

        Dependencies are resolved as of the commit date, or as of the chosen interpreter's
        release when that is later: packages older than the interpreter rarely install on it.
        """
        known = sorted(PYTHON_RELEASES, key=_python_key)
        admitted = known
        for file, spec in self.requires_python:
            narrowed = [v for v in admitted if _spec_allows(spec, v)]
            if narrowed:
                admitted = narrowed
                self.out.note(file, f"requires-python {spec}")
            else:
                self.out.note(file, f"requires-python {spec} matches no known release; ignored")
        in_date = [v for v in _newest(PYTHON_RELEASES, self.when) if v in admitted]
        listed = {v for versions in self.listed.values() for v in versions}
        order = [v for v in in_date if v in listed] + [v for v in in_date if v not in listed]
        order += [v for v in admitted if v not in order]  # newer than the commit: nearest first
        if wanted in order:
            order.remove(wanted)
            order.insert(0, wanted)
        self.out.runtime_allowed = order
        self.out.runtime_version = order[0]
        self.out.debian_release = debian_release("python", self.out.runtime_version)
        released = datetime.combine(PYTHON_RELEASES[self.out.runtime_version], datetime.min.time(), UTC)
        if self.when is not None and released > self.when:
            self.out.resolution_date = _instant(released)
            self.out.note("(runtime)", f"python {self.out.runtime_version} came out after the commit: dependencies "
                                       f"resolved as of its release, {self.out.resolution_date}")

    def build(self, wanted: str = "") -> None:
        out = self.out
        self.choose_runtime(wanted)
        when = ["--uploaded-prior-to", out.resolution_date] if out.resolution_date else []
        for requirement in self.undated:  # once installed, the dated install finds it satisfied
            out.install_commands.append(shlex.join(["pip", "install", requirement]))
            out.note("(install)", f"{requirement}: no release before {out.resolution_date} on the index (deleted and "
                                  "uploaded again later?): installed first, undated")
        if self.build_requires and self.editable:
            out.install_commands.append(shlex.join(["pip", "install", *when, *self.build_requires]))
        packages = list(self.packages)
        if self.loose_pins:
            for rel in self.requirement_files:
                for item in _unpinned(self.root / rel):
                    self._add(packages, item)
                out.note(rel, "its packages without their pins, resolved as of the date")
        if not any(_requirement_name(p) == "pytest" for p in packages):
            packages.append("pytest")
        args = ["pip", "install", *when, *packages]
        for rel in [] if self.loose_pins else self.requirement_files:
            args += ["-r", rel]
        out.requirement_files = list(self.requirement_files)
        for group in self.groups:
            args += ["--group", group]
        if self.install_project:
            args.append(f".[{','.join(self.extras)}]" if self.extras else ".")
        out.install_commands.append(shlex.join(args))
        if self.editable:
            out.rebuild_commands.append("pip install --no-deps --no-build-isolation -e .")
        out.test_command, out.log_parser = self._runner() or ("python -m pytest -rA -v -p no:cacheprovider", "pytest")

    def _runner(self) -> tuple[str, str] | None:
        """The project's own unittest-style runner (`python -m unittest`, a `runtests.py` script)
        when its tox or CI test commands use one and nothing in the repo says pytest; None: pytest,
        which also runs unittest suites and reads them per test."""
        said = [_text(self.root / f) for f in self.out.dependency_files if (self.root / f).is_file()]
        said += [command for _, _, command in self.test_commands]
        conftests = [d for d in ("", "tests", "test", "testing", "src") if (self.root / d / "conftest.py").is_file()]
        if conftests or (self.root / "pytest.ini").is_file() or any(re.search(r"\bpy\.?test\b", t) for t in said):
            return None
        for file, where, command in self.test_commands:
            words = command.split()
            if "unittest" in words and "-m" in words and not where:
                self.out.note(file, f"tests run by unittest: {command}")
                # `discover` must be unittest's first argument
                return ("python -m unittest -v" if "discover" not in words else "python -m unittest discover -v " +
                        " ".join(words[words.index("discover") + 1:]), "unittest")
            script = next((w for w in words if re.search(r"(^|/)run_?tests?\.py$", w)), "")
            path = posixpath.normpath(posixpath.join(where, script.removeprefix("./"))) if script else ""
            if path and (self.root / path).is_file():
                verbose = " --verbosity 2" if "--verbosity" in _text(self.root / path) else " -v"
                self.out.note(file, f"tests run by the project's own runner {path} (unittest output): {command}")
                return f"python {path}{verbose}", "unittest"
        return None


def _python(root: Path, ci: CiFindings, when: datetime | None, build_system: str, plan_for: PythonPlanning) -> RepoAnalysis:
    out = RepoAnalysis(language="python", build_system=build_system, resolution_date=_instant(when))
    plan = _PythonPlan(root, ci, when, out, plan_for.requirement_files, plan_for.undated, plan_for.loose_pins)
    plan.read()
    plan.build(plan_for.runtime)
    return out


# --- JavaScript / TypeScript ---------------------------------------------------------------------

JS_RUNNERS: dict[str, tuple[str, list[str]]] = {
    "vitest": ("vitest", ["--reporter=json"]),
    "jest": ("jest", ["--ci", "--json"]),
    "mocha": ("mocha", ["--reporter", "json"]),
    "ava": ("ava", ["--tap"]),
    "tap": ("node-tap", ["--reporter=tap"]),
    "uvu": ("uvu", []),
    "tape": ("tape", []),
}
"""npm package (its binary has the same name) -> (log parser, flags that make it print what the
parser reads: a machine-readable reporter where the runner has one; uvu has none, tape prints TAP)."""
_WRAPPERS = {"nyc", "c8", "cross-env", "dotenv", "npx", "env"}
"""Words that may stand before a runner in `scripts.test` (coverage, environment), dropped."""
_REPORTER_OPTIONS = ("--reporter", "-R", "--test-reporter")


def _script_runner(segment: str) -> tuple[str, list[str], list[str]] | None:
    """(runner, its arguments, the variables set before it) of one command of `scripts.test` that
    runs a known runner directly (after wrappers), the reporter options it had dropped: ours
    replace them. Words keep their quotes: the command line runs in a shell as the script did."""
    try:
        words = shlex.split(segment, posix=False)
    except ValueError:
        return None
    variables: list[str] = []
    while words and (words[0] in _WRAPPERS or words[0].startswith("-") or "=" in words[0]):
        word = words.pop(0)
        if "=" in word and not word.startswith("-"):
            variables.append(word)
    if not words:
        return None
    runner = "node:test" if words[0] == "node" and "--test" in words else words[0]
    if runner not in JS_RUNNERS and runner != "node:test":
        return None
    args: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "|":  # `tape test/*.js | tap-spec`: the runner's own output is what the parser reads
            break
        if word.split("=", 1)[0] in _REPORTER_OPTIONS:
            if "=" not in word:
                next(rest, None)
        elif word not in ("--tap", "--json", "--test"):
            args.append(word)
    return runner, args, variables


def _js_runner(scripts: dict[str, str], deps: dict[str, Any]) -> tuple[str, str] | None:
    """(test command, log parser): the runner `scripts.test` runs (through `npm run` / `yarn` of
    another script too), with its own arguments (files, options) and the reporter its parser reads;
    else the first known runner among the dependencies; None when there is none."""
    segments = re.split(r"&&|\|\||;", scripts.get("test", ""))
    found = None
    expanded = 0
    while segments and found is None:
        words = segments.pop(0).split()
        name = words[-1] if words[:-1] in (["npm", "run"], ["pnpm", "run"], ["yarn", "run"], ["yarn"]) else ""
        if name in scripts and expanded < 10:  # a script that runs itself is read 10 times, not forever
            expanded += 1
            segments[:0] = re.split(r"&&|\|\||;", scripts[name])
        else:
            found = _script_runner(" ".join(words))
    if found is None:
        runner = next((name for name in JS_RUNNERS if name in deps), "")
        if not runner:
            return None
        found = (runner, [], [])
    runner, args, variables = found
    if runner == "node:test":
        return " ".join([*variables, "node", "--test", "--test-reporter=tap", *args]), "tap"
    parser, flags = JS_RUNNERS[runner]
    if runner == "vitest":
        args = ["run", *(a for a in args if a not in ("run", "--run", "watch", "--watch"))]
    if runner == "tap":
        major = re.search(r"\d+", str(deps.get("tap", "")))
        flags = [*flags, "--no-coverage" if major and int(major.group()) < 18 else "--disable-coverage"]
    return " ".join([*variables, "npx", runner, *args, *flags]), parser


def _package_manager(package: dict[str, Any], name: str) -> str:
    """The version `packageManager` ("pnpm@8.15.4+sha512...") names for `name`, "" if another or none."""
    match = re.fullmatch(rf"{name}@([\w.-]+)(?:\+.*)?", str(package.get("packageManager", "")))
    return match.group(1) if match else ""


def _pnpm_install(root: Path, package: dict[str, Any]) -> str:
    """pnpm fetched from the npm registry by npx: the version `packageManager` names, else the major
    that writes the lock file's version (5.x: 7, 6.x: 8, 9.x: 9)."""
    version = _package_manager(package, "pnpm")
    if not version:
        lock = re.search(r"^lockfileVersion: '?(\d+)", _text(root / "pnpm-lock.yaml"), re.MULTILINE)
        version = {"5": "7", "6": "8"}.get(lock.group(1), "9") if lock else "9"
    return f"npx --yes pnpm@{version} install --frozen-lockfile"


def _yarn_install(root: Path, package: dict[str, Any]) -> str:
    """yarn fetched from the npm registry by npx (classic: `yarn`, berry: `@yarnpkg/cli-dist`), or the
    release the repo keeps (`yarnPath`); berry installs into node_modules (no Plug'n'Play: the
    dependency layer is a node_modules)."""
    version = _package_manager(package, "yarn")
    rc = _text(root / ".yarnrc.yml")
    if not rc and not (version and int(version.split(".")[0]) >= 2):
        return f"npx --yes yarn@{version or '1'} install --frozen-lockfile"
    path = re.search(r"^yarnPath: *['\"]?([^'\"\s]+)", rc, re.MULTILINE)
    yarn = f"node {path.group(1)}" if path and (root / path.group(1)).is_file() \
        else f"npx --yes @yarnpkg/cli-dist@{version or '4'}"
    return f"YARN_NODE_LINKER=node-modules {yarn} install --immutable"


def _node(root: Path, ci: CiFindings, when: datetime | None) -> RepoAnalysis:
    try:
        package = json.loads(_text(root / "package.json"))
    except json.JSONDecodeError:
        package = {}
    deps = {**package.get("dependencies", {}), **package.get("devDependencies", {})}
    language = "typescript" if (root / "tsconfig.json").is_file() or "typescript" in deps else "javascript"
    out = RepoAnalysis(language=language, build_system="npm", dependency_files=["package.json"],
                       resolution_date=_instant(when))
    locks = [("package-lock.json", "npm", "npm ci"), ("npm-shrinkwrap.json", "npm", "npm ci"),
             ("pnpm-lock.yaml", "pnpm", _pnpm_install(root, package)), ("yarn.lock", "yarn", _yarn_install(root, package)),
             ("bun.lockb", "bun", "bun install --frozen-lockfile")]
    for lock, tool, command in locks:
        if (root / lock).is_file():
            out.build_system = tool
            out.install_commands = [command]
            out.dependency_files.append(lock)
            out.note(lock, f"lock file: install with {command}")
            break
    else:
        before = f" --before={out.resolution_date}" if out.resolution_date else ""
        out.install_commands = [f"npm install{before}"]
        out.note("package.json", "no lock file: npm install resolves afresh" + (" as of the commit date" if before else ""))
    scripts = package.get("scripts", {})
    test_script = scripts.get("test", "")
    if test_script:
        out.note("package.json", f"scripts.test: {test_script}")
    found = _js_runner(scripts, deps)
    if found is None:
        out.test_command = "npm test"
        out.note("package.json", "no known test runner: results cannot be parsed per test")
    else:
        out.test_command, out.log_parser = found
        out.note("package.json", f"tests run by {out.log_parser}: {out.test_command}")
    if "build" in scripts:
        out.rebuild_commands = ["npm run build"]  # npm runs any manager's scripts; only npm is on the PATH
    candidates = _newest(NODE_LTS, when)
    wanted = ""
    for file in (".nvmrc", ".node-version"):
        if (root / file).is_file() and (match := re.match(r"v?(\d+)", _text(root / file).strip())):
            wanted = match.group(1)
            out.note(file, f"node {wanted}")
    engines = package.get("engines", {}).get("node", "")
    if engines and not wanted:
        out.note("package.json", f"engines.node {engines}")
        low = re.search(r">=?\s*v?(\d+)", engines)
        exact = re.fullmatch(r"[\^~]?v?(\d+)(?:\.[\dx*]+)*", engines.strip())
        if exact:
            wanted = exact.group(1)
        elif low:
            newer = [v for v in candidates if int(v) >= int(low.group(1))]
            wanted = newer[0] if newer else low.group(1)
    if not wanted and (versions := ci.versions.get("node")):
        wanted = max(versions, key=int)
        out.note(".github/workflows", f"CI runs node {', '.join(versions)}")
    out.runtime_version = wanted or (candidates[0] if candidates else "20")
    out.runtime_allowed = [out.runtime_version]
    return out


# --- Go, Rust, Java, C/C++ -----------------------------------------------------------------------

def _toolchain(out: RepoAnalysis, minimum: str) -> None:
    """Go or Rust: the Debian toolchains that satisfy `minimum` (empty: any), the oldest chosen."""
    out.runtime_allowed = shipped_toolchains(out.language, minimum or "0")
    out.runtime_version = out.runtime_allowed[0] if out.runtime_allowed else minimum
    out.debian_release = debian_release(out.language, out.runtime_version)


def _go(root: Path, ci: CiFindings) -> RepoAnalysis:
    """go.mod's `go` line is the oldest Go the module builds with (`toolchain` only a preference).
    Modules in `vendor/` (its modules.txt) are used as they are: nothing to download."""
    out = RepoAnalysis(language="go", build_system="go modules", dependency_files=["go.mod"],
                       install_commands=["go mod download"], test_command="go test -json ./...",
                       log_parser="gotest")
    text = _text(root / "go.mod")
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
    _toolchain(out, minimum)
    return out


RUST_EDITIONS = {"2018": "1.31", "2021": "1.56", "2024": "1.85"}
"""The first rustc of each edition."""
CARGO_LOCK_VERSIONS = {3: "1.53", 4: "1.78"}
"""The first cargo that reads each Cargo.lock format."""


def _cargo_vendored(root: Path) -> str:
    """The repo's cargo config file when it replaces crates.io with a source in the repo, else ""."""
    for name in (".cargo/config.toml", ".cargo/config"):
        if "replace-with" in str(_toml(root / name).get("source", {}).get("crates-io", {})):
            return name
    return ""


def _rust(root: Path) -> RepoAnalysis:
    """The oldest rustc the crate asks for: the toolchain file, `rust-version`, the edition and the
    lock file's format each set a minimum (a toolchain file's exact pin or channel is read as one)."""
    # Dependencies are vendored into the layer, which the layer's CARGO_HOME config points at:
    # sandboxes build them from there without writing to it (cargo extracts fetched crates into
    # CARGO_HOME, which they cannot write), with the lock file vendoring resolved (git sources need it)
    out = RepoAnalysis(language="rust", build_system="cargo", dependency_files=["Cargo.toml"],
                       install_commands=['cargo vendor "$SWEDOJO_ENV/vendor" > "$SWEDOJO_ENV/vendor.toml"',
                                         ('mkdir -p "$CARGO_HOME" && mv "$SWEDOJO_ENV/vendor.toml" "$CARGO_HOME/config.toml"'
                                          ' && cp Cargo.lock "$SWEDOJO_ENV/"')],
                       rebuild_commands=['[ -f Cargo.lock ] || cp "$SWEDOJO_ENV/Cargo.lock" .', "cargo build --tests"],
                       test_command="cargo test --no-fail-fast", log_parser="cargo")
    minimums: list[str] = []
    manifest = _toml(root / "Cargo.toml")
    shared = manifest.get("workspace", {}).get("package", {})
    for key in ("rust-version", "edition"):
        said = manifest.get("package", {}).get(key)
        said = said if isinstance(said, str) else shared.get(key)  # `key.workspace = true` inherits
        value = RUST_EDITIONS.get(str(said)) if key == "edition" else said
        if isinstance(value, str):
            minimums.append(value)
            out.note("Cargo.toml", f"{key} {said}: rustc {value} or newer")
    if (root / "Cargo.lock").is_file():
        out.dependency_files.append("Cargo.lock")
        lock = _toml(root / "Cargo.lock").get("version")
        if lock in CARGO_LOCK_VERSIONS:
            minimums.append(CARGO_LOCK_VERSIONS[lock])
            out.note("Cargo.lock", f"lock file version {lock}: cargo {CARGO_LOCK_VERSIONS[lock]} or newer")
    for file in ("rust-toolchain.toml", "rust-toolchain"):
        path = root / file
        if path.is_file():
            channel = _toml(path).get("toolchain", {}).get("channel") if file.endswith(".toml") else _text(path).strip()
            if channel:
                # "1.75.0": at least that; "stable" or "nightly": the newest Debian has
                newest = list(DEBIAN_TOOLCHAINS["rust"].values())[-1]
                minimums.append(str(channel) if version_key(str(channel)) else newest)
                out.note(file, f"toolchain {channel}")
            break
    if config := _cargo_vendored(root):
        out.install_commands, out.rebuild_commands = [], ["cargo build --tests"]
        out.dependency_files.append(config)
        out.note(config, "crates.io replaced by a source in the repo (vendored): nothing to fetch")
    _toolchain(out, max(minimums, key=version_key, default=""))
    return out


def _java(root: Path, ci: CiFindings, when: datetime | None) -> RepoAnalysis:
    version = ""
    if (root / "pom.xml").is_file():
        # go-offline misses what only the test phase resolves (surefire's provider): a run of no
        # test fetches it; sandboxes then run offline (-o)
        out = RepoAnalysis(language="java", build_system="maven", dependency_files=["pom.xml"],
                           install_commands=["mvn -B -ntp dependency:go-offline",
                                             ("mvn -B -ntp -Dtest=NoSuchTest -DfailIfNoTests=false "
                                              "-Dsurefire.failIfNoSpecifiedTests=false test")],
                           rebuild_commands=["mvn -B -o -q -DskipTests test-compile"],
                           test_command="mvn -B -o -fae test; status=$?; "
                                        "find . -path '*/surefire-reports/TEST-*.xml' -exec cat {} +; exit $status",
                           log_parser="surefire")
        pom = _text(root / "pom.xml")
        for key in ("maven.compiler.release", "release", "java.version", "maven.compiler.source"):
            if match := re.search(rf"<{re.escape(key)}>\s*(?:1\.)?(\d+)\s*<", pom):
                version = match.group(1)
                out.note("pom.xml", f"{key} {version}")
                break
    else:
        build = next(p for p in ("build.gradle.kts", "build.gradle") if (root / p).is_file())
        gradle = "./gradlew" if (root / "gradlew").is_file() else "gradle"
        out = RepoAnalysis(language="java", build_system="gradle", dependency_files=[build],
                           install_commands=[f"{gradle} --no-daemon dependencies"],
                           rebuild_commands=[f"{gradle} --no-daemon testClasses"],
                           test_command=f"{gradle} --no-daemon test --continue; status=$?; "
                                        "find . -path '*/test-results/*/TEST-*.xml' -exec cat {} +; exit $status",
                           log_parser="surefire")
        text = _text(root / build)
        match = (re.search(r"JavaLanguageVersion\.of\((\d+)\)", text)
                 or re.search(r"sourceCompatibility\s*=\s*['\"]?(?:JavaVersion\.VERSION_)?(?:1[._])?(\d+)", text))
        if match:
            version = match.group(1)
            out.note(build, f"java {version}")
    if not version and (versions := ci.versions.get("java")):
        version = max(versions, key=int)
        out.note(".github/workflows", f"CI runs java {', '.join(versions)}")
    lts = _newest(JAVA_LTS, when)
    out.runtime_version = version or (lts[0] if lts else "17")
    out.runtime_allowed = [out.runtime_version]
    out.debian_release = debian_release("java", out.runtime_version)
    return out


def _c_language(root: Path) -> str:
    cpp = any(next(root.rglob(pattern), None) for pattern in ("*.cpp", "*.cc", "*.cxx"))
    return "cpp" if cpp else "c"


def _make_target(text: str) -> str:
    for target in ("check", "test"):
        if re.search(rf"^{target}\s*:", text, re.MULTILINE):
            return target
    return ""


def _c(root: Path) -> RepoAnalysis:
    language = _c_language(root)
    if (root / "CMakeLists.txt").is_file():
        out = RepoAnalysis(language=language, build_system="cmake", dependency_files=["CMakeLists.txt"],
                           rebuild_commands=["cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug && cmake --build build -j2"],
                           build_command="cmake --build build -j2",
                           test_command="cd build && ctest --output-on-failure", log_parser="ctest")
        if not re.search(r"enable_testing|add_test|include\(CTest\)", _text(root / "CMakeLists.txt")):
            out.note("CMakeLists.txt", "no enable_testing/add_test: ctest may find no tests")
        else:
            out.note("CMakeLists.txt", "ctest tests")
        return out
    if (root / "meson.build").is_file():
        # meson's own JUnit report (meson-logs/testlog.junit.xml) is read per test and for its counts
        out = RepoAnalysis(language=language, build_system="meson", dependency_files=["meson.build"],
                           rebuild_commands=["meson setup build && meson compile -C build"],
                           build_command="meson compile -C build",
                           test_command="meson test -C build --print-errorlogs; status=$?; "
                                        "cat build/meson-logs/testlog.junit.xml; exit $status",
                           log_parser="surefire")
        out.note("meson.build", "meson test, its JUnit report read as surefire's")
        return out
    if (root / "configure.ac").is_file() or (root / "Makefile.am").is_file():
        configure = "./configure" if (root / "configure").is_file() else "autoreconf -fi && ./configure"
        out = RepoAnalysis(language=language, build_system="autotools", dependency_files=["configure.ac"],
                           rebuild_commands=[f"{configure} && make -j2"], build_command="make -j2",
                           test_command="make check",
                           log_parser="automake")
        out.note("configure.ac", "automake harness: make check")
        return out
    text = _text(root / "Makefile")
    target = _make_target(text)
    out = RepoAnalysis(language=language, build_system="make", dependency_files=["Makefile"],
                       rebuild_commands=["make -j2"], build_command="make -j2",
                       test_command=f"make {target or 'test'}", log_parser="tap")
    out.note("Makefile", f"target {target}: output assumed TAP" if target else "no test target found")
    return out


# --- entry point ---------------------------------------------------------------------------------

def undated(analysis: RepoAnalysis, why: str) -> RepoAnalysis:
    """The analysis resolving the latest dependencies, for a registry that cannot answer as of its
    date (`why`: what it said): the date options leave the install commands."""
    date = analysis.resolution_date
    commands = [c.replace(f" --before={date}", "").replace(f" --uploaded-prior-to {date}", "")
                for c in analysis.install_commands]
    said = Evidence(file="(install)", says=f"resolution as of {date} dropped, latest versions instead: {why}")
    return analysis.model_copy(update={"resolution_date": "", "install_commands": commands,
                                       "evidence": [*analysis.evidence, said]})


def without_scripts(analysis: RepoAnalysis, why: str) -> RepoAnalysis:
    """The analysis installing with npm but running no dependency's install scripts, for one whose
    script failed (`why`: which, and its command), e.g. one that downloads from a host out of reach;
    unchanged when no npm install command is left to change."""
    commands = [f"{c} --ignore-scripts" if re.match(r"npm (?:ci|install)\b", c) and "--ignore-scripts" not in c
                else c for c in analysis.install_commands]
    if commands == analysis.install_commands:
        return analysis
    said = Evidence(file="(install)", says=f"a dependency's install script failed ({why}): installed without scripts")
    return analysis.model_copy(update={"install_commands": commands, "evidence": [*analysis.evidence, said]})


def _mocha_range(root: Path) -> str:
    """The mocha version range package.json asks for ("" when none): old mocha takes fewer options."""
    try:
        package = json.loads(_text(root / "package.json")) if (root / "package.json").is_file() else {}
    except json.JSONDecodeError:
        return ""
    return str({**package.get("dependencies", {}), **package.get("devDependencies", {})}.get("mocha", ""))


def _strong_pyproject(root: Path) -> bool:
    data = _toml(root / "pyproject.toml")
    return bool(data.get("project") or data.get("build-system") or data.get("tool", {}).get("poetry"))


def analyse(root: Path, when: datetime | None = None, python: PythonPlanning | None = None) -> RepoAnalysis:
    """Read `root` (a work tree) and say how to set it up; `when` is the commit date; `python`:
    choices a retry makes for a Python project (default: the rules' first choice)."""
    ci = read_workflows(root)

    def has(name: str) -> bool:
        return (root / name).is_file()

    strong_pyproject = has("pyproject.toml") and _strong_pyproject(root)
    python_weak = has("setup.cfg") or has("tox.ini") or has("noxfile.py") or has("Pipfile") or \
        any(root.glob("*requirements*.txt"))
    if has("setup.py") or strong_pyproject:
        out = _python(root, ci, when, "pyproject" if strong_pyproject else "setup.py", python or PythonPlanning())
    elif has("package.json"):
        out = _node(root, ci, when)
    elif has("go.mod"):
        out = _go(root, ci)
    elif has("Cargo.toml"):
        out = _rust(root)
    elif has("pom.xml") or has("build.gradle") or has("build.gradle.kts"):
        out = _java(root, ci, when)
    elif has("CMakeLists.txt") or has("meson.build") or has("configure.ac") or has("Makefile.am") or has("Makefile"):
        out = _c(root)
    elif python_weak:
        kind = "pipfile" if has("Pipfile") else "tox" if has("tox.ini") else "requirements"
        out = _python(root, ci, when, kind, python or PythonPlanning())
    else:
        raise NoBuildSystemError(
            f"{root}: no build or dependency file the rules know (pyproject.toml, setup.py, package.json, "
            "go.mod, Cargo.toml, pom.xml, build.gradle, CMakeLists.txt, meson.build, Makefile, requirements*.txt)")
    for lock in ("poetry.lock", "uv.lock", "Pipfile.lock"):
        if has(lock):
            out.note(lock, "lock file present (resolution still goes through pip with the commit date)")
    graded = graded_command(root, out.test_command, out.log_parser, _mocha_range(root))
    out.test_command = graded.command
    for note in graded.notes:
        out.note("(test command)", note)
    out.ci_commands = [c.command for c in ci.commands]
    for c in ci.commands:
        out.note(c.file, f"{c.kind}: {c.command}")
    for file in ci.unreadable:
        out.note(file, "workflow did not parse; skipped")
    return out
