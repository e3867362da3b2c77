"""Limits on all the processes of a local sandbox together, by a cgroup the harness makes for it.

rlimits bind each process alone: four processes under a 256 MB data limit hold a gigabyte. A
cgroup binds them together. It needs root and a cgroup file system we may write: cgroup v2 with
the memory and pids controllers enabled at its root (`memory.max`, `memory.swap.max`,
`pids.max`, and `cpu.max` where the cpu controller is), else the v1 memory and pids hierarchies
of a hybrid host (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`, `pids.max`, and the
CPU bandwidth `cpu.cfs_quota_us` where the cpu hierarchy is mounted). Where neither can be used the sandbox runs with rlimits only and its isolation report
says why. `SWEDOJO_CGROUP_ROOT` names another mount point (tests use a
missing one to see the fallback).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

from swedojo.sandboxes.owners import this_process

ROOT = Path(os.environ.get("SWEDOJO_CGROUP_ROOT", "/sys/fs/cgroup"))
"""Where the cgroup file systems are mounted."""
ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
"""`sh -c ENTER enter PROCS... -- CMD...`: move this process into every cgroup whose
`cgroup.procs` is given, then become CMD (its children are born there)."""
_V2_CONTROLLERS = ("memory", "pids")


def _v2_root() -> Path | None:
    """The cgroup v2 mount with the memory and pids controllers, made available to children."""
    for root in (ROOT, ROOT / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.is_file() and set(_V2_CONTROLLERS) <= set(controllers.read_text().split()):
            wanted = [c for c in (*_V2_CONTROLLERS, "cpu") if c in controllers.read_text().split()]
            with contextlib.suppress(OSError):
                (root / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            if set(_V2_CONTROLLERS) <= set((root / "cgroup.subtree_control").read_text().split()):
                return root
    return None


def _v1_roots() -> tuple[Path, Path] | None:
    """The v1 memory and pids hierarchies, when both are mounted."""
    memory, pids = ROOT / "memory", ROOT / "pids"
    if (memory / "memory.limit_in_bytes").is_file() and (pids / "cgroup.procs").is_file():
        return memory, pids
    return None


class Cgroup:
    """One sandbox's cgroup (a directory in each hierarchy), its limits written; `close` kills
    what is left in it and removes it."""

    def __init__(self, *, memory_bytes: int, pids: int, cpus: float) -> None:
        name = f"swedojo-{this_process()}-{secrets.token_hex(3)}"  # owners.reap_local reads it
        self.dirs: list[Path] = []
        self.limits: dict[str, int] = {"memory": memory_bytes, "pids": pids}
        """What is in force, by the names of `Isolation.cgroup`."""
        try:
            v2 = _v2_root()
            if v2 is not None:
                self._make(v2 / name, {"memory.max": memory_bytes, "pids.max": pids})
                with contextlib.suppress(FileNotFoundError):  # absent without swap accounting
                    (self.dirs[0] / "memory.swap.max").write_text("0")
                if (self.dirs[0] / "cpu.max").is_file():
                    (self.dirs[0] / "cpu.max").write_text(f"{int(cpus * 100_000)} 100000")
                    self.limits["cpu"] = int(cpus * 1e6)
                return
            roots = _v1_roots()
            if roots is None:
                raise OSError(f"no cgroup hierarchy with memory and pids under {ROOT}")
            memory, pid_root = roots
            self._make(memory / name, {"memory.limit_in_bytes": memory_bytes})
            with contextlib.suppress(FileNotFoundError):  # absent without swap accounting
                (self.dirs[0] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            self._make(pid_root / name, {"pids.max": pids})
            cpu = ROOT / "cpu"
            if (cpu / "cpu.cfs_quota_us").is_file():
                self._make(cpu / name, {"cpu.cfs_period_us": 100_000, "cpu.cfs_quota_us": int(cpus * 100_000)})
                self.limits["cpu"] = int(cpus * 1e6)
        except BaseException:
            self.close()
            raise

    def _make(self, path: Path, limits: dict[str, int]) -> None:
        path.mkdir()
        self.dirs.append(path)
        for file, value in limits.items():
            (path / file).write_text(str(value))

    def enter(self, argv: list[str], sh: str) -> list[str]:
        """`argv` started inside this cgroup, by the shell at `sh`."""
        return [sh, "-c", ENTER, "enter", *(str(d / "cgroup.procs") for d in self.dirs), "--", *argv]

    def close(self) -> None:
        """Kill every process left in it, then remove it; idempotent."""
        for path in reversed(self.dirs):
            for _ in range(100):
                with contextlib.suppress(OSError):
                    path.rmdir()
                    break
                with contextlib.suppress(OSError):
                    for pid in (path / "cgroup.procs").read_text().split():
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.01)
        self.dirs = []
