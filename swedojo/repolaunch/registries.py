"""The registries Go, cargo and Maven fetch dependencies from, and the one line a launch says when
the dependency layer's fetch failed because one is out of reach.

Reachability is decided from evidence, never from a list of places known to be offline: the failed
fetch printed a network error (a fetch that failed otherwise, a missing version or a broken git
dependency, keeps its own message), and that error names the registry's host, or else a short TCP
probe of its hosts from here fails. The tool's retries and causes stay in the build log.
"""

from __future__ import annotations

import re
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path

from swedojo.repolaunch.detect import RepoAnalysis

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


REGISTRIES = {
    "go": Registry("the Go module proxy", ("proxy.golang.org",), "the module's"),
    "rust": Registry("crates.io", ("index.crates.io", "static.crates.io", "github.com"), "the crate's"),
    "java": Registry("Maven Central", ("repo.maven.apache.org",), "the project's"),
}


def _go_requirements(root: Path) -> int:
    text = (root / "go.mod").read_text(errors="replace") if (root / "go.mod").is_file() else ""
    blocks = re.findall(r"^require\s*\((.*?)^\)", text, re.MULTILINE | re.DOTALL)
    single = re.findall(r"^require\s+[^\s(]+\s+v\S+", text, re.MULTILINE)
    return len(single) + sum(len(re.findall(r"^\s*[^\s/][^\s]*\s+v\S+", block, re.MULTILINE)) for block in blocks)


def _toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _crates(root: Path) -> int:
    """Registry packages in Cargo.lock, else the manifest's direct dependencies from a registry."""
    packages = _toml(root / "Cargo.lock").get("package", [])
    if isinstance(packages, list) and packages:
        return sum(1 for p in packages if isinstance(p, dict) and str(p.get("source", "")).startswith("registry+"))
    manifest = _toml(root / "Cargo.toml")
    tables = [manifest.get(key, {}) for key in ("dependencies", "dev-dependencies", "build-dependencies")]
    return sum(1 for table in tables if isinstance(table, dict)
               for spec in table.values() if not (isinstance(spec, dict) and ("path" in spec or "git" in spec)))


def _maven_dependencies(root: Path) -> int:
    pom = root / "pom.xml"
    return len(re.findall(r"<dependency>", pom.read_text(errors="replace"))) if pom.is_file() else 0


def _dependencies(language: str, root: Path) -> str:
    count = {"go": _go_requirements, "rust": _crates, "java": _maven_dependencies}[language](root)
    owner = REGISTRIES[language].owner
    said = f"{owner} {count} dependenc{'y' if count == 1 else 'ies'}" if count else ""
    if language == "java":
        return f"{said} and Maven's own plugins" if said else "Maven's own plugins"
    return said or f"{owner} dependencies"


def _reachable(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def unreachable_registry(analysis: RepoAnalysis, root: Path, failure: str, log_text: str) -> str:
    """The one-line reason for a failed dependency fetch when the registry is out of reach, else "".

    `failure` is the install error's message (it names the step that failed: only the
    dependency layer's own commands fetch), `log_text` the build log of the attempt.
    """
    registry = REGISTRIES.get(analysis.language)
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
    return f"{registry.name} ({host}) is not reachable from here: {_dependencies(analysis.language, root)} " \
           "cannot be fetched"
