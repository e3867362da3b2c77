"""The `docker` backend: hardened containers with one persistent terminal attached over an exec socket.

Layout of a sandbox container:
- pid 1 is docker-init; under it a tiny bash supervisor (`_SUPERVISOR`) reads requests from the
  container's stdin, which is this process's attach stream. When this process dies, even by
  SIGKILL, the stream closes, the supervisor exits and the daemon removes the container
  (`auto_remove`). Requests let the owner signal processes inside without starting a new process
  there, so an interrupt works even when a fork bomb holds every pid. The two run as root with
  one capability, CAP_KILL, so nothing the sandbox user runs can signal, trace or rewrite them;
  everything else runs as the sandbox user, with no capability at all.
- `reset()` makes a used container as a fresh one (see `_RESET`), for the pool to reuse.
- The terminal's bash is one long-lived exec (stdin attached, no tty), driven by `PersistentTerminal`.
- The root filesystem is read-only; the work tree and /tmp are size-capped tmpfs mounts owned by the
  sandbox user. The repository, checked out on the host, is streamed in as a tar through the shell
  before the terminal takes it over (no extra exec: that costs ~80 ms).
- Files in and out and the diff go through one-off execs as the sandbox user (same rights as the
  agent, and they see the tmpfs mounts, which the daemon's archive API does not).
"""

from __future__ import annotations

import atexit
import io
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import socket
import struct
import tarfile
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

import docker
import docker.errors
from docker.types import LogConfig

from swedojo.repos import checkout
from swedojo.sandboxes import standins
from swedojo.sandboxes.base import (
    ExecResult,
    Isolation,
    OneOffFiles,
    SandboxConfig,
    SandboxError,
)
from swedojo.sandboxes.browser import BrowserUnavailableError
from swedojo.sandboxes.image_use import record_use
from swedojo.sandboxes.owners import gone, reap_once, this_process
from swedojo.sandboxes.seccomp import render_docker_profile
from swedojo.sandboxes.terminal import SHELL_ARGV, SHELL_ENV, PersistentTerminal
from swedojo.sandboxes.warm_runner import WarmRunner
from swedojo.schema import EnvSpec

LABEL = "swedojo.sandbox"
"""Label on every container the backend starts (value "1")."""
OWNER_PID_LABEL = "swedojo.owner_pid"
"""Pid of the process that owns the container."""
OWNER_HOST_LABEL = "swedojo.owner_host"
"""Host name of that process (owner pids are only checked on the same host)."""
OWNER_LABEL = "swedojo.owner"
"""The owner's token (`owners.this_process`: boot, pid and its start time), so that a reused pid
does not pass for the owner."""
SANDBOX_USER = "1000:1000"
"""uid:gid every process in the sandbox runs as."""
SANDBOX_HOME = "/tmp"
"""HOME inside: the root filesystem is read-only, /tmp is writable."""
FILE_OP_TIMEOUT_S = 120.0
"""Bound on one-off execs (file reads/writes, repo copy, diff)."""

_LIVE = r"""
live() {
  local t line
  for t in /proc/$1/task/[0-9]*; do
    read -r line < "$t/stat" 2>/dev/null || continue
    line=${line##*) }
    [[ ${line:0:1} == [ZX] ]] || return 0
  done
  return 1
}
"""
"""Bash function `live PID`: true while any thread of process PID runs. Never judged by the
thread-group leader alone: a leader that exited (SYS_exit) shows `Z` while its other threads go
on, and kill(PID) still reaches them."""

_SUPERVISOR = _LIVE + r"""
others() {
  victims=()
  local d p
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [[ $p == 1 || $p == $$ || ,$1, == *,$p,* ]] && continue
    live "$p" && victims+=("$p")
  done
}
while read -r seq op pid; do
  case $op in
    int) kill -INT -- "-$pid" ;;
    kill) for _ in {1..100}; do others "$pid"; ((${#victims[@]})) || break; kill -KILL "${victims[@]}"; done ;;
  esac
  echo "$seq"
done 2>/dev/null
"""
"""The container's main process. Requests, one per line, `SEQ OP PID`, each answered with `SEQ`
once done: `int PID` sends SIGINT to process group PID; `kill PID[,PID...]` kills every process
but those, itself and init, in rounds until none is left (a fork bomb's children included). Only
builtins, so it works when no pid is free."""

