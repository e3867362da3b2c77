"""Patches in a sandbox's work tree: which files a diff touches, applying it, restoring files.

Every consumer (grading, the reward tiers, the gold policy, task generation) applies patches
with SWE-bench's fallbacks through these functions, so a patch that applies for one applies
for all.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex

from swedojo.sandboxes.base import Sandbox

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


class PatchApplyError(Exception):
    """A patch applied with none of the fallbacks."""


def patch_files(patch: str) -> list[str]:
    """Paths a unified git diff touches (old and new names)."""
    files: list[str] = []
    for a, b in _DIFF_FILE.findall(patch):
        for name in (a, b):
            if name not in files:
                files.append(name)
    return files


def deleted_files(patch: str) -> list[str]:
    """Paths a unified git diff deletes."""
    return re.findall(r"^diff --git a/(\S+) b/\S+\n(?:(?!diff --git).*\n)*?deleted file mode", patch, re.MULTILINE)


def apply_commands(path: str) -> list[str]:
    """SWE-bench's fallbacks for applying the diff at `path`, in order; `patch` only if it applies whole."""
    return [
        f"git apply --verbose {path}",
        f"patch --batch --fuzz=5 -p1 --dry-run -i {path} >/dev/null && patch --batch --fuzz=5 -p1 -i {path}",
    ]


def apply_patch(sandbox: Sandbox, patch: str, what: str = "patch") -> str:
    """Apply a diff in the work tree: `git apply`, then `patch --fuzz=5` (SWE-bench's fallbacks).

    The patch travels base64-encoded through the terminal, so any bytes survive any backend;
    staging, the fallbacks in order and the cleanup are one command. Returns the command that
    worked; raises PatchApplyError with the last error line.
    """
    if not patch.endswith("\n"):
        patch += "\n"
    path = f"/tmp/swedojo-{secrets.token_hex(8)}.diff"
    marker = f"swedojo-applied-{secrets.token_hex(8)}:"
    encoded = base64.b64encode(patch.encode("utf-8", errors="surrogateescape")).decode()
    commands = apply_commands(path)
    steps = [f"printf %s {encoded} | base64 -d > {path} || {{ rm -f {path}; echo {marker}staging; exit 1; }}"]
    steps += [f"{{ {command}; }} && {{ rm -f {path}; echo {marker}{i}; exit 0; }}" for i, command in enumerate(commands)]
    result = sandbox.exec(f"( {'; '.join(steps)}; rm -f {path}; exit 1 )")
    lines = [line for line in result.output.splitlines() if line.strip()]
    said = lines[-1].removeprefix(marker) if lines and lines[-1].startswith(marker) else None
    if result.ok and said is not None and said.isdigit():
        command = commands[int(said)]
        return command.split(" ")[0] + (" apply" if command.startswith("git") else "")
    if said == "staging":
        raise PatchApplyError(f"could not stage the {what}: {' '.join(lines[:-1])[-200:]}")
    raise PatchApplyError(f"{what} does not apply: {lines[-1] if lines else f'exit {result.exit_code}'}")


def restore_files(sandbox: Sandbox, commit: str, files: list[str]) -> None:
    """Put `files` back as they are at `commit` (one command); those that do not exist there are removed."""
    steps = []
    for f in files:
        path, ref = shlex.quote(f), shlex.quote(f"{commit}:{f}")
        restore = f"git checkout -q {shlex.quote(commit)} -- {path}"
        steps.append(f"if git cat-file -e {ref} 2>/dev/null; then {restore}; else rm -f {path}; fi")
    if steps:
        sandbox.exec("\n".join(steps))
