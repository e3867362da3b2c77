"""Analysis, rules first: language, build system, runtime version, install and test commands.

`analyse(root, date)` reads a work tree (and its CI workflows) and returns a `RepoAnalysis` that
says which file said what. It never runs the project: building is the launcher's job. `date` is
the commit date: it bounds the runtime versions (no Python 3.12 for a 2021 commit) and pins
Python dependency resolution to packages uploaded before it. Each language's rules are its
recipe's (`recipes`); the one whose build files the tree has, by detection priority, reads it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from swedojo.repolaunch.analysis import Evidence, PythonPlanning, RepoAnalysis
from swedojo.repolaunch.ci import read_workflows
from swedojo.repolaunch.recipes import recipe_for, recipes
from swedojo.repolaunch.runner import graded_command


class NoBuildSystemError(Exception):
    """No file the rules know says how to build or test the repository."""


def debian_release(language: str, version: str) -> str:
    """Debian release whose libraries match the runtime's era (and ship its toolchain)."""
    return recipe_for(language).debian_release(version)


def undated(analysis: RepoAnalysis, why: str) -> RepoAnalysis:
    """The analysis resolving the latest dependencies, for a registry that cannot answer as of its
    date (`why`: what it said): the date options leave the install commands."""
    date = analysis.resolution_date
    commands = [c.replace(f" --before={date}", "").replace(f" --uploaded-prior-to {date}", "")
                for c in analysis.install_commands]
    said = Evidence(file="(install)", says=f"resolution as of {date} dropped, latest versions instead: {why}")
    return analysis.model_copy(update={"resolution_date": "", "install_commands": commands,
                                       "evidence": [*analysis.evidence, said]})


def analyse(root: Path, when: datetime | None = None, python: PythonPlanning | None = None) -> RepoAnalysis:
    """Read `root` (a work tree) and say how to set it up; `when` is the commit date; `python`:
    choices a retry makes for a Python project (default: the rules' first choice)."""
    ci = read_workflows(root)
    claims = [(priority, recipe) for recipe in recipes() if (priority := recipe.detect(root)) is not None]
    if not claims:
        raise NoBuildSystemError(
            f"{root}: no build or dependency file the rules know (pyproject.toml, setup.py, package.json, "
            "go.mod, Cargo.toml, pom.xml, build.gradle, CMakeLists.txt, meson.build, Makefile, requirements*.txt)")
    recipe = min(claims, key=lambda claim: claim[0])[1]
    out = recipe.analyse(root, ci, when, python or PythonPlanning())
    for lock in ("poetry.lock", "uv.lock", "Pipfile.lock"):
        if (root / lock).is_file():
            out.note(lock, "lock file present (resolution still goes through pip with the commit date)")
    graded = graded_command(root, out.test_command, out.log_parser)
    out.test_command = graded.command
    for note in graded.notes:
        out.note("(test command)", note)
    out.ci_commands = [c.command for c in ci.commands]
    for c in ci.commands:
        out.note(c.script or c.file, f"{c.kind}: {c.command}")
    for file in ci.unreadable:
        out.note(file, "workflow did not parse; skipped")
    return out
