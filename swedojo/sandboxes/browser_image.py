"""The docker backend's browser images: a task's image plus Debian's chromium and a font, built here.

No registry is reachable, so the image is built locally `FROM` the task's own image (for the plain
environment of the bundled front-end suite, the locally made Python image, itself made from the
Debian base): the Debian archive is reachable while building, never from a sandbox. The tag is
content-addressed, `swedojo/browser:<hash of the parent image's id and the recipe>`, so it is
built once, on first use, under a lock shared by every process, and found by tag afterwards; a
rebuilt parent gets a new browser image.
"""

from __future__ import annotations

import hashlib
import io

import docker.errors

from swedojo.sandboxes.base import SandboxError
from swedojo.sandboxes.docker import api
from swedojo.sandboxes.filelock import file_lock
from swedojo.sandboxes.image_use import index_path

REPOSITORY = "swedojo/browser"
PACKAGES = ("chromium", "fonts-dejavu-core")
"""Debian's chromium (at /usr/bin/chromium) and the one font family the bundled pages name."""
BUILD_TIMEOUT_S = 1800.0


class BrowserImageError(SandboxError):
    """The browser image could not be built (the parent image is missing, or apt failed)."""


def dockerfile(parent: str) -> str:
    """The recipe: `parent` plus the browser, its apt lists and caches removed."""
    return (f"FROM {parent}\nUSER root\n"
            "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            f"--no-install-recommends {' '.join(PACKAGES)} >/dev/null "
            "&& rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb && test -x /usr/bin/chromium\n")


def browser_tag(parent: str) -> str:
    """The browser image's tag for `parent` (which must exist locally)."""
    try:
        parent_id = api().inspect_image(parent)["Id"]
    except docker.errors.ImageNotFound as exc:
        raise BrowserImageError(f"image {parent!r} not found; base images are made by `make docker-up`") from exc
    digest = hashlib.sha256(f"{parent_id}\n{dockerfile(parent)}".encode()).hexdigest()[:16]
    return f"{REPOSITORY}:{digest}"


def _exists(tag: str) -> bool:
    try:
        api().inspect_image(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_browser_image(parent: str) -> str:
    """The tag of `parent` with the browser, built now if no process built it before."""
    tag = browser_tag(parent)
    if _exists(tag):
        return tag
    with file_lock(index_path().with_name("browser-image.lock")):
        if _exists(tag):
            return tag
        lines: list[str] = []
        try:
            stream = api().build(fileobj=io.BytesIO(dockerfile(parent).encode()), tag=tag, rm=True, forcerm=True,
                                 pull=False, network_mode="host", decode=True, timeout=BUILD_TIMEOUT_S)
            for chunk in stream:
                if "error" in chunk:
                    said = " | ".join(line.strip() for line in lines[-5:] if line.strip())
                    raise BrowserImageError(f"building {tag} from {parent}: {chunk['error'].strip()} ({said})")
                lines += chunk.get("stream", "").splitlines()
        except docker.errors.APIError as exc:
            raise BrowserImageError(f"building {tag} from {parent}: the engine refused: {exc.explanation}") from exc
    return tag
