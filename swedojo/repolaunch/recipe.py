"""What both backends build, written once: the dependency layer's commands and key, the repo
layer's steps, the shims that let sandboxes use a layer.

A dependency layer lives in one directory (`$SWEDOJO_ENV`): the local cache's `<key>/`, or
`/opt/swedojo/env` in an image. Python: `venv/` (the dependencies, not the project) and `shims/`
(first on PATH); Node: `node_modules/`; Go: `gomod/` (the module cache); Rust: `vendor/` (cargo
vendor) and `cargo/` (`CARGO_HOME`, whose config points crates.io there); Java: `m2/` (Maven's
local repository); C: nothing. The repo layer runs in every fresh sandbox: Python makes an
overlay venv in `$HOME` that sees the layer through a `.pth` file and installs the project
editable into it; Node links the layer's packages into the work tree's `node_modules`; cargo,
Maven, CMake, Meson and make build in the work tree. Sandboxes fetch nothing: Go and cargo are
told to stay offline, and Maven runs with `-o`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

from swedojo.repolaunch.detect import RepoAnalysis

ENV_VAR = "SWEDOJO_ENV"
"""`EnvSpec.env_vars` key naming the dependency layer's directory (in a sandbox's view)."""
LAYOUT = 2
"""Version of the layer layout; part of every key, so a layout change rebuilds."""
PYTHON = "python"
NODE = ("javascript", "typescript")
NATIVE = ("c", "cpp")
GO, RUST, JAVA = "go", "rust", "java"
OVERLAY = '"$HOME/.swedojo-venv"'
EXCLUDE_BUILD_LEFTOVERS = "git ls-files --others --exclude-standard --directory | sed 's|^|/|' >> .git/info/exclude"
"""egg-info, build/, objects and links made by the repo layer stay out of `git diff`, hence out of patches."""
LINK_NODE_MODULES = (f'mkdir -p node_modules && for f in "${ENV_VAR}"/node_modules/* "${ENV_VAR}"/node_modules/.[!.]*; '
                     'do [ -e "$f" ] && ln -sfn "$f" node_modules/; done; true')
"""The layer's packages linked one by one into a node_modules of the work tree's own, where tools
may write (ava, babel and others keep a cache in `node_modules/.cache`; the layer is read-only)."""
NPM_QUIET = {"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
"""npm settings for builds: no network calls beyond the registry, no noise in the log."""
DROP_PROJECT = Path(__file__).with_name("drop_project.py")
"""Script the dependency venv runs last: uninstall the project itself, list what is installed."""


class UnsupportedLanguageError(ValueError):
    """No recipe for this language yet (the same on every backend)."""


def unsupported(analysis: RepoAnalysis) -> UnsupportedLanguageError:
    """The one reason every backend gives for a language without a recipe."""
    return UnsupportedLanguageError(f"no environment recipe for {analysis.language} ({analysis.build_system}) yet, "
                                    "on any backend (there are recipes for python, javascript, typescript, go, rust, "
                                    "java with maven, c and cpp)")


def has_recipe(analysis: RepoAnalysis) -> bool:
    """Whether both backends can build the analysis (Gradle, whose wrapper fetches Gradle itself, not yet)."""
    return analysis.language in (PYTHON, *NODE, *NATIVE, GO, RUST) or \
        (analysis.language == JAVA and analysis.build_system == "maven")


def toolchain_env(language: str, root: str, sandbox: bool) -> dict[str, str]:
    """Go, cargo and Maven variables naming where the dependency layer (`root`) keeps what they
    fetched: the same at install and in sandboxes. Installs keep Go's module cache removable;
    sandboxes are offline, so a dependency the layer lacks fails at once, naming itself."""
    if language == GO:
        return {"GOMODCACHE": f"{root}/gomod", "GOTOOLCHAIN": "local",
                **({"GOPROXY": "off"} if sandbox else {"GOFLAGS": "-modcacherw"})}
    if language == RUST:
        return {"CARGO_HOME": f"{root}/cargo", **({"CARGO_NET_OFFLINE": "true"} if sandbox else {})}
    if language == JAVA:
        return {"MAVEN_OPTS": f"-Dmaven.repo.local={root}/m2"}
    return {}


def install_plan(analysis: RepoAnalysis) -> list[str]:
    """The dependency layer's commands as recorded in the `EnvSpec` (replayed verbatim by --rebuild).

    Python ends with the layer's own pip (date-pinned like the rest), which sandboxes use for
    the repo layer.
    """
    if analysis.language == PYTHON:
        when = f" --uploaded-prior-to {analysis.resolution_date}" if analysis.resolution_date else ""
        return [*analysis.install_commands, f"pip install{when} pip"]
    if not has_recipe(analysis):
        raise unsupported(analysis)
    return list(analysis.install_commands)


def sandbox_steps(analysis: RepoAnalysis) -> list[str]:
    """The repo layer as run in every fresh sandbox (`EnvSpec.rebuild_commands`)."""
    if analysis.language == PYTHON:
        return ["swedojo-overlay", *analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS] if analysis.rebuild_commands \
            else []
    if analysis.language in NODE:
        return [LINK_NODE_MODULES, *analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS]
    return [*analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS] if analysis.rebuild_commands else []


def env_key(workdir: Path, analysis: RepoAnalysis, runtime: str) -> str:
    """Hash of what decides a dependency layer: dependency files, commands, resolution date, runtime.

    The same for both backends (`runtime` names the interpreter or the runtime image), so commits
    whose dependency files did not change share one layer.
    """
    digest = hashlib.sha256(json.dumps({
        "layout": LAYOUT, "runtime": runtime, "install": install_plan(analysis),
        "rebuild": sandbox_steps(analysis), "date": analysis.resolution_date,
    }, sort_keys=True).encode())
    for rel in sorted(set(analysis.dependency_files)):
        path = workdir / rel
        digest.update(rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
    return digest.hexdigest()[:24]


def python_shims(root: str, base_python: str, site: str, pip_driver: str) -> dict[str, str]:
    """Scripts by path relative to the layer root: `shims/{python,python3,pip,swedojo-overlay}`, and
    `venv/bin/pip`, which drives the venv with `pip_driver` (a python holding a date-aware pip)
    until the layer's own pip replaces it."""
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
        "venv/bin/pip": f'exec {shlex.quote(pip_driver)} -m pip --python {venv_python} "$@"',
    }


def script(body: str) -> str:
    """A shim's file content."""
    return f"#!/bin/sh\n{body}\n"


def npm_resolved(lock_text: str) -> dict[str, str]:
    """name -> version of the top-level packages npm installed (`node_modules/.package-lock.json`)."""
    try:
        packages = json.loads(lock_text).get("packages", {})
    except (json.JSONDecodeError, AttributeError):
        return {}
    return {path.removeprefix("node_modules/"): info.get("version", "") for path, info in sorted(packages.items())
            if path.startswith("node_modules/") and "/node_modules/" not in path}
