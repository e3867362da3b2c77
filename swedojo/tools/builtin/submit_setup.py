"""`submit_setup`: end a setup run with a plan of plain commands (the setup agent's `submit`).

The plan is the call's arguments, validated here, so a plan the launcher could not read (no test
command, an unknown log parser) is sent back to the model at once instead of failing the launch.
The launcher runs it from scratch; the agent's own experiments in its sandbox are not kept.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from swedojo.sandboxes.base import Sandbox
from swedojo.testrun.parsers import PARSERS
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult


class SetupPlanParams(ToolParams):
    install_commands: list[str]
    """Shell commands that install the dependencies, run in order from the repository's root in a
    fresh checkout with the network on. Python: a fresh virtualenv is active (`pip install ...`);
    the project itself is installed by `rebuild_commands`."""
    rebuild_commands: list[str] = Field(default_factory=list)
    """Commands run in every fresh checkout after the install, with the network off: install or
    build the project itself (Python: `pip install --no-deps --no-build-isolation -e .`)."""
    test_command: str = Field(min_length=1)
    """Runs the whole test suite from the repository's root with the network off; test ids may be
    appended to it."""
    log_parser: str = Field(description=f"How the test command's output is read, one of: {', '.join(PARSERS)}.")
    language: str = ""
    """python, javascript, typescript, go, rust, java, c or cpp; empty: the one the rules found
    (python when they found none)."""
    runtime_version: str = ""
    """Interpreter or toolchain version to use (e.g. 3.11); empty: the one the rules chose, else any."""

    @field_validator("log_parser")
    @classmethod
    def _known_parser(cls, value: str) -> str:
        if value not in PARSERS:
            raise ValueError(f"unknown log parser {value!r}; known: {', '.join(PARSERS)}")
        return value


class SubmitSetupTool(Tool[SetupPlanParams]):
    """Submit the setup plan as your final answer: the commands that install the dependencies, build
    the project and run its tests, and how to read the test output. Call it once, when the plan has
    worked in your sandbox: the run ends, and the plan is run again from scratch in a clean checkout."""

    name = "submit_setup"
    returns = "A confirmation; the run then ends."
    params = SetupPlanParams

    def run(self, sandbox: Sandbox, params: SetupPlanParams, ctx: ToolContext) -> ToolResult:
        ctx.submitted = True
        return ToolResult(output=f"Submitted a plan of {len(params.install_commands)} install and "
                                 f"{len(params.rebuild_commands)} build command(s); tests: {params.test_command}",
                          submitted=True)
