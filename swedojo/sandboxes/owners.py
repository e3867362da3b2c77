"""Which process a sandbox's leftovers belong to, named so that pid reuse cannot fool a reaper.

A driver killed with SIGKILL runs no cleanup. What it leaves (a docker container that never
started, a local sandbox's tmpfs work tree and cgroups) carries its owner token: the boot, the
pid and the pid's start time. The next run reaps what belongs to owners that are gone, and never
what belongs to a live one: a pid now used by another process has another start time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

TOKEN = re.compile(r"[0-9a-f]{8}-\d+-\d+")
"""`<boot id prefix>-<pid>-<start time in clock ticks since boot>`."""
LOCAL_PREFIX = "swedojo-local-"
"""Local sandboxes' temp directories: `swedojo-local-<token>-<random>`, under the temp dir."""
CGROUP_PREFIX = "swedojo-"
"""Local sandboxes' cgroups: `swedojo-<token>-<random>`, in each hierarchy they use."""


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:8]


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (after the parenthesised name, which may hold spaces); None when no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[19]


def this_process() -> str:
    """The owner token of this process."""
    pid = os.getpid()
    return f"{_boot()}-{pid}-{_start_time(pid)}"


def gone(token: str) -> bool:
    """True only when the owner is provably gone: booted before, or its pid free or another process's.
    A token of another form is never judged gone."""
    if not TOKEN.fullmatch(token):
        return False
    boot, pid, start = token.split("-")
    return boot != _boot() or _start_time(int(pid)) != start


def _owner(name: str, prefix: str) -> str:
    """The token in `name` (`<prefix><token>-<random>`), "" when it has none."""
    found = TOKEN.match(name.removeprefix(prefix)) if name.startswith(prefix) else None
    return found.group(0) if found else ""


def reap_local(temp: Path | None = None, cgroup_roots: list[Path] | None = None) -> list[str]:
    """Remove the local sandboxes' leftovers of owners that are gone: their cgroups (killing what is
    still in them) and temp directories (unmounting the work tree's tmpfs). Returns what went."""
    reaped = []
    for root in cgroup_roots if cgroup_roots is not None else _cgroup_roots():
        for path in sorted(root.glob(f"{CGROUP_PREFIX}*")):
            owner = _owner(path.name, CGROUP_PREFIX)
            if owner and gone(owner) and path.is_dir() and _empty_cgroup(path):
                reaped.append(str(path))
    temp = temp or Path(tempfile.gettempdir())
    mounts = _mount_points()
    for path in sorted(temp.glob(f"{LOCAL_PREFIX}*")):
        owner = _owner(path.name, LOCAL_PREFIX)
        if not owner or not gone(owner) or path.is_symlink() or not path.is_dir():
            continue
        for point in sorted((m for m in mounts if path in m.parents), reverse=True):
            subprocess.run(["umount", "--lazy", str(point)], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)
        reaped.append(str(path))
    return reaped


def _cgroup_roots() -> list[Path]:
    from swedojo.sandboxes.cgroup import (
        ROOT,  # it names its cgroups with `this_process`
    )

    return [ROOT, ROOT / "unified", ROOT / "memory", ROOT / "pids", ROOT / "cpu"]


def _empty_cgroup(path: Path) -> bool:
    """Kill what is left in the cgroup at `path` and remove it; False when it would not go."""
    for _ in range(100):
        with contextlib.suppress(OSError):
            path.rmdir()
            return True
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.01)
    return False


def _mount_points() -> list[Path]:
    """The mount points of this mount namespace (octal escapes of /proc/self/mounts decoded)."""
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            field = line.split()[1]
            points.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)))
    return points


_reaped_for: set[str] = set()
_reaping = threading.Lock()


def reap_once(kind: str, reap: Callable[[], list[str]]) -> None:
    """Run `reap()` the first time this process opens a sandbox of `kind` (the others wait for it);
    a failure is logged, never raised: leftovers of others must not stop this run."""
    with _reaping:
        if kind in _reaped_for:
            return
        _reaped_for.add(kind)
        try:
            reaped = reap()
        except Exception as exc:  # noqa: BLE001 (see the docstring)
            log.warning("could not reap the %s sandboxes of killed runs: %s", kind, exc)
            return
    if reaped:
        log.info("reaped %d %s sandbox leftover(s) of runs that are gone", len(reaped), kind)
