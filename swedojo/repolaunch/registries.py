"""Where a language's dependencies come from (a recipe names its registry: Go, cargo and Maven have
one), and the one line a launch says when the dependency layer's fetch failed because it is out of reach.

Reachability is decided from evidence, never from a list of places known to be offline: the failed
fetch printed a network error (a fetch that failed otherwise, a missing version or a broken git
dependency, keeps its own message), and that error names the registry's host, or else a short TCP
probe of its hosts from here fails. The tool's retries and causes stay in the build log.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swedojo.repolaunch.analysis import RepoAnalysis

PROBE_TIMEOUT_S = 3.0
"""A registry host that takes longer than this to accept a connection counts as unreachable."""
_NETWORK_ERROR = re.compile(
    r"dial tcp|no such host|Could not resolve host|failed to resolve address|Name or service not known"
    r"|Temporary failure in name resolution|Unknown host|UnknownHostException|Connection refused"
    r"|Connection timed out|connect timed out|i/o timeout|Network is unreachable|network failure"
    r"|Could not transfer|Transfer failed", re.IGNORECASE)
"""What Go, cargo (libgit2, curl) and Maven print when a host cannot be reached (Maven's "Could not
transfer" is an I/O failure; a missing artifact is "Could not find")."""


@dataclass(frozen=True)
class Registry:
    """Where a language's dependencies come from."""

    name: str
    """How people call it: "crates.io"."""
    hosts: tuple[str, ...]
    """Hosts the fetch talks to (cargo before 1.70 clones crates.io's index from github.com)."""
    owner: str
    """Whose dependencies: "the module's", "the crate's"."""
    count: Callable[[Path], int]
    """How many dependencies of the work tree come from it, as its files say (0: they do not say)."""
    also: str = ""
    """What the tool fetches from it besides the project's dependencies ("Maven's own plugins")."""


def _dependencies(registry: Registry, root: Path) -> str:
    count = registry.count(root)
    said = f"{registry.owner} {count} dependenc{'y' if count == 1 else 'ies'}" if count else ""
    if registry.also:
        return f"{said} and {registry.also}" if said else registry.also
    return said or f"{registry.owner} dependencies"


def _reachable(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def unreachable_registry(registry: Registry | None, analysis: RepoAnalysis, root: Path, failure: str,
                         log_text: str) -> str:
    """The one-line reason for a failed dependency fetch when `registry` (the analysis's recipe's;
    None: it has none) is out of reach, else "".

    `failure` is the install error's message (it names the step that failed: only the
    dependency layer's own commands fetch), `log_text` the build log of the attempt.
    """
    if registry is None or not any(f"`{command}`" in failure for command in analysis.install_commands):
        return ""
    errors = [line for line in log_text.splitlines() if _NETWORK_ERROR.search(line)]
    named = [host for line in errors for host in registry.hosts if host in line]
    if named:
        host = named[0]
    elif errors and not any(_reachable(host) for host in registry.hosts):
        host = registry.hosts[0]
    else:
        return ""
    return f"{registry.name} ({host}) is not reachable from here: {_dependencies(registry, root)} " \
           "cannot be fetched"


_SOURCE = re.compile(r"unable to access '(\w+://[^'\s]+)'|Could not resolve host: ([\w.-]+)|Failed to connect to ([\w.-]+)")
"""git's and curl's words for a URL or host it could not reach."""


def unreachable_source(analysis: RepoAnalysis, failure: str, log_text: str) -> str:
    """The one-line reason when a repo-layer step (`failure` names it) failed on a download of its
    own that cannot reach its host (CMake's FetchContent or ExternalProject, a script's git clone),
    else "": another plan cannot cure it, and it is where the launch ran, not the project."""
    if not any(f"`{command}`" in failure for command in analysis.rebuild_commands):
        return ""
    lines = [line for line in log_text.splitlines() if _NETWORK_ERROR.search(line)]
    found = next((match for line in lines if (match := _SOURCE.search(line))), None)
    if found is None:
        return ""
    url = found.group(1) or ""
    host = url.split("/")[2] if url else found.group(2) or found.group(3)
    return f"the build downloads {url or 'from ' + host} itself, and {host} is not reachable from here"
