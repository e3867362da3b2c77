"""Problem statements written from what a user would see, never from the fix.

The text comes from failing test names and pytest's `E` lines (assertion and exception messages),
plus, for history tasks, the linked issue or the commit message. A final guard removes any line
that contains a changed line of the gold patch, so the fix cannot leak through any source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_ASSERT = re.compile(r"^E\s+(?:AssertionError: )?assert (.+?) == (.+)$")
_WHERE = re.compile(r"^E\s+\+\s+where (.+?) = (.+)$")
_EXCEPTION = re.compile(r"^E\s+((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)):?\s*(.*)$")
_ISSUE_REF = re.compile(r"(?:\bgh-|#)(\d+)\b")
_ISSUE_MENTION = re.compile(r"\(?\s*\b(?:(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?)\s+)?(?:gh-|#)\d+\b\s*\)?", re.I)
_MAX_NOTE = 240
_MAX_BULLETS = 12
_MAX_NAMES = 4


def _sections(log: str) -> dict[str, list[str]]:
    """pytest failure sections (`___ name ___`) -> their `E` lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        header = _SECTION.match(line)
        if header:
            current = sections.setdefault(header.group(1), [])
        elif line.startswith("="):
            current = None
        elif current is not None and line.startswith("E "):
            current.append(line.rstrip())
    return sections


def _section_name(test: str) -> str:
    """How pytest titles a test's failure section: `Class.test[param]` without the file."""
    return ".".join(test.split("::")[1:]) or test


def _describe(lines: list[str]) -> str:
    """One sentence from a failure's `E` lines."""
    for i, line in enumerate(lines):
        found = _ASSERT.match(line)
        if found:
            got, expected = found.group(1), found.group(2)
            where = next((_WHERE.match(w) for w in lines[i + 1 : i + 3] if _WHERE.match(w)), None)
            if where and where.group(1) == got:
                return f"`{where.group(2)}` returns `{got}` where `{expected}` was expected"
            return f"got `{got}` where `{expected}` was expected"
    for line in reversed(lines):
        found = _EXCEPTION.match(line)
        if found:
            message = f": {found.group(2)}" if found.group(2) else ""
            return f"raises `{found.group(1)}{message}`"
    text = next((line[1:].strip() for line in lines if line[1:].strip()), "")
    return f"fails: `{text}`" if text else "fails"


def failure_notes(log: str, tests: list[str]) -> dict[str, str]:
    """Test id -> what its failure looks like in `log` (tests absent from the log: not collected)."""
    sections = _sections(log)
    notes: dict[str, str] = {}
    for test in tests:
        lines = sections.get(_section_name(test))
        if lines is None:
            collect = sections.get(f"ERROR collecting {test.split('::')[0]}")
            notes[test] = f"cannot be collected: {_describe(collect)}" if collect else "fails"
        else:
            notes[test] = _describe(lines)
        if len(notes[test]) > _MAX_NOTE:
            notes[test] = notes[test][:_MAX_NOTE] + "…"
    return notes


def changed_lines(patch: str) -> set[str]:
    """The added and removed lines of a diff, stripped (what must never appear in a statement)."""
    out = set()
    for line in patch.splitlines():
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            text = line[1:].strip()
            if len(text) >= 4:
                out.add(text)
    return out


def guard(text: str, patch: str) -> str:
    """Drop every line of `text` that contains a changed line of the gold patch."""
    secret = changed_lines(patch)
    kept = [line for line in text.splitlines() if not any(s in line for s in secret)]
    return "\n".join(kept).strip() + "\n"


def _bullets(notes: dict[str, str]) -> str:
    """One bullet per distinct failure, naming the tests that show it (a few, then a count)."""
    groups: dict[str, list[str]] = {}
    for test, note in notes.items():
        groups.setdefault(note, []).append(test)
    lines = []
    for note, tests in list(groups.items())[:_MAX_BULLETS]:
        more = f" and {len(tests) - _MAX_NAMES} more" if len(tests) > _MAX_NAMES else ""
        lines.append(f"- {', '.join(f'`{t}`' for t in tests[:_MAX_NAMES])}{more}: {note}.")
    if len(groups) > _MAX_BULLETS:
        lines.append(f"- and {len(groups) - _MAX_BULLETS} other failures.")
    return "\n".join(lines)


def mutation_statement(log: str, failing: list[str], patch: str) -> str:
    """An issue as a user would file it after seeing the tests fail."""
    notes = failure_notes(log, failing)
    shown = ", ".join(t.split("::")[-1] for t in failing[:3]) + (" and more" if len(failing) > 3 else "")
    count = f"{len(failing)} test{'s' if len(failing) != 1 else ''}"
    text = (
        f"Tests fail: {shown}\n\n"
        f"Running the test suite, {count} that should pass now fail:\n\n{_bullets(notes)}\n\n"
        "The other tests pass. The failing tests describe the intended behaviour: please fix the code "
        "(not the tests) so that they pass again without breaking the others.\n"
    )
    return guard(text, patch)


def issue_text(message: str, issues_dir: Path | None) -> str:
    """The text of the first issue the commit message names (`#N`) that is available locally."""
    if issues_dir is None:
        return ""
    for number in _ISSUE_REF.findall(message):
        for suffix in (".md", ".txt", ".json"):
            path = issues_dir / f"{number}{suffix}"
            if not path.is_file():
                continue
            if suffix != ".json":
                return path.read_text(encoding="utf-8").strip()
            data = json.loads(path.read_text(encoding="utf-8"))
            return f"{data.get('title', '')}\n\n{data.get('body', '')}".strip()
    return ""


def history_statement(message: str, log: str, failing: list[str], patch: str, issues_dir: Path | None) -> str:
    """The linked issue if it is available locally, else the commit message plus the failing tests."""
    issue = issue_text(message, issues_dir)
    if issue:
        return guard(issue, patch)
    subject, _, body = message.strip().partition("\n")
    parts = [_ISSUE_MENTION.sub("", subject).strip(" .:")]
    # Lines that only point at an issue ("Fixes #2") mean nothing without it.
    body = "\n".join(line for line in body.splitlines() if not line.strip() or _ISSUE_MENTION.sub("", line).strip())
    if body.strip():
        parts.append(body.strip())
    parts.append(f"These tests should pass and do not yet:\n\n{_bullets(failure_notes(log, failing))}")
    return guard("\n\n".join(parts) + "\n", patch)
