"""Tool-call formats by name: how a model writes calls and reads results."""

from __future__ import annotations

from swedojo.tools.formats.base import FormatError, ParseResult, ToolCallFormat
from swedojo.tools.formats.glm import GlmFormat
from swedojo.tools.formats.native import NativeFormat
from swedojo.tools.formats.openai import OpenAIFormat
from swedojo.tools.formats.react import ReactFormat

FORMATS: dict[str, ToolCallFormat] = {f.name: f for f in (GlmFormat(), OpenAIFormat(), ReactFormat(), NativeFormat())}


class UnknownFormatError(KeyError):
    """No tool-call format has this name."""


def get_format(name: str) -> ToolCallFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormatError(f"unknown tool-call format {name!r}; known: {', '.join(FORMATS)}") from None


__all__ = [
    "FORMATS",
    "FormatError",
    "GlmFormat",
    "NativeFormat",
    "OpenAIFormat",
    "ParseResult",
    "ReactFormat",
    "ToolCallFormat",
    "UnknownFormatError",
    "get_format",
]
