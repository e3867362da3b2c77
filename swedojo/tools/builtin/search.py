"""`search`: find files by glob and grep file contents, with results capped and the cut said.

Both go through git (`ls-files`, `grep`) so ignored files (virtualenvs, build output) stay out.
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field, model_validator

from swedojo.sandboxes.base import Sandbox
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult, error
from swedojo.tools.builtin.editor import resolve_path

MAX_FILES = 100
MAX_LINES = 200
MAX_LINE_CHARS = 400

_GREP_ONLY = {"include", "context", "ignore_case"}


class SearchParams(ToolParams):
    command: Literal["find_files", "grep"]
    """find_files: files whose path matches a glob; grep: lines that match a regular expression."""
    pattern: str = Field(min_length=1)
    """find_files: a glob (`*.py`: file names anywhere; `src/**/test_*.py`: paths under `path`); grep: a regex (grep -E)."""
    path: str = "."
    """Directory to search, relative to the repository root."""
    include: str | None = None
    """grep: only search files matching this glob, e.g. `*.py`."""
    context: int = Field(0, ge=0, le=10)
    """grep: lines of context shown before and after each match."""
    ignore_case: bool = False
    """grep: match regardless of case."""

    @model_validator(mode="after")
    def _grep_options_only_for_grep(self) -> SearchParams:
        if self.command == "find_files" and (stray := sorted(_GREP_ONLY & self.model_fields_set)):
            raise ValueError(f"command 'find_files' does not take {', '.join(stray)}")
        return self


def _capped(command: str, limit: int) -> str:
    """Run `command` in a subshell (the terminal's cwd stays), print its first `limit` lines, then their total."""
    return f"(set -o pipefail; {command} | awk -v max={limit} 'NR <= max {{print}} END {{print NR}}')"


def _render(output: str, limit: int, what: str) -> str:
    lines = [line.rstrip("\r") for line in output.split("\n") if line]
    total = int(lines.pop()) if lines and lines[-1].isdigit() else len(lines)
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line cut]" for line in lines[:limit]]
    if total > limit:
        shown.append(f"[{total - limit} more {what} not shown; narrow the pattern or the path]")
    return "\n".join(shown)


class SearchTool(Tool[SearchParams]):
    """Search the repository (files ignored by git are left out).

    * find_files: list files whose path matches a glob.
    * grep: show matching lines as `path:line:text` (context lines as `path-line-text`)."""

    name = "search"
    returns = f"Matching paths (at most {MAX_FILES}) or matching lines (at most {MAX_LINES}), with a note when more were found."
    params = SearchParams

    def run(self, sandbox: Sandbox, params: SearchParams, ctx: ToolContext) -> ToolResult:
        where = resolve_path(sandbox.workdir, params.path)
        if where is None:
            return error(f"{params.path}: the path is outside the repository.")
        if sandbox.exec(f"test -d {shlex.quote(where)}").exit_code != 0:
            return error(f"{params.path}: no such directory.")
        if params.command == "find_files":
            return self._find(sandbox, where, params.pattern)
        return self._grep(sandbox, where, params)

    @staticmethod
    def _find(sandbox: Sandbox, where: str, pattern: str) -> ToolResult:
        glob = pattern if "/" in pattern else f"**/{pattern}"
        git = (
            f"git -c core.quotepath=off ls-files -co --exclude-standard --full-name -- {shlex.quote(':(glob)' + glob)}"
        )
        result = sandbox.exec(_capped(f"cd {shlex.quote(where)} && {git} | sort", MAX_FILES))
        if result.exit_code != 0:
            return error(f"finding files failed: {result.output.strip()}")
        listing = _render(result.output, MAX_FILES, "files")
        return ToolResult(output=listing or f"No files match {pattern!r}.")

    @staticmethod
    def _grep(sandbox: Sandbox, where: str, params: SearchParams) -> ToolResult:
        args = ["git", "-c", "core.quotepath=off", "grep", "--full-name", "-n", "-I", "--untracked", "-E"]
        if params.ignore_case:
            args.append("-i")
        if params.context:
            args.append(f"-C{params.context}")
        args += ["-e", params.pattern]
        if params.include:
            args += ["--", params.include]
        result = sandbox.exec(_capped(f"cd {shlex.quote(where)} && {shlex.join(args)}", MAX_LINES))
        if result.exit_code == 1:
            return ToolResult(output=f"No lines match {params.pattern!r}.")
        if result.exit_code != 0:
            return error(f"grep failed: {_render(result.output, MAX_LINES, 'lines')}")
        return ToolResult(output=_render(result.output, MAX_LINES, "lines"))
