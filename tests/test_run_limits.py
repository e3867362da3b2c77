"""`dojo eval --token-limit-run` / `--cost-limit-run`: what the whole run may spend. Once its finished
instances reach the limit no new one starts; those not started stay out of the resolved rate, and
the summary names the limit."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.rundir import RunDir
from swedojo.schema import ToolCall
from swedojo.tools.formats import get_format

GLM = get_format("glm")
FIX_OLD = "    if len(text) <= width:\n        return text\n"
FIX_NEW = FIX_OLD + "    if width <= len(ellipsis):\n        return ellipsis[:width]\n"
"""textkit-1's fix: the first instance of the demo suite."""


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "script.json"
    calls = [ToolCall(name="str_replace_editor", arguments={"command": "str_replace", "path": "textkit/wrap.py",
                                                            "old_str": FIX_OLD, "new_str": FIX_NEW}),
             ToolCall(name="submit", arguments={})]
    script.write_text(json.dumps([{"content": GLM.render_calls([call])} for call in calls]))
    return script


def test_a_run_token_limit_starts_no_instance_once_reached(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--suite", "demo", "--limit", "3", "--policy", "model", "--model",
                                      f"scripted:{_script(tmp_path)}", "--max-steps", "3", "--workers", "1",
                                      "--rewards", "resolved", "--token-limit-run", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert list(RunDir(out).read_results()) == ["swedojo-demo__textkit-1"]  # the first instance spent the budget
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 3 and summary["not_started"] == 2 and summary["resolved"] == 1
    assert summary["resolved_rate"] == 1.0  # over the one instance that ran, not the three selected
    assert summary["stopped_by"].endswith("tokens, prompt and completion, over the run (limit --token-limit-run=1)")
    assert f"run limit reached: {summary['stopped_by']}; 2 instance(s) not started, left out of the resolved rate" in result.output
    assert "1/1 (100%; 2 not started)" in result.output


def test_a_run_cost_limit_needs_a_priced_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", "model", "--model", f"scripted:{_script(tmp_path)}",
                                      "--cost-limit-run", "1", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "--cost-limit-run: the price of scripted:" in result.output, result.output
