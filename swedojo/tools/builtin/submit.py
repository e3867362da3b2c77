"""`submit`: end the run; the patch is the work tree's diff against the base commit."""

from __future__ import annotations

from swedojo.sandboxes.base import Sandbox
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult


class SubmitParams(ToolParams):
    pass


class SubmitTool(Tool[SubmitParams]):
    """Submit your changes as the final answer. Call it once, when you are done: the run ends."""

    name = "submit"
    returns = "A confirmation with the number of changed files; the run then ends."
    params = SubmitParams

    def run(self, sandbox: Sandbox, params: SubmitParams, ctx: ToolContext) -> ToolResult:
        patch = sandbox.diff()
        ctx.submitted = True
        files = sum(1 for line in patch.splitlines() if line.startswith("diff --git "))
        note = f"{files} file(s) changed" if files else "the patch is empty: no file was changed"
        return ToolResult(output=f"Submitted; {note}.", submitted=True, patch=patch)
