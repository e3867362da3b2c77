"""`str_replace_editor`: view, create and edit files through the sandbox's byte-level file API.

Files keep their bytes outside the edit: CRLF files are matched with normalised newlines and
written back with CRLF; files that are not UTF-8 are edited as latin-1 (every byte maps to one
character and back), and the observation says so.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from swedojo.sandboxes.base import Sandbox
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult, error

SNIPPET_CONTEXT = 4
"""Lines shown around an edit."""

_ARGS_BY_COMMAND: dict[str, tuple[set[str], set[str]]] = {
    # command: (required, allowed)
    "view": (set(), {"view_range"}),
    "create": ({"file_text"}, {"file_text"}),
    "str_replace": ({"old_str"}, {"old_str", "new_str"}),
    "insert": ({"insert_line", "new_str"}, {"insert_line", "new_str"}),
    "undo_edit": (set(), set()),
}


class EditorParams(ToolParams):
    command: Literal["view", "create", "str_replace", "insert", "undo_edit"]
    """What to do (see the tool description)."""
    path: str = Field(min_length=1)
    """File or directory, relative to the repository root (or absolute, inside the repository)."""
    file_text: str | None = None
    """`create`: the whole content of the new file."""
    old_str: str | None = Field(None, min_length=1)
    """`str_replace`: the text to replace; it must occur exactly once and match exactly, whitespace included."""
    new_str: str | None = None
    """`str_replace`: the replacement (omit or empty to delete); `insert`: the lines to insert."""
    insert_line: int | None = Field(None, ge=0)
    """`insert`: insert after this line number (0 inserts at the top)."""
    view_range: list[int] | None = Field(None, min_length=2, max_length=2)
    """`view` of a file: [first, last] line numbers, 1-based and inclusive; last -1 means the end."""

    @model_validator(mode="after")
    def _fits_command(self) -> EditorParams:
        required, allowed = _ARGS_BY_COMMAND[self.command]
        given = {
            name
            for name in ("file_text", "old_str", "new_str", "insert_line", "view_range")
            if getattr(self, name) is not None
        }
        problems = []
        if missing := sorted(required - given):
            problems.append(f"command {self.command!r} needs {', '.join(missing)}")
        if stray := sorted(given - allowed):
            problems.append(f"command {self.command!r} does not take {', '.join(stray)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass
class _Text:
    """A file decoded for editing, and how to encode it back to the same bytes."""

    text: str
    encoding: Literal["utf-8", "latin-1"]
    crlf: bool

    @classmethod
    def decode(cls, data: bytes) -> _Text:
        crlf = b"\r\n" in data and data.count(b"\r\n") == data.count(b"\n")
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = data.decode("latin-1"), "latin-1"
        return cls(text.replace("\r\n", "\n") if crlf else text, encoding, crlf)  # type: ignore[arg-type]

    def encode(self, text: str) -> bytes:
        """Raises UnicodeEncodeError when a latin-1 file gets characters latin-1 cannot hold."""
        return (text.replace("\n", "\r\n") if self.crlf else text).encode(self.encoding)

    def normalise(self, value: str) -> str:
        """The model's text in the file's newline convention (as decoded)."""
        return value.replace("\r\n", "\n") if self.crlf else value

    @property
    def notes(self) -> str:
        notes = []
        if self.encoding == "latin-1":
            notes.append(
                "[note: the file is not valid UTF-8; it is read and written as latin-1, so bytes you do not edit are kept]"
            )
        if self.crlf:
            notes.append("[note: the file has CRLF line endings; they are kept]")
        return "".join("\n" + n for n in notes)


def resolve_path(workdir: str, path: str) -> str | None:
    """Absolute, normalised path inside `workdir`, or None when it points outside."""
    root = posixpath.normpath(workdir)
    full = posixpath.normpath(posixpath.join(root, path))
    return full if full == root or full.startswith(root.rstrip("/") + "/") else None


def shown(workdir: str, path: str) -> str:
    """A path as the model sees it: relative to the repository, so observations do not depend on the machine."""
    return posixpath.relpath(path, posixpath.normpath(workdir))


def split_lines(text: str) -> list[str]:
    """Lines without their newline; only `\\n` ends a line (as for grep and git)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{first + i:6}\t{line}" for i, line in enumerate(lines))


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _occurrences(text: str, sub: str) -> list[int]:
    """Start of every occurrence, overlapping ones included (they are ambiguous too)."""
    found, pos = [], text.find(sub)
    while pos != -1:
        found.append(pos)
        pos = text.find(sub, pos + 1)
    return found


