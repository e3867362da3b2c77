"""Docker images in layers with content-addressed tags: base -> runtime -> deps -> repo.

- base `swedojo/base:<release>`: a Debian root made here with debootstrap (no registry is
  reachable), with the host's CA bundle and apt settings; bookworm comes from
  `scripts/ensure_docker.sh`, other releases are made on first use (`ensure_base`).
- runtime `swedojo/runtime:<family>-<release>-<hash>`: the Debian release's interpreter or
  toolchain, git, patch, the sandbox user (uid 1000), and for Python a venv with swedojo's own pip
  version (which has `--uploaded-prior-to`); hash of the base image id and the recipe.
- deps `swedojo/deps:<key>`: the dependency layer at `/opt/swedojo/env`, key = the recipe's `env_key`
  with the runtime tag as runtime (the same function as the local layer), so commits with the
  same dependency files share it. Built in a first stage that has the checkout; only the layer
  is copied into the image.
- repo `swedojo/env:<name>-<commit>-<hash>`: the commit at `/testbed` (a fresh `git init` holding
  just that commit and its ancestors) with the repo layer run as the sandbox user: `docker run`
  on it runs the tests as they were validated.

Sandboxes mount a fresh work tree over `/testbed`, so they run the repo layer again
(`environment.prepare`); the image's `/testbed` serves standalone use. Where the project is built
(`EnvSpec.build_command`) or its repo layer writes only the tree (`EnvSpec.repo_layer_in_tree`),
the repo layer's outputs are also kept beside it, and a fresh sandbox starts from them
(`sandboxes.prebuilt`).

Every layer is checked by tag before building: a second launch of the same spec builds nothing.
With a layer store on a shared directory (`$SWEDOJO_IMAGE_STORE`, `sandboxes.image_store`), a layer
this engine lacks is loaded from there when another node saved it, and each layer built is saved.
`nocache` (for `--rebuild`) builds each layer from scratch under the same tag; the images it
replaces are removed where nothing else uses them.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import IO

import docker.errors
from pydantic import BaseModel

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import EngineBuildError, InstallError
from swedojo.repolaunch.recipes import recipe_for, recipe_of
from swedojo.repolaunch.recipes.base import ENV_VAR, apt
from swedojo.sandboxes import image_store, prebuilt
from swedojo.sandboxes.docker import SANDBOX_USER, api, owner_labels
from swedojo.sandboxes.filelock import exclusive_if_free, file_lock, shared_lock
from swedojo.sandboxes.image_disk import budget_mb, prune_to_budget
from swedojo.sandboxes.image_use import record_use
from swedojo.schema import EnvSpec

ENV_ROOT = "/opt/swedojo/env"
"""The dependency layer's directory in images (`$SWEDOJO_ENV`)."""
SRC = "/opt/swedojo/src"
"""The checkout in the dependency layer's build stage (not in the image)."""
TESTBED = "/testbed"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_CA = "/etc/ssl/host-ca-bundle.crt"
"""The host's CA bundle in base images (ensure_docker.sh puts it there)."""
LAYERS = ("base", "runtime", "deps", "repo")


class LayerBuildError(InstallError):
    """`docker build` of a layer failed: a step exited non-zero."""


class BaseImageError(InstallError):
    """The Debian base image is missing and could not be made here."""


class Layer(BaseModel):
    """One image of a launch."""

    name: str
    """base, runtime, deps or repo."""
    tag: str
    """Content-addressed tag."""
    image_id: str = ""
    """Image id after the launch."""
    cached: bool = False
    """The tag existed: nothing was built."""
    seconds: float = 0.0
    """Build time (0 when cached)."""
    size_mb: float = 0.0
    """Size of the image (all layers below included)."""


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def image_id(tag: str) -> str:
    """The id of a local image, "" when there is none."""
    try:
        return str(api().inspect_image(tag)["Id"])
    except docker.errors.ImageNotFound:
        return ""


