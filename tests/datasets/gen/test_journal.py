"""The journal survives a kill mid-write and refuses to mix runs with other settings."""

from __future__ import annotations

import pytest

from swedojo.datasets.gen.journal import Entry, Header, Journal, JournalMismatchError, Outcome, read_entries

HEADER = Header(repo="acme/shapes", mode="mutations", tip="abc", seed=1)


def test_a_line_cut_by_a_kill_is_dropped_and_the_next_record_starts_clean(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, HEADER)
    journal.record(Entry(key="a", strategy="mutation", outcome=Outcome.NO_BREAK, compiled=True))
    with path.open("a") as fh:
        fh.write('{"key": "b", "strategy": "mutat')  # killed here
    again = Journal(path, HEADER)
    assert list(again.entries) == ["a"] and again.entries["a"].compiled
    again.record(Entry(key="b", strategy="mutation", outcome=Outcome.KEPT))
    assert [e.key for e in read_entries(path)] == ["a", "b"]


def test_other_settings_are_refused(tmp_path):
    path = tmp_path / "j.jsonl"
    Journal(path, HEADER)
    with pytest.raises(JournalMismatchError, match="use another --out"):
        Journal(path, HEADER.model_copy(update={"seed": 2}))
