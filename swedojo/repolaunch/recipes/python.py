"""Python: pip installs the dependencies into a venv; each sandbox installs the project editable.

The dependency layer holds `venv/` (the dependencies, not the project: its last step,
`drop_project.py`, uninstalls the project and lists what is installed in `resolved.json`) and
`shims/` (first on PATH). Installs run swedojo's own pip (which has `--uploaded-prior-to`) with
`--python` aimed at the venv (`build/pip`, even when a requirement brings an older pip into the
venv); the layer's own pip, installed last, is the sandboxes'; a date-pinned install ignores pip's
config files (local mirrors carry no upload times). The repo
layer makes an overlay venv in `$HOME` that sees the layer through a `.pth` file and installs the
project editable into it. The rules are read with the commit date: it bounds the interpreters (no
Python 3.12 for a 2021 commit) and pins resolution to packages uploaded before it.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    instant,
    newest,
    read_text,
    read_toml,
    version_key,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import InstallError, NoRuntimeError
from swedojo.repolaunch.host import Runtime, no_host_runtime, visible_to_sandboxes
from swedojo.repolaunch.recipes.base import (
    ADD_SANDBOX_USER,
    EXCLUDE_BUILD_LEFTOVERS,
    LanguageRecipe,
    apt,
)
from swedojo.repolaunch.recipes.pyreqs import (
    PROJECT,
    Change,
    RequirementFile,
    conda_files,
    conda_requirements,
    distribution_of,
    nox_installs,
    read_requirement_file,
    requirement,
    tolerant_install,
    tox_env_for,
    tox_envs,
    tox_lines,
)
from swedojo.repolaunch.runner import pytest_config_addopts
from swedojo.testrun.skips import named_module

PYTHON_RELEASES = {
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14),
    "3.9": date(2020, 10, 5), "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24),
    "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7), "3.14": date(2025, 10, 7),
}
TEST_EXTRAS = ("test", "tests", "testing")
DEV_EXTRAS = ("dev", "develop", "development")
DEBIAN_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
"""The python3 each Debian release ships."""
PIP_TOOL = "/opt/swedojo/pip"
"""Runtime layer venv holding the pip that installs Python dependency layers."""
MIN_PYTHON = (3, 9)
"""Oldest interpreter swedojo's pip can drive with `--python`."""
OVERLAY = '"$HOME/.swedojo-venv"'
CACHE_PLUGIN_OPTIONS = frozenset({
    "--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first", "--lfnf", "--last-failed-no-failures",
    "--cache-show", "--cache-clear", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip", "--sw-reset", "--stepwise-reset"})
"""Options of pytest's cache plugin and of stepwise, which needs it: unknown with `-p no:cacheprovider`."""
PYTEST_CACHE = "/tmp/swedojo-pytest-cache"
"""Where pytest's cache goes where the project's options need the plugin: out of the work tree."""
NOT_EDITABLE = '"$HOME/.swedojo-venv/not-editable"'
"""Marks a sandbox whose project could not be installed editable (see `EDITABLE_OR_INSTALLED`)."""
EDITABLE_OR_INSTALLED = (
    "pip install --no-deps --no-build-isolation -e . || { echo 'swedojo: the editable install failed (above): "
    "the project is installed as it is, and again before every test run'; "
    f"pip install --no-deps --no-build-isolation . && touch {NOT_EDITABLE}; }}")
"""The repo layer's install of the project: editable, so the tests see every edit; where the build
backend cannot (no PEP 660 hook, an old setuptools or flit), a plain install, which the build step
(`REINSTALL_IF_NOT_EDITABLE`) repeats before each test run so the tests never see an older tree."""
REINSTALL_IF_NOT_EDITABLE = (f"[ ! -e {NOT_EDITABLE} ] || "
                             "pip install --quiet --no-deps --no-build-isolation --force-reinstall .")
"""The build step of a Python project: nothing where it is installed editable."""
DROP_PROJECT = Path(__file__).parents[1] / "drop_project.py"
"""Script the dependency venv runs last: uninstall the project itself, list what is installed."""
IMAGE_DROP_PROJECT = "/opt/swedojo/drop_project.py"
"""Where the deps image's build stage has `DROP_PROJECT`."""
WEAK_PRIORITY = 70
"""Detection priority of a tree with Python files that do not say how to build it (requirements,
tox, a Pipfile): any other language's build file wins over them."""
_NO_DISTRIBUTION = re.compile(r"No matching distribution found for (\S+)")
_OPTIONAL_MISSING = re.compile(r"swedojo: optional requirement (\S+) not installed")
"""What `pyreqs.tolerant_install` says of an optional requirement the index does not have."""
_CANNOT_INSTALL = re.compile(r"Cannot install (.+?) because these package versions have conflicting dependencies")


def _conflicting(said: str) -> list[str]:
    """The names of the requirements pip says conflict with the project being installed (`X==1
    and proj 2.0 (from /path)`): the others than the project, which a path marks."""
    found: list[str] = []
    for match in _CANNOT_INSTALL.finditer(said):
        parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", match.group(1))
        if not any("(from " in part for part in parts):
            continue  # two dependencies at odds: nothing of the project's own to keep
        for part in parts:
            if "(from " not in part and (name := _requirement_name(part.strip())) and name not in found:
                found.append(name)
    return found


# --- rules ---------------------------------------------------------------------------------------

def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(errors="replace"))
    except configparser.Error:
        pass
    return parser


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def _python_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


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


def _tox_versions(envlist: str) -> list[str]:
    versions = []
    for env in tox_envs(envlist):
        for factor in env.split("-"):
            match = re.fullmatch(r"py3(\d+)", factor)
            if match and f"3.{match.group(1)}" not in versions:
                versions.append(f"3.{match.group(1)}")
    return versions


_PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
               "--find-links", "--trusted-host", "--python", "--target", "-t", "--prefix", "--root", "--upgrade-strategy",
               "--platform", "--only-binary", "--no-binary", "--uploaded-prior-to", "-e", "--editable"}
