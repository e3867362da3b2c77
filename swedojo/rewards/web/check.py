"""What one browser tier found: the same three parts as a tier's `Outcome`."""

from __future__ import annotations

from typing import Any, NamedTuple

MAX_LISTED = 20
"""Violations listed in evidence before only their count is kept."""


class Check(NamedTuple):
    """A tier's score in [0, 1], whether it passed, and the evidence behind it."""

    score: float
    passed: bool
    evidence: dict[str, Any]


def from_groups(groups: dict[str, list[str]], evidence: dict[str, Any]) -> Check:
    """A tier scored as the fraction of its check groups without a violation; passed when none has one.

    `groups`: group name -> its violations (empty: the group passed)."""
    failed = {name: found for name, found in groups.items() if found}
    score = (len(groups) - len(failed)) / len(groups) if groups else 0.0
    listed = {name: found[:MAX_LISTED] for name, found in failed.items()}
    counts = {name: len(found) for name, found in failed.items()}
    return Check(score, bool(groups) and not failed,
                 {**evidence, "checked": sorted(groups), "violations": listed, "violation_counts": counts})
