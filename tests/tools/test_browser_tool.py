"""The `browser` tool end to end: a scripted model works a web-demo task through `dojo eval`, looking at
its page in Chromium inside the sandbox (open, query, click, type, screenshot); the observations say
what the page did and the screenshot is a file next to the trajectory."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from swedojo.agent.policies import gold_apply_command
from swedojo.cli import app
from swedojo.datasets.registry import load_suite
from swedojo.schema import ExitStatus, ToolCall, Trajectory
from swedojo.tools.builtin.browser import BrowserParams
from swedojo.tools.formats import get_format
from swedojo.tools.registry import ToolSetConfig

pytestmark = pytest.mark.slow

GLM = get_format("glm")
TASK = "swedojo-web__signup-1"


def _browser(**arguments) -> dict[str, str]:
    return {"content": GLM.render_calls([ToolCall(name="browser", arguments=arguments)])}


def test_the_web_tool_set_has_the_browser_with_its_own_fingerprint():
    web, swe = ToolSetConfig().build("web"), ToolSetConfig().build("swe")
    assert "browser" in web.names and "browser" not in swe.names
    assert web.fingerprint != swe.fingerprint and len(web.fingerprints()["browser"]) == 64
    with pytest.raises(ValueError, match="needs 'selector'"):
        BrowserParams(action="click")


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_scripted_episode_uses_the_browser_tool_on_a_web_demo_task(backend, tmp_path):
    instance = next(t for t in load_suite("web-demo").loaded.instances if t.instance_id == TASK)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        _browser(action="screenshot"),  # 0: nothing open yet
        _browser(action="open", path="index.html"),  # 1
        _browser(action="click", selector="button[type=submit]"),  # 2: the base page has no validation
        _browser(action="query", selector="p.error"),  # 3
        {"content": GLM.render_calls([ToolCall(name="bash", arguments={"command": gold_apply_command(instance.patch)})])},  # 4
        _browser(action="open", path="index.html"),  # 5: the page again, with the script
        _browser(action="click", selector="button[type=submit]"),  # 6
        _browser(action="query", selector="#name-error"),  # 7
        _browser(action="type", selector="#name", text="Ada Lovelace"),  # 8
        _browser(action="query", selector="#name"),  # 9
        _browser(action="screenshot", full_page=True),  # 10
        _browser(action="open", path="../etc/passwd"),  # 11
        {"content": GLM.render_calls([ToolCall(name="submit")])},  # 12
    ]))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--suite", "web-demo", "--policy", "model", "--model", f"scripted:{script}",
                                      "--instance", TASK, "--backend", backend, "--out", str(out)])
    assert result.exit_code == 0, result.output
    trajectory_file = out / "trajectories" / f"{TASK}.json"
    trajectory = Trajectory.model_validate_json(trajectory_file.read_text())
    assert trajectory.exit_status == ExitStatus.SUBMITTED and "browser" in trajectory.tool_fingerprints
    seen = [step.observation for step in trajectory.steps]
    assert "No page is open" in seen[0]
    assert seen[1].startswith("Opened index.html at 1280x720: title ")
    assert seen[3] == "0 element(s) match 'p.error'."  # the base page has no error messages
    assert '"visible": true' in seen[7] and "Your name is required." in seen[7] and '"box": {"x": ' in seen[7]
    assert seen[8] == "Typed 12 character(s) into '#name'."
    assert '"value": "Ada Lovelace"' in seen[9] and '"id": "name"' in seen[9]
    assert "give a path inside the work tree" in seen[11]
    shot = trajectory.steps[10].files
    assert shot == [f"{TASK}.files/screenshot-001.png"] and shot[0] in seen[10]
    png = trajectory_file.parent / shot[0]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert all(not step.files for step in trajectory.steps[:10])
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert results[0]["status"] == "resolved"  # the gold page it applied and looked at passes every browser tier