"""pip install options that take a value: the word after one is no requirement."""
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
    for line in read_text(path).splitlines():
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
                 planning: PythonPlanning) -> None:
        self.root, self.ci, self.when, self.out = root, ci, when, out
        self.use_requirement_files = planning.requirement_files
        self.loose_pins = planning.loose_pins
        self.undated = planning.undated
        self.demoted = set(planning.demoted)
        self.optional: list[str] = list(planning.optional)  # installed where they can be (conda files, skips)
        self.changes: list[Change] = []  # requirement lines not taken as written
        self.expanded: dict[str, RequirementFile] = {}  # requirement files pip could not read as they are
        self.tox: dict[str, dict[str, str]] = {}  # tox.ini's settings, evaluated once the interpreter is chosen
        self.requirement_files: list[str] = []
        self.packages: list[str] = []
        self.extras: list[str] = []
        self.groups: list[str] = []
        self.build_requires: list[str] = []
        self.cython: list[str] = []  # Cython sources whose C output the build needs and git lacks
        self.install_project = False  # pip has to build "." to learn its dependencies
        self.editable = False
        self.backend: tuple[str, list[str]] = ("", [])  # pyproject's build-backend and backend-path
        self.requires_python: list[tuple[str, str]] = []  # (file, specifier)
        self.listed: dict[str, list[str]] = {}  # file -> versions it names
        self.test_commands: list[tuple[str, str, str]] = []  # (file, working directory, command) from tox and CI

    def _add(self, items: list[str], item: str) -> None:
        if item and item not in items:
            items.append(item)

    def _take(self, line: str, source: str) -> None:
        """A requirement line from `source`, validated (`pyreqs.requirement`)."""
        taken = requirement(line, source, self.changes)
        if taken == PROJECT:
            self.install_project = True
        else:
            self._add(self.packages, taken)

    def read(self) -> None:
        self._pyproject()
        self._setup_py()
        self._setup_cfg()
        self._tox()
        self._nox()
        self._pipfile()
        self._ci()
        pin = self.root / ".python-version"
        if pin.is_file() and (match := re.match(r"(\d+\.\d+)", read_text(pin).strip())):
            self.listed[".python-version"] = [match.group(1)]
            self.out.note(".python-version", f"python {match.group(1)}")

    def _pyproject(self) -> None:
        path = self.root / "pyproject.toml"
        if not path.is_file():
            return
        data = read_toml(path)
        self.out.dependency_files.append("pyproject.toml")
        build = data.get("build-system", {})
        project = data.get("project", {})
        poetry = data.get("tool", {}).get("poetry", {})
        if not (build or project or poetry):
            self.out.note("pyproject.toml", "tool configuration only, no project table")
            return
        self.editable = True
        if isinstance(build.get("build-backend"), str):
            self.backend = (build["build-backend"], [str(p) for p in build.get("backend-path", [])])
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
        text = read_text(path)
        self.out.dependency_files.append("setup.py")
        self.editable = True
        self.install_project = True
        if not self.build_requires:
            self.build_requires = ["setuptools", "wheel"]
        if match := re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", text):
            self.requires_python.append(("setup.py", match.group(1)))
        self._classifiers("setup.py", text)
        self._generated_sources(text)
        block = re.search(r"extras_require\s*=\s*(?:dict\()?\{?(.*?)[})]", text, re.DOTALL)
        keys = re.findall(r"['\"]?(\w+)['\"]?\s*[:=]", block.group(1)) if block else []
        for extra in [e for e in TEST_EXTRAS if e in keys] or [e for e in DEV_EXTRAS if e in keys]:
            self._add(self.extras, extra)
        self.out.note("setup.py", "setuptools project" + (f"; extras {', '.join(self.extras)}" if self.extras else ""))

    def _generated_sources(self, text: str) -> None:
        """C or C++ sources setup.py compiles that git lacks but whose Cython source it has (the
        project's own `make cython` writes them): Cython is installed to build, and generates them
        before the project is built, in the deps layer and in every work tree."""
        for source, ext in sorted(set(re.findall(r"['\"]([\w./-]+\.(c|cpp))['\"]", text))):
            pyx = source.removesuffix(f".{ext}") + ".pyx"
            if not (self.root / source).exists() and (self.root / pyx).is_file():
                self._add(self.cython, f"{'--cplus ' if ext == 'cpp' else ''}{pyx}")
                self.out.note("setup.py", f"compiles {source}, which the repository does not hold: generated from {pyx} by Cython")

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
            parsed = read_requirement_file(self.root, rel)
            if parsed.changes:  # pip would stop at a line: the file's lines go to pip one by one
                self.expanded[rel] = parsed
                self.changes += parsed.changes

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
        self.tox = {section: dict(cfg[section]) for section in cfg.sections()}
        if cfg.has_option("testenv", "commands"):
            self.out.note("tox.ini", f"testenv commands: {'; '.join(_lines(cfg.get('testenv', 'commands')))}")
            where = _tox_substituted(cfg.get("testenv", "changedir", fallback="")).removeprefix("./").rstrip("/")
            for line in _lines(cfg.get("testenv", "commands")):
                self.test_commands.append(("tox.ini", where, _tox_substituted(line.replace("{envpython}", "python"))))

    def _tox_deps(self) -> None:
        """tox's deps and extras as the envlist's environment for the chosen interpreter has them:
        factor conditions evaluated, references to other settings followed."""
        if not self.tox:
            return
        env, factors = tox_env_for(self.tox.get("tox", {}).get("envlist", ""), self.out.runtime_version)
        deps = tox_lines(self.tox, "testenv", "deps", factors)
        for line in deps:
            line = _tox_substituted(line)
            if match := re.match(r"^(?:-r|--requirement)\s*(\S+)$", line):
                self._requirement_file(match.group(1), "tox.ini")
            elif line and not line.startswith("-"):
                self._take(line, "tox.ini")
        extras = [e for line in tox_lines(self.tox, "testenv", "extras", factors) for e in re.split(r"[,\s]+", line) if e]
        for extra in extras:
            self._add(self.extras, extra)
        if deps or extras:
            self.out.note("tox.ini", f"testenv deps and extras as environment {env} has them"
                                     + (f": extras {', '.join(extras)}" if extras else ""))

    def _conda(self) -> None:
        """The optional test dependencies a conda environment file declares (the one for the
        tests), for projects that list them nowhere else."""
        files = conda_files(self.root)
        if not files:
            return
        name = _requirement_name(read_toml(self.root / "pyproject.toml").get("project", {}).get("name", "") or "")
        found = [r for r in conda_requirements(self.root, files[0], self.changes)
                 if _requirement_name(r) not in (name, "pytest")]
        self._add(self.out.dependency_files, files[0])
        for item in found:
            self._add(self.optional, item)
        self.out.note(files[0], f"conda environment file: {len(found)} requirements, optional"
                      + (f" (also found, left out: {', '.join(files[1:4])})" if files[1:] else ""))

    def _nox(self) -> None:
        path = self.root / "noxfile.py"
        if not path.is_file():
            return
        self.out.dependency_files.append("noxfile.py")
        installs = nox_installs(read_text(path))
        others = sorted({i.session for i in installs if _OTHER_JOB.search(i.session.lower()) and "test" not in i.session})
        for args in (install.args for install in installs if install.session not in others):
            for i, arg in enumerate(args):
                before = args[i - 1] if i else ""
                if arg in ("-r", "--requirement") and i + 1 < len(args):
                    self._requirement_file(args[i + 1], "noxfile.py")
                elif before == "--group":
                    self._add(self.groups, arg)
                    self.out.note("noxfile.py", f"dependency group {arg}")
                elif match := re.fullmatch(r"\.\[([\w,\-]+)\]", arg):
                    for extra in match.group(1).split(","):
                        self._add(self.extras, extra)
                elif not arg.startswith("-") and arg != "." and before not in _PIP_VALUED | {"--group"}:
                    self._take(arg, "noxfile.py")
        self.out.note("noxfile.py", "session.install calls" + (f"; left out: sessions {', '.join(others)}" if others else ""))

    def _pipfile(self) -> None:
        path = self.root / "Pipfile"
        if not path.is_file():
            return
        data = read_toml(path)
        self.out.dependency_files.append("Pipfile")
        sections = ["dev-packages"] + ([] if self.editable else ["packages"])
        for section in sections:
            for name, value in data.get(section, {}).items():
                version = value if isinstance(value, str) else value.get("version", "*") if isinstance(value, dict) else "*"
                self._take(name if version == "*" else f"{name}{version}", "Pipfile")
        if python := data.get("requires", {}).get("python_version"):
            self.listed["Pipfile"] = [str(python)]
        self.out.note("Pipfile", f"{' and '.join(sections)}")

    def _ci(self) -> None:
        by_job: dict[tuple[str, str], list[str]] = {}
        for cmd in self.ci.commands:
            if not re.search(r"\bpip3? install\b", cmd.command):
                continue
            try:
                words = shlex.split(cmd.command)
            except ValueError:
                continue
            named: list[str] = []
            installs = [i for i, w in enumerate(words) if w == "install" and i and re.fullmatch(r"pip3?", words[i - 1])]
            ends = [i for i, w in enumerate(words) if w in ("&&", "||", ";", "|")] + [len(words)]
            spans = [(start, next(e for e in ends if e > start)) for start in installs]
            for i, word in enumerate(words):
                if word in ("-r", "--requirement") and i + 1 < len(words):
                    self._requirement_file(words[i + 1], cmd.file)
                elif match := re.fullmatch(r"(?:-e)?\.\[([\w,\-]+)\]", word):
                    for extra in match.group(1).split(","):
                        self._add(self.extras, extra)
                    self.out.note(cmd.file, f"installs extras {match.group(1)}")
                elif any(start < i < end for start, end in spans) and not word.startswith(("-", ".", "/", "$")) \
                        and words[i - 1] not in _PIP_VALUED and "$" not in word and "{" not in word:
                    named.append(word)
            if named and not _OTHER_JOB.search(cmd.file.lower()):  # the test job's own tools, as CI has them
                changes: list[Change] = []
                taken = [t for word in named if (t := requirement(word, cmd.file, changes)) and t != PROJECT
                         and _requirement_name(t) not in ("pip", "setuptools", "wheel")]
                by_job.setdefault((cmd.file, cmd.job), []).extend(taken)
        self._ci_installs(by_job)
        self.test_commands += [(cmd.script or cmd.file, cmd.workdir, cmd.command) for cmd in self.ci.commands
                               if cmd.kind == "test"]
        if versions := self.ci.versions.get("python"):
            self.listed["ci"] = versions
            self.out.note(".github/workflows", f"CI runs python {', '.join(versions)}")

    def _ci_installs(self, by_job: dict[tuple[str, str], list[str]]) -> None:
        """Take what CI jobs install by name as optional requirements: what at least half of the jobs
        that run the tests install (all jobs, where none visibly does; a test job that installs
        only from requirement files counts among them). A name only a
        few jobs install belongs to a configuration of its own (an optional-dependencies or
        tensorflow job, a linter's): the tests' skips, read after validation, say whether the suite
        wants it, and it is not worth building a heavy layer on the chance."""
        testing = {(c.file, c.job) for c in self.ci.commands if c.kind == "test"}
        jobs = [job for job in by_job if job in testing] or list(by_job)
        counts: dict[str, int] = {}
        for job in jobs:
            for name in dict.fromkeys(_requirement_name(t) for t in by_job[job]):
                counts[name] = counts.get(name, 0) + 1
        among = len(testing) if any(job in testing for job in by_job) else len(jobs)  # those installing by -r count too
        for job in jobs:
            file = job[0]
            kept = [t for t in by_job[job] if 2 * counts[_requirement_name(t)] >= among]
            left = [t for t in by_job[job] if t not in kept]
            for item in kept:
                self._add(self.optional, item)
            where = f"job {job[1]}" if job[1] else "a step"
            if kept:
                self.out.note(file, f"{where} installs {', '.join(kept)}: optional, each where it can be")
            if left:
                self.out.note(file, f"{where} installs {', '.join(left)}, which fewer than half of the {among} "
                                    "test jobs do: left to what the tests' skips ask for")

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
        in_date = [v for v in newest(PYTHON_RELEASES, self.when) if v in admitted]
        listed = {v for versions in self.listed.values() for v in versions}
        order = [v for v in in_date if v in listed] + [v for v in in_date if v not in listed]
        order += [v for v in admitted if v not in order]  # newer than the commit: nearest first
        if wanted in order:
            order.remove(wanted)
            order.insert(0, wanted)
        self.out.runtime_allowed = order
        self.out.runtime_version = order[0]
        self.out.debian_release = python_debian_release(self.out.runtime_version)
        released = datetime.combine(PYTHON_RELEASES[self.out.runtime_version], datetime.min.time(), UTC)
        if self.when is not None and released > self.when:
            self.out.resolution_date = instant(released)
            self.out.note("(runtime)", f"python {self.out.runtime_version} came out after the commit: dependencies "
                                       f"resolved as of its release, {self.out.resolution_date}")

    def build(self, wanted: str = "") -> None:
        out = self.out
        self.choose_runtime(wanted)
        self._tox_deps()
        self._requirements()
        self._conda()
        when = ["--uploaded-prior-to", out.resolution_date] if out.resolution_date else []
        for undated in self.undated:  # once installed, the dated install finds it satisfied
            out.install_commands.append(shlex.join(["pip", "install", undated]))
            out.note("(install)", f"{undated}: no release before {out.resolution_date} on the index (deleted and "
                                  "uploaded again later?): installed first, undated")
        if self.cython and not any(_requirement_name(r) == "cython" for r in self.build_requires):
            self._add(self.build_requires, "cython")
        if self.build_requires and self.editable:
            out.install_commands.append(shlex.join(["pip", "install", *when, *self.build_requires]))
        generate = [f"python -m cython {pyx}" for pyx in self.cython]
        out.install_commands += generate  # before "." is built below
        if self.backend[0] and self.editable:
            out.install_commands.append(editable_needs(*self.backend, out.resolution_date))
            out.note("pyproject.toml", f"build backend {self.backend[0]}: what it asks for to build editable is installed")
        packages = list(self.packages)
        if self.loose_pins:
            for rel in self.requirement_files:
                for item in _unpinned(self.root / rel):
                    self._add(packages, item)
                out.note(rel, "its packages without their pins, resolved as of the date")
        demoted = [p for p in packages if _requirement_name(p) in self.demoted]
        packages = [p for p in packages if p not in demoted]
        for item in demoted:
            self._add(self.optional, item)
            out.note("(install)", f"{item}: in conflict with the project itself, installed where it can be")
        if not any(_requirement_name(p) == "pytest" for p in packages):
            packages.append("pytest")
        args = ["pip", "install", *when, *packages]
        for rel in [] if self.loose_pins else self.requirement_files:
            if rel in self.expanded:
                args += [r for r in self.expanded[rel].requirements
                         if r not in args and _requirement_name(r) not in self.demoted]
                args += [w for c in self.expanded[rel].constraints for w in ("-c", c)]
                self.install_project = self.install_project or self.expanded[rel].project
            else:
                args += ["-r", rel]
        out.requirement_files = list(self.requirement_files)
        for group in self.groups:
            args += ["--group", group]
        if self.install_project:
            args.append(f".[{','.join(self.extras)}]" if self.extras else ".")
        out.install_commands.append(shlex.join(args))
        optional = [r for r in self.optional if _requirement_name(r) not in {_requirement_name(p) for p in packages}]
        if optional:
            out.install_commands.append(tolerant_install(optional, out.resolution_date))
            out.note("(install)", f"optional test requirements, each installed where it can be: {', '.join(optional)}")
        for change in self.changes:
            out.note("(requirements)", change.describe())
        out.requirement_changes = [change.describe() for change in self.changes]
        if self.editable:
            out.rebuild_commands += [*generate, EDITABLE_OR_INSTALLED]
            out.build_command = REINSTALL_IF_NOT_EDITABLE
        out.test_command, out.log_parser = self._runner() or (self._pytest_command(), "pytest")

    def _pytest_command(self) -> str:
        """pytest without its cache plugin (no `.pytest_cache` in the work tree, no state carried from
        one run to the next), unless the project's `addopts` use the plugin's options (`--ff`,
        `--sw`): pytest then refuses them as unrecognized and runs nothing. Its cache then goes out
        of the work tree and is cleared at the start of every run."""
        file, addopts = pytest_config_addopts(self.root)
        used = sorted({word.split("=")[0] for word in addopts} & CACHE_PLUGIN_OPTIONS)
        plugins = "".join(f" -p {plugin}" for plugin in self._own_plugins(addopts))
        if not used:
            return f"python -m pytest -rA -v -p no:cacheprovider{plugins}"
        self.out.note(file, f"addopts use the cache plugin's {', '.join(used)}: its cache is kept in /tmp, cleared "
                            "at the start of every run")
        return f"python -m pytest -rA -v -o cache_dir={PYTEST_CACHE} --cache-clear{plugins}"

    def _own_plugins(self, addopts: list[str]) -> list[str]:
        """The repository's own pytest plugins its test commands load (`pytest -p pkg._tests.plugin`
        in tox or in a script CI runs), which its configuration does not: without one the suite can
        run as another (a plugin that runs the async tests: "async def functions are not natively
        supported"). Only modules the repository holds: another is a dependency's, loaded by its
        entry point or not installed."""
        found: list[str] = []
        for file, _, command in self.test_commands:
            if not re.search(r"\bpytest\b", command):
                continue
            for plugin in re.findall(r"(?:^|\s)-p\s*([\w.]+)(?=\s|$)", command):
                module = plugin.replace(".", "/")
                own = any((self.root / base / f"{module}{tail}").exists()
                          for base in ("", "src") for tail in (".py", "/__init__.py"))
                if own and plugin not in found and f"-p {plugin}" not in " ".join(addopts):
                    found.append(plugin)
                    self.out.note(file, f"its pytest loads the repository's plugin {plugin}: so do the tests here")
        return found

    def _runner(self) -> tuple[str, str] | None:
        """The project's own unittest-style runner (`python -m unittest`, a `runtests.py` script)
        when its tox or CI test commands use one and nothing in the repo says pytest; None: pytest,
        which also runs unittest suites and reads them per test."""
        said = [read_text(self.root / f) for f in self.out.dependency_files if (self.root / f).is_file()]
        said += [command for _, _, command in self.test_commands]
        conftests = [d for d in ("", "tests", "test", "testing", "src") if (self.root / d / "conftest.py").is_file()]
        if conftests or (self.root / "pytest.ini").is_file() or any(re.search(r"\bpy\.?test\b", t) for t in said):
            return None
        for file, where, command in self.test_commands:
            words = command.split()
            if "unittest" in words and "-m" in words and not where:
                self.out.note(file, f"tests run by unittest: {command}")
                # `discover` must be unittest's first argument
                rest = [w for w in words[words.index("discover") + 1:] if w != "-v"] if "discover" in words else None
                return ("python -m unittest -v" if rest is None else " ".join(["python -m unittest discover -v", *rest]),
                        "unittest")
            script = next((w for w in words if re.search(r"(^|/)run_?tests?\.py$", w)), "")
            path = posixpath.normpath(posixpath.join(where, script.removeprefix("./"))) if script else ""
            if path and (self.root / path).is_file():
                verbose = " --verbosity 2" if "--verbosity" in read_text(self.root / path) else " -v"
                self.out.note(file, f"tests run by the project's own runner {path} (unittest output): {command}")
                return f"python {path}{verbose}", "unittest"
        return None


