"""What every tool-call format provides: parse model text to calls, render tools, calls and results.

Parsers never raise: whatever the text, they return a `ParseResult` whose errors say what was
expected, so a format error goes back to the model instead of ending the run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from pydantic import BaseModel, Field

from swedojo.schema import ToolCall
from swedojo.tools.base import ToolResult, ToolSpec

EXCERPT_CHARS = 120


class FormatError(BaseModel):
    """Malformed tool-call markup."""

    message: str
    """What was wrong and what was expected."""
    excerpt: str = ""
    """The offending text, shortened."""

    def render(self) -> str:
        return f"{self.message} (near: {self.excerpt!r})" if self.excerpt else self.message


def excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


class ParseResult(BaseModel):
    """The calls found in one assistant message, the text around them, and any format errors."""

    content: str = ""
    """The message text outside the calls."""
    calls: list[ToolCall] = Field(default_factory=list)
    """Well-formed calls, in order (not yet validated against the tools)."""
    errors: list[FormatError] = Field(default_factory=list)
    """Malformed markup; a call with an error is left out of `calls`."""


class ToolCallFormat(ABC):
    """One way for a model to write tool calls and read tool results."""

    name: str
    stop: tuple[str, ...] = ()
    """Strings the backend should stop generating at (beyond the chat template's own)."""
    expected: str
    """One line saying how a call is written, for error messages."""

    @abstractmethod
    def render_tools(self, specs: Sequence[ToolSpec]) -> str:
        """The system-prompt section that lists the tools and says how to call them."""

    @abstractmethod
    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """Calls as the model would write them (for scripted policies and round trips)."""

    @abstractmethod
    def _parse(self, text: str, specs: dict[str, ToolSpec]) -> ParseResult:
        """Find the calls; may assume nothing about `text`, but is guarded by `parse`."""

    @abstractmethod
    def render_result(self, output: str) -> str:
        """One tool result (or error) as the model reads it."""

    def render_observation(self, results: Sequence[ToolResult], errors: Sequence[FormatError] = ()) -> str:
        """One turn's observation for text prompts: each call's result, then the format errors."""
        parts = [self.render_result(r.output) for r in results]
        if errors:
            parts.append(self.render_result("\n".join(e.render() for e in errors)))
        return "\n".join(parts)

    def parse(self, text: str, specs: Sequence[ToolSpec] = ()) -> ParseResult:
        """Calls in `text`; `specs` tell which arguments are strings (GLM). Never raises."""
        try:
            result = self._parse(text, {s.name: s for s in specs})
        except RecursionError:
            return ParseResult(
                content=text,
                errors=[FormatError(message=f"The tool call is nested too deeply to read. Expected: {self.expected}")],
            )
        if not result.calls and not result.errors:
            result.errors.append(FormatError(message=f"No tool call found. Expected: {self.expected}"))
        return result
