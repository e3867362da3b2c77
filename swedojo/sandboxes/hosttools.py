"""The host programs the harness runs as itself for the local backend, found where only root writes."""

from __future__ import annotations

import functools
import os
import shutil

from swedojo.sandboxes.base import SandboxError

SYSTEM_PATH = os.environ.get("SWEDOJO_HELPER_PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
"""Where the helpers the harness runs as itself (prlimit, bwrap, setpriv, nsenter, chown) are
looked up: never the caller's PATH, whose entries a sandbox may be able to write. The operator
may name other directories in `SWEDOJO_HELPER_PATH` (tests hide bwrap that way)."""


def installed(name: str) -> bool:
    """Helper `name` is on `SYSTEM_PATH`."""
    return shutil.which(name, path=SYSTEM_PATH) is not None


@functools.cache
def tool(name: str) -> str:
    """The absolute path of helper `name` on `SYSTEM_PATH`; SandboxError when it is missing."""
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise SandboxError(f"{name} is not installed in {SYSTEM_PATH} (scripts/system_deps.sh installs it)")
    return found