_ASK_BACKEND = """import importlib, sys
out, spec, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path[:0] = paths
sys.stdout = sys.stderr  # what the backend prints (setuptools' `running egg_info`) is not an answer
module, _, attr = spec.partition(":")
backend = importlib.import_module(module)
for part in filter(None, attr.split(".")):
    backend = getattr(backend, part)
hook = getattr(backend, "get_requires_for_build_editable", None)
with open(out, "w") as handle:
    handle.write("\\n".join(hook() if hook else []))"""


def editable_needs(backend: str, backend_path: list[str], when: str) -> str:
    """A dependency layer step installing what the build backend asks for to build the project
    editable (PEP 660's hook: `editables` for hatchling of 2022), which an install without build
    isolation does not fetch; a backend that cannot be asked is said, and the step goes on."""
    dated = f" --uploaded-prior-to {when}" if when else ""
    needs = "/tmp/swedojo-editable-needs.txt"
    ask = shlex.join(["python", "-c", _ASK_BACKEND, needs, backend, *backend_path])
    return (f"if {ask}; then [ ! -s {needs} ] || pip install{dated} -r {needs}; "
            f"else echo 'swedojo: the build backend {backend} could not say what an editable build needs'; fi")


# --- what a failed or skipping attempt says -------------------------------------------------------

