"""The tools a run can call: chosen as a named set, fingerprinted, and the only way to dispatch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from swedojo.sandboxes.base import Sandbox, cut_output
from swedojo.schema import ToolCall
from swedojo.tools.base import (
    Tool,
    ToolContext,
    ToolParams,
    ToolResult,
    ToolSpec,
    sha256_hex,
)
from swedojo.tools.builtin import BUILTIN_TOOLS
from swedojo.tools.dispatch import CallRejection, invalid_arguments, unknown_tool


class DuplicateToolError(ValueError):
    """Two tools with one name in a registry."""


class UnknownToolSetError(KeyError):
    """The config names no such tool set."""


class UnknownBuiltinToolError(KeyError):
    """A tool set lists a name that no built-in tool has."""


class FingerprintMismatchError(Exception):
    """A trajectory was recorded with tools other than these: replaying it would mean other actions."""

    def __init__(self, differing: list[str], missing: list[str], extra: list[str]) -> None:
        self.differing, self.missing, self.extra = differing, missing, extra
        parts = []
        if differing:
            parts.append(f"changed: {', '.join(differing)}")
        if missing:
            parts.append(f"recorded but not registered: {', '.join(missing)}")
        if extra:
            parts.append(f"registered but not recorded: {', '.join(extra)}")
        super().__init__("tool fingerprints differ from the recording (" + "; ".join(parts) + ")")


@dataclass(frozen=True)
class BoundCall:
    """A call whose arguments validated: safe to run."""

    tool: Tool[ToolParams]
    params: ToolParams
    call: ToolCall


class ToolRegistry:
    """Tools by name. Calls go through `validate`, so an invalid call never reaches a tool."""

    def __init__(self, tools: Iterable[Tool[ToolParams]] = ()) -> None:
        self._tools: dict[str, Tool[ToolParams]] = {}
        self._specs: dict[str, ToolSpec] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[ToolParams]) -> None:
        if tool.name in self._tools:
            raise DuplicateToolError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def get(self, name: str) -> Tool[ToolParams]:
        return self._tools[name]

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs.values())

    def fingerprints(self) -> dict[str, str]:
        """Tool name -> fingerprint: what `Trajectory.tool_fingerprints` records."""
        return {name: spec.fingerprint for name, spec in self._specs.items()}

    @property
    def fingerprint(self) -> str:
        """One hash over the sorted (name, fingerprint) pairs: `Trajectory.toolset_fingerprint`."""
        return sha256_hex(sorted(self.fingerprints().items()))

    def check_replay(self, recorded: Mapping[str, str]) -> None:
        """Refuse a trajectory recorded with other tools, naming each that differs."""
        current = self.fingerprints()
        differing = sorted(n for n in recorded.keys() & current.keys() if recorded[n] != current[n])
        missing = sorted(recorded.keys() - current.keys())
        extra = sorted(current.keys() - recorded.keys())
        if differing or missing or extra:
            raise FingerprintMismatchError(differing, missing, extra)

    def validate(self, call: ToolCall) -> BoundCall | CallRejection:
        tool = self._tools.get(call.name)
        if tool is None:
            return unknown_tool(call.name, self.names)
        try:
            params = tool.params.model_validate(call.arguments)
        except ValidationError as exc:
            return invalid_arguments(call.name, exc, list(tool.params.model_fields))
        return BoundCall(tool, params, call)

    def dispatch(self, call: ToolCall, sandbox: Sandbox, ctx: ToolContext) -> ToolResult:
        """Validate, then run; a rejected call comes back as a result and is never executed."""
        bound = self.validate(call)
        if isinstance(bound, CallRejection):
            return bound.result()
        result = bound.tool.run(sandbox, bound.params, ctx)
        output, _ = cut_output(result.output.encode("utf-8", errors="replace"), ctx.max_output_bytes)
        return result.model_copy(update={"output": output})


DEFAULT_TOOL_SETS: dict[str, list[str]] = {
    "swe": ["bash", "str_replace_editor", "search", "run_tests", "submit"],
    "minimal": ["bash", "submit"],
    "setup": ["bash", "str_replace_editor", "search", "submit_setup"],
    "web": ["bash", "str_replace_editor", "search", "browser", "submit"],
}
"""swe: solving an issue; minimal: bash alone; setup: the setup agent of `dojo launch`, whose
answer is a plan of commands (`submit_setup`), not a patch; web: a front-end task, judged in the
browser (no tests to run; the agent looks at its pages with `browser`)."""


class ToolSetConfig(BaseModel):
    """Named tool sets; a task kind or bench suite names one, which fixes the tools and fingerprints."""

    sets: dict[str, list[str]] = Field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_TOOL_SETS.items()})
    """Set name -> built-in tool names, in the order the model sees them."""
    default: str = "swe"
    """Set used when none is named."""

    def build(self, name: str | None = None) -> ToolRegistry:
        """A registry holding exactly the tools of set `name` (the default set when None)."""
        name = name or self.default
        if name not in self.sets:
            raise UnknownToolSetError(f"unknown tool set {name!r}; known: {', '.join(sorted(self.sets))}")
        unknown = [t for t in self.sets[name] if t not in BUILTIN_TOOLS]
        if unknown:
            raise UnknownBuiltinToolError(
                f"tool set {name!r} lists unknown tools {', '.join(unknown)}; built-in: {', '.join(BUILTIN_TOOLS)}"
            )
        return ToolRegistry(BUILTIN_TOOLS[t]() for t in self.sets[name])