_RESET = _LIVE + r"""shopt -s nullglob dotglob
server=
if [[ -n $2 ]] && read -r stat < "/proc/$2/stat" 2>/dev/null; then
  rest=${stat##*) }
  read -ra fields <<< "$rest"
  # the same process (start time), running or asleep, not dumpable (its /proc entry is root's)
  if [[ ${fields[19]} == "$3" && ${fields[0]} == [RS] && ! -O /proc/$2/stat ]]; then server=$2; else kill -KILL "$2" 2>/dev/null; fi
fi
for dir in /tmp /dev/shm /dev/mqueue "$1"; do
  entries=("$dir"/*)
  ((${#entries[@]})) || continue
  chmod -R u+rwX -- "${entries[@]}" 2>/dev/null
  rm -rf -- "${entries[@]}" 2>/dev/null
done
ipcrm --all 2>/dev/null
left=()
for dir in /tmp /dev/shm /dev/mqueue "$1"; do
  entries=("$dir"/*)
  ((${#entries[@]})) && left+=("files in $dir: ${entries[*]:0:3}")
done
for kind in shm sem msg; do
  lines=0
  while read -r _; do ((lines++)); done < "/proc/sysvipc/$kind"
  ((lines > 1)) && left+=("SysV $kind objects")
done
roots=0
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [[ $p == $$ || $p == "$PPID" || $p == "$server" ]] && continue
  live "$p" || continue
  uid=
  { while read -r key value _; do [[ $key == Uid: ]] && { uid=$value; break; }; done < "$d/status"; } 2>/dev/null || continue
  if [[ $uid == 0 ]]; then ((roots++)); else left+=("process $p (uid $uid)"); fi
done
((roots == 2)) || left+=("$roots root processes, not init and the supervisor")
if ((${#left[@]})); then printf '%s\n' "${left[@]}"; exit 1; fi
[[ -n $server ]] && echo "server kept"
exit 0
"""
"""`reset WORKDIR [PID STARTTIME]`, run as the sandbox user after the supervisor killed every
process but the warm runner's server PID: keep that server only if it is still the same process
(start time), running, and not dumpable (nothing could trace it or write its memory; it may have
been killed, stopped or replaced), else kill it. Then empty every place the user can write (the
work tree, /tmp, /dev/shm, /dev/mqueue; the root filesystem is read-only), remove its SysV IPC
objects, and check with builtins only that nothing is left: no file there, no IPC object, no
process with a running thread (`live`) but init, the supervisor and the kept server (and this check). Exit 1 with what is
left; print `server kept` when it was."""


class ResetError(SandboxError):
    """A used container could not be made as fresh (something the sandbox left survived the reset)."""


class DockerUnavailableError(SandboxError):
    """No Docker Engine answers (start one with `make docker-up`)."""


class ImageNotFoundError(SandboxError):
    """The image does not exist locally (and no registry is reachable to pull it)."""


class ContainerError(SandboxError):
    """The engine failed to create, start, exec in or remove a container."""


class CopyError(SandboxError):
    """The repository could not be copied into the sandbox (e.g. it exceeds the work tree's size cap)."""


class SandboxClosedError(SandboxError):
    """The sandbox was used after `close()`."""


_client: docker.APIClient | None = None
_client_lock = threading.Lock()


def api() -> docker.APIClient:
    """The process-wide low-level Docker client; DockerUnavailableError if no engine answers."""
    global _client
    with _client_lock:
        if _client is None:
            try:
                client = docker.from_env(timeout=120).api
                client.ping()
            except docker.errors.DockerException as exc:
                raise DockerUnavailableError(
                    f"no Docker Engine answers ({exc}); run `make docker-up`"
                ) from exc
            _client = client
        return _client


def docker_available() -> bool:
    """True when a Docker Engine answers."""
    try:
        api()
    except DockerUnavailableError:
        return False
    return True