_OLDER = re.compile(
    r"No module named '(?:distutils|imp|asynchat|asyncore|smtpd|cgi|cgitb|crypt|telnetlib|nntplib|pipes|audioop|"
    r"lib2to3|msilib|nis|ossaudiodev|spwd|sunau|uu|xdrlib|chunk|mailcap|sndhdr|imghdr)'"
    r"|module 'collections' has no attribute|cannot import name '\w+' from 'collections'"
    r"|module '(?:inspect|asyncio|unittest|configparser|ast|pkgutil|gettext|locale|ssl|random)' has no attribute"
    r"|cannot import name '\w+' from '(?:inspect|asyncio|ast|unittest|distutils)[.\w]*'"
    r"|requires a different Python: [\d.]+ not in '[^']*<")
"""What code older than the interpreter says: a module or name the standard library has since dropped,
or a package whose Requires-Python caps the version."""
_NEWER = re.compile(
    r"cannot import name '\w+' from '(?:types|typing|enum|itertools|functools|dataclasses|contextlib|tomllib)'"
    r"|No module named '(?:tomllib|zoneinfo|graphlib|annotationlib)'"
    r"|unsupported operand type\(s\) for \|: 'type'|requires a different Python: [\d.]+ not in '>")
"""What code newer than the interpreter says: a standard library name not there yet, `X | Y` types,
or a Requires-Python floor."""


