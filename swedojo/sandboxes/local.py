"""The `local` backend: a checkout in a temp dir and a hardened persistent terminal on the host.

The shell is started as
`prlimit (rlimits) -- bwrap (namespaces, a file system of its own, seccomp) -- setpriv (own uid) -- bash`,
after `nsenter --net` into its private network when the network is on:
- bubblewrap: private pid/ipc/uts/net namespaces and a root of its own, read-only, that shows of
  the host only what commands need (`_view`, a whitelist: what is not named is not there):
  - the system, read-only: /usr, /bin, /sbin, /lib*, /etc, /opt, /sys (`_SYSTEM`);
  - the toolchains commands are given, read-only: the harness's Python (`sys.prefix`,
    `sys.base_prefix`), each directory of the commands' PATH with the installation it belongs to (a
    venv with the Python it was made from, a pyenv or node root: `_installation`), a local
    launch's dependency layer (`$SWEDOJO_ENV`), and the files a caller names (`readable`: the
    harness's own scripts its steps run, e.g. `repolaunch/drop_project.py`);
  - the work tree and the writable directories it is given; a size-capped private /tmp and
    /dev/shm, its own /dev and /proc.
  Not there: /root, /home, /work, /var, /srv, /mnt, /run, ...: run directories, suite files and
  users' files. The `swedojo` package, where a visible directory holds it (installed into the
  harness's venv or the system), is covered by an empty file system: its bundled suites hold gold
  patches. `isolation.visible` lists all of it, and `dojo sandbox info` prints it. The host's Unix
  sockets bound at a visible path are covered (`hostnet.bound_sockets`); `--die-with-parent`,
  `--new-session`; the seccomp filter loaded right before exec.
- the network on (`config.network`), as root: a network namespace of the sandbox's own whose only
  way out is user-mode NAT, out of reach of the host's loopback and addresses
  (`hostnet.PrivateNetwork`), entered by every command; without slirp4netns, the host's.
- an unprivileged uid of its own when we are root (RLIMIT_NPROC does not bind root, so a fork
  bomb is contained only for another uid; the uid also keeps host files at their permissions).
  Host PATH entries only root may enter (~root/...) are left out of the default PATH; a PATH given
  in `config.env` is shown wherever it lies.
- rlimits: processes (per uid), data segment (memory), file size (disk), CPU seconds, no cores.
- as root, a cgroup of its own (`sandboxes/cgroup.py`): memory and pids of all its processes
  together (and CPU time where the cpu controller is there); where none can be made, rlimits only.
Without bubblewrap (or when it cannot make namespaces here) the filter is loaded by
`seccomp_exec` and only uid, rlimits and seccomp remain (the network on: the host's namespace;
the whole host visible as its permissions allow the uid); `isolation` says what is in force.
- as root, the work tree is a tmpfs of its own capped at the checkout plus `config.disk_mb`.
`LocalConfinement` is all of this but the work tree and the shell: a local launch's install steps
run in one (`repolaunch.local`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple, Self

from swedojo.repos import checkout
from swedojo.sandboxes.base import (
    ExecResult,
    Isolation,
    OneOffFiles,
    SandboxConfig,
    SandboxError,
)
from swedojo.sandboxes.cgroup import Cgroup
from swedojo.sandboxes.hostnet import (
    PrivateNetwork,
    bound_sockets,
    nat_problem,
    resolv_conf,
)
from swedojo.sandboxes.hosttools import SYSTEM_PATH, installed, tool
from swedojo.sandboxes.interpreter import reachable, sandbox_python
from swedojo.sandboxes.owners import LOCAL_PREFIX, reap_local, reap_once, this_process
from swedojo.sandboxes.seccomp import SeccompUnavailableError, bpf_fd, compile_bpf
from swedojo.sandboxes.terminal import (
    SHELL_ARGV,
    SHELL_ENV,
    PersistentTerminal,
    SubprocessTransport,
)
from swedojo.schema import EnvSpec

log = logging.getLogger(__name__)

UID_BASE = 1_000_000
"""Sandboxes started by root run as a random uid in [UID_BASE, UID_BASE + 2**20)."""
FILE_OP_TIMEOUT_S = 120.0
"""Bound on the helper processes behind read_file, write_file and diff."""
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_PACKAGE = Path(__file__).resolve().parents[1]
"""The `swedojo` package's directory: never shown (its bundled suites hold gold patches)."""
_AFRESH = ["/tmp", "/dev"]
"""Where bubblewrap gives the sandbox file systems of its own instead of the host's."""
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "sys")
"""The host's directories under / every sandbox sees read-only, those this host has: programs and
their libraries; /etc for what they read at start (the dynamic linker's cache, certificates, names
of users, git's and pip's system settings); /opt, where tools installed outside the package manager
live (and local package indexes pip is pointed at); /sys, where runtimes read the CPUs and the
cgroup's limits (JVM, Node, Go, OpenBLAS). Nothing else under /: not /root, /home, /var, /srv,
/mnt, /run or a project's tree such as /work."""
LAYER_VAR = "SWEDOJO_ENV"
"""The variable of `config.env` naming a local launch's dependency layer (`repolaunch.recipes.base.ENV_VAR`),
which the sandbox sees read-only."""
_LAUNCHER_FD = 9
"""Descriptor a `launcher` script opens its seccomp filter file on."""
NAT = "user-mode NAT (slirp4netns), the host's loopback and addresses out of reach"
"""`Isolation.network_via` of a sandbox in a `PrivateNetwork`."""


