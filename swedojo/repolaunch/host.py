"""What the local backend finds on this host: interpreters and toolchains the sandboxes can run.

Sandboxes run as an unprivileged uid with a private /tmp, seeing of the host read-only only the
system and the toolchains on their PATH (`sandboxes.local._view`), so a runtime must be readable
by any user and live outside /tmp.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import InstallError


def visible_to_sandboxes(path: Path) -> bool:
    """Whether a sandbox's uid can reach `path`: outside its private /tmp, every directory searchable."""
    real = Path(os.path.realpath(path))
    if real.parts[1:2] in (("tmp",), ("dev",)):
        return False
    if os.getuid() != 0:
        return True  # sandboxes then run as our own uid
    return all(os.stat(parent).st_mode & 0o001 for parent in [*real.parents, real] if parent.exists())


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


def host_tool(name: str, version_args: list[str], prefix: str = "v") -> Runtime | None:
    """The tool on PATH and its version: the first word of its output's first line after `prefix`
    ("v20.1.0", "go1.19.8", "cargo 1.95.0 (...)", "javac 17.0.15")."""
    found = shutil.which(name)
    if not found or not visible_to_sandboxes(Path(found)):
        return None
    proc = subprocess.run([found, *version_args], capture_output=True, text=True, check=False)
    words = proc.stdout.strip().splitlines()[0].removeprefix(prefix).split() if proc.returncode == 0 and proc.stdout \
        else []
    return Runtime(name=name, version=words[0], path=Path(os.path.realpath(found))) if words else None


def no_host_runtime(wanted: str, log: BuildLog) -> InstallError:
    """The one reason the local backend gives when this host lacks `wanted` ("go", "cc and make")."""
    return InstallError(f"no {wanted} on this host that sandboxes can run (--backend docker brings its own)",
                        log.path)