def interpreter_direction(said: str) -> int:
    """-1 when a failed attempt's log says the code wants an older interpreter, 1 a newer one,
    0 when it does not say (the last such line counts: it is nearest the failure)."""
    found = [(m.start(), -1) for m in _OLDER.finditer(said)] + [(m.start(), 1) for m in _NEWER.finditer(said)]
    return max(found)[1] if found else 0


def distributions(modules: list[str], tried: tuple[str, ...], workdir: Path) -> list[str]:
    """The distributions of top-level `modules` that the repository does not provide and no
    earlier plan tried."""
    found = []
    for module in modules:
        local = [workdir / module, workdir / f"{module}.py", workdir / "src" / module]
        wanted = distribution_of(module)
        if wanted and not any(path.exists() for path in local) and wanted not in tried and wanted not in found:
            found.append(wanted)
    return found


_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")


def unimportable(said: str, tried: tuple[str, ...], workdir: Path) -> list[str]:
    """The distributions of the modules a failed attempt's log says could not be imported (a
    conftest's, a test module's) that the repository does not provide: test dependencies the
    rules did not find declared."""
    modules = [m.split(".")[0] for m in dict.fromkeys(_NO_MODULE.findall(said))]
    return distributions([m for m in dict.fromkeys(modules) if named_module(f"No module named '{m}'")], tried,
                         workdir)[:MAX_MISSING]


