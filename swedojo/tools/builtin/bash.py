"""`bash`: one command in the sandbox's persistent terminal."""

from __future__ import annotations

from pydantic import Field

from swedojo.sandboxes.base import Sandbox
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult


class BashParams(ToolParams):
    command: str = Field(min_length=1)
    """The shell command to run. The working directory and environment persist between calls."""


class BashTool(Tool[BashParams]):
    """Run a bash command in the repository's terminal (state such as cwd persists between calls).

    Do not start interactive programs or servers that never exit: each command has a timeout."""

    name = "bash"
    returns = "The combined stdout and stderr, then the exit code (or a timeout note)."
    params = BashParams

    def run(self, sandbox: Sandbox, params: BashParams, ctx: ToolContext) -> ToolResult:
        result = sandbox.exec(params.command)
        if result.timed_out:
            note = f"[timed out after {result.duration_s:.0f}s; the command was interrupted]"
        else:
            note = f"[exit code: {result.exit_code}]"
        output = result.output.rstrip("\n")
        text = f"{output}\n{note}" if output else note
        return ToolResult(output=text, is_error=result.timed_out, timed_out=result.timed_out)