def layer_info(name: str, tag: str, cached: bool, seconds: float = 0.0) -> Layer:
    """What a launch reports about one of its images."""
    info = api().inspect_image(tag)
    return Layer(name=name, tag=tag, image_id=info["Id"], cached=cached, seconds=seconds,
                 size_mb=round(info["Size"] / 2**20, 1))


# --- the recipe's layers ------------------------------------------------------------------------

def layer_env(spec: EnvSpec) -> dict[str, str]:
    """Variables of the dependency layer: in the deps image and in `EnvSpec.env_vars`."""
    recipe = recipe_for(spec.language)
    return {ENV_VAR: ENV_ROOT, "PATH": ":".join([*recipe.layer_path(ENV_ROOT), SYSTEM_PATH]),
            **recipe.layer_env(ENV_ROOT)}


# --- Dockerfiles --------------------------------------------------------------------------------

STEP_MARK = "#swedojo-step"
"""Printed before each step of a layer's RUN: the build reads it for progress and for errors."""


def _env_line(variables: dict[str, str]) -> str:
    return "ENV " + " ".join(f"{k}={json.dumps(v)}" for k, v in variables.items())


def _run(steps: list[str], cwd: str = "") -> list[str]:
    """One RUN for all of a layer's steps (every instruction costs a container commit), each in a
    subshell (as each runs in its own shell locally), announced by a marker line."""
    if not steps:
        return []
    lines = ["set -e", *([f"cd {cwd}"] if cwd else [])]
    for index, step in enumerate(steps):
        lines += [f"echo '{STEP_MARK} {index}'", f"( {step}\n)"]
    return ["RUN " + json.dumps(["/bin/bash", "-c", "\n".join(lines)])]


def layer_steps(name: str, spec: EnvSpec) -> list[str]:
    """What the layer's RUN does: the spec's commands plus the fixed steps of the layer's layout."""
    if name == "runtime":
        return spec.toolchain_commands
    if name == "repo":  # where the project is built, its outputs kept for fresh sandboxes
        return [*spec.rebuild_commands, *([prebuilt.SAVE] if prebuilt.kept(spec) else [])]
    return recipe_for(spec.language).image_deps_steps(spec.install_commands, ENV_ROOT, SRC)


def runtime_dockerfile(spec: EnvSpec) -> str:
    lines = [f"FROM {spec.base_image}"]
    if variables := recipe_for(spec.language).runtime_env(HOST_CA):
        lines.append(_env_line(variables))
    return "\n".join([*lines, *_run(layer_steps("runtime", spec)), ""])


_MANIFEST = f"{ENV_ROOT}/.swedojo-files"
_COUNT = f"find {ENV_ROOT} -mindepth 1 ! -path {_MANIFEST} | wc -l"
COPY_LOST_FILES = 97
"""Exit status of the deps layer's check that `COPY --from` copied every file: the legacy builder
can lose its source mid-copy (the daemon logs "Can't stat file ... to tar", the layer is committed
short, and the build cache then serves the short layer to every later build)."""


def deps_dockerfile(spec: EnvSpec) -> str:
    """Two stages: the first has the checkout and installs; the image keeps only `/opt/swedojo/env`,
    counted in both stages (`COPY_LOST_FILES`)."""
    runtime = spec.layers["runtime"]
    lines = [f"FROM {runtime} AS build", _env_line(recipe_for(spec.language).image_install_env(
        ENV_ROOT, SYSTEM_PATH, dated=bool(spec.resolution_date)))]
    lines += ["COPY opt /opt", *_run(layer_steps("deps", spec), SRC),
              f"RUN [ ! -d {ENV_ROOT} ] || {_COUNT} > {_MANIFEST}"]  # no layer: the copy fails on its own
    lines += [f"FROM {runtime}", f"COPY --from=build {ENV_ROOT} {ENV_ROOT}",
              (f'RUN n=$({_COUNT}) && [ "$n" = "$(cat {_MANIFEST})" ] || '
               f'{{ echo "the engine copied $n of $(cat {_MANIFEST}) files of {ENV_ROOT}"; exit {COPY_LOST_FILES}; }}'),
              _env_line(layer_env(spec)), ""]
    return "\n".join(lines)


