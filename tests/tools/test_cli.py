"""`dojo tools`: what the model sees, with fingerprints."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.tools.registry import ToolSetConfig


def test_tools_json_lists_the_set_with_schemas_and_fingerprints() -> None:
    result = CliRunner().invoke(app, ["tools", "--set", "minimal", "--format", "react", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    registry = ToolSetConfig().build("minimal")
    assert record["fingerprint"] == registry.fingerprint
    assert {t["name"]: t["fingerprint"] for t in record["tools"]} == registry.fingerprints()
    assert record["tools"][0]["parameters"]["required"] == ["command"]
    assert "Action Input:" in record["prompt"]


def test_tools_text_shows_the_prompt_section_and_fingerprints() -> None:
    result = CliRunner().invoke(app, ["tools"])
    assert result.exit_code == 0, result.output
    assert "<tools>" in result.output and "str_replace_editor" in result.output
    assert ToolSetConfig().build("swe").fingerprint in result.output


def test_tools_rejects_unknown_sets_and_formats() -> None:
    assert CliRunner().invoke(app, ["tools", "--set", "nope"]).exit_code != 0
    assert CliRunner().invoke(app, ["tools", "--format", "xml"]).exit_code != 0
