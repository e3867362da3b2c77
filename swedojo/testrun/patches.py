"""Patches in a sandbox's work tree: which files a diff touches, applying it, restoring files,
and keeping a candidate's hands off the test infrastructure.

Every consumer (grading, the reward tiers, the gold policy, task generation) applies patches
with SWE-bench's fallbacks through these functions, so a patch that applies for one applies
for all.
"""

from __future__ import annotations

import base64
import fnmatch
import posixpath
import re
import secrets
import shlex

from swedojo.sandboxes.base import Sandbox, SandboxError

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


class PatchApplyError(Exception):
    """A patch applied with none of the fallbacks."""


class InfrastructureChangedError(PatchApplyError):
    """A candidate changed test infrastructure that could not be put back as it was."""


TEST_INFRASTRUCTURE = {
    "conftest.py": "pytest loads it as a plugin",
    "pytest.ini": "pytest's configuration",
    ".pytest.ini": "pytest's configuration",
    "pytest.toml": "pytest's configuration",
    ".pytest.toml": "pytest's configuration",
    "tox.ini": "may hold pytest's configuration",
    "setup.cfg": "may hold pytest's configuration",
    "pyproject.toml": "may hold pytest's configuration",
    "sitecustomize.py": "Python runs it at startup",
    "usercustomize.py": "Python runs it at startup",
    "*.pth": "Python's site runs its import lines at startup",
    "entry_points.txt": "may register pytest plugins (pytest11)",
    "*.pyc": "Python may run it in place of its source",
}
"""Names of the files that decide how tests run rather than what the code does, and why. Grading
trusts none of a candidate's: they are put back as they were before it applied."""


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


_GIT = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false"
"""git that runs nothing the work tree's repository configures."""


def restore_files(sandbox: Sandbox, commit: str, files: list[str]) -> None:
    """Put `files` back as they are at `commit` (one command); those that do not exist there are removed."""
    steps = []
    for f in files:
        path, ref = shlex.quote(f), shlex.quote(f"{commit}:{f}")
        restore = f"{_GIT} checkout -q {shlex.quote(commit)} -- {path}"
        steps.append(f"if {_GIT} cat-file -e {ref} 2>/dev/null; then {restore}; else rm -f {path}; fi")
    if steps:
        sandbox.exec("\n".join(steps))


_NAMES = " -o ".join(f"-name {shlex.quote(name)}" for name in TEST_INFRASTRUCTURE)


def _inventory(out: str) -> str:
    """Shell that lists the test infrastructure into `out`: `SHA256  ./PATH` per regular file, `other PATH -> TARGET` else."""
    find = rf"find . -path ./.git -prune -o \( {_NAMES} \)"
    return rf"{find} -type f -exec sha256sum -- {{}} + > {out} && {find} ! -type f ! -type d -printf 'other %P -> %l\n' >> {out}"


def infrastructure(sandbox: Sandbox) -> dict[str, str]:
    """Every test-infrastructure file in the work tree (`TEST_INFRASTRUCTURE`, git's directory
    aside): path -> sha256 of its content, or where a link points. A line that names no path
    plainly (sha256sum escapes odd names) is kept whole as its own key, so it never matches."""
    out = f".git/swedojo-{secrets.token_hex(8)}.inventory"  # in the work tree: every backend's file reads see it
    result = sandbox.exec(f"{_inventory(out)}; echo $?")
    if result.output.strip().splitlines()[-1:] != ["0"]:
        raise SandboxError(f"cannot list the test infrastructure: {result.output.strip()[-200:]}")
    listing = sandbox.read_file(out).decode("utf-8", errors="surrogateescape")
    sandbox.exec(f"rm -f {out}")
    found: dict[str, str] = {}
    for line in listing.splitlines():
        digest, sep, path = line.partition("  ./")
        if line.startswith("other "):
            path, _, target = line.removeprefix("other ").partition(" -> ")
            found[path] = f"-> {target}"
        elif sep and len(digest) == 64:
            found[path] = digest
        else:
            found[line] = "unreadable"
    return found


def restore_infrastructure(sandbox: Sandbox, commit: str, before: dict[str, str]) -> dict[str, str]:
    """Put back every test-infrastructure file that differs from `before` (an `infrastructure`
    of the tree before the candidate applied) as it is at `commit`, and check that the tests now
    see exactly `before`. Returns {path: why it was restored}; InfrastructureChangedError when
    that cannot be done (e.g. the candidate changed such a file the repo layer made)."""
    after = infrastructure(sandbox)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    if not changed:
        return {}
    restore_files(sandbox, commit, changed)
    now = infrastructure(sandbox)
    if now != before:
        left = sorted(path for path in before.keys() | now.keys() if before.get(path) != now.get(path))
        raise InfrastructureChangedError(
            f"the candidate changes test infrastructure that cannot be restored to {commit[:12]}: {', '.join(left[:5])}")
    return {path: _why(path) for path in changed}


def _why(path: str) -> str:
    name = posixpath.basename(path)
    reason = next(why for pattern, why in TEST_INFRASTRUCTURE.items() if fnmatch.fnmatchcase(name, pattern))
    return f"test infrastructure ({reason}): restored to the base commit"
