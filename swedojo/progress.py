"""Progress of a long command: a live display on a terminal, timestamped lines when piped.

A piped `dojo eval`, `dojo gen` or `dojo launch` (as scripts and CI run them) otherwise prints
nothing for minutes. Piped, a line every few seconds says the time, how long the command has run,
and what `describe()` reports of the work so far, read from what the command writes as it goes;
on a terminal rich redraws the same (or a richer view) in place. Deep in a run, `stage()` says
what the current step is doing (the baseline suite run of tier 3, grading, ...), for whoever
listens with `reporting`: the reason a step is long is then on the console.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from swedojo.schema import EvalStatus


def _elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _said(describe: Callable[[], str]) -> str:
    try:
        return describe()
    except Exception as exc:  # a progress line must never end the command it reports on
        return f"(progress unavailable: {type(exc).__name__})"


class Heartbeat:
    """Prints `[HH:MM:SS +elapsed] describe()` every `every_s` seconds inside a `with` block."""

    def __init__(self, describe: Callable[[], str], write: Callable[[str], None], every_s: float = 10.0) -> None:
        self.describe, self.write, self.every_s = describe, write, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="swedojo-heartbeat", daemon=True)
        self._started = time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            what = _said(self.describe)
            self.write(f"[{datetime.now():%H:%M:%S} +{_elapsed(time.monotonic() - self._started)}] {what}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


class _Spinning:
    """A spinner, the elapsed time and `describe()`, as of each redraw."""

    def __init__(self, describe: Callable[[], str]) -> None:
        self.describe = describe
        self.spinner = Spinner("dots")
        self.started = time.monotonic()

    def __rich__(self) -> Spinner:
        self.spinner.update(text=f"{_elapsed(time.monotonic() - self.started)}  {_said(self.describe)}")
        return self.spinner


class RunProgress:
    """The progress of a run over many instances: done of total, resolved and errors so far, the
    ETA, and what each running instance is doing. `describe()` says it in one line (piped output);
    as a rich renderable it is a bar with those counts and a line per running instance."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.counts: dict[str, int] = {}
        """Finished instances per EvalStatus value."""
        self.running: dict[str, tuple[float, str]] = {}
        """Instance id -> (when it started, what it is doing now)."""
        self._started = time.monotonic()
        self._durations: list[float] = []
        """How long each finished instance took, from its first stage."""
        self._width = 1
        """The most instances seen running at once: the run's pace."""
        self._lock = threading.Lock()
        self._bar = Progress(SpinnerColumn(), TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[tally]}"), TimeElapsedColumn(), TextColumn("{task.fields[eta]}"))
        self._task = self._bar.add_task("evaluating", total=total, tally="", eta="")

    def stage(self, instance_id: str, what: str) -> None:
        """`instance_id` does `what` now (the first call starts its clock)."""
        with self._lock:
            self.running[instance_id] = (self.running.get(instance_id, (time.monotonic(), ""))[0], what)
            self._width = max(self._width, len(self.running))

    def finish(self, instance_id: str, status: EvalStatus) -> None:
        with self._lock:
            started = self.running.pop(instance_id, None)
            if started is not None:
                self._durations.append(time.monotonic() - started[0])
            self.done += 1
            self.counts[status.value] = self.counts.get(status.value, 0) + 1

    def eta_s(self) -> float | None:
        """Seconds left: the instances not finished at the mean time one took, less what the running
        ones have done (each counted up to that mean), over as many at once as the run has had. It
        falls while the run waits on a long instance, where elapsed-per-done grew with every tick.
        None before the first instance finished."""
        if not self.done:
            return None
        now = time.monotonic()
        if not self._durations:  # finished without a stage: the run's pace so far
            return (now - self._started) / self.done * (self.total - self.done)
        mean = sum(self._durations) / len(self._durations)
        begun = sum(min(now - since, mean) for since, _ in self.running.values())
        return max(0.0, (self.total - self.done) * mean - begun) / self._width

    def tally(self) -> str:
        """`N resolved, N errors[, N timed out]`; errors: infra_error, the harness's failures."""
        resolved, errors = self.counts.get(EvalStatus.RESOLVED.value, 0), self.counts.get(EvalStatus.INFRA_ERROR.value, 0)
        timed_out = self.counts.get(EvalStatus.TIMED_OUT.value, 0)
        return (f"{resolved} resolved, {errors} error{'s' if errors != 1 else ''}"
                + (f", {timed_out} timed out" if timed_out else ""))

    def describe(self) -> str:
        """`D of T done (tally), ETA 1m05s; running ID (12s: stage), ...`: the line a piped run prints."""
        now = time.monotonic()
        with self._lock:
            busy = ", ".join(f"{i} ({now - t:.0f}s: {what})" for i, (t, what) in self.running.items()) or "nothing"
        eta = self.eta_s()
        counts = f" ({self.tally()}), ETA {_elapsed(eta)}" if eta is not None else ""
        return f"{self.done} of {self.total} done{counts}; running {busy}"

    def __rich__(self) -> Group:
        eta = self.eta_s()
        self._bar.update(self._task, completed=self.done, tally=self.tally(),
                         eta=f"ETA {_elapsed(eta)}" if eta is not None else "ETA -")
        now = time.monotonic()
        workers = Table.grid(padding=(0, 2))
        with self._lock:
            for instance_id, (started, what) in self.running.items():
                workers.add_row(Text(f"  {instance_id}"), Text(_elapsed(now - started), style="dim"), Text(what))
        return Group(self._bar, workers)


@contextmanager
def shown(console: Console, describe: Callable[[], str], display: RenderableType | None = None) -> Iterator[None]:
    """Progress inside the block: on a terminal a live display (`display`, by default a spinner with
    `describe()`), which lines printed meanwhile scroll above; piped, a `Heartbeat` on `console`."""
    if console.is_terminal:
        with Live(display if display is not None else _Spinning(describe), console=console, refresh_per_second=4,
                  transient=True):
            yield
    else:
        with Heartbeat(describe, lambda line: console.print(line, markup=False, highlight=False)):
            yield


_listener: ContextVar[Callable[[str], None] | None] = ContextVar("swedojo_stage_listener", default=None)


def stage(what: str) -> None:
    """Say what the running step does now (to the listener of `reporting`, if any)."""
    listener = _listener.get()
    if listener is not None:
        listener(what)


@contextmanager
def reporting(listener: Callable[[str], None]) -> Iterator[None]:
    """`stage()` calls made in this block (in this thread) go to `listener`."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
