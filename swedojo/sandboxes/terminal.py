"""The persistent terminal: one interactive bash per sandbox, driven over a `Transport`.

Each command is sent as two lines. The first evals the command (single-quoted, so any text is
one line for bash's parser; stdin from /dev/null so nothing can wait on the terminal). The second
prints the end marker `\\x1e<nonce>:<exit code>[x]\\x1e\\n` (x: ended by a top-level `exit`) on a
private copy of stdout, with a fresh random nonce per command. Bash reads its input one byte at
a time from a pipe, so the second line sits unread in the pipe while the command runs: the command
never sees its nonce and cannot print the marker early, and markers of earlier commands are
worthless. (A command that sets out to read the shell's own stdin pipe through /proc could take
its marker line; it would gain nothing it cannot have by running itself in the background.)

On a timeout the terminal interrupts (SIGINT: interactive bash abandons the command line, builtin
loops included), then kills what the command started (a fork bomb's orphans too; see
`Transport.interrupt`), and as a last resort ends the shell. cwd, variables and functions persist across commands; `exit` at top level ends the command,
not the shell.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from swedojo.sandboxes.base import (
    ExecResult,
    SandboxConfig,
    SandboxError,
    Transport,
    cut_output,
)

SHELL_ARGV = ("bash", "--noprofile", "--norc", "--noediting", "-i")
"""How every backend starts the shell: interactive (SIGINT abandons the line), no readline (no echo)."""

SHELL_ENV = {"PS1": "", "PS2": "", "PS0": ""}
"""Environment the shell needs from its first prompt on (no prompts in the output)."""

_INIT = r"""set +H +o history
unset HISTFILE PROMPT_COMMAND
PS1= PS2= PS0= PS4='+ '
exec {__sd_fd}>&1
__sd_ret() { return "$1"; }
__sd_end() { local rc=$?; PS1= PS2= PS0=; printf '\036%s:%s%s\036\n' "$1" "${__sd_exit:-$rc}" "${__sd_exit:+x}" >&"$__sd_fd"; }
exit() { local rc=${1:-$?}; [[ $rc =~ ^-?[0-9]+$ ]] || rc=2; rc=$((rc & 255)); if [[ $BASHPID == "$$" ]]; then __sd_exit=$rc; { kill -INT $$; wait; } 2>/dev/null; fi; builtin exit "$rc"; }
"""

_WINDOW = 64
"""Bytes kept across reads to find a marker split between two reads (a marker is < 40 bytes)."""
_START_TIMEOUT_S = 30.0
_GRACE_S = 1.0
_FORCE_ROUNDS = 3
_SETTLE_S = 0.1
_TTY_NOISE = re.compile(rb"bash: \[\d+: \d+ \(-?\d+\)\] tc[gs]etattr: [^\n]*\n")
"""Interactive bash without a tty complains like this when a command dies of a signal (SIGPIPE)."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TerminalClosedError(SandboxError):
    """The terminal's shell is gone and cannot be restarted, or the terminal was closed."""


class TimeBudgetExhaustedError(SandboxError):
    """The sandbox used up its total time budget (`SandboxConfig.total_time_s`)."""


def quote(text: str) -> str:
    """Single-quote `text` for bash (any text but NUL)."""
    return "'" + text.replace("'", "'\\''") + "'"


