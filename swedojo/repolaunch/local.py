"""The `local` launch mode: the dependency layer as a cached directory, tests in a `LocalSandbox`.

Two layers, as the docker images have them (see `recipe`):
- dependency layer: a directory under `~/.cache/swedojo/envs/<key>/` (Python: a venv holding the
  dependencies, not the project; Node: `node_modules`; Go, cargo, Maven: what they fetched; C:
  empty), key = `recipe.env_key` with the host runtime's version; many commits share one;
- repo layer: `EnvSpec.rebuild_commands`, run inside each sandbox (`environment.prepare`); nothing
  is written to the shared layer.

Installing runs the repository's code (its setup.py, build backends, npm scripts): each install
step runs inside a local sandbox (`LocalConfinement` with `BUILD_LIMITS`: network on, the host
read-only, writes only to the checkout and the layer directory, which is given back to us after).

Sandboxes run as an unprivileged uid with the host read-only and a private /tmp, so the layer
and its runtime must be readable by any user and live outside /tmp: interpreters that are
not are skipped, and the default cache is `~/.cache/swedojo/envs` only where other users can
reach it (`/var/cache/swedojo/envs` otherwise, e.g. for root). `SWEDOJO_CACHE` overrides both.

pip: the dependency layer is installed by swedojo's own pip (which has `--uploaded-prior-to`)
with `--python` aimed at the venv. A date-pinned install ignores pip's config files: local
mirrors and find-links carry no upload times and would defeat the date.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from pydantic import BaseModel

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.detect import RepoAnalysis
from swedojo.repolaunch.errors import InstallError
from swedojo.repolaunch.recipe import (
    DROP_PROJECT,
    ENV_VAR,
    GO,
    JAVA,
    NATIVE,
    NODE,
    NPM_QUIET,
    PYTHON,
    RUST,
    env_key,
    has_recipe,
    install_plan,
    npm_resolved,
    python_shims,
    sandbox_steps,
    script,
    toolchain_env,
    unsupported,
)
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.filelock import file_lock
from swedojo.sandboxes.local import LocalConfinement
from swedojo.schema import EnvSpec

MIN_PYTHON = (3, 9)
"""Oldest interpreter swedojo's pip can drive with `--python`."""
_PASS_THROUGH = ("LANG", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "PIP_INDEX_URL",
                 "PIP_CACHE_DIR", "PIP_DEFAULT_TIMEOUT", "NODE_EXTRA_CA_CERTS", "http_proxy", "https_proxy",
                 "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "npm_config_cache", "PIP_EXTRA_INDEX_URL",
                 "npm_config_registry")


BUILD_LIMITS = SandboxConfig(network=True, memory_mb=8192, pids=4096, cpus=float(os.cpu_count() or 1),
                             disk_mb=8192)
"""The install steps' sandbox: the network, and room for compilers and wheels (disk_mb bounds
each file written and the private /tmp that holds pip's and npm's caches)."""


def visible_to_sandboxes(path: Path) -> bool:
    """Whether a sandbox's uid can reach `path`: outside its private /tmp, every directory searchable."""
    real = Path(os.path.realpath(path))
    if real.parts[1:2] in (("tmp",), ("dev",)):
        return False
    if os.getuid() != 0:
        return True  # sandboxes then run as our own uid
    return all(os.stat(parent).st_mode & 0o001 for parent in [*real.parents, real] if parent.exists())


def default_cache_dir() -> Path:
    """Where dependency layers live: `$SWEDOJO_CACHE/envs`, else under ~/.cache if sandboxes reach it."""
    if "SWEDOJO_CACHE" in os.environ:
        return Path(os.environ["SWEDOJO_CACHE"]) / "envs"
    home = Path.home() / ".cache" / "swedojo" / "envs"
    return home if visible_to_sandboxes(Path.home()) else Path("/var/cache/swedojo/envs")


class Runtime(BaseModel):
    """A host interpreter or toolchain the layer is made for."""

    name: str
    """python, node, cc, go, cargo or javac."""
    version: str
    """Full version, e.g. 3.12.1."""
    path: Path
    """The real executable (not a pyenv shim)."""

    @property
    def ident(self) -> str:
        return f"{self.name} {self.version}"


class LocalEnv(BaseModel):
    """A built dependency layer; `env.json` in its directory marks it complete."""

    key: str
    """Content hash the directory is named by."""
    root: Path
    """The layer's directory (`$SWEDOJO_ENV` in sandboxes)."""
    language: str
    """Language the layer was made for."""
    runtime: Runtime
    """Host runtime it uses."""
    resolution_date: str
    """Packages uploaded before this instant only (empty: latest)."""
    install_commands: list[str]
    """The dependency layer's commands as they ran."""
    rebuild_commands: list[str]
    """The repo layer, run in every sandbox."""
    resolved: dict[str, str]
    """Distribution -> version in the layer."""
    build_seconds: float = 0.0
    """How long building took."""

    def sandbox_env(self) -> dict[str, str]:
        """`EnvSpec.env_vars` additions for sandboxes on this layer."""
        host = os.environ.get("PATH", "/usr/bin:/bin")
        if self.language == PYTHON:
            return {ENV_VAR: str(self.root), "PATH": f"{self.root / 'shims'}:{self.root / 'venv' / 'bin'}:{host}"}
        if self.language in NODE:
            return {ENV_VAR: str(self.root), "PATH": f"{self.root / 'node_modules' / '.bin'}:{host}", **NPM_QUIET}
        return {ENV_VAR: str(self.root), **toolchain_env(self.language, str(self.root), sandbox=True)}


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


