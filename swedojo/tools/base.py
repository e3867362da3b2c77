"""What a tool is: a name, a version, a pydantic parameter model, a description, and `run`.

A tool's fingerprint is the sha256 of its canonical signature (name, parameter JSON schema,
return description, version), so a trajectory can say exactly which tools it was recorded with
and a replay against different tools is refused. The signature is built only from JSON data
(no `hash()`, no reprs, no paths), so the hex is the same in every process and on every machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from swedojo.sandboxes.base import Sandbox
from swedojo.schema import EnvSpec


class ToolParams(BaseModel):
    """Base of every parameter model: unknown arguments are rejected, field docstrings document."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ToolResult(BaseModel):
    """What a call returned; `output` is what the model sees."""

    output: str
    """Observation text (capped, head and tail kept)."""
    is_error: bool = False
    """The call did not do what was asked (bad arguments, missing file, timeout, ...)."""
    rejected: bool = False
    """The call failed validation and was never executed."""
    timed_out: bool = False
    """A command the call ran hit its timeout (the agent may stop after several in a row)."""
    submitted: bool = False
    """The call ended the run with a submission."""
    patch: str = ""
    """The submitted diff, when `submitted`."""
    files: list[str] = Field(default_factory=list)
    """Files the call saved for the trajectory (screenshots), relative to the trajectory's directory."""
    images: list[str] = Field(default_factory=list, exclude=True)
    """PNG images among them, as paths on this machine: a model that takes images sees them with the text."""


@dataclass
class ToolContext:
    """Per-run state and settings shared by the tools of one run (runtime state, not a contract)."""

    env: EnvSpec | None = None
    """The environment: `run_tests` uses its test command and log parser."""
    max_output_bytes: int = 16_000
    """Observations longer than this are cut, head and tail kept."""
    test_timeout_s: float = 900.0
    """Timeout of one `run_tests` call."""
    edits: dict[str, list[bytes | None]] = field(default_factory=dict)
    """Undo stack per file path: the bytes before each edit (None: the file did not exist)."""
    submitted: bool = False
    """Set by `submit`."""
    files_dir: Path | None = None
    """Where calls save files for the trajectory (a directory next to it); None: this run keeps none."""
    resources: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    """What tools keep open across calls (the browser tool's Chromium), closed with the run (`close`)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Tools' own state across calls, by tool name."""

    def close(self) -> None:
        """Close what the run's tools kept open."""
        self.state.clear()
        self.resources.close()


class _ModelFacingSchema(GenerateJsonSchema):
    """JSON schema as a model should read it: no generated titles, optional fields without `null`."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


def parameter_schema(params: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a parameter model, with field descriptions, minus class-name titles."""
    schema = params.model_json_schema(schema_generator=_ModelFacingSchema)
    schema.pop("title", None)
    for definition in schema.get("$defs", {}).values():
        definition.pop("title", None)
    return schema


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, ASCII only: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("ascii")).hexdigest()


class ToolSpec(BaseModel):
    """A tool as the model and the trajectory see it."""

    name: str
    """Name the model calls."""
    version: str
    """Bumped when behaviour changes without the schema changing."""
    description: str
    """What the tool does and when to use it."""
    parameters: dict[str, Any]
    """JSON schema of the arguments."""
    returns: str
    """What the observation contains."""

    @property
    def signature(self) -> dict[str, Any]:
        """What the fingerprint covers; the description is prose and may be reworded freely."""
        return {"name": self.name, "parameters": self.parameters, "returns": self.returns, "version": self.version}

    @property
    def fingerprint(self) -> str:
        return sha256_hex(self.signature)

    @property
    def full_description(self) -> str:
        return f"{self.description}\n\nReturns: {self.returns}"

    def openai(self) -> dict[str, Any]:
        """The OpenAI / chat-template `tools` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.full_description, "parameters": self.parameters},
        }


P = TypeVar("P", bound=ToolParams)


class Tool(ABC, Generic[P]):
    """A typed action on a sandbox. The class docstring is the description the model reads."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    returns: ClassVar[str]
    params: type[P]

    @abstractmethod
    def run(self, sandbox: Sandbox, params: P, ctx: ToolContext) -> ToolResult:
        """Do the call; expected failures come back as `ToolResult(is_error=True)`."""

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            version=self.version,
            description=inspect.getdoc(type(self)) or "",
            parameters=parameter_schema(self.params),
            returns=self.returns,
        )


def error(message: str) -> ToolResult:
    return ToolResult(output=message, is_error=True)
