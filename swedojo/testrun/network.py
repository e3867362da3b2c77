"""Tests that failed for want of the network, from the reason the runner printed.

Sandboxes run with the network off (and this machine reaches only package registries), so a
test that calls a public service fails for every patch, the right one included. Such a test
says nothing about the code: graders leave it out of scoring and say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_OFFLINE = re.compile(
    r"Temporary failure in name resolution|Name or service not known|nodename nor servname|getaddrinfo failed"
    r"|Network is unreachable|No route to host|Failed to resolve|Could not resolve host|\[Errno -[235]\]"
    r"|Failed to establish a new connection: \[Errno 1\]|socket\.py:\d+: PermissionError")
"""A lookup or route that fails offline, or a socket the sandbox refuses to make (its syscall filter
denies network sockets when the network is off)."""
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$", re.MULTILINE)
"""pytest's header of one test's failure report: `____ Class.test_name ____`."""


_REFUSED = re.compile(r"Connection refused|\[Errno 111\]")


def offline_failures(log: str, tests: Iterable[str], served_hosts: Iterable[str] = ()) -> dict[str, str]:
    """Test id (of `tests`, a pytest log's node ids) -> the line saying so, for each test whose failure
    report in the log is a host lookup or a route that a network would have served. With local
    stand-ins for `served_hosts` (resolved to loopback), a refused connection in a report that
    names one of them is a port no stand-in serves (https): the network would have served it too."""
    served = list(served_hosts)
    by_header: dict[str, list[str]] = {}
    for test in tests:
        by_header.setdefault(".".join(test.split("::")[1:]), []).append(test)
    found: dict[str, str] = {}
    headers = list(_SECTION.finditer(log))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(log)
        said = _OFFLINE.search(log, header.end(), end)
        if said is None and any(host in log[header.end():end] for host in served):
            said = _REFUSED.search(log, header.end(), end)
        if said:
            line_start = log.rfind("\n", header.end(), said.start()) + 1
            line = log[line_start:log.find("\n", said.end()) if "\n" in log[said.end():end] else end].strip()
            for test in by_header.get(header.group(1), []):
                found[test] = line[:300]
    return found
