"""The `local` launch mode: the dependency layer as a cached directory, tests in a `LocalSandbox`.

Two layers, as the docker images have them (see `recipes`):
- dependency layer: a directory under `~/.cache/swedojo/envs/<key>/` (Python: a venv holding the
  dependencies, not the project; Node: `node_modules`; Go, cargo, Maven: what they fetched; C:
  empty), key = the recipe's `env_key` with the host runtime's version; many commits share one;
- repo layer: `EnvSpec.rebuild_commands`, run inside each sandbox (`environment.prepare`); nothing
  is written to the shared layer.

Installing runs the repository's code (its setup.py, build backends, npm scripts): each install
step runs inside a local sandbox (`LocalConfinement` with `BUILD_LIMITS`: network on, of the host
only the system, the toolchains and the harness's scripts the steps run (`local_helpers`) shown,
read-only; writes only to the checkout and the layer directory, which is given back to us after).

Sandboxes run as an unprivileged uid with a private /tmp, seeing the layer and its runtime
read-only but not the rest of the host beyond the system (`sandboxes.local._view`), so the layer
and its runtime must be readable by any user and live outside /tmp: interpreters that are
not are skipped, and the default cache is `~/.cache/swedojo/envs` only where other users can
reach it (`/var/cache/swedojo/envs` otherwise, e.g. for root). `SWEDOJO_CACHE` overrides both.

pip: the dependency layer is installed by swedojo's own pip (which has `--uploaded-prior-to`)
with `--python` aimed at the venv. A date-pinned install ignores pip's config files: local
mirrors and find-links carry no upload times and would defeat the date.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path

from pydantic import BaseModel

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import InstallError
from swedojo.repolaunch.host import Runtime, visible_to_sandboxes
from swedojo.repolaunch.recipes import recipe_for, recipe_of
from swedojo.repolaunch.recipes.base import ENV_VAR, NPM_QUIET
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.filelock import file_lock
from swedojo.sandboxes.local import LocalConfinement
from swedojo.schema import EnvSpec

_PASS_THROUGH = ("LANG", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "PIP_INDEX_URL",
                 "PIP_CACHE_DIR", "PIP_DEFAULT_TIMEOUT", "NODE_EXTRA_CA_CERTS", "http_proxy", "https_proxy",
                 "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "npm_config_cache", "PIP_EXTRA_INDEX_URL",
                 "npm_config_registry")


BUILD_LIMITS = SandboxConfig(network=True, memory_mb=8192, pids=4096, cpus=float(os.cpu_count() or 1),
                             disk_mb=8192)
"""The install steps' sandbox: the network, and room for compilers and wheels (disk_mb bounds
each file written and the private /tmp that holds pip's and npm's caches)."""


def default_cache_dir() -> Path:
    """Where dependency layers live: `$SWEDOJO_CACHE/envs`, else under ~/.cache if sandboxes reach it."""
    if "SWEDOJO_CACHE" in os.environ:
        return Path(os.environ["SWEDOJO_CACHE"]) / "envs"
    home = Path.home() / ".cache" / "swedojo" / "envs"
    return home if visible_to_sandboxes(Path.home()) else Path("/var/cache/swedojo/envs")


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
        recipe = recipe_for(self.language)
        layer_path = recipe.layer_path(str(self.root))
        path = {"PATH": ":".join([*layer_path, os.environ.get("PATH", "/usr/bin:/bin")])} if layer_path else {}
        return {ENV_VAR: str(self.root), **path, **recipe.layer_env(str(self.root))}


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
               PIP_PROGRESS_BAR="off", **NPM_QUIET, **{ENV_VAR: str(root)})
    env.update(recipe_for(language).install_env(str(root), env["PATH"]))
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
    recipe = recipe_of(analysis)
    runtime = recipe.host_runtime(analysis, log)
    cache = cache_dir or default_cache_dir()
    _check_cache(cache, log)
    key = recipe.env_key(checkout, analysis, runtime.ident)
    root = cache / key
    with file_lock(cache / f"{key}.lock"):
        if (root / "env.json").is_file():
            log.write(f"dependency layer {key}: cache hit ({root})\n")
            return LocalEnv.model_validate_json((root / "env.json").read_text()), True
        env = LocalEnv(key=key, root=root, language=analysis.language, runtime=runtime,
                       resolution_date=analysis.resolution_date, install_commands=recipe.install_plan(analysis),
                       rebuild_commands=recipe.sandbox_steps(analysis), resolved={})
        return _build(checkout, env, log, timeout), False


def rebuild_env(spec: EnvSpec, checkout: Path, log: BuildLog, timeout: float = 1800.0) -> LocalEnv:
    """Build the dependency layer an `EnvSpec` names again from scratch, from the spec's commands alone."""
    old = load_env(spec)
    analysis = RepoAnalysis(language=spec.language, build_system=spec.build_system,
                            runtime_allowed=[".".join(spec.runtime_version.split(".")[:2])],
                            runtime_version=spec.runtime_version.split(".")[0])
    runtime = recipe_of(analysis).host_runtime(analysis, log)
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
    recipe = recipe_for(env.language)
    try:
        recipe.prepare_local_layer(env.root, env.runtime)
        variables = _install_env(env.language, env.root, pinned=bool(env.resolution_date))
        if env.resolution_date:
            log.write(f"resolving as of {env.resolution_date} (PyPI upload times / npm --before)\n")
        limits = BUILD_LIMITS.model_copy(update={"total_time_s": timeout, "host_ports": _mirror_ports(variables),
                                                 "env": {"PATH": variables["PATH"]}})  # shown: its toolchains
        confinement = LocalConfinement(limits, Path(tempfile.mkdtemp(prefix="swedojo-build-")), checkout,
                                       writable=(env.root,), readable=recipe.local_helpers())
        try:
            for command in env.install_commands:
                log.begin(f"install: {command}")
                code = log.run(command, checkout, variables, timeout, confinement)
                if code != 0:
                    raise InstallError(f"`{command}` {'timed out' if code is None else f'exited with {code}'}", log.path)
            recipe.finish_local_layer(checkout, env.root,
                                      lambda command: log.run(command, checkout, variables, timeout, confinement), log)
            env.resolved = recipe.resolved(lambda rel: _read(env.root / rel))[0]
        finally:
            confinement.close()
    except BaseException:
        shutil.rmtree(env.root, ignore_errors=True)
        raise
    env.build_seconds = time.monotonic() - start
    (env.root / "env.json").write_text(env.model_dump_json(indent=2))
    return env


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def load_env(spec: EnvSpec) -> LocalEnv:
    """The dependency layer an `EnvSpec` from a local launch points at."""
    try:
        return LocalEnv.model_validate_json((Path(spec.env_vars[ENV_VAR]) / "env.json").read_text())
    except (KeyError, OSError, ValueError) as exc:
        raise InstallError(f"EnvSpec for {spec.repo}@{spec.commit[:12]} names no built local environment "
                           f"({ENV_VAR}): launch it again") from exc
