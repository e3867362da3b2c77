"""The `Sandbox` protocol every backend implements, and its errors.

A sandbox is a work tree (the repo at a commit) plus a way to run commands in it. Backends:
`local` (embedded default, no daemon) and `docker` (hardened containers from repolaunch images).
"""

from __future__ import annotations

import errno
import os
import posixpath
import signal
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class SandboxError(Exception):
    """A sandbox could not be created or stopped working: an infrastructure failure."""


class SandboxConfig(BaseModel):
    """Limits and options shared by every backend."""

    network: bool = False
    """Allow network access from inside (off by default)."""
    host_ports: list[int] = Field(default_factory=list)
    """Ports of the host's loopback the sandbox may reach while the network is on (a package
    mirror the operator serves there); every other host address stays out of reach where the
    backend gives the sandbox a network of its own (local: relayed into it)."""
    standins: bool = False
    """Resolve the public test services' host names to loopback and mount their stand-ins
    (`sandboxes.standins`; docker only, the backend says when it cannot)."""
    command_timeout_s: float = 120.0
    """Default per-command timeout."""
    total_time_s: float = 3600.0
    """Budget for all commands of the sandbox together."""
    max_output_bytes: int = 64_000
    """Output beyond this is cut; head and tail are kept."""
    memory_mb: int = 2048
    """Memory limit."""
    pids: int = 512
    """Process limit."""
    cpus: float = 1.0
    """CPU share."""
    disk_mb: int = 1024
    """Size cap for scratch space and written files."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for every command."""


class ExecResult(BaseModel):
    """The result of one command."""

    output: str
    """Combined stdout and stderr, decoded with replacement, possibly cut."""
    exit_code: int | None
    """Exit code; None when the command was timed out or killed."""
    timed_out: bool = False
    """The command hit its timeout and was interrupted."""
    truncated: bool = False
    """Output was cut (head and tail kept)."""
    duration_s: float = 0.0
    """Wall time."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Isolation(BaseModel):
    """What confines the commands of a backend's sandboxes on this machine, and what is missing
    here: `dojo sandbox info` prints it, so an operator sees the weak spots of a host."""

    backend: str
    """The backend's registered name."""
    namespaces: list[str] = Field(default_factory=list)
    """Private namespaces: mount, pid, ipc, uts, net (net: the network off, or on through `network_via`)."""
    read_only_root: bool = False
    """The root file system is read-only but for the work tree and a private /tmp."""
    visible: dict[str, str] = Field(default_factory=dict)
    """The paths commands find there, each with what they find (the host's, read-only or writable;
    a file system of the sandbox's own; a cover): where the backend shows a part of the host's
    files, nothing else of them is there. Empty where the file system is the sandbox's own (an image)."""
    seccomp: bool = False
    """The seccomp filter of `swedojo.sandboxes.seccomp` is loaded."""
    uid: int
    """Uid the commands run as (0: root)."""
    network: bool = False
    """Commands can reach the network."""
    network_via: str = ""
    """With the network on, what carries it out of the sandbox's own network namespace (user-mode
    NAT, the engine's bridge); empty when commands use the host's namespace itself."""
    masked_sockets: list[str] = Field(default_factory=list)
    """The host's Unix sockets bound at a path that the sandbox's view of the host's files would
    show, each covered so that nothing connects to them (those bound when this was reported)."""
    rlimits: dict[str, int] = Field(default_factory=dict)
    """Limits of each process (prlimit names): nproc, data, fsize, cpu, core."""
    cgroup: dict[str, int] = Field(default_factory=dict)
    """Limits of all the sandbox's processes together, by a cgroup: memory (bytes), pids, cpu
    (millionths of a CPU)."""
    disk_mb: dict[str, int] = Field(default_factory=dict)
    """Size caps in MiB of the places commands may write, by place (/tmp, the work tree)."""
    missing: list[str] = Field(default_factory=list)
    """What could not be put in force here, and why, in plain words."""


@runtime_checkable
class Sandbox(Protocol):
    """A work tree and a persistent terminal in it."""

    workdir: str
    """Absolute path of the repository inside the sandbox."""

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run a shell command in the sandbox's terminal (cwd and env persist)."""
        ...

    def read_file(self, path: str) -> bytes:
        """Read a file; relative paths are relative to `workdir`."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file, creating parent directories; relative to `workdir`."""
        ...

    def diff(self) -> str:
        """`git diff` of the work tree against the base commit, new files included."""
        ...

    def close(self) -> None:
        """Release everything; idempotent."""
        ...