class LocalIsolation(Isolation):
    """What confines the commands of a local sandbox on this machine."""

    bubblewrap: bool
    """Commands run under bubblewrap."""


@functools.cache
def bubblewrap_problem() -> str | None:
    """None when bubblewrap can make the namespaces here; otherwise why not."""
    if not installed("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    argv = [tool("bwrap"), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    argv += [] if os.getuid() == 0 else ["--unshare-user"]
    proc = subprocess.run([*argv, "--", "true"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {proc.stderr.strip()}"
    return None


class _Mount(NamedTuple):
    """One place of the sandbox's file system, in the order bubblewrap makes them."""

    path: str
    kind: Literal["read-only", "link", "dev", "proc", "private", "empty", "writable"]
    """read-only / writable: the host's directory (or file) bound there; link: a symlink (`/bin`
    on a merged /usr); dev, proc: bubblewrap's own; private: a size-capped tmpfs of the sandbox's;
    empty: a read-only tmpfs covering what a visible directory holds (the harness's package)."""
    target: str = ""
    """A link's target."""


def _home(path: Path) -> bool:
    """`path` is / or a home directory: never shown whole, whatever lies under it."""
    return path == Path("/") or path in (Path("/root"), Path.home()) or path.parent == Path("/home")


def _venv_home(config: Path) -> str:
    """The `home` a venv's pyvenv.cfg names: the bin directory of the Python it was made from."""
    for line in config.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return value.strip()
    return ""


def _installation(directory: str, depth: int = 0) -> set[Path]:
    """A PATH directory and the installation it belongs to, which its programs need besides it: its
    parent, when it is the `bin` or `shims` of a prefix: a venv (its pyvenv.cfg; with the Python
    the venv was made from, whose programs it links to), or a Python, node or pyenv root (a lib or
    libexec beside it). Never a home directory whole (~/bin is shown, not ~)."""
    if not os.path.isabs(directory) or not os.path.isdir(directory):  # "" or ".": the harness's cwd, not shown
        return set()
    real = Path(os.path.realpath(directory))
    found, parent = {real}, real.parent
    if real.name not in ("bin", "shims") or _home(parent):
        return found
    if (parent / "pyvenv.cfg").is_file():
        found.add(parent)
        base = _venv_home(parent / "pyvenv.cfg")
        if base and depth < 4:  # a venv made from a venv's Python: followed a few steps
            found |= _installation(base, depth + 1)
    elif (parent / "lib").is_dir() or (parent / "libexec").is_dir():
        found.add(parent)
    return found


def _host_path(foreign: bool) -> list[str]:
    """The host's PATH for commands (the system's tools appended); `foreign`: they run as a uid of
    their own, so entries it cannot enter are left out."""
    path = os.environ.get("PATH", _DEFAULT_PATH).split(os.pathsep)
    if foreign:
        path = [p for p in path if os.path.isdir(p) and reachable(p)]
    return path + [p for p in _DEFAULT_PATH.split(os.pathsep) if p not in path]  # the system's tools, whatever was cut


def _toolchains(config: SandboxConfig) -> set[Path]:
    """What of the host commands run besides the system: the harness's Python (`plain_python` puts
    it on PATH; the layer's pip runs it), each directory of the commands' PATH with its
    installation, a local launch's dependency layer (`LAYER_VAR`), and where our helpers that run
    inside (setpriv) are found (`hosttools.SYSTEM_PATH`)."""
    path = config.env["PATH"].split(os.pathsep) if "PATH" in config.env else _host_path(os.getuid() == 0)
    path += SYSTEM_PATH.split(os.pathsep)
    roots = (sys.prefix, sys.base_prefix, config.env.get(LAYER_VAR, ""))
    found = {Path(os.path.realpath(p)) for p in roots if os.path.isabs(p)}
    for directory in path:
        found |= _installation(directory)
    return {p for p in found if not _home(p)}


def _under(path: Path, places: list[Path]) -> bool:
    return any(path == place or place in path.parents for place in places)


def _view(config: SandboxConfig, writable: tuple[Path, ...] = (), readable: tuple[Path, ...] = ()) -> list[_Mount]:
    """The sandbox's file system: a whitelist of the host's paths, in the order bubblewrap mounts
    them: the system (`_SYSTEM`), the sandbox's own /dev, /proc, /tmp and /dev/shm, the toolchains
    (`_toolchains`) and the `readable` files and directories read-only, an empty cover over the
    harness's package where a visible directory holds it (the `readable` under it bound back), then
    the `writable` directories. A path under another shown one is not bound again; the host's
    resolv.conf, with the network on, wherever /etc's link leads."""
    mounts: list[_Mount] = []
    for name in _SYSTEM:
        place = Path("/", name)
        if place.is_symlink():
            mounts.append(_Mount(str(place), "link", os.readlink(place)))
        elif place.is_dir():
            mounts.append(_Mount(str(place), "read-only"))
    mounts += [_Mount("/dev", "dev"), _Mount("/proc", "proc"), _Mount("/tmp", "private"), _Mount("/dev/shm", "private")]
    wanted = _toolchains(config) | {Path(os.path.realpath(p)) for p in readable}
    if config.network:  # /etc/resolv.conf may be a link to /run/...
        wanted.add(Path(os.path.realpath("/etc/resolv.conf")))
    shown = [Path(m.path) for m in mounts if m.kind == "read-only"]
    own = [Path(os.path.realpath(p)) for p in writable]
    for target in sorted(wanted):
        if os.path.exists(target) and not _under(target, [*shown, *own]):
            shown.append(target)
            mounts.append(_Mount(str(target), "read-only"))
    if _under(_PACKAGE, shown):
        mounts.append(_Mount(str(_PACKAGE), "empty"))
        mounts += [_Mount(str(p), "read-only") for p in sorted(wanted) if _PACKAGE in p.parents and p.exists()]
    return mounts + [_Mount(str(p), "writable") for p in writable]


def _visible(mounts: list[_Mount], disk_mb: int) -> dict[str, str]:
    """`Isolation.visible`: each place of `mounts` and what the sandbox finds there."""
    said = {"read-only": "read-only", "writable": "writable", "dev": "private: device nodes only",
            "proc": "private: the sandbox's processes", "private": f"private, empty, {disk_mb} MiB",
            "empty": "empty (covers the harness's package: its bundled suites)"}
    return {m.path: f"link to {m.target}" if m.kind == "link" else said[m.kind] for m in mounts}


def _shown(path: str, mounts: list[_Mount]) -> bool:
    """`path` of the host is what the sandbox sees there: the deepest mount holding it binds the host's."""
    holding = [m for m in mounts if _under(Path(path), [Path(m.path)])]
    return bool(holding) and max(holding, key=lambda m: len(m.path)).kind in ("read-only", "writable")


def _bwrap_view(mounts: list[_Mount], disk_mb: int) -> list[str]:
    """bwrap arguments making `mounts` on an empty root, each made enterable: bubblewrap creates the
    directories above a mount point 0700, so those not on a host directory are made 0755 first."""
    args: list[str] = []
    made: set[Path] = set()
    placed: list[_Mount] = []
    for mount in mounts:
        for above in reversed(Path(mount.path).parents[:-1]):
            holding = [m for m in placed if _under(above, [Path(m.path)])]
            deepest = max(holding, key=lambda m: len(m.path)) if holding else None
            fresh = deepest is None or (deepest.kind in ("private", "empty") and deepest.path != str(above))
            if fresh and above not in made:
                made.add(above)
                args += ["--perms", "0755", "--dir", str(above)]
        if mount.kind == "link":
            args += ["--symlink", mount.target, mount.path]
        elif mount.kind in ("read-only", "writable"):
            args += ["--ro-bind" if mount.kind == "read-only" else "--bind", mount.path, mount.path]
        elif mount.kind in ("dev", "proc"):
            args += [f"--{mount.kind}", mount.path]
        elif mount.kind == "private":
            args += ["--perms", "1777", "--size", str(disk_mb << 20), "--tmpfs", mount.path]
        else:
            args += ["--perms", "0755", "--size", str(1 << 20), "--tmpfs", mount.path]
        placed.append(mount)
    return args


def _uid_pids(uid: int) -> list[int]:
    """The processes of `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                pids.append(int(entry))
        except OSError:
            continue
    return pids


class LocalConfinement:
    """What confines commands on this host for one sandbox or build step: the plan (`isolation`),
    the cgroup, and the only directories commands may write: `workdir` (where they start) and
    `writable`; `readable`, files or directories of the host its commands read (the harness's
    scripts they run), are shown besides what every sandbox sees (`_view`). `root`, a temp dir of
    our own, holds the home and tmp of the fallback without bubblewrap and is removed at `close`;
    what the commands may write outside it is given back to us then (no later sandbox's uid may own it). `uncapped` is what `_plan` reports of the work
    tree's size cap: "" capped, else why not; None for a directory that is no sandbox's work tree."""

    def __init__(self, config: SandboxConfig, root: Path, workdir: Path, *, writable: tuple[Path, ...] = (),
                 readable: tuple[Path, ...] = (), bubblewrap: bool = True, uncapped: str | None = None) -> None:
        self.config = config
        self.workdir = str(workdir)
        self._root = root
        self._writable = (workdir, *writable)
        self._mounts = _view(config, self._writable, readable)
        self._closed = False
        self._cgroup: Cgroup | None = None
        self._network: PrivateNetwork | None = None
        reap_once("local", reap_local)  # what runs killed before this one left
        try:
            self._cgroup, why = _new_cgroup(self.config)
            self.isolation = _plan(self.config, bubblewrap, self._cgroup, why, uncapped, self._mounts)
            _warn_once(self.isolation.missing)
            self._prepare_dirs()
            if self.isolation.network_via:
                self._network = PrivateNetwork()
                for port in self.config.host_ports:
                    self._network.relay(port)
                resolv_conf(self._root / "resolv.conf")
        except BaseException:
            self.close()
            raise

    def _prepare_dirs(self) -> None:
        """Home and tmp for the fallback (bubblewrap makes a private /tmp); all owned by the uid."""
        if not self.isolation.bubblewrap:
            for name in ("home", "tmp"):
                (self._root / name).mkdir()
        uid = self.isolation.uid
        if uid != os.getuid():
            subprocess.run([tool("chown"), "-R", f"{uid}:{uid}", str(self._root), *self._outside_root()], check=True)

    def _outside_root(self) -> list[str]:
        return [str(p) for p in self._writable if self._root not in p.parents]

    def env(self) -> dict[str, str]:
        """The environment commands start with: PATH, HOME and TMPDIR they may use."""
        scratch = "/tmp" if self.isolation.bubblewrap else str(self._root / "tmp")
        home = "/tmp" if self.isolation.bubblewrap else str(self._root / "home")
        path = _host_path(self.isolation.uid != os.getuid())
        env = {"PATH": os.pathsep.join(path), "HOME": home, "TMPDIR": scratch}
        return env | {"LANG": "C.UTF-8"}  # no TERM, as in a container: runners print as they do on docker

    def _confine(self, command: list[str], seccomp_fd: int | None) -> list[str]:
        """argv running `command` with every confinement in force here."""
        argv = [tool("prlimit"), *(f"--{k}={v}" for k, v in self.isolation.rlimits.items()), "--"]
        if self.isolation.bubblewrap:
            argv += [tool("bwrap"), *_bwrap_view(self._mounts, self.config.disk_mb), "--chdir", self.workdir]
            for socket_file in bound_sockets(self.isolation.uid, [*_AFRESH, str(self._root), *map(str, self._writable)]):
                if _shown(socket_file, self._mounts):
                    argv += ["--ro-bind", "/dev/null", socket_file]  # after the binds: none of them uncovers it
            if self._network is not None and os.path.exists("/etc/resolv.conf"):
                argv += ["--ro-bind", str(self._root / "resolv.conf"), "/etc/resolv.conf"]
            for cover in [m.path for m in self._mounts if m.kind == "empty"] + ["/"]:
                argv += ["--remount-ro", cover]  # last: every mount point is made; nothing more can be
            argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
            argv += [] if self.config.network else ["--unshare-net"]  # on: the private network's, or the host's
            argv += [] if os.getuid() == 0 else ["--unshare-user"]
            argv += ["--die-with-parent", "--new-session"]
            argv += [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
            argv += ["--"]
        elif seccomp_fd is not None:
            argv += [sys.executable, "-m", "swedojo.sandboxes.seccomp_exec", str(seccomp_fd), "--"]
        argv += self._setpriv() + command
        argv = argv if self._network is None else self._network.enter(argv)
        return argv if self._cgroup is None else self._cgroup.enter(argv, tool("sh"))

    def launcher(self, command: list[str], name: str) -> Path:
        """A host executable, `<root>/<name>`, that runs `command` (its own arguments appended) under
        every confinement in force here, keeping every descriptor it was given: how a host process
        (playwright) starts a program inside the sandbox and talks to it over inherited pipes. The
        seccomp filter is read from a file on descriptor 9, since a memfd of ours would not reach it."""
        seccomp = None
        if self.isolation.seccomp:
            (self._root / f"{name}.bpf").write_bytes(compile_bpf(self._sockets()))
            seccomp = _LAUNCHER_FD
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in (self.env() | self.config.env).items())
        lines = ["#!/bin/sh"]
        if seccomp is not None:
            lines.append(f"exec {seccomp}<{shlex.quote(str(self._root / f'{name}.bpf'))}")
        lines.append(f'exec env -i {env} {shlex.join(self._confine(command, seccomp))} "$@"')
        path = self._root / name
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o700)
        return path

    @contextlib.contextmanager
    def confined(self, command: list[str]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """argv running `command` under every confinement in force here, and the descriptors
        to pass it; valid while the context is open."""
        with self._filter_fd() as fd:
            yield self._confine(command, fd), () if fd is None else (fd,)

    def _sockets(self) -> bool:
        """Whether the seccomp filter allows sockets beyond AF_UNIX: with the network on, or in a
        network namespace of the sandbox's own (bubblewrap), whose only interface is its loopback,
        where a test suite's own servers listen; never in the host's namespace."""
        return self.config.network or self.isolation.bubblewrap

    def _setpriv(self) -> list[str]:
        uid = self.isolation.uid
        if uid == os.getuid():
            return []
        ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        return [tool("setpriv"), *ids, "--inh-caps=-all", "--bounding-set=-all", "--"]

    @contextlib.contextmanager
    def _filter_fd(self) -> Iterator[int | None]:
        """An fd with the compiled seccomp filter for one child, closed afterwards."""
        if not self.isolation.seccomp:
            yield None
            return
        fd = bpf_fd(self._sockets())
        try:
            yield fd
        finally:
            os.close(fd)

    def close(self) -> None:
        """Kill every process the commands left, remove the cgroup and `root`; idempotent."""
        if self._closed:
            return
        self._closed = True
        isolation: LocalIsolation | None = getattr(self, "isolation", None)
        if isolation is not None and isolation.uid != os.getuid():
            for _ in range(100):  # leftovers that left the shell's session
                pids = _uid_pids(isolation.uid)
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if outside := self._outside_root():
                subprocess.run([tool("chown"), "-R", f"{os.getuid()}:{os.getgid()}", *outside], check=False)
        if self._cgroup is not None:
            self._cgroup.close()
        if self._network is not None:
            self._network.close()
        shutil.rmtree(self._root, ignore_errors=True)


class LocalSandbox(LocalConfinement, OneOffFiles):
    """A work tree in a temp dir and a persistent, confined bash in it.

    `bubblewrap=False` skips bubblewrap even where it works (to see or test the fallback).
    The work tree is a tmpfs of its own where we may mount one (root), sized to the checkout plus
    `config.disk_mb`: all the commands together write no more than that into it.
    """

    pooled: ClassVar[bool] = False
    serves_standins: ClassVar[bool] = False

    @classmethod
    def create(cls, *, image: str, source: Path | None, commit: str | None, config: SandboxConfig,
               workdir: str) -> LocalSandbox:
        """The registry's constructor (`registry.SandboxBackend`): `image` and `workdir` do not
        apply (the host's runtime, a work tree of its own)."""
        if source is None or commit is None:
            raise ValueError("the local backend needs a repository and a commit")
        return cls(source, commit, config)

    @classmethod
    def isolation_for(cls, config: SandboxConfig) -> LocalIsolation:
        """The registry's report (`registry.SandboxBackend`): what a sandbox made with `config`
        would be confined by here."""
        cgroup, why = _new_cgroup(config)
        try:
            return _plan(config, bubblewrap=True, cgroup=cgroup, why=why, uncapped=_mount_problem())
        finally:
            if cgroup is not None:
                cgroup.close()

    @classmethod
    def plain_python(cls, spec: EnvSpec, config: SandboxConfig) -> tuple[EnvSpec, SandboxConfig]:
        """The harness's own interpreter (which has pytest) runs the tests: first on PATH as `python`
        and `python3`, a reachable copy of it where the sandbox user cannot see it (`interpreter`)."""
        spec = spec.model_copy(update={"workdir": ""})  # each sandbox has its own work tree
        needs_reach = os.getuid() == 0 and bubblewrap_problem() is not None
        bin_dir, variables = sandbox_python(needs_reach)
        path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        return spec, config.model_copy(update={"env": {"PATH": path, **variables, **config.env}})

    @classmethod
    def with_browser(cls, spec: EnvSpec) -> EnvSpec:
        """Unchanged: the sandbox sees the host's /usr and /etc read-only, Debian's chromium included."""
        return spec

    def __init__(
        self,
        source: Path,
        commit: str,
        config: SandboxConfig | None = None,
        *,
        bubblewrap: bool = True,
    ) -> None:
        root = Path(tempfile.mkdtemp(prefix=f"{LOCAL_PREFIX}{this_process()}-"))  # owners.reap_local reads it
        config = config or SandboxConfig()
        self._terminal: PersistentTerminal | None = None
        self._transport: SubprocessTransport | None = None
        self._mounted = False
        try:
            uncapped = self._mount_work_tree(root / "repo")
            checkout(source, commit, root / "repo")
            if self._mounted:
                _cap(root / "repo", config.disk_mb)
        except BaseException:
            self._unmount(root / "repo")
            shutil.rmtree(root, ignore_errors=True)
            raise
        super().__init__(config, root, root / "repo", bubblewrap=bubblewrap, uncapped=uncapped)
        try:
            self._terminal = self._first_terminal()
        except BaseException:
            self.close()
            raise

    def _mount_work_tree(self, path: Path) -> str:
        """A tmpfs at `path` (unbounded until `_cap`); '' when mounted, else why the work tree's
        size is not capped here."""
        path.mkdir()
        if os.getuid() != 0:
            return "not root"
        mounted = subprocess.run([tool("mount"), "-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", "tmpfs", str(path)],
                                 capture_output=True, text=True, check=False)
        self._mounted = mounted.returncode == 0
        return "" if self._mounted else f"mount: {mounted.stderr.strip()}"

    def _unmount(self, path: Path) -> None:
        if self._mounted:  # lazily: a helper that has not yet gone may still hold it
            subprocess.run([tool("umount"), "--lazy", str(path)], capture_output=True, check=False)
            self._mounted = False

    def _first_terminal(self) -> PersistentTerminal:
        """The shell; started again (up to 3 times) when bubblewrap failed to remount a mount that
        was coming or going on the host (a container starting or stopping), or to cover a socket
        file removed since it was listed: not this sandbox's fault."""
        for _ in range(BWRAP_TRIES - 1):
            try:
                return PersistentTerminal(self._spawn(), self.config, reopen=self._spawn)
            except SandboxError as exc:
                if not bwrap_raced(str(exc)):
                    raise
        return PersistentTerminal(self._spawn(), self.config, reopen=self._spawn)

    def _spawn(self) -> SubprocessTransport:
        with self.confined(list(SHELL_ARGV)) as (argv, fds):
            self._transport = SubprocessTransport(argv, env=self.env() | SHELL_ENV, cwd=self.workdir, pass_fds=fds)
        return self._transport

    def _run(
        self, command: list[str], data: bytes = b"", *, enter: bool
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one of our own commands as the sandbox uid.

        enter=True: in the live sandbox's mount namespace (it sees the sandbox's /tmp), without
        the filter; for plain tools such as cat. Otherwise, or when that cannot be entered (the
        shell is gone, or we are not root): in a fresh, fully confined sandbox; for tools that
        obey the agent's files (git and its config).
        """
        if self._closed:
            raise SandboxError("sandbox is closed")
        live = self._transport if enter and os.getuid() == 0 else None  # nsenter needs root
        shell = live.shell_pid() if live is not None and self.isolation.bubblewrap else None
        with contextlib.nullcontext() if shell is not None else self._filter_fd() as fd:
            if shell is not None:
                argv = [tool("nsenter"), f"--target={shell}", "--mount", "--", *self._setpriv(), *command]
            else:
                argv = self._confine(command, fd)
            proc = self._run_once(argv, data, fd, command[0])
            # a fresh bubblewrap that lost a race with a host mount never ran the command
            for _ in range(BWRAP_TRIES - 1 if shell is None else 0):
                if not bwrap_raced(proc.stderr.decode(errors="replace")):
                    break
                proc = self._run_once(argv, data, fd, command[0])
            return proc

    def _run_once(
        self, argv: list[str], data: bytes, fd: int | None, name: str
    ) -> subprocess.CompletedProcess[bytes]:
        try:  # a session of its own: no controlling terminal (/dev/tty) to reach
            return subprocess.run(
                argv,
                input=data,
                capture_output=True,
                env=self.env() | {"PATH": _DEFAULT_PATH},
                cwd=self.workdir,
                pass_fds=() if fd is None else (fd,),
                timeout=FILE_OP_TIMEOUT_S,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise SandboxError(f"{name} timed out in the sandbox") from exc

    # -- the protocol --------------------------------------------------------------------------

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        if self._closed or self._terminal is None:
            raise SandboxError("sandbox is closed")
        return self._terminal.run(command, timeout)

    def _one_off(self, argv: list[str], data: bytes = b"", *, git: bool = False) -> tuple[int, bytes, bytes]:
        proc = self._run(argv, data, enter=not git)
        return proc.returncode, proc.stdout, proc.stderr

    def close(self) -> None:
        if self._closed:
            return
        if self._terminal is not None:
            self._terminal.close()
        self._unmount(Path(self.workdir))
        super().close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_warned: set[str] = set()


def _warn_once(missing: list[str]) -> None:
    """Log what isolation is missing here, each line once per process (it holds for every sandbox)."""
    new = [line for line in missing if line not in _warned]
    if new:
        _warned.update(new)
        log.warning("local sandbox isolation is partial: %s", "; ".join(new))


def _new_cgroup(config: SandboxConfig) -> tuple[Cgroup | None, str]:
    """A cgroup with `config`'s memory, pids and CPU limits for one sandbox, or None and why not."""
    if os.getuid() != 0:
        return None, "not root"
    try:
        return Cgroup(memory_bytes=config.memory_mb << 20, pids=config.pids, cpus=config.cpus), ""
    except OSError as exc:
        return None, str(exc)


BWRAP_TRIES = 4
"""How often a bubblewrap start that raced a host mount is tried (each race is a few in a hundred
at worst: another sandbox's work tree unmounted while bubblewrap remounts the tree read-only)."""


def bwrap_raced(stderr: str) -> bool:
    """bubblewrap failed before running anything, because a mount it was copying read-only, or a
    file it was covering, came or went on the host meanwhile: not the sandbox's fault."""
    return "bwrap: " in stderr and any(race in stderr for race in ("Unable to apply mount flags", "Can't create file at"))


@functools.cache
def _mount_problem() -> str:
    """'' when we may mount a tmpfs for a work tree here, else why not."""
    if os.getuid() != 0:
        return "not root"
    with tempfile.TemporaryDirectory(prefix="swedojo-mount-") as tmp:
        mounted = subprocess.run([tool("mount"), "-t", "tmpfs", "tmpfs", tmp], capture_output=True, text=True, check=False)
        if mounted.returncode != 0:
            return f"mount: {mounted.stderr.strip()}"
        subprocess.run([tool("umount"), tmp], check=True)
    return ""


def _cap(path: Path, disk_mb: int) -> None:
    """Bound the tmpfs at `path` to what it holds now plus `disk_mb`."""
    stat = os.statvfs(path)
    used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    size = f"size={(used >> 20) + disk_mb}m"
    subprocess.run([tool("mount"), "-o", f"remount,{size}", str(path)], capture_output=True, check=True)


def _plan(config: SandboxConfig, bubblewrap: bool, cgroup: Cgroup | None, why: str,
          uncapped: str | None = None, mounts: list[_Mount] | None = None) -> LocalIsolation:
    """What can be put in force here for `config`, with `cgroup` (or `why` there is none), a
    capped work tree ("" for `uncapped`; else why not; None: no work tree of a sandbox's, e.g. a
    build's checkout) and bubblewrap's `mounts` (`_view`; none given: those of a sandbox made with
    `config`, its work tree named by what it is)."""
    missing: list[str] = []
    mounts = mounts if mounts is not None else [*_view(config), _Mount("(the work tree)", "writable")]
    root = os.getuid() == 0
    uid = UID_BASE + secrets.randbelow(1 << 20) if root else os.getuid()
    if not root:
        missing.append("not root: commands run as the calling user, sharing its process limit")
    problem = bubblewrap_problem() if bubblewrap else "bubblewrap not used (bubblewrap=False)"
    if problem:
        missing.append(f"{problem}: no namespaces, the host file system (and the Unix sockets bound in it) "
                       "is protected only by uid")
    try:
        compile_bpf(config.network)
        seccomp = True
    except SeccompUnavailableError as exc:
        seccomp = False
        missing.append(f"no seccomp filter: {exc}")
    rlimits = {
        "nproc": config.pids if root else len(_uid_pids(uid)) + config.pids,
        "data": config.memory_mb << 20,
        "fsize": config.disk_mb << 20,
        "cpu": max(1, math.ceil(config.total_time_s * config.cpus)),
        "core": 0,
    }
    limits = cgroup.limits if cgroup is not None else {}
    if cgroup is None:
        missing.append(f"no cgroup ({why}): memory, pids and CPU time are limited per process (rlimits), "
                       "not for the sandbox's processes together")
    elif "cpu" not in limits:
        missing.append("no cpu controller in the sandbox's cgroup: CPU time is limited per process (rlimits)")
    if uncapped:
        missing.append(f"the work tree's total size is not capped ({uncapped}): each file is, by the fsize rlimit")
    on_host_network = ("no bubblewrap" if problem else nat_problem()) if config.network else None
    if on_host_network:  # why commands with the network on use the host's network namespace
        missing.append("network on: commands share the host's network namespace (its loopback, its other "
                       f"addresses, its abstract Unix sockets): {on_host_network}")
    namespaces = ["mount", "pid", "ipc", "uts"] + ([] if on_host_network else ["net"])
    return LocalIsolation(
        backend="local",
        bubblewrap=problem is None,
        namespaces=namespaces if problem is None else [],
        read_only_root=problem is None,
        seccomp=seccomp,
        uid=uid,
        network=config.network,
        network_via=NAT if config.network and not on_host_network else "",
        masked_sockets=[] if problem else [s for s in bound_sockets(uid, _AFRESH) if _shown(s, mounts)],
        visible=_visible(mounts, config.disk_mb) if problem is None
        else {"/": "the host's whole file system, as its permissions let the uid"},
        rlimits=rlimits,
        cgroup=limits,
        disk_mb=({"/tmp": config.disk_mb, "/dev/shm": config.disk_mb} if problem is None else {})
        | ({"work tree (beyond the checkout)": config.disk_mb} if uncapped == "" else {}),
        missing=missing,
    )