def _tool(name: str, version_args: list[str], prefix: str = "v") -> Runtime | None:
    """The tool on PATH and its version: the first word of its output's first line after `prefix`
    ("v20.1.0", "go1.19.8", "cargo 1.95.0 (...)", "javac 17.0.15")."""
    found = shutil.which(name)
    if not found or not visible_to_sandboxes(Path(found)):
        return None
    proc = subprocess.run([found, *version_args], capture_output=True, text=True, check=False)
    words = proc.stdout.strip().splitlines()[0].removeprefix(prefix).split() if proc.returncode == 0 and proc.stdout \
        else []
    return Runtime(name=name, version=words[0], path=Path(os.path.realpath(found))) if words else None


def find_runtime(analysis: RepoAnalysis, log: BuildLog) -> Runtime:
    """The host runtime for the analysis's language; InstallError when there is none sandboxes can use."""
    if analysis.language == PYTHON:
        found = find_interpreter(analysis.runtime_allowed)
        wanted = f"Python among {', '.join(analysis.runtime_allowed)} (at least {'.'.join(map(str, MIN_PYTHON))})"
    elif analysis.language in NODE:
        found = _tool("node", ["--version"]) if shutil.which("npm") else None
        wanted = "node and npm"
    elif analysis.language in NATIVE:
        found = _tool("cc", ["-dumpfullversion"]) if shutil.which("make") else None
        wanted = "cc and make"
    elif analysis.language == GO:
        found, wanted = _tool("go", ["env", "GOVERSION"], "go"), "go"
    elif analysis.language == RUST:
        found, wanted = _tool("cargo", ["--version"], "cargo "), "cargo"
    elif analysis.language == JAVA and has_recipe(analysis):
        found = _tool("javac", ["--version"], "javac ") if shutil.which("mvn") else None
        wanted = "javac and mvn"
    else:
        raise InstallError(str(unsupported(analysis)), log.path)
    if found is None:
        raise InstallError(f"no {wanted} on this host that sandboxes can run (--backend docker brings its own)",
                           log.path)
    if analysis.language in NODE and found.version.split(".")[0] != analysis.runtime_version.split(".")[0]:
        log.write(f"node {analysis.runtime_version} wanted, the host has {found.version}\n")
    return found


_INDEX_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "npm_config_registry", "http_proxy", "https_proxy",
                   "HTTP_PROXY", "HTTPS_PROXY")


def _mirror_ports(variables: dict[str, str]) -> list[int]:
    """Ports of the host's loopback where the operator's settings put a package index or a proxy (a
    local mirror): the install steps' sandbox, in a network of its own, gets them relayed."""
    ports: set[int] = set()
    for name in _INDEX_SETTINGS:
        for url in variables.get(name, "").split():
            parts = urllib.parse.urlsplit(url)
            if parts.hostname and (parts.hostname == "localhost" or parts.hostname.startswith("127.")):
                ports.add(parts.port or (443 if parts.scheme == "https" else 80))
    return sorted(ports)


def _install_env(language: str, root: Path, pinned: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASS_THROUGH or (not pinned and k.startswith("PIP_"))}
    env.update(PATH=os.environ.get("PATH", "/usr/bin:/bin"), PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               PIP_PROGRESS_BAR="off", **NPM_QUIET, **{ENV_VAR: str(root)},
               **toolchain_env(language, str(root), sandbox=False))
    if language == PYTHON:
        venv = root / "venv"
        env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(venv))
    if pinned:
        env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _check_cache(cache: Path, log: BuildLog) -> None:
    if not visible_to_sandboxes(cache):
        raise InstallError(f"environment cache {cache} is out of the sandboxes' reach (under /tmp, or a directory "
                           "other users cannot search): choose another with SWEDOJO_CACHE", log.path)


