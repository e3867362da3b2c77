"""The built-in tools, by name: what tool sets are made of."""

from __future__ import annotations

from swedojo.tools.base import Tool, ToolParams
from swedojo.tools.builtin.bash import BashTool
from swedojo.tools.builtin.browser import BrowserTool
from swedojo.tools.builtin.editor import EditorTool
from swedojo.tools.builtin.run_tests import RunTestsTool
from swedojo.tools.builtin.search import SearchTool
from swedojo.tools.builtin.submit import SubmitTool
from swedojo.tools.builtin.submit_setup import SubmitSetupTool

BUILTIN_TOOLS: dict[str, type[Tool[ToolParams]]] = {
    tool.name: tool for tool in (BashTool, EditorTool, SearchTool, RunTestsTool, BrowserTool, SubmitTool, SubmitSetupTool)
}

__all__ = ["BUILTIN_TOOLS", "BashTool", "BrowserTool", "EditorTool", "RunTestsTool", "SearchTool", "SubmitSetupTool", "SubmitTool"]