def repo_dockerfile(spec: EnvSpec) -> str:
    steps, (uid, gid) = layer_steps("repo", spec), SANDBOX_USER.split(":")
    lines = [f"FROM {spec.layers['deps']}", _env_line({**spec.env_vars, "HOME": "/home/sandbox"}),
             f"COPY --chown={SANDBOX_USER} testbed {TESTBED}",
             *([f"RUN install -d -o {uid} -g {gid} {prebuilt.PREBUILT} {prebuilt.PREBUILT}/tree"] if prebuilt.SAVE in steps else []),
             f"USER {SANDBOX_USER}", f"WORKDIR {TESTBED}"]
    return "\n".join([*lines, *_run(steps), ""])


# --- planning -----------------------------------------------------------------------------------

def _slug(repo: str) -> str:
    name = re.sub(r"\.git$", "", repo.rstrip("/").split("/")[-1]) or "repo"
    return re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.")[:40] or "repo"


def plan(spec: EnvSpec, analysis: RepoAnalysis, checkout: Path, log: BuildLog) -> EnvSpec:
    """Fill the docker fields of `spec` (base image, toolchain, env vars, every layer's tag).

    Makes the base image if it is missing: the runtime tag hashes its id.
    """
    recipe = recipe_of(analysis)
    release, version = recipe.docker_runtime(analysis)
    log.write(f"docker runtime: {recipe.family} {version} from Debian {release}\n")
    base = ensure_base(release, log)
    spec.base_image = base
    spec.runtime_version = version
    spec.toolchain_commands = recipe.toolchain_commands(analysis) + \
        ([apt(*analysis.system_packages)] if analysis.system_packages else [])
    spec.workdir = TESTBED
    spec.env_vars.update(layer_env(spec))
    runtime = f"swedojo/runtime:{recipe.family}-{release}-" \
              f"{_digest(image_id(base), runtime_dockerfile(spec))[:16]}"
    spec.layers = {"base": base, "runtime": runtime}
    spec.layers["deps"] = f"swedojo/deps:{recipe.env_key(checkout, analysis, runtime)}"
    repo_key = _digest(spec.layers["deps"], spec.commit, repo_dockerfile(spec))[:12]
    spec.layers["repo"] = f"swedojo/env:{_slug(spec.repo)}-{spec.commit[:12]}-{repo_key}"
    spec.image = spec.layers["repo"]
    return spec


# --- building -----------------------------------------------------------------------------------

def _context(name: str, spec: EnvSpec, checkout: Path, out: IO[bytes]) -> None:
    """The build context of layer `name` as a tar written to `out`."""
    dockerfile = {"runtime": runtime_dockerfile, "deps": deps_dockerfile, "repo": repo_dockerfile}[name](spec)
    with tarfile.open(fileobj=out, mode="w") as tar:
        image_store.add_text(tar, "Dockerfile", dockerfile)
        if name == "deps":
            tar.add(checkout, arcname=SRC.lstrip("/"))
            for path, content in recipe_for(spec.language).image_files(ENV_ROOT, spec.runtime_version).items():
                if isinstance(content, Path):
                    tar.add(content, arcname=path)
                else:
                    image_store.add_text(tar, path, content, 0o755)
        elif name == "repo":
            tar.add(checkout, arcname="testbed")
    out.seek(0)


_FAILED = re.compile(r"returned a non-zero code: (\d+)")
_STEP_ID = re.compile(r"^ ---> ([0-9a-f]{12,})$")
"""The image a build instruction produced (" ---> 1a2b3c4d5e6f")."""
ENGINE_RETRIES = 2
"""Times a layer the engine failed on its own (`EngineBuildError`) is built again: a real launch saw
the engine lose a `COPY --from` source twice in a row."""
BUILDS_LOCK = "builds.lock"
"""In the engine's lock directory: held shared by every layer build running (`_discard`)."""
LEFTOVERS = "leftovers"
"""In the engine's lock directory: leftover images to remove once no build runs, one id a line."""
_ENGINE_LOCKS: list[Path] = []