def build_env(checkout: Path, analysis: RepoAnalysis, log: BuildLog, cache_dir: Path | None = None,
              timeout: float = 1800.0) -> tuple[LocalEnv, bool]:
    """The dependency layer for `analysis`, from the cache or built now; True when it was cached."""
    runtime = find_runtime(analysis, log)
    cache = cache_dir or default_cache_dir()
    _check_cache(cache, log)
    key = env_key(checkout, analysis, runtime.ident)
    root = cache / key
    with file_lock(cache / f"{key}.lock"):
        if (root / "env.json").is_file():
            log.write(f"dependency layer {key}: cache hit ({root})\n")
            return LocalEnv.model_validate_json((root / "env.json").read_text()), True
        env = LocalEnv(key=key, root=root, language=analysis.language, runtime=runtime,
                       resolution_date=analysis.resolution_date, install_commands=install_plan(analysis),
                       rebuild_commands=sandbox_steps(analysis), resolved={})
        return _build(checkout, env, log, timeout), False


def rebuild_env(spec: EnvSpec, checkout: Path, log: BuildLog, timeout: float = 1800.0) -> LocalEnv:
    """Build the dependency layer an `EnvSpec` names again from scratch, from the spec's commands alone."""
    old = load_env(spec)
    analysis = RepoAnalysis(language=spec.language, build_system=spec.build_system,
                            runtime_allowed=[".".join(spec.runtime_version.split(".")[:2])],
                            runtime_version=spec.runtime_version.split(".")[0])
    runtime = find_runtime(analysis, log)
    if runtime.ident != old.runtime.ident:
        raise InstallError(f"the layer was built with {old.runtime.ident}; this host has {runtime.ident}", log.path)
    with file_lock(old.root.parent / f"{old.key}.lock"):
        env = old.model_copy(update={"install_commands": spec.install_commands,
                                     "rebuild_commands": spec.rebuild_commands, "resolved": {}})
        return _build(checkout, env, log, timeout)


def _build(checkout: Path, env: LocalEnv, log: BuildLog, timeout: float) -> LocalEnv:
    """Build `env` into its (emptied) directory; `env.json`, written last, marks it complete."""
    shutil.rmtree(env.root, ignore_errors=True)
    env.root.mkdir(parents=True)
    start = time.monotonic()
    log.begin(f"dependency layer {env.key} ({env.language}, {env.runtime.ident})")
    try:
        if env.language == PYTHON:
            _python_venv(env)
        variables = _install_env(env.language, env.root, pinned=bool(env.resolution_date))
        if env.resolution_date:
            log.write(f"resolving as of {env.resolution_date} (PyPI upload times / npm --before)\n")
        limits = BUILD_LIMITS.model_copy(update={"total_time_s": timeout, "host_ports": _mirror_ports(variables)})
        confinement = LocalConfinement(limits, Path(tempfile.mkdtemp(prefix="swedojo-build-")), checkout,
                                       writable=(env.root,))
        try:
            for command in env.install_commands:
                log.begin(f"install: {command}")
                code = log.run(command, checkout, variables, timeout, confinement)
                if code != 0:
                    raise InstallError(f"`{command}` {'timed out' if code is None else f'exited with {code}'}", log.path)
            env.resolved = _finish(checkout, env, variables, log, timeout, confinement)
        finally:
            confinement.close()
    except BaseException:
        shutil.rmtree(env.root, ignore_errors=True)
        raise
    env.build_seconds = time.monotonic() - start
    (env.root / "env.json").write_text(env.model_dump_json(indent=2))
    return env


def _python_venv(env: LocalEnv) -> None:
    """A venv without pip of its own (swedojo's pip drives it), and the layer's shims."""
    venv = env.root / "venv"
    subprocess.run([str(env.runtime.path), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for rel, body in python_shims(str(env.root), str(env.runtime.path), site, sys.executable).items():
        path = env.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script(body))
        path.chmod(0o755)


def _finish(checkout: Path, env: LocalEnv, variables: dict[str, str], log: BuildLog, timeout: float,
            confinement: LocalConfinement) -> dict[str, str]:
    """The layer's last step (drop the project from the venv / keep node_modules); what it holds."""
    if env.language == PYTHON:
        out = env.root / "resolved.json"
        command = f"{env.root / 'venv' / 'bin' / 'python'} -I {DROP_PROJECT} {checkout.as_uri()} {out}"
        if log.run(command, checkout, variables, timeout, confinement) != 0:
            raise InstallError("removing the project from the dependency layer failed", log.path)
        return json.loads(out.read_text())["resolved"]
    if env.language in NODE:
        modules = checkout / "node_modules"
        if modules.is_dir():
            shutil.move(modules, env.root / "node_modules")
        else:
            (env.root / "node_modules").mkdir()
        lock = env.root / "node_modules" / ".package-lock.json"
        return npm_resolved(lock.read_text()) if lock.is_file() else {}
    return {}


def load_env(spec: EnvSpec) -> LocalEnv:
    """The dependency layer an `EnvSpec` from a local launch points at."""
    try:
        return LocalEnv.model_validate_json((Path(spec.env_vars[ENV_VAR]) / "env.json").read_text())
    except (KeyError, OSError, ValueError) as exc:
        raise InstallError(f"EnvSpec for {spec.repo}@{spec.commit[:12]} names no built local environment "
                           f"({ENV_VAR}): launch it again") from exc
