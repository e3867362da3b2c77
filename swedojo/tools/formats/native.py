"""Tool calls through the model API's own tool calling (OpenAI's `tools`, Anthropic's `tool_use`).

The tools' schemas travel in the request, not in the prompt, and the API hands the calls back
structured; the agent reads those. The system prompt only names the tools. A call the model writes
in its text instead (a JSON object, as `openai` reads it) is still read, so a model that slips
out of the API's tool calling is not lost; its errors say to use the API's tool calling.
"""

from __future__ import annotations

from collections.abc import Sequence

from swedojo.tools.base import ToolSpec
from swedojo.tools.formats.openai import OpenAIFormat


class NativeFormat(OpenAIFormat):
    name = "native"
    expected = "a call of one of the provided functions through tool calling"

    def render_tools(self, specs: Sequence[ToolSpec]) -> str:
        names = ", ".join(s.name for s in specs)
        return (
            f"# Tools\n\nThe functions you can call are provided with this conversation ({names}); "
            "call them through tool calling, with arguments that follow their schemas."
        )