def engine_locks() -> Path:
    """The lock directory of the engine `api()` talks to, one per engine on this host (by its ID,
    under the temporary directory): every process building on that engine locks here, whatever its
    cache directory. With a lock directory per cache (as before), a launch's discards did not see
    the builds of a launch with another cache beside it, and removed images those builds had just
    taken from the engine's cache (a real launch lost a `COPY --from` source mid-copy)."""
    if not _ENGINE_LOCKS:
        engine = re.sub(r"[^A-Za-z0-9]", "", str(api().info().get("ID", ""))) or "engine"
        _ENGINE_LOCKS.append(Path(tempfile.gettempdir()) / "swedojo-docker-locks" / engine[:32])
    return _ENGINE_LOCKS[0]


class _Leftovers:
    """Images a build made that no tag will keep: the build stage (it holds the checkout), and what
    the steps before a failure made. Images named by FROM are never among them."""

    def __init__(self) -> None:
        self.from_ids: set[str] = set()
        self.last_id = ""
        self.stage_id = ""
        self._after_from = False

    def read(self, line: str) -> None:
        if line.startswith("Step ") and " : FROM " in line:
            if self.last_id:
                self.stage_id = self.last_id  # a build stage ends: the image keeps only what it copies
            self._after_from = True
        elif made := _STEP_ID.match(line.rstrip()):
            self.last_id = made.group(1)
            if self._after_from:
                self.from_ids.add(self.last_id)
            self._after_from = False

    def images(self, failed: bool) -> set[str]:
        return {self.stage_id, self.last_id if failed else ""} - self.from_ids - {""}


def _remove(image: str) -> bool:
    try:
        api().remove_image(image)
        return True
    except docker.errors.APIError:
        return False  # gone already, or the parent of a kept image (or of one still pending): it stays


def _discard(images: set[str]) -> None:
    """Remove a build's leftover images, with those left before, once no layer build runs on the
    engine (until then they wait in `LEFTOVERS` for the last build to end). The engine
    removes an image's untagged parents with it, and a build running beside may have just taken one
    of them from its cache: it then failed on a parent gone ("unknown parent image ID") or a
    `COPY --from` source gone ("lstat .../merged/...: no such file")."""
    lock_dir = engine_locks()
    with file_lock(lock_dir / f"{LEFTOVERS}.lock"):
        queue = lock_dir / LEFTOVERS
        pending = {*(queue.read_text().split() if queue.is_file() else ()), *images}
        with exclusive_if_free(lock_dir / BUILDS_LOCK) as free:
            if not free:
                queue.write_text("".join(f"{image}\n" for image in sorted(pending)))
                return
            while removed := {image for image in pending if _remove(image)}:  # a child first, then its parent
                pending -= removed
        queue.unlink(missing_ok=True)


def _build(name: str, spec: EnvSpec, checkout: Path, log: BuildLog, nocache: bool, timeout: float) -> None:
    tag = spec.layers[name]
    steps = layer_steps(name, spec)
    log.begin(f"{name} layer: building {tag}{' (no cache)' if nocache else ''}")
    current, leftovers, failed = -1, _Leftovers(), True
    try:
        with shared_lock(engine_locks() / BUILDS_LOCK), tempfile.TemporaryFile() as context:
            _context(name, spec, checkout, context)
            stream = api().build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                 nocache=nocache, pull=False, decode=True, timeout=timeout)
            for chunk in stream:
                if "error" in chunk:
                    found = _FAILED.search(chunk["error"])
                    if found and found.group(1) == str(COPY_LOST_FILES) and name == "deps":
                        raise EngineBuildError(f"{name} layer: {chunk['error'].strip()}: its copy lost files", log.path,
                                               cached_copy=True)
                    if found and current >= 0:
                        raise LayerBuildError(f"{name} layer: `{steps[current]}` exited with {found.group(1)}", log.path)
                    raise EngineBuildError(f"{name} layer: {chunk['error'].strip()}", log.path)
                for line in chunk.get("stream", "").splitlines(keepends=True):
                    if line.startswith(STEP_MARK):
                        current = int(line.split()[1])
                        log.begin(f"{name} layer: {steps[current][:120]}")
                        continue
                    leftovers.read(line)
                    log.write(line)
        failed = False
    except docker.errors.APIError as exc:
        raise EngineBuildError(f"{name} layer: the engine refused the build: {exc.explanation}", log.path) from exc
    finally:
        _discard(leftovers.images(failed))


