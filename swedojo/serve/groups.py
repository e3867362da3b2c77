"""Group semantics of an RL rollout batch, as the GLM-5 report describes them.

A sample that failed for infrastructure reasons is no evidence about the policy, so it never
becomes a zero reward: it is left out. A sample that started too many weight versions ago is off
policy, so it is left out too. Once every sample of a round has finished, a group with all of its
samples valid is reported; one with more than half of them is refilled with new samples; any
other is dropped. Refills are bounded, so a broken instance cannot loop forever.
"""

from __future__ import annotations

from dataclasses import dataclass


def is_stale(start_version: int, current_version: int, max_staleness: int | None) -> bool:
    """A sample is stale when it started more than `max_staleness` versions behind the current one."""
    return max_staleness is not None and current_version - start_version > max_staleness


@dataclass(frozen=True)
class Done:
    """The group holds all of its samples: report it."""


@dataclass(frozen=True)
class Refill:
    """Start `samples` new samples for the group."""

    samples: int


@dataclass(frozen=True)
class Drop:
    """Too few valid samples: the group is not reported."""

    reason: str


def decide(size: int, valid: int, refills_done: int, max_refills: int) -> Done | Refill | Drop:
    """What happens to a group whose round has finished with `valid` of `size` samples valid."""
    if valid >= size:
        return Done()
    if 2 * valid <= size:
        return Drop(f"{valid} of {size} samples valid after {refills_done} refill(s): no more than half survived")
    if refills_done >= max_refills:
        return Drop(f"{valid} of {size} samples valid after {refills_done} refill(s) (max_refill_rounds={max_refills})")
    return Refill(size - valid)
