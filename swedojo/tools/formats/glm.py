"""The GLM family's XML tool calls (GLM-4.5 ... GLM-5).

`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, several per message.
String arguments are written raw; others are JSON-encoded, so a value is JSON-decoded unless the
tool's schema says the argument is a string. Markup has no escaping: a value cannot contain
`</arg_value>`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from swedojo.schema import ToolCall
from swedojo.tools.base import ToolSpec
from swedojo.tools.formats.base import FormatError, ParseResult, ToolCallFormat, excerpt

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_PAIR = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_STRAY_TAGS = (CLOSE, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")


def _string_only(schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether an argument's schema admits only strings (then its raw text is the value)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        typed = [b for b in branches if b.get("type") != "null"]
        return bool(typed) and all(_string_only(b, root) for b in typed)
    kind = schema.get("type")
    if kind is None and "enum" in schema:
        return all(isinstance(v, str) for v in schema["enum"])
    return kind == "string" or (isinstance(kind, list) and "string" in kind and set(kind) <= {"string", "null"})


def _decode(raw: str, spec: ToolSpec | None, key: str) -> Any:
    prop = spec.parameters.get("properties", {}).get(key) if spec else None
    if prop is not None and _string_only(prop, spec.parameters):  # type: ignore[union-attr]
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class GlmFormat(ToolCallFormat):
    name = "glm"
    expected = (
        "<tool_call>NAME<arg_key>ARG</arg_key><arg_value>VALUE</arg_value>...</tool_call> (non-string values as JSON)"
    )

    def render_tools(self, specs: Sequence[ToolSpec]) -> str:
        tools = "\n".join(json.dumps(s.openai(), ensure_ascii=False) for s in specs)
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{tools}\n</tools>\n\n"
            "For each function call, output the function name and arguments within the following XML format:\n"
            "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
            "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
        )

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            OPEN
            + c.name
            + "".join(f"<arg_key>{k}</arg_key><arg_value>{_encode(v)}</arg_value>" for k, v in c.arguments.items())
            + CLOSE
            for c in calls
        )

    def render_result(self, output: str) -> str:
        return f"<tool_response>{output}</tool_response>"

    def _parse(self, text: str, specs: dict[str, ToolSpec]) -> ParseResult:
        result = ParseResult()
        content: list[str] = []
        pos = 0
        while (start := text.find(OPEN, pos)) != -1:
            content.append(text[pos:start])
            body_start = start + len(OPEN)
            end = text.find(CLOSE, body_start)
            if end == -1:
                result.errors.append(
                    FormatError(
                        message=f"<tool_call> is not closed by </tool_call>. Expected: {self.expected}",
                        excerpt=excerpt(text[start:]),
                    )
                )
                pos = len(text)
                break
            call = self._call(text[body_start:end], specs)
            if isinstance(call, FormatError):
                result.errors.append(call)
            else:
                result.calls.append(call)
            pos = end + len(CLOSE)
        content.append(text[pos:])
        result.content = "".join(content)
        for tag in _STRAY_TAGS:
            if tag in result.content:
                result.errors.append(
                    FormatError(message=f"{tag} appears outside a <tool_call> block. Expected: {self.expected}")
                )
        return result

    def _call(self, body: str, specs: dict[str, ToolSpec]) -> ToolCall | FormatError:
        first = body.find("<arg_key>")
        pos = len(body) if first == -1 else first
        name = body[:pos].strip()
        if not _NAME.fullmatch(name):
            return FormatError(
                message=f"Expected the tool name right after <tool_call>, then the arguments. Expected: {self.expected}",
                excerpt=excerpt(body),
            )
        arguments: dict[str, Any] = {}
        while body[pos:].strip():
            pair = _PAIR.match(body, pos)
            if pair is None:
                rest = body[pos:].lstrip()
                what = (
                    "</tool_call> before the next <tool_call>"
                    if rest.startswith(OPEN)
                    else "<arg_key>ARG</arg_key><arg_value>VALUE</arg_value> pairs"
                )
                return FormatError(
                    message=f"Expected {what} in the call to {name!r}. Expected: {self.expected}", excerpt=excerpt(rest)
                )
            key = pair.group(1).strip()
            if not _NAME.fullmatch(key):
                return FormatError(
                    message=f"Expected an argument name inside <arg_key>...</arg_key> in the call to {name!r}.",
                    excerpt=excerpt(pair.group(1)),
                )
            if key in arguments:
                return FormatError(
                    message=f"Argument {key!r} is given twice in the call to {name!r}; give each argument once."
                )
            arguments[key] = _decode(pair.group(2), specs.get(name), key)
            pos = pair.end()
        return ToolCall(name=name, arguments=arguments)
