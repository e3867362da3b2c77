"""Helpers the sandbox tests import by name (a module of its own: `conftest` is ambiguous across test folders)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swedojo.sandboxes import forkserver
from swedojo.sandboxes.base import Sandbox, SandboxConfig
from swedojo.sandboxes.registry import backend, names

DOCKER_IMAGE = "swedojo/python:bookworm"
"""Image of the sandboxes of backends that take one (`make docker-up` builds it)."""
MARKS = {"docker": pytest.mark.docker}
"""Markers of the backends that need more than the host (docker: an engine; see tests/conftest.py)."""
BACKENDS = [pytest.param(name, marks=MARKS.get(name, ())) for name in names()]

ESCAPE_CONFIG = SandboxConfig(
    command_timeout_s=20,
    total_time_s=900,
    max_output_bytes=16_000,
    memory_mb=512,
    pids=128,
    disk_mb=64,
)
"""Tight limits so that bombs hit them fast."""


def make_sandbox(name: str, repo_path: Path, config: SandboxConfig) -> Sandbox:
    """A sandbox of backend `name` with `repo_path` at HEAD in its work tree."""
    return backend(name).create(image=DOCKER_IMAGE, source=repo_path, commit="HEAD", config=config,
                                workdir="/testbed")


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A real git repository at `path` with one commit of `files`."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"README.md": "hello\n", "pkg/mod.py": "X = 1\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True)
    return path


MEMO_GROWTH_MIB = (forkserver._MEMO_BYTES >> 20) + 64
"""The most a fork server may grow whatever it is sent: its memo's bound and the allocator's slack."""


def memo_flood(runner_dir: str, socket_name: str, mib: int = 3 * MEMO_GROWTH_MIB) -> str:
    """Python source that asks the fork server at `socket_name` (its script in `runner_dir`) to
    memoise `mib` MiB of rewrites that fail (a syntax error), each under a path of its own."""
    return (
        f"import sys; sys.path.insert(0, {runner_dir!r}); import forkserver\n"
        "pad = 'p' * (2 << 20)\n"
        f"for i in range({mib} // 2):\n"
        f"    forkserver._ask_rewrite({socket_name!r}, f'/flood/{{i}}/{{pad}}', b'(', False)\n"
        "print('flooded')\n"
    )


def peak_rss_mib(status: str) -> int:
    """The most memory a process ever held (VmHWM), from its /proc/PID/status text, in MiB."""
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) >> 10


def env_without(root: Path, program: str) -> dict[str, str]:
    """This process's environment as on a machine without `program`: PATH and the helpers' path
    (`SWEDOJO_HELPER_PATH`) find every program of the system's directories but that one, linked
    into `root`/bin."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for directory in ("/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for entry in Path(directory).iterdir():
            target = bin_dir / entry.name
            if entry.name != program and not target.exists():
                target.symlink_to(entry)
    path = os.pathsep.join([str(Path(sys.executable).parent), str(bin_dir)])
    return {**os.environ, "PATH": path, "SWEDOJO_HELPER_PATH": str(bin_dir)}
