"""Decode steps of concurrent episodes batched into one forward on one in-process model.

Each episode keeps its own retained cache; only the single-token decode steps are batched. A batch
row's attention reads that row's own cache (`RowCaches`): the attention implementation the backend
installs (`inprocess.single_token_attention`) and GLM-5's DSA attention (`dsa.py`) take the rows'
keys one row at a time, with exactly the shapes an unbatched step has, so there is no padding and
no mask; everything else in the layer (projections, norms, routers, experts, the LM head) runs
once over the batch. Rows therefore differ from unbatched steps only where a batched matmul rounds
differently from a one-row one.

Episodes prefill on their own threads and hand their turn's decode loop to one scheduler thread
(`DecodeScheduler`), which samples every running turn's next token and feeds them all in one
forward per step; turns join and leave between steps (continuous batching).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from swedojo.agent.backends.base import BackendError


class RowCaches:
    """The caches of a batch's rows, for one batched single-token forward.

    `update` appends row i's new keys and values to row i's cache and returns the per-row lists of
    every cached key and value; the attention implementations that accept such lists attend each
    row to its own. Any other model code that needs the cache sees it per row through `rows`.
    """

    def __init__(self, rows: Sequence) -> None:
        self.rows = list(rows)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        keys, values = [], []
        for row, cache in enumerate(self.rows):
            key, value = cache.update(key_states[row : row + 1], value_states[row : row + 1], layer_idx)
            keys.append(key)
            values.append(value)
        return keys, values


class Turn(Protocol):
    """One call's sampling, as the backend defines it."""

    def next_token(self, logits: torch.Tensor) -> int | None:
        """Sample from `logits`; the token to feed next, or None when the turn is over."""
        ...


@dataclass
class _Job:
    conversation: object
    """The backend's state of the episode's conversation (its cache)."""
    turn: Turn
    logits: torch.Tensor
    """Next-token logits to sample from."""
    done: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    """Why a batch this job was in failed."""


class DecodeScheduler:
    """Runs the decode loops of concurrent calls on one thread, one batched forward per step.

    A call prefills on its own thread, then hands its turn over (`decode`) and waits. Each step the
    scheduler samples the next token of every turn it runs (on this thread, in order, so a turn's
    tokens depend only on its own logits and generator), finishes the turns that stopped, and feeds
    the others' tokens in one `forward_batch`. A new turn joins at the next step, up to `max_batch`
    at a time; nobody waits for a straggler, and an episode thread wakes once per turn, not once
    per token.
    """

    def __init__(
        self, forward_batch: Callable[[list[object], list[int]], list[torch.Tensor]], max_batch: int
    ) -> None:
        self.max_batch = max_batch
        self.batch_sizes: Counter[int] = Counter()
        """How many batched forwards of each size ran (for benchmarks and checks)."""
        self._forward_batch = forward_batch
        self._changed = threading.Condition()
        self._waiting: list[_Job] = []
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="swedojo-decode-scheduler", daemon=True)
        self._thread.start()

    def decode(self, conversation: object, turn: Turn, logits: torch.Tensor) -> None:
        """Run `turn` from `logits` to its end, feeding its tokens to `conversation` in batches."""
        job = _Job(conversation, turn, logits)
        with self._changed:
            if self._closed:
                raise DecodeSchedulerClosedError("the backend was closed")
            self._waiting.append(job)
            self._changed.notify_all()
        job.done.wait()
        if job.error is not None:
            raise job.error

    def close(self) -> None:
        """Stop the scheduler thread once the turns already handed over have finished."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()

    def _loop(self) -> None:
        running: list[_Job] = []
        while True:
            with self._changed:
                if not running:
                    self._changed.wait_for(lambda: self._waiting or self._closed)
                    if not self._waiting:
                        return
                joining = self._waiting[: self.max_batch - len(running)]
                del self._waiting[: len(joining)]
            running += joining
            fed: list[tuple[_Job, int]] = []
            for job in running:
                try:
                    token = job.turn.next_token(job.logits)
                except Exception as error:  # noqa: BLE001 - raised again in the job's own thread
                    job.error, token = error, None
                if token is None:
                    job.done.set()
                else:
                    fed.append((job, token))
            running = [job for job, _ in fed]
            if not fed:
                continue
            try:
                with torch.inference_mode():
                    logits = self._forward_batch([job.conversation for job in running], [token for _, token in fed])
            except Exception as error:  # noqa: BLE001 - every job of the batch raises it in its own thread
                for job in running:
                    job.error = error
                    job.done.set()
                running = []
                continue
            self.batch_sizes[len(running)] += 1
            for job, row in zip(running, logits):
                job.logits = row


class DecodeSchedulerClosedError(BackendError):
    """A turn was handed to a scheduler that was closed."""
