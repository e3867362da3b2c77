"""`LanguageRecipe`: what RepoLaunch knows about one language, in one place.

A recipe says whether a work tree is its language (`detect`), reads the tree into a
`RepoAnalysis` (`analyse`), and says what both backends build for it: the dependency layer's
commands, key and variables, the repo layer's steps, the docker runtime layer, the local
backend's host runtime. The builders (`images`, `local`) and `launch` ask the recipe and never
name a language, so a language is one module and one `register` call (`recipes/__init__.py`).

The dependency layer lives in one directory (`$SWEDOJO_ENV`): the local cache's `<key>/`, or
`/opt/swedojo/env` in an image; each recipe's module says what it keeps there. The repo layer
runs in every fresh sandbox. Sandboxes fetch nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from swedojo.repolaunch.analysis import (
    CiFindings,
    Evidence,
    PythonPlanning,
    RepoAnalysis,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.host import Runtime
from swedojo.repolaunch.missing import missing_packages
from swedojo.repolaunch.registries import Registry

ENV_VAR = "SWEDOJO_ENV"
"""`EnvSpec.env_vars` key naming the dependency layer's directory (in a sandbox's view)."""
LAYOUT = 2
"""Version of the layer layout; part of every key, so a layout change rebuilds."""
EXCLUDE_BUILD_LEFTOVERS = "git ls-files --others --exclude-standard --directory | sed 's|^|/|' >> .git/info/exclude"
"""egg-info, build/, objects and links made by the repo layer stay out of `git diff`, hence out of patches."""
NPM_QUIET = {"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
"""npm settings for builds: no network calls beyond the registry, no noise in the log."""
ADD_SANDBOX_USER = "useradd --uid 1000 --user-group --create-home --shell /bin/bash sandbox"
"""The runtime layer's step that makes the sandbox user (uid 1000)."""


def apt(*packages: str) -> str:
    """A runtime layer's step installing Debian packages, leaving no apt lists or archives behind."""
    return ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            f"{' '.join(packages)} >/dev/null && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb")


class Adaptation(BaseModel):
    """A change of plan that a failed attempt's build log calls for (npm's `--legacy-peer-deps`
    after a peer-dependency conflict, a missing tool's Debian package): applied to every later plan
    of the launch, each at most once, and recorded in the build log and `EnvSpec.attempts`."""

    name: str
    """What changes, in a few words; one adaptation of a name per launch."""
    cause: str
    """The log's line that called for it."""
    packages: list[str] = Field(default_factory=list)
    """Debian packages it adds to the runtime layer."""
    work_tree_mb: int = 0
    """Room it gives each sandbox's work tree (`EnvSpec.work_tree_mb`); 0: no change."""


WORK_TREE_STEPS = (4096, 16384)
"""Work tree sizes (MiB) a launch tries in turn after a step ran out of space (the default is
`SandboxConfig.disk_mb`)."""
_NO_SPACE = re.compile(r"^.*No space left on device.*$", re.MULTILINE)


