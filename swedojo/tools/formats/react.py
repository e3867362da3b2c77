"""A plain "Thought / Action / Action Input" text format for small models (ReAct style).

    Thought: what to do next
    Action: TOOL
    Action Input: {"arg": "value"}

Several Action blocks may follow each other. Text from a line starting `Observation:` after the
first action on is dropped: the model has started to imagine the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from swedojo.schema import ToolCall
from swedojo.tools.base import ToolSpec
from swedojo.tools.formats.base import FormatError, ParseResult, ToolCallFormat, excerpt

_ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_INPUT = re.compile(r"\s*Action[ \t]+Input[ \t]*:\s*(```[\w-]*\s*)?")
_FENCE_END = re.compile(r"\s*```")
_STRAY_INPUT = re.compile(r"^[ \t]*Action[ \t]+Input[ \t]*:", re.MULTILINE)
_OBSERVATION = re.compile(r"^[ \t]*Observation[ \t]*:", re.MULTILINE)
_DECODER = json.JSONDecoder()


class ReactFormat(ToolCallFormat):
    name = "react"
    stop = ("\nObservation:",)
    expected = 'a line "Action: TOOL" followed by a line "Action Input: {JSON object of arguments}"'

    def render_tools(self, specs: Sequence[ToolSpec]) -> str:
        tools = "\n\n".join(
            f"{s.name}: {s.description}\nArguments (JSON schema): {json.dumps(s.parameters, ensure_ascii=False)}\nReturns: {s.returns}"
            for s in specs
        )
        return (
            f"You can use these tools:\n\n{tools}\n\n"
            "To use a tool, answer in this format:\n\n"
            "Thought: what you think and what to do next\n"
            f"Action: the tool to use, one of [{', '.join(s.name for s in specs)}]\n"
            "Action Input: the arguments as a JSON object\n\n"
            'Then stop: the result comes back as "Observation: ...".'
        )

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            f"Action: {c.name}\nAction Input: {json.dumps(c.arguments, ensure_ascii=False)}" for c in calls
        )

    def render_result(self, output: str) -> str:
        return f"Observation: {output}"

    def _parse(self, text: str, specs: dict[str, ToolSpec]) -> ParseResult:
        first = _ACTION.search(text)
        if first and (imagined := _OBSERVATION.search(text, first.end())):
            text = text[: imagined.start()]
        result = ParseResult()
        content: list[str] = []
        pos = 0
        while (action := _ACTION.search(text, pos)) is not None:
            content.append(text[pos : action.start()])
            name = action.group(1).strip().strip("`")
            marker = _INPUT.match(text, action.end())
            if not name or marker is None:
                result.errors.append(
                    FormatError(message=f"Expected {self.expected}.", excerpt=excerpt(text[action.start() :]))
                )
                pos = action.end()
                continue
            pos = marker.end()
            try:
                arguments, pos = _DECODER.raw_decode(text, pos)
            except ValueError as exc:
                result.errors.append(
                    FormatError(
                        message=f"The Action Input of {name!r} is not valid JSON ({exc}); expected a JSON object.",
                        excerpt=excerpt(text[pos:]),
                    )
                )
                continue
            if marker.group(1) and (fence_end := _FENCE_END.match(text, pos)):
                pos = fence_end.end()
            if not isinstance(arguments, dict):
                result.errors.append(
                    FormatError(
                        message=f"The Action Input of {name!r} must be a JSON object, got {type(arguments).__name__}.",
                        excerpt=excerpt(json.dumps(arguments)),
                    )
                )
                continue
            result.calls.append(ToolCall(name=name, arguments=arguments))
        content.append(text[pos:])
        result.content = "".join(content)
        if _STRAY_INPUT.search(result.content):
            result.errors.append(
                FormatError(
                    message=f'"Action Input:" without an "Action: TOOL" line right before it. Expected {self.expected}.'
                )
            )
        return result