_NOT_REGULAR = "not a regular file"
_REGULAR = f'[ -f "$1" ] || [ -d "$1" ] || [ ! -e "$1" ] || {{ echo "$1: {_NOT_REGULAR}" >&2; exit 1; }}'
"""Refuse a FIFO, socket or device by its name before opening it (opening a FIFO waits for the
other end); directories and missing files go on to the open for its own error."""
_OPENED = ('case $(stat -c %F - <&3) in "regular file" | "regular empty file") ;; '
           'directory) echo "$1: Is a directory" >&2; exit 1 ;; '
           f'*) echo "$1: {_NOT_REGULAR}" >&2; exit 1 ;; esac')
"""Refuse what descriptor 3 holds unless it is a regular file: the file opened, not the name, so a
symlink (to /dev/tty, a device, anything outside the work tree) is followed to a regular file or
not at all, even when the name was swapped after `_REGULAR` looked at it."""
MAX_FILE_BYTES = 64 << 20
"""`read_file` reads no more: a larger file is an error (EFBIG), never held in the harness's memory."""
FILE_IO_S = 20
"""Bound on one file read or write inside the sandbox; past it the file is at fault (ETIMEDOUT):
a FIFO swapped in after `_REGULAR` holds the open until then."""
_BOUNDED = ["timeout", "-s", "KILL", str(FILE_IO_S), "bash", "-c"]
_READ = f'{_REGULAR}; exec 3<"$1" || exit 1; {_OPENED}; exec head -c {MAX_FILE_BYTES + 1} <&3'
_WRITE = f'{_REGULAR}; mkdir -p -- "$(dirname -- "$1")" && exec 3>"$1" || exit 1; {_OPENED}; exec cat >&3'
_DIFF = r"""set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_OPTIONAL_LOCKS=0
base=$(git rev-parse --verify -q 'HEAD^{commit}')
format=$(git rev-parse --show-object-format)
objects=$(cd "$(git rev-parse --git-path objects)" && pwd)
top=$PWD
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git init -q --bare --template= --object-format="$format" "$scratch"
echo "$objects" > "$scratch/objects/info/alternates"
export GIT_DIR="$scratch" GIT_WORK_TREE="$top" GIT_INDEX_FILE="$scratch/index"
git -c core.excludesFile="$top/.git/info/exclude" read-tree "$base"
git -c core.excludesFile="$top/.git/info/exclude" add -A
git diff --cached --binary --no-ext-diff --no-textconv --no-color "$base"
"""
"""The work tree against HEAD, new files included, by a git the harness configures: a scratch
repository borrowing the objects, so nothing of the agent's .git/config (diff.external, textconv,
color, prefixes, fsmonitor, hooks, filters) shapes the recorded patch or runs. Only its
info/exclude is read (the repo layer lists its build leftovers there)."""
_ERRNOS = (errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS,
           errno.ENOSPC, errno.EFBIG)  # fmt: skip
"""What a failed helper may report, by its strerror text (as coreutils and sh print it)."""


def file_error(stderr: bytes, path: str, exit_code: int = 1) -> OSError:
    """The OSError Python's own file functions would raise for what a failed `head`, `cat`,
    `mkdir` or `bash` said about `path` (e.g. FileNotFoundError), ETIMEDOUT when it was killed
    after `FILE_IO_S` (`exit_code` 137), a generic one (EIO) with its message else."""
    if exit_code == 128 + signal.SIGKILL:
        return OSError(errno.ETIMEDOUT, f"not done within {FILE_IO_S} s (a FIFO or device?)", path)
    text = stderr.decode(errors="replace").strip()
    if text.endswith(_NOT_REGULAR):
        return OSError(errno.EINVAL, "Not a regular file (a FIFO, socket or device)", path)
    if os.strerror(errno.EEXIST) in text:  # `mkdir -p` meets a file where a directory must be
        return NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    for code in _ERRNOS:
        if os.strerror(code) in text:
            if code == errno.EROFS:  # writing where one may not: a permission problem to the caller
                return PermissionError(code, os.strerror(code), path)
            return OSError(code, os.strerror(code), path)  # the subclass of that errno
    return OSError(errno.EIO, text or "failed", path)


