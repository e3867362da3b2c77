"""Validation messages a model can act on, and the count of consecutive format errors."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from swedojo.tools.base import ToolResult


class CallRejection(BaseModel):
    """Why a call was not executed."""

    kind: Literal["unknown_tool", "invalid_arguments"]
    """Unknown tool name, or arguments that do not fit the tool's parameters."""
    tool: str
    """The name the model used."""
    message: str
    """What was wrong and what was expected, for the model."""

    def result(self) -> ToolResult:
        return ToolResult(output=self.message, is_error=True, rejected=True)


def unknown_tool(name: str, available: Sequence[str]) -> CallRejection:
    """Name the closest tool (case-insensitively) and list all of them."""
    lowered = {n.lower(): n for n in available}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    hint = f" Did you mean {lowered[close[0]]!r}?" if close else ""
    message = f"Unknown tool {name!r}.{hint} Available tools: {', '.join(available)}."
    return CallRejection(kind="unknown_tool", tool=name, message=message)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def invalid_arguments(tool: str, exc: ValidationError, accepted: Sequence[str]) -> CallRejection:
    """Turn pydantic's errors into one line per argument, in the model's terms."""
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in err["loc"])
        kind = err["type"]
        if kind == "missing":
            lines.append(f"- missing required argument {where!r}")
        elif kind == "extra_forbidden":
            lines.append(f"- unexpected argument {where!r} (accepted: {', '.join(accepted)})")
        elif not where:
            lines.append(f"- {err['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"- argument {where!r}: {err['msg']} (got {_short(err['input'])})")
    message = f"Invalid arguments for {tool!r}; the call was not executed:\n" + "\n".join(lines)
    return CallRejection(kind="invalid_arguments", tool=tool, message=message)


class FormatErrorCounter:
    """Consecutive turns without a single executed call; the agent decides when to give up."""

    def __init__(self) -> None:
        self.consecutive = 0
        self.total = 0

    def record(self, results: Sequence[ToolResult]) -> int:
        """Record one turn's results (empty when nothing parsed); return the consecutive count."""
        if any(not r.rejected for r in results):
            self.consecutive = 0
        else:
            self.consecutive += 1
            self.total += 1
        return self.consecutive
