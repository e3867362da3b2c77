"""The build log: every command a launch runs and all it prints, plus the steps so far.

The file outlives a failed launch (errors point at it); the progress display reads `steps`,
`elapsed` and `tail()` from another thread while the build writes. It is plain text: the colour
and cursor escapes that npm, gcc or docker print are taken out on the way in.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from swedojo.sandboxes.local import BWRAP_TRIES, LocalConfinement, bwrap_raced
from swedojo.testrun.run import ANSI_ESCAPE

_CAUSE = re.compile(r"\berror\b|\bERR!|^\w*(?:Error|Exception):|\bfatal\b|No matching|not found", re.IGNORECASE)
"""A line that reads like the reason a step failed: npm's `npm error notarget ...`, gcc's `error:`,
pip's `ERROR: No matching distribution`, a Python exception, `command not found`."""


def plain(text: str) -> str:
    """`text` without ANSI escape sequences."""
    return ANSI_ESCAPE.sub("", text)


_WRAPPER = re.compile(r"subprocess-exited-with-error|metadata-generation-failed|This error originates from a "
                      r"subprocess|See above for output|did not run successfully|^ERROR: Failed (?:building|to build)"
                      r"|^ERROR: Could not build wheels|exit code: \d+$")
"""pip's trailer around a failed build step: it says a subprocess failed, never why."""
_RAISED = re.compile(r"^\W*\w*(?:Error|Exception): ")


def cause(text: str, most: int = 2) -> list[str]:
    """The lines of a failed step's log (`text`) that read like its reason, for the console: the
    exceptions' lines first, the last raised first (a chained traceback ends with the one that
    stopped it), then the first others, never pip's trailer that only says a subprocess
    failed; the build log is where the rest is. The harness's own lines (`$ command`, `==> step`)
    are not."""
    found: list[str] = []
    for line in (line.strip() for line in text.splitlines()):
        if line and not line.startswith(("$ ", "==> ")) and _CAUSE.search(line) and not _WRAPPER.search(line) \
                and line[:300] not in found:
            found.append(line[:300])
    raised = [line for line in found if _RAISED.match(line)]
    return (raised[::-1] + [line for line in found if line not in raised])[:most]


class BuildLog:
    """Append-only log file with a current step."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8", errors="replace")
        self.started = time.monotonic()
        self.steps: list[tuple[str, float]] = [("starting", self.started)]
        """Every step begun, with its start time (monotonic); the last one is running."""

    @property
    def step(self) -> str:
        return self.steps[-1][0]

    def begin(self, step: str) -> None:
        """Start a named step (shown by the progress display)."""
        self.steps.append((step, time.monotonic()))
        self.write(f"\n==> {step}\n")

    def timeline(self) -> list[tuple[str, float]]:
        """(step, seconds it took or has taken so far), oldest first."""
        steps = list(self.steps)
        ends = [start for _, start in steps[1:]] + [time.monotonic()]
        return [(name, end - start) for (name, start), end in zip(steps, ends)]

    def write(self, text: str) -> None:
        self._file.write(plain(text))
        self._file.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tail(self, lines: int = 8, max_bytes: int = 16_384) -> list[str]:
        """Last lines of the file, for the progress display and error messages."""
        with self.path.open("rb") as f:
            f.seek(max(0, self.path.stat().st_size - max_bytes))
            return f.read().decode("utf-8", errors="replace").splitlines()[-lines:]

    def run(self, command: str, cwd: Path, env: dict[str, str], timeout: float,
            confinement: LocalConfinement | None = None) -> int | None:
        """Run a shell command with its output going to the log (line by line, escapes taken out);
        the exit code, None on timeout. With `confinement`, inside it (its HOME and TMPDIR); a
        bubblewrap that raced a host mount before running anything is started again."""
        code = self._run_once(command, cwd, env, timeout, confinement)
        for _ in range(BWRAP_TRIES - 1 if confinement is not None else 0):
            if code != 1 or not bwrap_raced("\n".join(self.tail(2))):
                break
            code = self._run_once(command, cwd, env, timeout, confinement)
        return code

    def _run_once(self, command: str, cwd: Path, env: dict[str, str], timeout: float,
                  confinement: LocalConfinement | None) -> int | None:
        self.write(f"$ {command}\n")
        start = time.monotonic()
        argv = ["bash", "-c", command]
        if confinement is not None:
            env = env | {k: v for k, v in confinement.env().items() if k in ("HOME", "TMPDIR")}
        with contextlib.nullcontext((argv, ())) if confinement is None else confinement.confined(argv) as (argv, fds):
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, pass_fds=fds,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        copier = threading.Thread(target=self._copy, args=(proc.stdout,), name="swedojo-buildlog", daemon=True)
        copier.start()
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        copier.join(timeout=10)  # a process the command left running may hold the pipe open
        self.write(f"[{'timed out' if code is None else f'exit {code}'} after {time.monotonic() - start:.1f}s]\n")
        return code

    def _copy(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.write(line.decode(errors="replace"))

    def close(self) -> None:
        self._file.close()