def _whitespace_insensitive_lines(text: str, old: str) -> list[int]:
    tokens = old.split()
    if not tokens:
        return []
    pattern = re.compile(r"\s+".join(re.escape(t) for t in tokens))
    return [_line_of(text, m.start()) for m in pattern.finditer(text)]


class EditorTool(Tool[EditorParams]):
    """View, create and edit files in the repository.

    * view: a file with line numbers (optionally only `view_range`), or the files of a directory two levels deep.
    * create: write a new file; it refuses to overwrite an existing one.
    * str_replace: replace `old_str` with `new_str`. `old_str` must occur exactly once and match the file exactly,
      whitespace and indentation included; include enough surrounding lines to make it unique.
    * insert: insert `new_str` after line `insert_line`.
    * undo_edit: revert the last edit this tool made to `path` (repeatable)."""

    name = "str_replace_editor"
    returns = (
        "view: numbered lines or a file list; edits: the changed region with line numbers, or why nothing changed."
    )
    params = EditorParams

    def run(self, sandbox: Sandbox, params: EditorParams, ctx: ToolContext) -> ToolResult:
        path = resolve_path(sandbox.workdir, params.path)
        if path is None:
            return error(f"{params.path}: the path is outside the repository.")
        name = shown(sandbox.workdir, path)
        try:
            return self._run(sandbox, path, name, params, ctx)
        except OSError as exc:  # e.g. permission denied: the model's doing, not the infrastructure's
            return error(f"{name}: {exc.strerror or exc}")

    def _run(self, sandbox: Sandbox, path: str, name: str, params: EditorParams, ctx: ToolContext) -> ToolResult:
        if params.command == "view":
            return self._view(sandbox, path, name, params.view_range)
        if params.command == "create":
            return self._create(sandbox, path, name, params.file_text or "", ctx)
        if params.command == "undo_edit":
            return self._undo(sandbox, path, name, ctx)
        loaded = self._load(sandbox, path, name)
        if isinstance(loaded, ToolResult):
            return loaded
        data, decoded = loaded
        if params.command == "str_replace":
            edit = self._replace(
                name, decoded, decoded.normalise(params.old_str or ""), decoded.normalise(params.new_str or "")
            )
        else:
            edit = self._insert(name, decoded, params.insert_line or 0, decoded.normalise(params.new_str or ""))
        if isinstance(edit, ToolResult):
            return edit
        new_text, first, last = edit
        try:
            new_data = decoded.encode(new_text)
        except UnicodeEncodeError as exc:
            return error(
                f"{name}: the file is latin-1 (not UTF-8) and cannot hold {exc.object[exc.start : exc.end]!r}; nothing was changed."
            )
        sandbox.write_file(path, new_data)
        ctx.edits.setdefault(path, []).append(data)
        lines = split_lines(new_text)
        lo, hi = max(1, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT)
        return ToolResult(
            output=f"Edited {name}. Lines {lo}-{hi} now read:\n{numbered(lines[lo - 1 : hi], lo)}{decoded.notes}\n"
            "Check the result; undo_edit reverts this edit."
        )

    @staticmethod
    def _is_dir(sandbox: Sandbox, path: str) -> bool:
        return sandbox.exec(f"test -d {shlex.quote(path)}").exit_code == 0

    def _load(self, sandbox: Sandbox, path: str, name: str) -> tuple[bytes, _Text] | ToolResult:
        if self._is_dir(sandbox, path):
            return error(f"{name} is a directory; this command needs a file.")
        try:
            data = sandbox.read_file(path)
        except FileNotFoundError:
            return error(f"{name}: no such file. Use `view` on a directory to see what exists, or `create` a new file.")
        if b"\0" in data:
            return error(f"{name} is a binary file (it contains NUL bytes); this tool edits text files only.")
        return data, _Text.decode(data)

    def _view(self, sandbox: Sandbox, path: str, name: str, view_range: list[int] | None) -> ToolResult:
        if self._is_dir(sandbox, path):
            if view_range is not None:
                return error(f"{name} is a directory; view_range applies to files only.")
            listing = sandbox.exec(f"(cd {shlex.quote(path)} && find . -maxdepth 2 -not -path '*/.*' | sort)")
            return ToolResult(
                output=f"Files and directories in {name}, two levels deep, hidden ones left out:\n{listing.output.rstrip()}"
            )
        loaded = self._load(sandbox, path, name)
        if isinstance(loaded, ToolResult):
            return loaded
        decoded = loaded[1]
        lines = split_lines(decoded.text)
        if not lines:
            return ToolResult(output=f"{name} is empty.{decoded.notes}")
        first, last = view_range or (1, -1)
        last = len(lines) if last == -1 else last
        if not 1 <= first <= len(lines) or last < first:
            return error(
                f"view_range {view_range} is invalid: {name} has {len(lines)} lines; use [first, last] with 1 <= first <= last, or last = -1."
            )
        last = min(last, len(lines))
        header = f"{name}, lines {first}-{last} of {len(lines)}:"
        return ToolResult(output=f"{header}\n{numbered(lines[first - 1 : last], first)}{decoded.notes}")

    def _create(self, sandbox: Sandbox, path: str, name: str, text: str, ctx: ToolContext) -> ToolResult:
        if sandbox.exec(f"test -e {shlex.quote(path)}").exit_code == 0:
            return error(f"{name} already exists; `create` does not overwrite. Edit it with str_replace or insert.")
        sandbox.write_file(path, text.encode("utf-8"))
        ctx.edits.setdefault(path, []).append(None)
        return ToolResult(output=f"Created {name} ({len(split_lines(text))} lines).")

    def _undo(self, sandbox: Sandbox, path: str, name: str, ctx: ToolContext) -> ToolResult:
        stack = ctx.edits.get(path)
        if not stack:
            return error(f"No edit of {name} to undo (only edits made with this tool can be undone).")
        previous = stack.pop()
        if previous is None:
            sandbox.exec(f"rm -f -- {shlex.quote(path)}")
            return ToolResult(output=f"Undid the creation of {name}: the file is removed.")
        sandbox.write_file(path, previous)
        return ToolResult(output=f"Undid the last edit of {name}; {len(stack)} earlier edit(s) can still be undone.")

    @staticmethod
    def _replace(name: str, decoded: _Text, old: str, new: str) -> tuple[str, int, int] | ToolResult:
        text = decoded.text
        found = _occurrences(text, old)
        if len(found) > 1:
            where = ", ".join(str(_line_of(text, pos)) for pos in found)
            return error(
                f"old_str occurs {len(found)} times in {name} (starting at lines {where}); nothing was changed. "
                "Include more surrounding lines so that it occurs exactly once."
            )
        if not found:
            near = _whitespace_insensitive_lines(text, old)
            hint = ""
            if near:
                hint = (
                    f" Text that differs only in whitespace (indentation, tabs, spaces or line breaks) starts at line(s) "
                    f"{', '.join(map(str, near))}: view those lines and copy them exactly."
                )
            return error(f"old_str was not found in {name}; nothing was changed.{hint}")
        pos = found[0]
        first = _line_of(text, pos)
        return text[:pos] + new + text[pos + len(old) :], first, first + new.count("\n")

    @staticmethod
    def _insert(name: str, decoded: _Text, after: int, new: str) -> tuple[str, int, int] | ToolResult:
        parts = [p for p in re.split(r"(?<=\n)", decoded.text) if p]
        if after > len(parts):
            return error(f"insert_line {after} is past the end: {name} has {len(parts)} lines.")
        if after == len(parts) and parts and not parts[-1].endswith("\n"):
            parts[-1] += "\n"
        block = new if new.endswith("\n") else new + "\n"
        text = "".join(parts[:after]) + block + "".join(parts[after:])
        return text, after + 1, after + block.count("\n")