class OneOffFiles:
    """`read_file`, `write_file` and `diff` of the `Sandbox` protocol, for backends that run each
    as a one-off helper process in the sandbox (`cat`, `sh`, `git`), so the files are touched
    with the sandbox user's rights and see its mounts. The helpers' shell and the mapping of
    their errors to OSErrors are written here once; a backend implements `_one_off` (how a
    helper runs) and has `workdir`."""

    workdir: str

    def _one_off(self, argv: list[str], data: bytes = b"", *, git: bool = False) -> tuple[int, bytes, bytes]:
        """Run `argv` once as the sandbox user in the work tree, `data` on its stdin, bounded in
        time: (exit code, stdout, stderr). SandboxError when it cannot run or times out.

        `git`: the helper is git, which obeys files the agent controls (its config, hooks,
        attributes); a backend may confine it more than the coreutils behind file reads and
        writes."""
        raise NotImplementedError

    def _path(self, path: str) -> str:
        """`path` inside the sandbox: relative ones are relative to `workdir`."""
        return posixpath.join(self.workdir, path)

    def read_file(self, path: str) -> bytes:
        code, out, err = self._one_off([*_BOUNDED, _READ, "read_file", self._path(path)])
        if code != 0:
            raise file_error(err, path, code)
        if len(out) > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, f"File too large (over {MAX_FILE_BYTES >> 20} MiB, not read)", path)
        return out

    def write_file(self, path: str, data: bytes) -> None:
        code, _, err = self._one_off([*_BOUNDED, _WRITE, "write_file", self._path(path)], data)
        if code != 0:
            raise file_error(err, path, code)

    def diff(self) -> str:
        code, out, err = self._one_off(["sh", "-c", _DIFF], git=True)
        if code != 0:
            raise SandboxError(f"git diff failed: {(err or out).decode(errors='replace').strip()}")
        return out.decode("utf-8", errors="replace")


def cut_output(data: bytes, limit: int, skipped: int = 0) -> tuple[str, bool]:
    """Decode bytes for a model, keeping head and tail when over `limit` and saying what was cut.

    `skipped` counts bytes a streaming reader already left out between `data`'s head and tail
    (they count as cut); `data` must then hold at least `limit // 2` bytes on each side of them.
    """
    if len(data) + skipped <= limit:
        return data.decode("utf-8", errors="replace"), False
    half = limit // 2
    head, tail = data[:half], data[len(data) - half:]
    cut = len(data) + skipped - len(head) - len(tail)
    note = f"\n[... {cut} bytes of output cut; first {len(head)} and last {len(tail)} bytes kept ...]\n"
    return head.decode("utf-8", errors="replace") + note + tail.decode("utf-8", errors="replace"), True


class Transport(Protocol):
    """A byte pipe to one long-lived bash process: what the persistent terminal drives.

    The local backend implements it over a subprocess, the docker backend over one attached
    exec socket, so the terminal logic (markers, timeouts, output caps) is written once.

    Contract (see `swedojo.sandboxes.terminal`): the shell is `bash --noprofile --norc
    --noediting -i` with stdout and stderr on one stream and no tty (a tty would echo input).
    Interactive mode matters: on SIGINT bash abandons the current command line, builtin loops
    included, and reads the next one. The terminal writes commands with `send`, reads with
    `recv`. On a timeout it calls `interrupt()`, then `interrupt(force=True)` (also when the
    shell came back, to end what the command left running) a few times if needed, and
    `close()` if even that did not bring the shell back.
    """

    def send(self, data: bytes) -> None:
        """Write bytes to the shell's stdin."""
        ...

    def recv(self, timeout: float) -> bytes:
        """Bytes from the shell's stdout/stderr; b"" if none within `timeout`; EOFError once it is gone."""
        ...

    def interrupt(self, force: bool = False) -> None:
        """Stop the running command but keep the shell.

        force=False: SIGINT to the shell's process group (the shell and its foreground command).
        force=True: SIGKILL what the current command started (the processes started since the
        last `send`; a backend that cannot tell kills every other process of the sandbox), then
        SIGINT to the shell. Returns once the kills are done: the terminal writes right after.
        """
        ...

    def close(self) -> None:
        """End the shell and everything it started; idempotent."""
        ...