MAX_MISSING = 8
"""Modules an attempt's import errors add at most, at once."""


def strong_pyproject(root: Path) -> bool:
    """Whether pyproject.toml describes a project (not only tools' settings)."""
    data = read_toml(root / "pyproject.toml")
    return bool(data.get("project") or data.get("build-system") or data.get("tool", {}).get("poetry"))


def python_debian_release(version: str) -> str:
    """Debian release whose libraries match the interpreter's era."""
    try:
        parts = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return "bookworm"
    return "bullseye" if parts <= (3, 9) else "bookworm" if parts <= (3, 11) else "trixie"


def python_runtimes(analysis: RepoAnalysis) -> list[str]:
    """The Pythons Debian releases ship that the analysis admits, in its order: what to try."""
    return [v for v in analysis.runtime_allowed if v in DEBIAN_PYTHON.values()]


# --- the layer ----------------------------------------------------------------------------------

def _python_minor(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2])


def _candidates(minor: str) -> list[str]:
    found = [shutil.which(f"python{minor}") or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found += sorted((str(p) for p in pyenv.glob(f"{minor}.*/bin/python{minor}")), reverse=True)
    found += [f"/usr/local/bin/python{minor}", f"/usr/bin/python{minor}"]
    return [c for c in found if c and Path(c).is_file()]


def find_interpreter(allowed: list[str]) -> Runtime | None:
    """The first version in `allowed` (preferred first) that this host has and sandboxes can run."""
    for minor in allowed:
        if _python_minor(minor) < MIN_PYTHON:
            continue
        for candidate in filter(lambda c: visible_to_sandboxes(Path(c)), _candidates(minor)):
            code = "import sys, platform; print(sys.executable); print(platform.python_version())"
            proc = subprocess.run([candidate, "-c", code], capture_output=True, text=True, check=False)
            lines = proc.stdout.split()
            if proc.returncode == 0 and len(lines) == 2 and lines[1].startswith(f"{minor}.") \
                    and visible_to_sandboxes(Path(lines[0])):  # a shim may lead elsewhere
                return Runtime(name="python", version=lines[1], path=Path(lines[0]))
    return None


def python_shims(root: str, base_python: str, site: str, pip_driver: str) -> dict[str, str]:
    """Scripts by path relative to the layer root: `shims/{python,python3,pip,swedojo-overlay}`, and
    `build/pip`, which drives the venv with `pip_driver` (a python holding a date-aware pip) in
    every step of the layer's build: first on the build's PATH, where no pip a requirement brings
    into the venv shadows it (`venv/bin/pip` would be overwritten)."""
    venv_python = shlex.quote(f"{root}/venv/bin/python")
    pick = f'target={venv_python}; [ -x {OVERLAY}/bin/python ] && target={OVERLAY}/bin/python'
    pth = f"import site; site.addsitedir({site!r})"
    overlay = "\n".join([
        "set -e",
        f"{shlex.quote(base_python)} -m venv --without-pip {OVERLAY}",
        f'site=$({OVERLAY}/bin/python -c "import sysconfig; print(sysconfig.get_path(\'purelib\'))")',
        f'echo {shlex.quote(pth)} > "$site/_swedojo_deps.pth"',
    ])
    return {
        "shims/python": f'{pick}\nexec "$target" "$@"',
        "shims/python3": f'{pick}\nexec "$target" "$@"',
        "shims/pip": f'{pick}\nexec "$target" -m pip "$@"',
        "shims/swedojo-overlay": overlay,
        "build/pip": f'exec {shlex.quote(pip_driver)} -m pip --python {venv_python} "$@"',
    }


def script(body: str) -> str:
    """A shim's file content."""
    return f"#!/bin/sh\n{body}\n"


def drop_project_step(root: str, drop_script: str, checkout_uri: str) -> str:
    """The layer's last step: uninstall the project `checkout_uri` from the venv, list what stays."""
    return f"{root}/venv/bin/python -I {drop_script} {checkout_uri} {root}/resolved.json"


class PythonRecipe(LanguageRecipe):
    """pyproject.toml, setup.py (strong), else setup.cfg, tox.ini, noxfile.py, Pipfile or requirements (weak)."""

    languages = ("python",)
    family = "python"
    priority = 10
    ci_version_keys = ("python-version", "python", "python_version", "py")
    ci_minor_versions = True
    replans = True

    def detect(self, root: Path) -> int | None:
        if (root / "setup.py").is_file() or ((root / "pyproject.toml").is_file() and strong_pyproject(root)):
            return self.priority
        weak = [(root / name).is_file() for name in ("setup.cfg", "tox.ini", "noxfile.py", "Pipfile")]
        return WEAK_PRIORITY if any(weak) or any(root.glob("*requirements*.txt")) else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        if (root / "pyproject.toml").is_file() and strong_pyproject(root):
            build_system = "pyproject"
        elif (root / "setup.py").is_file():
            build_system = "setup.py"
        else:
            build_system = "pipfile" if (root / "Pipfile").is_file() else "tox" if (root / "tox.ini").is_file() \
                else "requirements"
        out = RepoAnalysis(language="python", build_system=build_system, resolution_date=instant(when))
        plan = _PythonPlan(root, ci, when, out, planning)
        plan.read()
        plan.build(planning.runtime)
        return out

    def debian_release(self, version: str) -> str:
        return python_debian_release(version)

    def known_runtimes(self) -> list[str]:
        return sorted(PYTHON_RELEASES, key=version_key, reverse=True)

    def retry(self, plan: PythonPlanning, analysis: RepoAnalysis, said: str) -> PythonPlanning | None:
        """The same runtime planned again after a failed attempt, from what its part of the build log
        (`said`) says: with the requirements the index had no dated release of installed undated, else
        with the requirements pip found in conflict with the project itself (a linter pinned to an
        older release of the project, in the same tox environment) installed where they can be, after
        the rest, else with the requirement files' pins loosened, else without the requirement files
        (their pins may install a test runner too old for the interpreter, or name packages that no
        longer exist); None when none is left to try."""
        optional = {_requirement_name(r) for r in _OPTIONAL_MISSING.findall(said)}  # the tolerant step's own
        missing = [r for r in dict.fromkeys(_NO_DISTRIBUTION.findall(said))
                   if r not in plan.undated and _requirement_name(r) not in optional]
        if missing and len(plan.undated) < 5:
            return plan.model_copy(update={"undated": (*plan.undated, *missing)})
        conflicting = [name for name in _conflicting(said) if name not in plan.demoted]
        if conflicting:
            return plan.model_copy(update={"demoted": (*plan.demoted, *conflicting)})
        if plan.requirement_files and analysis.requirement_files and not plan.loose_pins:
            return plan.model_copy(update={"loose_pins": True})
        if plan.requirement_files and analysis.requirement_files:
            return plan.model_copy(update={"requirement_files": False, "loose_pins": False, "undated": ()})
        return None

    def install_plan(self, analysis: RepoAnalysis) -> list[str]:
        """The install commands, then the layer's own pip (date-pinned like the rest), which
        sandboxes use for the repo layer."""
        when = f" --uploaded-prior-to {analysis.resolution_date}" if analysis.resolution_date else ""
        return [*analysis.install_commands, f"pip install{when} pip"]

    def sandbox_steps(self, analysis: RepoAnalysis) -> list[str]:
        return ["swedojo-overlay", *analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS] if analysis.rebuild_commands \
            else []

    def install_env(self, root: str, path: str) -> dict[str, str]:
        return {"PATH": f"{root}/build:{root}/venv/bin:{path}", "VIRTUAL_ENV": f"{root}/venv"}

    def layer_path(self, root: str) -> list[str]:
        return [f"{root}/shims", f"{root}/venv/bin"]

    def resolved(self, read: Callable[[str], bytes | None]) -> tuple[dict[str, str], str]:
        said = read("resolved.json")
        if said is None:
            return {}, ""
        data = json.loads(said)
        return data["resolved"], data["python"]

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """The analysis's runtime when a release ships it (the launcher plans for one of `python_runtimes`)."""
        for release, shipped in DEBIAN_PYTHON.items():
            if shipped == analysis.runtime_version:
                return release, shipped
        raise NoRuntimeError(f"no Debian release ships Python {analysis.runtime_version} "
                             f"(bullseye 3.9, bookworm 3.11, trixie 3.13)")

    def docker_runtimes(self, analysis: RepoAnalysis) -> list[str]:
        found = python_runtimes(analysis)
        if not found:
            raise InstallError(f"no Debian release ships a Python the project admits ({', '.join(analysis.runtime_allowed)}; "
                               "bullseye has 3.9, bookworm 3.11, trixie 3.13)")
        return found

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        # The newest pip up to swedojo's own that runs on this interpreter (pip 26.1 dropped 3.9;
        # 26.0 is the first with --uploaded-prior-to): its Requires-Python decides.
        pip = importlib.metadata.version("pip")
        tool = (f"python3 -m venv {PIP_TOOL} && {PIP_TOOL}/bin/python -m pip install -q --no-cache-dir "
                f"--disable-pip-version-check --upgrade 'pip<={pip}' && {PIP_TOOL}/bin/python -m pip install --help "
                "| grep -q -- --uploaded-prior-to || { echo 'no pip with --uploaded-prior-to runs on this Python'; exit 1; }")
        return [apt("python3", "python3-venv", "git", "patch", "procps"), ADD_SANDBOX_USER, tool]

    def image_install_env(self, root: str, path: str, dated: bool) -> dict[str, str]:
        build_env = {**self.install_env(root, path), "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
                     "PIP_PROGRESS_BAR": "off", "PIP_NO_CACHE_DIR": "1"}
        if dated:
            build_env["PIP_CONFIG_FILE"] = "/dev/null"  # as locally: no mirror without upload times
        return build_env

    def image_deps_steps(self, install_commands: list[str], root: str, checkout: str) -> list[str]:
        return [f"python3 -m venv --without-pip {root}/venv", *install_commands,
                drop_project_step(root, IMAGE_DROP_PROJECT, f"file://{checkout}")]

    def image_files(self, root: str, runtime_version: str) -> dict[str, str | Path]:
        minor = ".".join(runtime_version.split(".")[:2])
        shims = python_shims(root, "/usr/bin/python3", f"{root}/venv/lib/python{minor}/site-packages",
                             f"{PIP_TOOL}/bin/python")
        return {**{f"{root.lstrip('/')}/{rel}": script(body) for rel, body in shims.items()},
                IMAGE_DROP_PROJECT.lstrip("/"): DROP_PROJECT}

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = find_interpreter(analysis.runtime_allowed)
        if found is None:
            raise no_host_runtime(f"Python among {', '.join(analysis.runtime_allowed)} "
                                  f"(at least {'.'.join(map(str, MIN_PYTHON))})", log)
        return found

    def local_runtimes(self, analysis: RepoAnalysis, log: BuildLog) -> list[str]:
        """The admitted Pythons this host has, in the analysis's order; before any build, one line
        naming what is needed and that the docker backend provides it when the host has none."""
        found = [v for v in analysis.runtime_allowed if find_interpreter([v])]
        if not found:
            docker = python_runtimes(analysis)
            offer = f"; --backend docker provides Python {docker[0]}" if docker else ""
            raise InstallError(f"the local backend needs Python {analysis.runtime_allowed[0]} (the project admits "
                               f"{', '.join(analysis.runtime_allowed)}) and this host has none of them{offer}", log.path)
        return found

    def prepare_local_layer(self, root: Path, runtime: Runtime) -> None:
        """A venv without pip of its own (swedojo's pip drives it), and the layer's shims."""
        venv = root / "venv"
        subprocess.run([str(runtime.path), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        site = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
        for rel, body in python_shims(str(root), str(runtime.path), site, sys.executable).items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(script(body))
            path.chmod(0o755)

    def local_helpers(self) -> tuple[Path, ...]:
        return (DROP_PROJECT,)

    def finish_local_layer(self, checkout: Path, root: Path, run: Callable[[str], int | None], log: BuildLog) -> None:
        if run(drop_project_step(str(root), str(DROP_PROJECT), checkout.as_uri())) != 0:
            raise InstallError("removing the project from the dependency layer failed", log.path)
