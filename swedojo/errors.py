"""The project's root exception, and the one for bad input that `dojo` reports in one line.

A command cannot go on when what it was given is wrong (a path it cannot write, a repository that
is not there, an address where nothing answers). That is the user's to fix, not a bug: raising
`BadInputError` wherever it is found, at any layer, gets one line and exit status 2 from every
command, since `swedojo.cli` catches it once where the app is invoked (no try/except per command,
no traceback). It sits below every layer so that any of them can raise it.
"""

from __future__ import annotations

import os
from pathlib import Path


class SwedojoError(Exception):
    """Root of the errors swedojo raises on purpose."""


class BadInputError(SwedojoError):
    """What the user gave cannot be used; the message says which option and why, on one line."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())  # one line whatever the cause's text held


def output_dir(path: Path, option: str = "--out") -> Path:
    """`path` made (with its parents) and writable, before any work is done for it: a command that
    cannot write its results says so at once rather than with a traceback after the work."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"{option} {path}: cannot create the directory ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInputError(f"{option} {path}: the directory is not writable")
    return path
