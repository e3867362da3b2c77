"""The build log: every command a launch runs and all it prints, plus the steps so far.

The file outlives a failed launch (errors point at it); the progress display reads `steps`,
`elapsed` and `tail()` from another thread while the build writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


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
        self._file.write(text)
        self._file.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tail(self, lines: int = 8, max_bytes: int = 16_384) -> list[str]:
        """Last lines of the file, for the progress display and error messages."""
        with self.path.open("rb") as f:
            f.seek(max(0, self.path.stat().st_size - max_bytes))
            return f.read().decode("utf-8", errors="replace").splitlines()[-lines:]

    def run(self, command: str, cwd: Path, env: dict[str, str], timeout: float) -> int | None:
        """Run a shell command with its output going to the log; the exit code, None on timeout."""
        self.write(f"$ {command}\n")
        start = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=self._file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        self.write(f"[{'timed out' if code is None else f'exit {code}'} after {time.monotonic() - start:.1f}s]\n")
        return code

    def close(self) -> None:
        self._file.close()
