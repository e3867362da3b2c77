"""A `python` the local sandbox's user can run, whatever the host calls its interpreter and wherever it lies.

The local backend runs commands as an unprivileged uid of its own when started by root. With
bubblewrap, the harness's interpreter is bound into the sandbox even where only root may enter
(under /root, as pyenv installs it). Without bubblewrap there is no mount namespace to do that:
the uid can run only what any user may reach. Then the interpreter's prefix (minus its own
site-packages) is linked once into a cache every user may enter, with the harness's
site-packages on its path, and that copy runs the tests. Either way a `bin/` with `python` and
`python3` comes first on the sandbox's PATH, because Debian and others ship only `python3`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("SWEDOJO_SANDBOX_CACHE") or ("/var/cache/swedojo" if os.getuid() == 0 else
                                                           Path.home() / ".cache" / "swedojo"))
"""Where the `python` directories and reachable interpreters are kept (`SWEDOJO_SANDBOX_CACHE` moves it)."""


class InterpreterError(RuntimeError):
    """No interpreter the sandbox user can run could be made."""


def reachable(path: str | Path) -> bool:
    """Whether any user may enter `path` (every directory on the way is o+x)."""
    parts = Path(path).parts
    return all(os.stat(Path(*parts[:i])).st_mode & 0o001 for i in range(2, len(parts) + 1))


def _publish(staging: Path, target: Path) -> None:
    """Move a finished `staging` directory to `target` (open to all); another process may have won."""
    os.chmod(staging, 0o755)
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)


def _mirror() -> tuple[Path, Path]:
    """(interpreter, its lib dir) of a copy of the harness's Python every user can run, made once.

    The prefix is hard-linked where the file system allows (no space, instant), else copied; its
    own site-packages are left out and the harness's are put on its path by a `.pth` file.
    """
    base, version = Path(sys.base_prefix), f"python{sys.version_info.major}.{sys.version_info.minor}"
    key = hashlib.sha256(f"{base}|{sys.prefix}|{sys.version}".encode()).hexdigest()[:16]
    home = CACHE / "interpreters" / key
    if not home.is_dir():
        home.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        if not reachable(home.parent):
            raise InterpreterError(f"{home.parent} is not open to other users: cannot share an interpreter from it")
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=home.parent))
        if subprocess.run(["cp", "-al", f"{base}/.", str(staging)], capture_output=True, check=False).returncode:
            shutil.copytree(base, staging, symlinks=True, dirs_exist_ok=True)
        site = staging / "lib" / version / "site-packages"
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir(parents=True)
        (site / "swedojo-harness.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
        _publish(staging, home)
    return home / "bin" / Path(os.path.realpath(sys.executable)).name, home / "lib"


def sandbox_python(needs_reach: bool) -> tuple[Path, dict[str, str]]:
    """A directory holding `python` and `python3` for the sandbox's PATH, and the variables they need.

    `needs_reach`: the sandbox user cannot be shown what only root may enter (no bubblewrap),
    so the interpreter must be one any user reaches, else a reachable copy of it is made.
    """
    interpreter, env = Path(sys.executable), {}
    if needs_reach and not (reachable(os.path.realpath(sys.executable)) and reachable(sys.base_prefix)):
        harness_site = sysconfig.get_paths()["purelib"]
        if not reachable(harness_site):
            raise InterpreterError(f"the harness's packages ({harness_site}) are where the sandbox user "
                                   "cannot go, and without bubblewrap they cannot be shown to it")
        interpreter, lib = _mirror()
        env["LD_LIBRARY_PATH"] = str(lib)  # a shared libpython is looked for where the original lies
    directory = CACHE / "bin" / hashlib.sha256(str(interpreter).encode()).hexdigest()[:16]
    if not directory.is_dir():
        directory.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        staging = Path(tempfile.mkdtemp(prefix=".bin-", dir=directory.parent))
        for name in ("python", "python3"):
            (staging / name).symlink_to(interpreter)
        _publish(staging, directory)
    return directory, env
