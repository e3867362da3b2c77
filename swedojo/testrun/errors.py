"""Errors of test runs: one root, so every consumer catches a run whose result cannot be read alike."""

from __future__ import annotations


class TestRunError(Exception):
    """A test run whose result cannot be read: the root of this package's errors."""

    __test__ = False


class SummaryMismatchError(TestRunError):
    """The runner's own summary counts another number of tests than the parser read: the per-test
    results would be guesses (a test missed, one read twice, or a result line forged)."""
