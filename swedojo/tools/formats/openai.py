"""OpenAI-style JSON function calls written in text.

Accepted: `{"name": ..., "arguments": {...}}` (arguments may be a JSON-encoded string, or be
called `parameters`), the API's `{"id": ..., "type": "function", "function": {...}}`,
`{"tool_calls": [...]}`, and lists of these; bare, inside ```json fences, or inside other markup
such as `<tool_call>...</tool_call>`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from swedojo.schema import ToolCall
from swedojo.tools.base import ToolSpec
from swedojo.tools.formats.base import FormatError, ParseResult, ToolCallFormat, excerpt

_START = re.compile(r"```|\{\s*\"|\[\s*\{")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_CALL_START = re.compile(r'(?:\[\s*)?\{\s*"(?:name|function|tool_calls|type|id)"\s*:')
_JSON_FENCES = {"", "json", "tool_call", "tool_calls"}
_DECODER = json.JSONDecoder()


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and ("name" in item or "function" in item)


class OpenAIFormat(ToolCallFormat):
    name = "openai"
    expected = '{"name": TOOL, "arguments": {ARG: VALUE, ...}} in a ```json block (a JSON list for several calls)'

    def render_tools(self, specs: Sequence[ToolSpec]) -> str:
        tools = "\n".join(json.dumps(s.openai(), ensure_ascii=False) for s in specs)
        return (
            "# Tools\n\nYou can call the following functions, described by JSON schemas:\n"
            f"{tools}\n\n"
            "To call a function, reply with a JSON object in a ```json block:\n"
            '```json\n{"name": "<function-name>", "arguments": {"<argument-name>": <value>, ...}}\n```\n'
            "For several calls, put a JSON list of such objects in the block."
        )

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        items = [{"name": c.name, "arguments": c.arguments, **({"id": c.call_id} if c.call_id else {})} for c in calls]
        value = items[0] if len(items) == 1 else items
        return f"```json\n{json.dumps(value, ensure_ascii=False)}\n```"

    def render_result(self, output: str) -> str:
        return output

    def _parse(self, text: str, specs: dict[str, ToolSpec]) -> ParseResult:
        result = ParseResult()
        content: list[str] = []
        pos = scan = 0
        while (start := _START.search(text, scan)) is not None:
            i = start.start()
            scan, found = self._block(text, i)
            calls = [f for f in found if isinstance(f, ToolCall)]
            result.calls += calls
            result.errors += [f for f in found if isinstance(f, FormatError)]
            if calls:
                content.append(text[pos:i])
                pos = scan
        content.append(text[pos:])
        result.content = "".join(content)
        return result

    def _block(self, text: str, i: int) -> tuple[int, list[ToolCall | FormatError]]:
        """What starts at `i` (a fence or a JSON value): where to read on, and the calls and errors in it."""
        if text.startswith("```", i):
            fence = _FENCE.match(text, i)
            if fence is None:
                return i + 3, []  # an unclosed fence: read on inside it
            lang, body = fence.group(1).lower(), fence.group(2)
            if lang not in _JSON_FENCES:
                return fence.end(), []
            try:
                value = json.loads(body)
            except ValueError as exc:
                if lang == "json" or _CALL_START.search(body):
                    return fence.end(), [
                        FormatError(
                            message=f"Invalid JSON in a tool call ({exc}). Expected: {self.expected}",
                            excerpt=excerpt(body),
                        )
                    ]
                return fence.end(), []
            return fence.end(), self._calls(value)
        try:
            value, end = _DECODER.raw_decode(text, i)
        except ValueError as exc:
            if _CALL_START.match(text, i):
                return i + 1, [
                    FormatError(
                        message=f"Invalid JSON in a tool call ({exc}). Expected: {self.expected}",
                        excerpt=excerpt(text[i:]),
                    )
                ]
            return i + 1, []
        return end, self._calls(value)

    def _calls(self, value: Any) -> list[ToolCall | FormatError]:
        """Calls in a decoded JSON value; empty when the value is not meant as calls at all."""
        if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        items = value if isinstance(value, list) else [value]
        if not any(_is_call(item) for item in items):
            return []
        return [self._call(item) for item in items]

    def _call(self, item: Any) -> ToolCall | FormatError:
        fn = item.get("function", item) if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            return FormatError(
                message=f'Expected an object with a "name" string. Expected: {self.expected}',
                excerpt=excerpt(json.dumps(item)),
            )
        name = fn["name"]
        arguments = fn.get("arguments", fn.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return FormatError(
                    message=f"The arguments of {name!r} are a string that is not valid JSON ({exc}); expected a JSON object.",
                    excerpt=excerpt(arguments),
                )
        if not isinstance(arguments, dict):
            return FormatError(
                message=f"The arguments of {name!r} must be a JSON object, got {type(arguments).__name__}.",
                excerpt=excerpt(json.dumps(arguments)),
            )
        call_id = item.get("id", item.get("call_id", ""))
        return ToolCall(
            name=name, arguments=arguments, call_id=call_id if isinstance(call_id, str) else json.dumps(call_id)
        )