def _build_retrying(name: str, spec: EnvSpec, checkout: Path, log: BuildLog, nocache: bool, timeout: float) -> None:
    """`_build`, again up to `ENGINE_RETRIES` times after a failure of the engine's own."""
    for attempt in range(ENGINE_RETRIES + 1):
        try:
            return _build(name, spec, checkout, log, nocache, timeout)
        except EngineBuildError as exc:
            if attempt == ENGINE_RETRIES:
                raise
            nocache = nocache or exc.cached_copy  # the short copy is in the build cache: not from there again
            log.write(f"{exc.message}: the engine failed, no step did: building the layer again"
                      f"{' without the build cache' if exc.cached_copy else ''}\n")


def _save(name: str, tag: str, store: Path, log: BuildLog) -> None:
    saved = image_store.save(tag, store)
    log.write(f"{name} layer: saved to the image store {store}: {saved.new_layers} of its {saved.layers} "
              f"layers new there ({saved.new_bytes / 2**20:.1f} MB)\n")


def build_images(spec: EnvSpec, checkout: Path, log: BuildLog, nocache: bool = False,
                 timeout: float = 1800.0) -> list[Layer]:
    """Build the layers `spec.layers` names that do not exist yet (every one with `nocache`); with an
    image store (`$SWEDOJO_IMAGE_STORE`), load one from there instead where it holds it, and save
    each layer built there."""
    layers = [layer_info("base", spec.layers["base"], cached=True)]
    replaced: list[str] = []
    store = image_store.store_dir()
    for name in LAYERS[1:]:
        tag = spec.layers[name]
        record_use(tag)  # found or built, it is in use (`dojo sandbox prune --unused-days`)
        with file_lock(engine_locks() / f"{tag.replace('/', '_').replace(':', '_')}.lock"):
            old = image_id(tag)
            if old and not nocache:
                log.write(f"{name} layer: cache hit {tag} ({old[7:19]})\n")
                layers.append(layer_info(name, tag, cached=True))
                if store and not image_store.has(tag, store):  # built before the store was set: other nodes need it
                    _save(name, tag, store, log)
                continue
            start = time.monotonic()
            if not old and not nocache and store and image_store.load(tag, store):  # another node built it
                layers.append(layer_info(name, tag, cached=True, seconds=time.monotonic() - start))
                log.write(f"{name} layer: loaded {tag} from the image store {store} in {layers[-1].seconds:.1f}s\n")
                continue
            _build_retrying(name, spec, checkout, log, nocache, timeout)
            layers.append(layer_info(name, tag, cached=False, seconds=time.monotonic() - start))
            log.write(f"{name} layer: built {tag} in {layers[-1].seconds:.1f}s ({layers[-1].size_mb:.0f} MB)\n")
            if store:
                _save(name, tag, store, log)
            if old and old != layers[-1].image_id:
                replaced.append(old)
    _discard(set(replaced))  # its untagged parents go with it: not while a build beside may use them
    if (budget := budget_mb()) is not None and not all(layer.cached for layer in layers):
        pruned = prune_to_budget(budget)  # this launch's own layers are held: they stay
        log.write(f"disk budget {budget / 1024:g} GB: removed {len(pruned.removed)} least recently used image(s)"
                  + "".join(f"\n  {tag}" for tag in pruned.removed) + "\n")
    return layers