class _Capture:
    """The head and tail of a byte stream: about 2 * limit bytes kept, the middle counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.skipped = 0

    def add(self, data: bytes) -> None:
        room = max(self.limit - len(self.head), 0)
        self.head += data[:room]
        self.tail += data[room:]
        excess = len(self.tail) - self.limit - _WINDOW
        if excess > 0:
            del self.tail[:excess]
            self.skipped += excess

    def drop_last(self, n: int) -> None:
        """Forget the last `n` (<= _WINDOW) bytes: the start of a marker split across reads."""
        k = min(n, len(self.tail))
        del self.tail[len(self.tail) - k :]
        del self.head[len(self.head) - (n - k) :]

    def ends_with_newline(self) -> bool:
        return (self.tail or self.head).endswith(b"\n")

    def render(self) -> tuple[str, bool]:
        data = _TTY_NOISE.sub(b"", bytes(self.head + self.tail))
        return cut_output(data, self.limit, self.skipped)


class PersistentTerminal:
    """One bash that keeps cwd, env and shell state across commands.

    `reopen`, when given, starts a new transport after the shell died (e.g. `exec`, `set -e`),
    so the terminal keeps working with fresh state; without it a dead shell raises
    `TerminalClosedError` on the next `run`.
    """

    def __init__(
        self,
        transport: Transport,
        config: SandboxConfig,
        reopen: Callable[[], Transport] | None = None,
    ) -> None:
        self.config = config
        self._transport = transport
        self._reopen = reopen
        self._alive = False
        self._closed = False
        self._used_s = 0.0
        self._last_code = 0
        self._pending = b""
        self._start()

    @property
    def remaining_s(self) -> float:
        """Seconds left of the total time budget."""
        return self.config.total_time_s - self._used_s

    def _start(self) -> None:
        for name in self.config.env:
            if not _ENV_NAME.fullmatch(name):
                raise SandboxError(f"invalid environment variable name: {name!r}")
        exports = "".join(f"export {k}={quote(v)}\n" for k, v in self.config.env.items())
        self._pending = b""
        self._transport.send((_INIT + exports).encode())
        capture = _Capture(4096)
        try:
            started = self._sync(capture, _START_TIMEOUT_S)
        except EOFError:
            started = False
        if not started:
            self._transport.close()
            raise SandboxError(f"the shell did not start: {capture.render()[0].strip()}")
        self._alive = True

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run `command` in the shell; failures of the command come back as values."""
        if self._closed:
            raise TerminalClosedError("the terminal is closed")
        if self.remaining_s <= 0:
            raise TimeBudgetExhaustedError(
                f"the total time budget of {self.config.total_time_s:g} s is used up"
            )
        if not self._alive:
            if self._reopen is None:
                raise TerminalClosedError("the shell exited")
            self._transport = self._reopen()
            self._start()
        if "\0" in command:
            return ExecResult(output="command contains a NUL byte; not run", exit_code=2)
        limit = timeout if timeout is not None else self.config.command_timeout_s
        budget_bound = self.remaining_s < limit
        limit = min(limit, self.remaining_s)
        start = time.monotonic()
        nonce = secrets.token_hex(8)
        capture = _Capture(self.config.max_output_bytes)
        notes: list[str] = []
        exit_code: int | None = None
        timed_out = False
        try:
            self._transport.send(
                # The empty line resets bash's parser after a syntax error inside eval (an
                # unmatched quote), which would otherwise reject the `{` of the marker line.
                # stdout and stderr are put back on the terminal first: a command that closed or
                # moved them (`exec 1>&- 2>&-`, `exec >file`) leaves every later one its output.
                f"exec 1>&\"$__sd_fd\" 2>&1; {{ unset __sd_exit; __sd_ret {self._last_code}; }} 2>/dev/null; "
                f"eval -- {quote(command)} < /dev/null\n\n"
                f"{{ __sd_end {nonce}; }} 2>/dev/null\n".encode()
            )
            exit_code = self._collect(nonce, capture, start + limit)
            if exit_code is None:
                timed_out = True
                notes.append(
                    f"[the total time budget of {self.config.total_time_s:g} s is used up]"
                    if budget_bound
                    else f"[command timed out after {limit:g} s and was interrupted]"
                )
                if not self._stop(nonce, capture):
                    notes.append("[the shell did not come back and was ended: state is reset]")
                    self._end()
        except EOFError:
            exit_code = None
            notes.append("[the shell exited: cwd, variables and background processes are gone]")
            self._end()
        if exit_code is not None:
            self._last_code = exit_code
        self._used_s += time.monotonic() - start
        text, truncated = capture.render()
        if notes:
            text = text + ("" if not text or text.endswith("\n") else "\n") + "\n".join(notes)
        return ExecResult(
            output=text,
            exit_code=None if timed_out else exit_code,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def _stop(self, nonce: str, capture: _Capture) -> bool:
        """Interrupt, then kill what the command started; True once the shell is back."""
        self._transport.interrupt()
        back = self._collect(nonce, capture, time.monotonic() + _GRACE_S) is not None
        for _ in range(_FORCE_ROUNDS):
            self._transport.interrupt(force=True)
            if back:
                break
            back = self._collect(nonce, capture, time.monotonic() + _GRACE_S) is not None
        if not back:
            return False
        # The force ends with a SIGINT to the shell, idle by now: let it land before the sync
        # line (it would discard a half-read line), then collect the last words of the killed.
        time.sleep(_SETTLE_S)
        return self._sync(capture, _GRACE_S * 5)

    def _sync(self, capture: _Capture, timeout: float) -> bool:
        """Send a bare marker line and read up to it: True when it came."""
        nonce = secrets.token_hex(8)
        self._transport.send(f"\n{{ __sd_end {nonce}; }} 2>/dev/null\n".encode())
        return self._collect(nonce, capture, time.monotonic() + timeout) is not None

    def _end(self) -> None:
        self._alive = False
        self._transport.close()

    def _collect(self, nonce: str, capture: _Capture, deadline: float) -> int | None:
        """Read into `capture` until the marker of `nonce` (its exit code) or `deadline` (None)."""
        marker = re.compile(b"\x1e" + nonce.encode() + rb":(-?\d+)(x?)\x1e\n")
        window = b""
        chunk, self._pending = self._pending, b""
        while True:
            if chunk:
                joined = window + chunk
                found = marker.search(joined)
                if found:
                    keep = found.start() - len(window)
                    if keep >= 0:
                        capture.add(chunk[:keep])
                    else:
                        capture.drop_last(-keep)
                    if found.group(2) and capture.ends_with_newline():
                        capture.drop_last(1)  # the newline bash prints on the SIGINT of `exit`
                    self._pending = joined[found.end() :]
                    return int(found.group(1))
                capture.add(chunk)
                window = joined[-_WINDOW:]
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            chunk = self._transport.recv(left)

    def close(self) -> None:
        """End the shell; idempotent."""
        if not self._closed:
            self._closed = True
            self._alive = False
            self._transport.close()


class _Proc(NamedTuple):
    """A row of /proc/PID/stat."""

    comm: str
    ppid: int
    session: int
    start: int
    """Start time in clock ticks since boot."""


_Table = dict[int, _Proc]


def _process_table() -> _Table:
    """Every process visible in /proc."""
    table: _Table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
        fields = stat[stat.rindex(b")") + 2 :].split()
        table[int(entry)] = _Proc(comm, int(fields[1]), int(fields[3]), int(fields[19]))
    return table


class _Mark(NamedTuple):
    """A point in process history: processes started later are `after` it."""

    tick: int
    """Clock ticks since boot, the unit of `_Proc.start` (10 ms: too coarse alone)."""
    last_pid: int
    """The last pid handed out; within the same tick, newer processes have larger pids."""

    def before(self, pid: int, proc: _Proc) -> bool:
        return proc.start < self.tick or (proc.start == self.tick and pid <= self.last_pid)


@functools.cache
def _last_pid_fd() -> int:
    return os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY | os.O_CLOEXEC)


