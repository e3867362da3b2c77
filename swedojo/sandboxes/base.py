"""The `Sandbox` protocol every backend implements, and its errors.

A sandbox is a work tree (the repo at a commit) plus a way to run commands in it. Backends:
`local` (embedded default, no daemon) and `docker` (hardened containers from repolaunch images).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class SandboxError(Exception):
    """A sandbox could not be created or stopped working: an infrastructure failure."""


class SandboxConfig(BaseModel):
    """Limits and options shared by every backend."""

    network: bool = False
    """Allow network access from inside (off by default)."""
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
