"""A timestamped progress line every few seconds while a long command works.

A piped `dojo eval` or `dojo gen` (as scripts and CI run them) otherwise prints nothing for
minutes. The line says the time, how long the command has run, and what `describe()` reports of
the work so far, read from what the command writes as it goes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType


def _elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Heartbeat:
    """Prints `[HH:MM:SS +elapsed] describe()` every `every_s` seconds inside a `with` block."""

    def __init__(self, describe: Callable[[], str], write: Callable[[str], None], every_s: float = 10.0) -> None:
        self.describe, self.write, self.every_s = describe, write, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="swedojo-heartbeat", daemon=True)
        self._started = time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                what = self.describe()
            except Exception as exc:  # a progress line must never end the command it reports on
                what = f"(progress unavailable: {type(exc).__name__})"
            self.write(f"[{datetime.now():%H:%M:%S} +{_elapsed(time.monotonic() - self._started)}] {what}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