def _mark() -> _Mark:
    tick = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
    return _Mark(tick, int(os.pread(_last_pid_fd(), 32, 0)))


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class SubprocessTransport:
    """A `Transport` over a local child process (its own session), e.g. bash or bwrap ... bash.

    `argv` must end up exec'ing `SHELL_ARGV`; the shell is found as the nearest process named
    `shell_name` below the child, so wrappers (prlimit, bwrap, setpriv) in between are fine.
    The sandbox's processes are the child's descendants and the shell's session (orphans of a
    pid namespace stay descendants; without one, orphans keep the session unless they leave it).
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        shell_name: str = "bash",
    ) -> None:
        self._shell_name = shell_name
        self._shell: int | None = None
        self._since = _mark()
        try:
            # A harness started as a background job has SIGINT ignored, and a shell cannot undo an
            # ignored SIGINT: without the reset, no interrupt would reach the commands.
            self._proc = subprocess.Popen(
                ["/usr/bin/env", "--default-signal=INT", *argv],  # by path: the caller's PATH may be the sandbox's
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {argv[0]}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin
        self._out = self._proc.stdout.fileno()

    def send(self, data: bytes) -> None:
        self._since = _mark()
        try:
            self._in.write(data)
        except (BrokenPipeError, ValueError) as exc:
            raise EOFError("the shell is gone") from exc

    def recv(self, timeout: float) -> bytes:
        try:
            ready, _, _ = select.select([self._out], [], [], max(timeout, 0.0))
            data = os.read(self._out, 1 << 16) if ready else b""
        except (OSError, ValueError) as exc:
            raise EOFError("the shell is gone") from exc
        if ready and not data:
            raise EOFError("the shell is gone")
        return data

    def shell_pid(self) -> int | None:
        """Pid of the shell (in this host's pid namespace), None once it is gone."""
        if self._proc.poll() is not None:
            return None
        return self._find_shell(_process_table())

    def interrupt(self, force: bool = False) -> None:
        shell = self._find_shell(_process_table())
        if shell is None:
            return
        if force:
            # The shell hears of the interrupt before its children die, so it drops the rest of the
            # command line as after a plain Ctrl-C (an earlier SIGINT may never have reached it).
            self._interrupt_group(shell)
            for _ in range(100):
                victims = self._others(_process_table(), shell, since=self._since)
                if not victims:
                    break
                for pid in victims:
                    _signal(pid, signal.SIGKILL)
        self._interrupt_group(shell)

    @staticmethod
    def _interrupt_group(shell: int) -> None:
        try:
            os.killpg(os.getpgid(shell), signal.SIGINT)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        if self._proc.poll() is None:
            table = _process_table()
            shell = self._find_shell(table)
            victims = self._others(table, shell) if shell is not None else set()
            for pid in [self._proc.pid, *([shell] if shell else []), *victims]:
                _signal(pid, signal.SIGKILL)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._proc.wait()

    def _find_shell(self, table: _Table) -> int | None:
        """The nearest process named like the shell at or below the child (cached)."""
        if self._shell is not None and self._shell in table:
            return self._shell
        level = [self._proc.pid]
        while level:
            for pid in level:
                if pid in table and table[pid].comm == self._shell_name:
                    self._shell = pid
                    return pid
            parents = set(level)
            level = [pid for pid, row in table.items() if row.ppid in parents]
        return None

    def _others(self, table: _Table, shell: int, since: _Mark | None = None) -> set[int]:
        """The sandbox's processes but the shell and its ancestors (started from `since` on)."""
        keep = {self._proc.pid}
        pid = shell
        while pid in table and pid != self._proc.pid:
            keep.add(pid)
            pid = table[pid].ppid
        session = table[shell].session if shell in table else None
        descendants: set[int] = set()
        level = {self._proc.pid}
        while level:
            level = {pid for pid, row in table.items() if row.ppid in level} - descendants
            descendants |= level
        found = descendants | {pid for pid, row in table.items() if row.session == session}
        if since is not None:
            found = {pid for pid in found if not since.before(pid, table[pid])}
        return found - keep


def local_shell(
    env: Mapping[str, str] | None = None, cwd: str | None = None
) -> SubprocessTransport:
    """A plain bash on this host (no isolation): the building block for tests and wrappers."""
    return SubprocessTransport(SHELL_ARGV, env={**(env or os.environ), **SHELL_ENV}, cwd=cwd)
