"""Decode steps of concurrent episodes batched into one forward on one in-process model.

Each episode keeps its own retained cache; only the single-token decode steps are batched. A batch
row's attention reads that row's own cache (`RowCaches`): the attention implementation the backend
installs (`inprocess.single_token_attention`) and GLM-5's DSA attention (`dsa.py`) take the rows'
keys one row at a time, with exactly the shapes an unbatched step has, so there is no padding and
no mask; everything else in the layer (projections, norms, routers, experts, the LM head) runs
once over the batch. Rows therefore differ from unbatched steps only where a batched matmul rounds
differently from a one-row one.

Episodes call `DecodeScheduler.step` from their own threads; one scheduler thread runs a batch as
soon as every episode that is decoding has a step waiting (an episode between two steps only
samples a token, so it is never waited on for long), and never waits for one that is prefilling or
out running tools.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


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


@dataclass
class DecodeStep:
    """One episode's next token to feed, and what the batched forward answered."""

    conversation: object
    """The backend's state of the episode's conversation (its cache)."""
    token: int
    """The token to feed."""
    done: threading.Event = field(default_factory=threading.Event)
    logits: torch.Tensor | None = None
    """Float32 next-token logits after `token`."""
    error: BaseException | None = None
    """Why the batch failed (every step of it gets the same error)."""


class DecodeScheduler:
    """Gathers the decode steps of the episodes that are decoding and runs them as one batch.

    `run_batch` feeds every step's token to its conversation in one forward and sets each step's
    logits; it runs on the scheduler's own thread, at most `max_batch` steps at a time.
    """

    def __init__(self, run_batch: Callable[[list[DecodeStep]], None], max_batch: int) -> None:
        self.max_batch = max_batch
        self.batch_sizes: Counter[int] = Counter()
        """How many batched forwards of each size ran (for benchmarks and checks)."""
        self._run_batch = run_batch
        self._changed = threading.Condition()
        self._pending: list[DecodeStep] = []
        self._decoding = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="swedojo-decode-scheduler", daemon=True)
        self._thread.start()

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """An episode's decode loop: while it is open, batches wait for this episode's next step."""
        with self._changed:
            self._decoding += 1
        try:
            yield
        finally:
            with self._changed:
                self._decoding -= 1
                self._changed.notify_all()

    def step(self, conversation: object, token: int) -> torch.Tensor:
        """Feed `token` to `conversation` in the next batch; its float32 next-token logits."""
        step = DecodeStep(conversation, token)
        with self._changed:
            if self._closed:
                raise RuntimeError("the decode scheduler is closed")
            self._pending.append(step)
            self._changed.notify_all()
        step.done.wait()
        if step.error is not None:
            raise step.error
        assert step.logits is not None
        return step.logits

    def close(self) -> None:
        """Stop the scheduler thread once the steps already submitted have run."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()

    def _ready(self) -> bool:
        waiting = len(self._pending)
        return waiting > 0 and (self._closed or waiting >= min(self._decoding, self.max_batch))

    def _loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._ready() or (self._closed and not self._pending))
                if not self._pending:
                    return
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            try:
                with torch.inference_mode():
                    self._run_batch(batch)
                self.batch_sizes[len(batch)] += 1
            except Exception as error:  # noqa: BLE001 - every waiting episode re-raises it in its own thread
                for step in batch:
                    step.error = error
            finally:
                for step in batch:
                    step.done.set()