# Every live container of this process, removed at interpreter exit and on SIGTERM.
_live: dict[str, Container] = {}
_live_lock = threading.Lock()
_hooks_installed = False


def _remove_live() -> None:
    """Remove this process's containers (a forked child inherits the registry, not the containers)."""
    with _live_lock:
        containers = [c for c in _live.values() if c.owner_pid == os.getpid()]
    for container in containers:
        try:
            container.remove()
        except SandboxError:
            pass


def _on_sigterm_then(previous: Any) -> Any:
    def handler(signum: int, frame: Any) -> None:
        _remove_live()
        if callable(previous):
            previous(signum, frame)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    return handler


def _install_cleanup_hooks() -> None:
    global _hooks_installed
    with _live_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    reap_once("docker", prune)  # what runs killed before this one left
    atexit.register(_remove_live)
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, _on_sigterm_then(previous))


def _raw(sock: Any) -> socket.socket:
    """The plain socket under what docker-py returns for a hijacked connection."""
    return getattr(sock, "_sock", sock)


class _Frames:
    """Reader of Docker's multiplexed stream (no tty): 8-byte header (stream, size), then payload."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def take(self) -> list[tuple[int, bytes]]:
        """Complete frames received so far."""
        frames = []
        while len(self.buf) >= 8:
            kind, size = struct.unpack(">BxxxL", self.buf[:8])
            if len(self.buf) < 8 + size:
                break
            frames.append((kind, bytes(self.buf[8 : 8 + size])))
            del self.buf[: 8 + size]
        return frames

    def fill(self, timeout: float) -> bool:
        """Read what arrives within `timeout`; False if nothing did. Sets `eof` when the peer is gone."""
        try:
            ready, _, _ = select.select([self.sock], [], [], max(timeout, 0.0))
            if not ready:
                return False
            data = self.sock.recv(1 << 16)
        except (OSError, ValueError):
            data = b""
        if not data:
            self.eof = True
        self.buf += data
        return True


_SHELL_START = r"""exec 2>&1
echo "$$"
read -r nonce size || exit
if [ "$size" -gt 0 ]; then
  head -c "$size" | { tar -x -f - 2>&1; rc=$?; cat >/dev/null; echo; echo "$nonce:$rc"; }
else
  echo; echo "$nonce:0"
