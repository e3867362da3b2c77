"""Test-log parsers: map a framework's output to test id -> status.

`parse_log(name, log)` is the single entry point; each parser is registered by name in `PARSERS`
and the `EnvSpec.log_parser` field names the one to use.
"""

from __future__ import annotations

import re
from typing import Callable

from swedojo.schema import TestStatus

LogParser = Callable[[str], dict[str, TestStatus]]

_PYTEST_RA = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\s+(\S+?)(?:\s+-\s+.*)?$")
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)(?:\s+\[.*\])?$")


def parse_pytest(log: str) -> dict[str, TestStatus]:
    """Read `pytest -rA` short summary lines (and `-v` result lines as a fallback).

    A test seen with several statuses (e.g. PASSED then ERROR in teardown) keeps the worst.
    """
    results: dict[str, TestStatus] = {}
    worst = [TestStatus.ERROR, TestStatus.FAILED, TestStatus.XPASS, TestStatus.SKIPPED,
             TestStatus.XFAIL, TestStatus.PASSED]
    for raw in log.splitlines():
        line = raw.strip()
        match = _PYTEST_RA.match(line)
        if match:
            status, test = TestStatus(match.group(1)), match.group(2)
        else:
            match = _PYTEST_VERBOSE.match(line)
            if not match:
                continue
            test, status = match.group(1), TestStatus(match.group(2))
        if status == TestStatus.SKIPPED and "::" not in test:
            continue  # "SKIPPED [1] file.py:12: reason" carries no test id
        previous = results.get(test)
        if previous is None or worst.index(status) < worst.index(previous):
            results[test] = status
    return results


PARSERS: dict[str, LogParser] = {"pytest": parse_pytest}


class UnknownParserError(KeyError):
    """No parser is registered under the requested name."""


def parse_log(name: str, log: str) -> dict[str, TestStatus]:
    """Parse `log` with the parser registered as `name`."""
    try:
        parser = PARSERS[name]
    except KeyError:
        raise UnknownParserError(f"unknown log parser {name!r}; known: {', '.join(sorted(PARSERS))}") from None
    return parser(log)
