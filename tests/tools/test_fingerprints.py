"""Fingerprints: sensitive to every part of the signature, stable across processes, and pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field
from toolfixtures import AlteredBash, make_tool

from swedojo.schema import Trajectory
from swedojo.tools.base import Tool, ToolParams
from swedojo.tools.builtin import BashTool, SubmitTool
from swedojo.tools.registry import FingerprintMismatchError, ToolRegistry, ToolSetConfig

PINNED = {
    "bash": "582b87d56ae7b629458b0161f9fc400861de4c34cdd763f311aa87767b71b604",
    "submit": "686627548d7a8351fca3c3803526f4b2ab512433d47aac1b6d3580bca717d9fb",
}


class Base(ToolParams):
    path: str = "."
    """Where."""


class Renamed(ToolParams):
    where: str = "."
    """Where."""


class Retyped(ToolParams):
    path: int = 0
    """Where."""


class Redefaulted(ToolParams):
    path: str = "src"
    """Where."""


class Redescribed(ToolParams):
    path: str = "."
    """Which directory."""


class Required(ToolParams):
    path: str
    """Where."""


def fp(tool: Tool[ToolParams]) -> str:
    return tool.spec().fingerprint


def test_fingerprint_changes_with_each_part_of_the_signature() -> None:
    base = fp(make_tool(Base))
    variants = {
        "parameter name": make_tool(Renamed),
        "parameter type": make_tool(Retyped),
        "parameter default": make_tool(Redefaulted),
        "parameter description": make_tool(Redescribed),
        "required-ness": make_tool(Required),
        "tool name": make_tool(Base, name="probe2"),
        "version": make_tool(Base, version="2"),
        "return description": make_tool(Base, returns="other text"),
    }
    prints = {what: fp(tool) for what, tool in variants.items()}
    assert base not in prints.values(), prints
    assert len(set(prints.values())) == len(prints)


def test_fingerprint_ignores_the_prose_description_and_the_class_name() -> None:
    assert fp(make_tool(Base, doc="Reworded prose.")) == fp(make_tool(Base))
    alias = type(
        "SameShape", (ToolParams,), {"__annotations__": {"path": str}, "path": Field(".", description="Where.")}
    )
    assert fp(make_tool(alias)) == fp(make_tool(Base))


def test_builtin_fingerprints_are_pinned() -> None:
    """A failure here means a tool's signature changed: bump its version and update the pin on purpose."""
    assert fp(BashTool()) == PINNED["bash"]
    assert fp(SubmitTool()) == PINNED["submit"]


def test_fingerprints_are_the_same_in_other_processes(tmp_path: Path) -> None:
    script = (
        "import json; from swedojo.tools.registry import ToolSetConfig; "
        "r = ToolSetConfig().build('swe'); print(json.dumps([r.fingerprints(), r.fingerprint]))"
    )
    here = ToolSetConfig().build("swe")
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == [here.fingerprints(), here.fingerprint]


def test_registry_fingerprint_does_not_depend_on_order() -> None:
    a, b = BashTool(), SubmitTool()
    assert ToolRegistry([a, b]).fingerprint == ToolRegistry([b, a]).fingerprint
    assert ToolRegistry([a]).fingerprint != ToolRegistry([a, b]).fingerprint


def test_replay_against_other_fingerprints_is_refused_naming_the_tools() -> None:
    recorded = ToolSetConfig().build("swe")
    trajectory = Trajectory(
        instance_id="t",
        policy="replay",
        tool_fingerprints=recorded.fingerprints(),
        toolset_fingerprint=recorded.fingerprint,
    )
    recorded.check_replay(trajectory.tool_fingerprints)  # same tools: fine

    tools = [AlteredBash() if name == "bash" else recorded.get(name) for name in recorded.names if name != "run_tests"]
    other = ToolRegistry([*tools, make_tool(Base, name="extra_tool")])
    with pytest.raises(FingerprintMismatchError) as info:
        other.check_replay(trajectory.tool_fingerprints)
    assert info.value.differing == ["bash"]
    assert info.value.missing == ["run_tests"]
    assert info.value.extra == ["extra_tool"]
    assert "bash" in str(info.value) and "run_tests" in str(info.value) and "extra_tool" in str(info.value)