fi
exec "$@"
"""
"""How the terminal's shell starts: print its pid, wait for `NONCE SIZE` and SIZE bytes of a tar to
unpack into the work tree (0: none; `cat` drains what tar leaves), say `NONCE:EXIT`, then exec the
interactive bash. `read` and `head` read exactly what they need from the pipe (bash itself would
buffer), so no archive byte is ever read as a command."""


class DockerTransport:
    """A `Transport` over one exec'd bash in a container, attached once (stdin + multiplexed output).

    Started before it is needed (the pool keeps one per container); `begin` then unpacks the
    repository and lets the interactive shell start.
    """

    def __init__(self, container: Container) -> None:
        self._container = container
        self._closed = False
        argv = ["bash", "-c", _SHELL_START, "shell", *SHELL_ARGV]
        try:
            exec_id = api().exec_create(
                container.id,
                argv,
                stdin=True,
                tty=False,
                user=SANDBOX_USER,
                workdir=container.workdir,
                environment=SHELL_ENV,
            )["Id"]
            self._handle = api().exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise ContainerError(
                f"cannot start the shell in {container.short_id}: {exc.explanation}"
            ) from exc
        self._sock = _raw(self._handle)
        self._frames = _Frames(self._sock)
        self._pending = bytearray()
        try:
            self.pid = int(self._read_until(re.compile(rb"(\d+)\n"), 30.0).group(1))
        except (EOFError, TimeoutError, ValueError) as exc:
            self.close()
            raise ContainerError(
                f"the shell in {container.short_id} did not start: {exc}"
            ) from exc

    def _read_until(
        self, pattern: re.Pattern[bytes], timeout: float
    ) -> re.Match[bytes]:
        """Read until `pattern` matches what arrived; keep what follows the match for `recv`."""
        output = b""
        deadline = time.monotonic() + timeout
        while not (found := pattern.search(output)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {timeout:g} s: {output[-200:]!r}")
            output += self.recv(deadline - time.monotonic())
        self._pending[:0] = output[found.end() :]
        return found

    def begin(self, archive: bytes = b"", timeout: float = FILE_OP_TIMEOUT_S) -> None:
        """Unpack `archive` (a tar; none if empty) into the work tree, then start the interactive shell."""
        nonce = secrets.token_hex(8)
        self.send(f"{nonce} {len(archive)}\n".encode() + archive)
        try:
            found = self._read_until(
                re.compile(rf"(?s)(.*)\n{nonce}:(\d+)\n".encode()), timeout
            )
        except (EOFError, TimeoutError) as exc:
            raise CopyError(
                f"unpacking into {self._container.workdir} failed: {exc}"
            ) from exc
        if found.group(2) != b"0":
            said = found.group(1).decode(errors="replace").strip().splitlines()
            raise CopyError(
                f"unpacking into {self._container.workdir} failed: {said[-1] if said else 'tar failed'}"
            )

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except (OSError, ValueError) as exc:
            raise EOFError("the shell is gone") from exc

    def recv(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            out = self._pending + b"".join(data for _, data in self._frames.take())
            self._pending.clear()
            if out:
                return bytes(out)
            if self._frames.eof:
                raise EOFError("the shell is gone")
            if not self._frames.fill(deadline - time.monotonic()):
                return b""

    def interrupt(self, force: bool = False) -> None:
        if force:
            self._container.request("kill", self.pid, *self._container.spared())
        self._container.request("int", self.pid)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._container.request("kill", *self._container.spared())
        for closable in (self._handle, self._sock):
            try:
                closable.close()
            except OSError:
                pass


class Container:
    """One started, hardened container and its supervisor; removed on `remove()`, at exit or SIGTERM."""

    def __init__(
        self, image: str, config: SandboxConfig, workdir: str = "/testbed"
    ) -> None:
        self.image = image
        self.config = config
        self.workdir = workdir
        self.owner_pid = os.getpid()
        self.runner: WarmRunner | None = None
        """The warm test runner started in it, if any (`start_runner`)."""
        self.uses = 0
        """How many times `reset()` made it fresh again."""
        self._server: tuple[str, str] | None = None
        """The warm runner's server as (pid, start time), read when `start_runner` started it."""
        self._removed = False
        self._lock = threading.Lock()
        self._request_lock = threading.Lock()
        self._requests = 0
        client = api()
        _install_cleanup_hooks()
        record_use(image)  # for `dojo sandbox prune --unused-days`
        tmpfs_opts = f"rw,nosuid,nodev,size={config.disk_mb}m"
        served = config.standins and not config.network
        host_config = client.create_host_config(
            binds={standins.volume_for(image): {"bind": standins.MOUNT, "mode": "ro"}} if served else None,
            extra_hosts={host: "127.0.0.1" for host in standins.HOSTS} if served else None,
            init=True,
            cap_add=["KILL"],  # the supervisor's, as root; processes of the sandbox user have none
            auto_remove=True,
            read_only=True,
            tmpfs={
                "/tmp": f"{tmpfs_opts},exec,mode=1777",
                workdir: f"{tmpfs_opts},exec,mode=0755,uid=1000,gid=1000",
            },
            cap_drop=["ALL"],
            security_opt=[
                "no-new-privileges",
                # sockets are allowed: with the network off the container's own namespace has only its
                # loopback, where the tests' own servers (and the stand-ins) listen
                "seccomp=" + render_docker_profile(sockets=True),
            ],
            network_mode="bridge" if config.network else "none",
            pids_limit=config.pids,
            mem_limit=f"{config.memory_mb}m",
            memswap_limit=f"{config.memory_mb}m",
            nano_cpus=int(config.cpus * 1e9),
            log_config=LogConfig(type="none"),
        )
        labels = owner_labels()
        try:
            self.id: str = client.create_container(
                image,
                command=["bash", "-c", _SUPERVISOR],
                stdin_open=True,
                user="0:0",
                working_dir=workdir,
                environment={"HOME": SANDBOX_HOME},
                labels=labels,
                hostname="sandbox",
                host_config=host_config,
            )["Id"]
        except docker.errors.ImageNotFound as exc:
            raise ImageNotFoundError(
                f"image {image!r} not found; base images are made by `make docker-up`"
            ) from exc
        except docker.errors.APIError as exc:
            raise ContainerError(
                f"cannot create a container from {image!r}: {exc.explanation}"
            ) from exc
        with _live_lock:
            _live[self.id] = self
        try:
            self._attach = client.attach_socket(
                self.id, params={"stdin": 1, "stdout": 1, "stream": 1}
            )
            self._attach_sock = _raw(self._attach)
            self._answers = _Frames(self._attach_sock)
            client.start(self.id)
        except docker.errors.APIError as exc:
            self.remove()
            raise ContainerError(
                f"cannot start a container from {image!r}: {exc.explanation}"
            ) from exc
        try:
            self._spare: DockerTransport | None = DockerTransport(self)
        except SandboxError:
            self.remove()
            raise

    @property
    def short_id(self) -> str:
        return self.id[:12]

    def spared(self) -> tuple[int, ...]:
        """Processes a kill request leaves alone: the warm runner's server (reset() checks it before reuse)."""
        return (int(self._server[0]),) if self._server else ()

    def request(self, op: str, *pids: int, timeout: float = 30.0) -> None:
        """Have the supervisor signal processes (see `_SUPERVISOR`) and wait until it did.

        Best effort: a no-op once the container is gone, given up after `timeout`.
        """
        with self._request_lock:
            self._requests += 1
            seq = str(self._requests).encode()
            try:
                target = ",".join(str(pid) for pid in pids) or "0"
                self._attach_sock.sendall(b"%s %s %s\n" % (seq, op.encode(), target.encode()))
            except (AttributeError, OSError, ValueError):
                return
            deadline = time.monotonic() + timeout
            lines = b""
            while seq not in lines.split(b"\n")[:-1]:
                if self._answers.eof or time.monotonic() > deadline:
                    return
                self._answers.fill(deadline - time.monotonic())
                lines += b"".join(data for _, data in self._answers.take())

    def start_runner(self, runner: WarmRunner, wait_s: float = 0.0) -> None:
        """Start `runner`'s fork server (and wait up to `wait_s` for it to listen); test commands of
        sandboxes on this container then go to it."""
        code, out, err = self.run(runner.start_argv(wait_s), runner.script, timeout=FILE_OP_TIMEOUT_S + wait_s)
        if code != 0:
            raise ContainerError(
                f"cannot start the warm test runner in {self.short_id}: {(err or out).decode(errors='replace').strip()}"
            )
        self.runner = runner
        stat = out.decode(errors="replace")
        fields = stat[stat.rfind(")") + 2 :].split()
        self._server = (stat.split()[0], fields[19]) if len(fields) > 19 else None

    def reset(self, runner_wait_s: float = 0.0) -> None:
        """Make the container as a fresh start left it, warm runner and spare shell included.

        Every process of the sandbox user is killed (by the root supervisor, which they cannot
        touch), every place it can write is emptied and its IPC objects removed, and `_RESET`
        checks that nothing is left. The runner's server is spared when it is provably the one
        started here and untouched (its warm imports and memo carry over), else started again.
        Raises ResetError (the container must then be removed) when anything survived.
        """
        if self._spare is not None:
            self._spare.close()
            self._spare = None
        self.request("kill", *self.spared())
        code, out, err = self.run(["bash", "-c", _RESET, "reset", self.workdir, *(self._server or ())])
        if code != 0:
            said = (out + err).decode(errors="replace").strip().replace("\n", "; ")
            raise ResetError(f"container {self.short_id} is not fresh after a reset: {said or f'exit {code}'}")
        if self.runner is not None and b"server kept" in out:
            code, out, err = self.run(["sh", "-c", self.runner.script_command()], self.runner.script)
            if code != 0:
                raise ResetError(f"cannot put the runner's client back in {self.short_id}: {(err or out).decode(errors='replace').strip()}")
        elif self.runner is not None:
            self.start_runner(self.runner, runner_wait_s)
        self._spare = DockerTransport(self)
        self.uses += 1

    def shell(self, archive: bytes = b"") -> DockerTransport:
        """A bash attached over an exec socket, with `archive` (a tar) unpacked into the work tree first.

        The first call gets the shell started with the container; later ones (after the shell died) new ones.
        """
        if self._removed:
            raise SandboxClosedError(f"container {self.short_id} is removed")
        spare, self._spare = self._spare, None
        transport = spare or DockerTransport(self)
        try:
            transport.begin(archive)
        except SandboxError:
            transport.close()
            raise
        return transport

    def run(
        self, argv: list[str], data: bytes = b"", timeout: float = FILE_OP_TIMEOUT_S
    ) -> tuple[int, bytes, bytes]:
        """Run a one-off process as the sandbox user in the work tree: (exit code, stdout, stderr).

        It is killed after `timeout` seconds (ContainerError), by coreutils `timeout` inside.
        """
        if self._removed:
            raise SandboxClosedError(f"container {self.short_id} is removed")
        client = api()
        bounded = ["timeout", "-s", "KILL", f"{timeout:g}", *argv]
        try:
            exec_id = client.exec_create(
                self.id, bounded, stdin=True, user=SANDBOX_USER, workdir=self.workdir
            )["Id"]
            handle = client.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise ContainerError(
                f"exec in {self.short_id} failed: {exc.explanation}"
            ) from exc
        sock = _raw(handle)
        frames = _Frames(sock)
        out = {1: bytearray(), 2: bytearray()}
        started = time.monotonic()
        deadline = started + timeout + 10
        too_slow = ContainerError(
            f"{shlex.join(argv)} in {self.short_id} took over {timeout:g} s"
        )
        try:
            sock.settimeout(timeout)
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while not frames.eof:
                if time.monotonic() > deadline:
                    raise too_slow
                frames.fill(deadline - time.monotonic())
                for kind, chunk in frames.take():
                    out.setdefault(kind, bytearray()).extend(chunk)
        except OSError as exc:
            raise ContainerError(f"exec in {self.short_id} failed: {exc}") from exc
        finally:
            handle.close()
            sock.close()
        code = self._exit_code(exec_id)
        if code == 128 + signal.SIGKILL and time.monotonic() - started >= timeout:
            raise too_slow
        return code, bytes(out[1]), bytes(out[2])

    def _exit_code(self, exec_id: str) -> int:
        deadline = time.monotonic() + 10
        while True:
            info = api().exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                raise ContainerError(
                    f"exec in {self.short_id} did not report its exit code"
                )
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill and remove the container; idempotent."""
        with self._lock:
            if self._removed:
                return
            self._removed = True
        with _live_lock:
            _live.pop(self.id, None)
        try:
            api().remove_container(self.id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # 409: the daemon is already removing it (auto_remove)
            if exc.status_code != 409:
                raise ContainerError(
                    f"cannot remove container {self.short_id}: {exc.explanation}"
                ) from exc
        finally:
            if getattr(self, "_spare", None) is not None:
                self._spare.close()
            if hasattr(self, "_attach"):
                self._attach.close()
                self._attach_sock.close()


_tars: OrderedDict[tuple[str, str], bytes] = OrderedDict()
_tars_lock = threading.Lock()
TAR_CACHE_BYTES = 256 * 2**20
"""Checkouts at full commit ids are kept as tars up to this size in total (least recently used go first)."""


def _repo_tar(source: Path, commit: str) -> bytes:
    """The repository at `commit` (with its git metadata) as a tar of the work tree's contents.

    Cached when `commit` is a full commit id (it names the same tree forever): the many sandboxes of
    one task (rollouts, grading) check out once.
    """
    key = (str(source.resolve()), commit)
    with _tars_lock:
        if key in _tars:
            _tars.move_to_end(key)
            return _tars[key]
    data = _checkout_tar(source, commit)
    if (
        re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit)
        and len(data) <= TAR_CACHE_BYTES
    ):
        with _tars_lock:
            _tars[key] = data
            while sum(map(len, _tars.values())) > TAR_CACHE_BYTES:
                _tars.popitem(last=False)
    return data


def _checkout_tar(source: Path, commit: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="swedojo-checkout-") as tmp:
        tree = Path(tmp) / "repo"
        checkout(source, commit, tree)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for entry in sorted(tree.iterdir()):
                tar.add(entry, arcname=entry.name)
        return buf.getvalue()


class DockerSandbox(OneOffFiles):
    """A hardened container with the repo at `commit` in `workdir` and a persistent terminal.

    The work tree is a fresh size-capped tmpfs (whatever the image has at `workdir` is hidden):
    with `source` and `commit` it holds a checkout, owned by the sandbox user; without, it is
    empty. The pool passes a started `container` to skip the start.
    """

    pooled: ClassVar[bool] = True
    serves_standins: ClassVar[bool] = True

    @classmethod
    def create(cls, *, image: str, source: Path | None, commit: str | None, config: SandboxConfig,
               workdir: str) -> DockerSandbox:
        """The registry's constructor (`registry.SandboxBackend`)."""
        if not image:
            raise ValueError("the docker backend needs an image")
        return cls(image, source, commit, config, workdir)

    @classmethod
    def isolation_for(cls, config: SandboxConfig) -> Isolation:
        """The registry's report (`registry.SandboxBackend`): what a container made with `config`
        is confined by on the engine that answers here (its cgroup support, from `docker info`)."""
        info = api().info()
        supported = {"memory": "MemoryLimit", "pids": "PidsLimit", "cpu": "CpuCfsQuota"}
        limits = {"memory": config.memory_mb << 20, "pids": config.pids, "cpu": int(config.cpus * 1e6)}
        cgroup = {name: limits[name] for name, flag in supported.items() if info.get(flag)}
        missing = [f"the engine cannot limit {name} (no cgroup support for it): not bounded"
                   for name in supported if name not in cgroup]
        if not info.get("SwapLimit"):
            missing.append("the engine cannot limit swap: memory may spill past its limit into swap")
        seccomp = any(option.startswith("name=seccomp") for option in info.get("SecurityOptions") or ())
        if not seccomp:
            missing.append("the engine has no seccomp support: no syscall filter")
        if config.network:
            missing.append("network on: the bridge's gateway is the host, so a service it serves on all its "
                           "addresses is reachable at any of them (its loopback is not)")
        return Isolation(
            backend="docker",
            namespaces=["mount", "pid", "ipc", "uts", "net"],
            read_only_root=True,
            seccomp=seccomp,
            uid=int(SANDBOX_USER.split(":")[0]),
            network=config.network,
            network_via="the engine's bridge (NAT)" if config.network else "",
            cgroup=cgroup,
            disk_mb={"/tmp": config.disk_mb, "work tree": config.disk_mb},
            missing=missing,
        )

    @classmethod
    def plain_python(cls, spec: EnvSpec, config: SandboxConfig) -> tuple[EnvSpec, SandboxConfig]:
        """The locally made Python image (`make docker-up` builds it) runs the tests."""
        from swedojo.sandboxes.environment import DEFAULT_PYTHON_IMAGE

        update = {"image": DEFAULT_PYTHON_IMAGE, "test_command": "python3 -m pytest -rA -p no:cacheprovider"}
        return spec.model_copy(update=update), config

    @classmethod
    def with_browser(cls, spec: EnvSpec) -> EnvSpec:
        """The spec's image with Debian's chromium added (`browser_image`), built on first use."""
        from swedojo.sandboxes.browser_image import ensure_browser_image

        return spec.model_copy(update={"image": ensure_browser_image(spec.image)})

    def __init__(
        self,
        image: str,
        source: Path | None = None,
        commit: str | None = None,
        config: SandboxConfig | None = None,
        workdir: str = "/testbed",
        *,
        container: Container | None = None,
        remove: Callable[[Container], None] | None = None,
    ) -> None:
        """`remove`: what disposes of the container on close (the pool's background removal); default now."""
        if (source is None) != (commit is None):
            raise ValueError("give both source and commit, or neither")
        self.config = config or SandboxConfig()
        self.workdir = workdir
        self._container = container or Container(image, self.config, workdir)
        self._remove = remove
        self._closed = False
        self._launchers: Path | None = None
        """Host directory of the `launcher` scripts, made on first use."""
        try:
            archive = (
                _repo_tar(source, commit)
                if source is not None and commit is not None
                else b""
            )
            shell = self._container.shell(archive)
            self._terminal = PersistentTerminal(
                shell, self.config, reopen=self._container.shell
            )
        except BaseException:
            self._container.remove()
            raise

    @property
    def container_id(self) -> str:
        return self._container.id

    def _live(self) -> Container:
        if self._closed:
            raise SandboxClosedError("the sandbox is closed")
        return self._container

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        runner = self._live().runner
        return self._terminal.run(runner.rewrite(command) if runner else command, timeout)

    def _one_off(self, argv: list[str], data: bytes = b"", *, git: bool = False) -> tuple[int, bytes, bytes]:
        return self._live().run(argv, data)

    def launcher(self, command: list[str], name: str) -> Path:
        """A host executable, `<dir>/<name>`, that runs `command` (its own arguments appended) in the
        container as the sandbox user, in the work tree: `docker exec -i` carries only stdin and
        stdout, so the script hands its descriptors 3 and 4 (playwright's pipe to the browser and
        back) in as those, and inside they are moved back to 3 and 4 (stdin from /dev/null, stdout
        to stderr) before `command` starts. The container's confinement (no network, its seccomp
        profile, limits) is the browser's."""
        container = self._live()
        cli = shutil.which("docker")
        if cli is None:
            raise BrowserUnavailableError("no docker command on PATH to start a program in the container")
        if self._launchers is None:
            self._launchers = Path(tempfile.mkdtemp(prefix="swedojo-launch-"))
        inside = 'exec "$0" "$@" 3<&0 4>&1 </dev/null >&2'
        argv = [cli, "exec", "-i", "-u", SANDBOX_USER, "-w", self.workdir, container.id, "sh", "-c", inside, *command]
        path = self._launchers / name
        path.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@" <&3 >&4 3<&- 4>&-\n')
        path.chmod(0o700)
        return path

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._launchers is not None:
            shutil.rmtree(self._launchers, ignore_errors=True)
        if self._remove is not None:  # nothing of it runs on: the terminal's close kills every process first
            self._terminal.close()
            self._remove(self._container)
            return
        try:
            self._container.remove()
        finally:
            self._terminal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def owner_labels() -> dict[str, str]:
    """The labels of every container this process makes: `prune` removes them once it is gone."""
    return {LABEL: "1", OWNER_PID_LABEL: str(os.getpid()), OWNER_HOST_LABEL: socket.gethostname(),
            OWNER_LABEL: this_process()}


def orphaned(labels: dict[str, str]) -> bool:
    """Whether a labelled container's owner is gone: by its token (`owners.gone`), or for one made
    before tokens, by its pid alone; never for one of another host."""
    if labels.get(OWNER_HOST_LABEL) != socket.gethostname():
        return False
    if OWNER_LABEL in labels:
        return gone(labels[OWNER_LABEL])
    return not _pid_alive(labels.get(OWNER_PID_LABEL, ""))


def prune(everything: bool = False) -> list[str]:
    """Remove labelled containers whose owner process is gone (all of them with `everything`); their ids.
    Every docker run does it when it starts its first container, so a killed run's go with the next."""
    client = api()
    removed = []
    for info in client.containers(all=True, filters={"label": f"{LABEL}=1"}):
        if not everything and not orphaned(info.get("Labels") or {}):
            continue
        try:
            client.remove_container(info["Id"], force=True, v=True)
            removed.append(info["Id"])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise ContainerError(
                    f"cannot remove container {info['Id'][:12]}: {exc.explanation}"
                ) from exc
    return removed


def _pid_alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
