"""Read GitHub Actions workflows for the commands a project itself uses to install and test.

CI files often name the exact install and test steps and the runtime versions the project
supports (under the keys each language recipe names). Files are read with YAML's base loader
(every scalar stays a string: `3.10` does not become 3.1 and `on:` does not become True), and
anything odd in a file is skipped, not fatal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from swedojo.repolaunch.analysis import CiCommand, CiFindings
from swedojo.repolaunch.recipes import recipes

_INSTALL = re.compile(
    r"\b(pip3?|uv pip|uv) (install|sync)\b|\bpoetry install\b|\bpipenv install\b|\bnpm (ci|install)\b"
    r"|\byarn( install)?$|\byarn install\b|\bpnpm (i|install)\b|\bgo (mod download|get)\b|\bcargo (build|fetch)\b"
    r"|\bmvn\b.*\binstall\b|\bapt(-get)? install\b|\bcmake\b|\b\./configure\b"
)
_TEST = re.compile(
    r"\bpytest\b|\btox\b|\bnox\b|\b(npm|yarn|pnpm)( run)? test\b|\bgo test\b|\bcargo test\b|\bctest\b"
    r"|\bmake (test|check)\b|\bmvn\b.*\b(test|verify)\b|\bgradlew?\b.*\b(test|check)\b|\bunittest\b"
    r"|\brun_?tests?\.py\b"
)
def _walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a YAML tree."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _version(value: str, minor: bool) -> str | None:
    """A plain version ("3.11", "18.x", "1.21.4", "17") cut to the part that picks a toolchain
    (`minor`: major.minor, else the major alone)."""
    match = re.fullmatch(r"v?(\d+)(?:\.(\d+))?(?:\.[\dx*]+)?(?:-dev)?|v?(\d+)\.x", value.strip())
    if not match:
        return None
    if match.group(3):
        return match.group(3)
    major, minor_part = match.group(1), match.group(2)
    return f"{major}.{minor_part}" if minor and minor_part is not None else major


def _run_lines(script: str) -> Iterator[str]:
    joined = re.sub(r"\s*\\\n\s*", " ", script)
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


_NOT_A_COMMAND = re.compile(r"(?:echo|printf|export|local|declare)\b|\w+=\S*$")
"""A script's line that names a test tool without running one: a message, an assignment (`PATH=$PWD/.tox/...`)."""
_SCRIPT = re.compile(r"^(?:(?:ba)?sh |bash -\w+ |source |\. )?(?:\./)?([\w./-]+\.sh)(?:\s|$)")
"""A step that runs a shell script of the repository: `./ci.sh`, `bash scripts/test.sh --slow`."""


def _script_run(root: Path, where: str, line: str) -> str:
    """The repository's shell script a step runs (relative to the root), "" when it runs none."""
    match = _SCRIPT.match(line)
    if not match:
        return ""
    path = (root / where / match.group(1)).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        return ""
    return str(path.relative_to(root.resolve()))


def _script_tests(root: Path, workflow: str, script: str, where: str, job: str) -> list[CiCommand]:
    """The test lines of a shell script a workflow's step runs, as the step's own. Only its tests:
    its other lines set up CI machines (caches, coverage uploads, other installers)."""
    text = (root / script).read_text(errors="replace")
    return [CiCommand(file=workflow, script=script, kind="test", command=line, workdir=where, job=job)
            for line in _run_lines(text) if _TEST.search(line) and not _NOT_A_COMMAND.match(line)]


def read_workflows(root: Path) -> CiFindings:
    """Scan `.github/workflows/*.yml|yaml` under `root`."""
    findings = CiFindings()
    followed: set[tuple[str, str, str]] = set()
    folder = root / ".github" / "workflows"
    files = sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]) if folder.is_dir() else []
    for path in files:
        rel = str(path.relative_to(root))
        try:
            tree = yaml.load(path.read_text(errors="replace"), Loader=yaml.BaseLoader)
        except yaml.YAMLError:
            findings.unreadable.append(rel)
            continue
        jobs = tree.get("jobs") if isinstance(tree, dict) else None
        parts = list(jobs.items()) if isinstance(jobs, dict) else [("", tree)]
        for job, part in parts:
            for mapping in _walk(part):
                run = mapping.get("run")
                where = mapping.get("working-directory")
                where = where.strip().removeprefix("./").rstrip("/") if isinstance(where, str) else ""
                if isinstance(run, str):
                    for line in _run_lines(run):
                        kind = "test" if _TEST.search(line) else "install" if _INSTALL.search(line) else ""
                        if kind:
                            findings.commands.append(CiCommand(file=rel, kind=kind, command=line, workdir=where, job=job))
                        elif (script := _script_run(root, where, line)) and (rel, job, script) not in followed:
                            followed.add((rel, job, script))
                            findings.commands += _script_tests(root, rel, script, where, job)
                for recipe in recipes():
                    for key in recipe.ci_version_keys:
                        values = mapping.get(key)
                        for value in values if isinstance(values, list) else [values]:
                            version = _version(value, recipe.ci_minor_versions) if isinstance(value, str) else None
                            seen = findings.versions.setdefault(recipe.family, []) if version else []
                            if version and version not in seen:
                                seen.append(version)
    return findings