def read_file(tag: str, path: str) -> bytes:
    """A file of an image, without starting a container."""
    container = api().create_container(tag, command=["true"], labels=owner_labels())["Id"]  # a kill leaves it to prune
    try:
        stream, _ = api().get_archive(container, path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile(tar.getmembers()[0])
            return member.read() if member else b""
    finally:
        api().remove_container(container, force=True)


def resolved(spec: EnvSpec) -> tuple[dict[str, str], str]:
    """(name -> version in the dependency layer, exact runtime version when the layer says)."""
    deps = spec.layers["deps"]

    def read(rel: str) -> bytes | None:
        try:
            return read_file(deps, f"{ENV_ROOT}/{rel}")
        except docker.errors.NotFound:
            return None  # no dependency installed anything

    return recipe_for(spec.language).resolved(read)


# --- base images --------------------------------------------------------------------------------

def ensure_base(release: str, log: BuildLog) -> str:
    """`swedojo/base:<release>`, made now with debootstrap when missing (root on Debian only)."""
    tag = f"swedojo/base:{release}"
    if image_id(tag):
        return tag
    log.begin(f"base image {tag}: debootstrap {release} (a few minutes)")
    work = Path(tempfile.mkdtemp(prefix="swedojo-base-", dir="/var/tmp"))
    try:
        code = log.run(_base_script(release, work / "root", tag), work, {"PATH": SYSTEM_PATH}, 1800.0)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    if code != 0 or not image_id(tag):
        raise BaseImageError(f"making {tag} failed (needs root, debootstrap and a Debian mirror)", log.path)
    return tag


def _base_script(release: str, root: Path, tag: str) -> str:
    """What scripts/ensure_docker.sh does for bookworm, for any release: a minbase root from the
    mirror apt uses, apt sources for `release`, the host's CA bundle and network settings, imported."""
    r = shlex.quote(str(root))
    changes = [f"ENV PATH={SYSTEM_PATH}", "ENV LANG=C.UTF-8", f"ENV SSL_CERT_FILE={HOST_CA}",
               f"ENV REQUESTS_CA_BUNDLE={HOST_CA}", f"ENV PIP_CERT={HOST_CA}", 'CMD ["bash"]']
    return "\n".join([
        "set -euo pipefail",
        "command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }",
        "host=$(. /etc/os-release && echo \"$VERSION_CODENAME\")",
        ("mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' "
         "| awk -v s=\"$host\" '$2 == s { print $1; exit }')"),
        f"debootstrap --variant=minbase --include=ca-certificates {release} {r} \"${{mirror:-http://deb.debian.org/debian/}}\"",
        f"rm -f {r}/etc/apt/sources.list",
        "for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do",
        "  [ -s \"$f\" ] || continue",
        "  key=$(sed -nE 's/.*[Ss]igned-[Bb]y[:=] *([^] ]+).*/\\1/p' \"$f\" | head -n1)",
        f"  [ -z \"$key\" ] || [ -e {r}\"$key\" ] || continue",
        f"  install -D -m 0644 /dev/null {r}\"$f\" && sed \"s/\\b$host\\b/{release}/g\" \"$f\" > {r}\"$f\"",
        "done",
        f"install -D -m 0644 /etc/ssl/certs/ca-certificates.crt {r}/etc/ssl/certs/ca-certificates.crt",
        f"install -D -m 0644 /etc/ssl/certs/ca-certificates.crt {r}{HOST_CA}",
        "for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do",
        f"  [ -f \"$f\" ] && grep -q 'Acquire::' \"$f\" && install -D -m 0644 \"$f\" {r}\"$f\" || true",
        "done",
        f"[ ! -f /etc/pip.conf ] || install -D -m 0644 /etc/pip.conf {r}/etc/pip.conf",
        f"rm -rf {r}/var/cache/apt/archives/*.deb {r}/var/lib/apt/lists/*",
        f"tar -C {r} -c . | docker import {' '.join('--change ' + shlex.quote(c) for c in changes)} - {tag} >/dev/null",
    ])