class LanguageRecipe(ABC):
    """One language's rules and layers. Subclasses set the class attributes and implement the
    abstract methods; the defaults fit a compiled language whose toolchain needs no layer of its own."""

    languages: ClassVar[tuple[str, ...]]
    """The `RepoAnalysis.language` values it serves."""
    family: ClassVar[str]
    """Its name in runtime image tags and in `CiFindings.versions` ("node" for javascript and typescript)."""
    priority: ClassVar[int]
    """Detection order: when several recipes recognise a tree, the lowest priority wins."""
    build_systems: ClassVar[tuple[str, ...]] = ()
    """The build systems it can build, when not every one its `analyse` reports (Java: maven, not gradle)."""
    ci_version_keys: ClassVar[tuple[str, ...]] = ()
    """Workflow keys that name its runtime's versions (`node-version`, a matrix's `node`)."""
    ci_minor_versions: ClassVar[bool] = False
    """A version from CI keeps its minor ("3.11"); else the major alone picks the runtime ("18")."""
    registry: ClassVar[Registry | None] = None
    """Where its dependency layer fetches from, for the one-line reason of a fetch out of reach."""
    repo_layer_in_tree: ClassVar[bool] = False
    """Its repo layer writes nothing outside the work tree (`EnvSpec.repo_layer_in_tree`): a fresh
    docker sandbox at the image's commit takes the image's outputs in place of running it."""
    replans: ClassVar[bool] = False
    """A launch analyses the tree again for each plan it tries (Python: the interpreter decides the
    resolution date, and retries change the requirements), rather than only setting the runtime."""

    # --- analysis ---------------------------------------------------------------------------------

    @abstractmethod
    def detect(self, root: Path) -> int | None:
        """The priority at which the work tree `root` is this language (lower wins); None when it is not."""

    @abstractmethod
    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        """How to set `root` up; `when` is the commit date, `planning` the choices a retry makes."""

    def supports(self, analysis: RepoAnalysis) -> bool:
        """Whether both backends can build the analysis."""
        return not self.build_systems or analysis.build_system in self.build_systems

    def debian_release(self, version: str) -> str:
        """Debian release whose libraries match the runtime's era (and ship its toolchain)."""
        return "bookworm"

    def known_runtimes(self) -> list[str]:
        """Every runtime version the rules know, newest first: what a plan that names none admits."""
        return []

    def retry(self, plan: PythonPlanning, analysis: RepoAnalysis, said: str) -> PythonPlanning | None:
        """The plan to try next on the same runtime after an attempt whose build log says `said`
        failed; None when the log suggests none."""
        return None

    def adaptations(self, analysis: RepoAnalysis, said: str) -> list[Adaptation]:
        """What the build log of a failed attempt (`said`) calls for, most specific first. The base:
        a command the step could not find, or a program or library a configure step names, is
        installed from Debian (`missing_packages`); a step that ran out of space gets a work tree
        four times as large (`WORK_TREE_STEPS`)."""
        found = [Adaptation(name=f"install {package}", cause=cause, packages=[package])
                 for package, cause in missing_packages(said)]
        if (full := _NO_SPACE.search(said)) and (room := next((mb for mb in WORK_TREE_STEPS if mb > analysis.work_tree_mb), 0)):
            found.append(Adaptation(name=f"a work tree of {room} MiB", cause=full.group(0).strip(), work_tree_mb=room))
        return found

    def adapt(self, analysis: RepoAnalysis, adaptation: Adaptation) -> RepoAnalysis:
        """The analysis with `adaptation` applied (the base adds its packages and its room)."""
        packages = [p for p in adaptation.packages if p not in analysis.system_packages]
        said = Evidence(file="(launch)", says=f"{adaptation.name}: {adaptation.cause}")
        return analysis.model_copy(update={"system_packages": [*analysis.system_packages, *packages],
                                           "work_tree_mb": max(analysis.work_tree_mb, adaptation.work_tree_mb),
                                           "evidence": [*analysis.evidence, said]})

    # --- layers (both backends) -------------------------------------------------------------------

    def install_plan(self, analysis: RepoAnalysis) -> list[str]:
        """The dependency layer's commands as recorded in the `EnvSpec` (replayed verbatim by --rebuild)."""
        return list(analysis.install_commands)

    def sandbox_steps(self, analysis: RepoAnalysis) -> list[str]:
        """The repo layer as run in every fresh sandbox (`EnvSpec.rebuild_commands`)."""
        return [*analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS] if analysis.rebuild_commands else []

    def env_key(self, workdir: Path, analysis: RepoAnalysis, runtime: str) -> str:
        """Hash of what decides a dependency layer: dependency files, commands, resolution date, runtime.

        The same for both backends (`runtime` names the interpreter or the runtime image), so commits
        whose dependency files did not change share one layer.
        """
        digest = hashlib.sha256(json.dumps({
            "layout": LAYOUT, "runtime": runtime, "install": self.install_plan(analysis),
            "rebuild": self.sandbox_steps(analysis), "date": analysis.resolution_date,
        }, sort_keys=True).encode())
        for rel in sorted(set(analysis.dependency_files)):
            path = workdir / rel
            digest.update(rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
        return digest.hexdigest()[:24]

    def toolchain_env(self, root: str, sandbox: bool) -> dict[str, str]:
        """The toolchain's variables naming where the layer (`root`) keeps what it fetched: the same
        at install and in sandboxes; `sandbox`: in a sandbox (offline) rather than at install."""
        return {}

    def install_env(self, root: str, path: str) -> dict[str, str]:
        """Variables the layer's install commands need besides the builder's own; `path` is the PATH below."""
        return self.toolchain_env(root, sandbox=False)

    def layer_path(self, root: str) -> list[str]:
        """Directories of the layer put before PATH in sandboxes."""
        return []

    def layer_env(self, root: str) -> dict[str, str]:
        """Variables of the layer in sandboxes, besides `$SWEDOJO_ENV` and PATH."""
        return self.toolchain_env(root, sandbox=True)

    def resolved(self, read: Callable[[str], bytes | None]) -> tuple[dict[str, str], str]:
        """(name -> version in the built layer, the exact runtime version when the layer says);
        `read(path relative to the layer)` gives a file of it, None when it is missing."""
        return {}, ""

    # --- docker images ----------------------------------------------------------------------------

    @abstractmethod
    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """(Debian release, runtime version) of the runtime image: the runtime is the one the release
        ships. NoRuntimeError when no release ships one the project can use."""

    def docker_runtimes(self, analysis: RepoAnalysis) -> list[str]:
        """The runtimes the docker backend can try for the analysis, in order."""
        return [self.docker_runtime(analysis)[1]]

    @abstractmethod
    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        """The runtime layer's steps (run as root on the base image)."""

    def runtime_env(self, ca_bundle: str) -> dict[str, str]:
        """Variables of the runtime image; `ca_bundle` is the host's CA bundle in the base image."""
        return {}

    def image_install_env(self, root: str, path: str, dated: bool) -> dict[str, str]:
        """Variables of the image stage that installs the layer; `dated`: resolution has a date."""
        return {ENV_VAR: root, **self.install_env(root, path)}

    def image_deps_steps(self, install_commands: list[str], root: str, checkout: str) -> list[str]:
        """The deps image's steps, run in `checkout`: the install commands and the layer's own around them."""
        return [f"mkdir -p {root}", *install_commands]

    def image_files(self, root: str, runtime_version: str) -> dict[str, str | Path]:
        """Files the deps image's build stage gets, by path: text (an executable script) or a file to copy."""
        return {}

    # --- local backend ----------------------------------------------------------------------------

    @abstractmethod
    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        """The host runtime for the analysis; InstallError (`host.no_host_runtime`) when sandboxes can use none."""

    def local_runtimes(self, analysis: RepoAnalysis, log: BuildLog) -> list[str]:
        """The runtimes the local backend can try for the analysis, in order."""
        return [self.host_runtime(analysis, log).version]

    def prepare_local_layer(self, root: Path, runtime: Runtime) -> None:
        """Make what the install commands expect in the empty layer directory `root`."""

    def local_helpers(self) -> tuple[Path, ...]:
        """The harness's own files the layer's local install steps run: a local sandbox shows of the
        harness's package only what it is told (its bundled suites hold gold patches)."""
        return ()

    def finish_local_layer(self, checkout: Path, root: Path, run: Callable[[str], int | None], log: BuildLog) -> None:
        """The layer's last step after the install commands ran in `checkout`; `run(command)` runs
        a step where they ran and gives its exit code."""
