"""The setup agent of `dojo launch --agent-model`: the agent loop, a scripted model, real sandboxes,
real pip installs, on repositories made here that the rules cannot set up."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from launch_helpers import DATE, PROJECT
from typer.testing import CliRunner

from swedojo.agent.backends import load_backend
from swedojo.agent.setup import ModelSetupAgent, SetupAgentSettings
from swedojo.cli import app
from swedojo.repolaunch.detect import analyse
from swedojo.repolaunch.errors import AnalyseError
from swedojo.repolaunch.launch import launch
from swedojo.schema import EnvSpec, ExitStatus, TestStatus, ToolCall, Trajectory
from swedojo.tools.formats import get_format

GLM = get_format("glm")
NEEDS_HELPERS = {
    **PROJECT,
    "README.md": "# calc\n\nThe tests need the vendored helpers: `pip install ./vendor/helpers`.\n",
    "vendor/helpers/pyproject.toml": "[build-system]\nrequires = ['setuptools>=61']\n"
                                     "build-backend = 'setuptools.build_meta'\n[project]\nname = 'calc-helpers-zq'\n"
                                     "version = '1.0'\n[tool.setuptools]\npy-modules = ['calc_helpers_zq']\n",
    "vendor/helpers/calc_helpers_zq.py": "SEVEN = 7\n",
    "tests/test_calc.py": "import calc_helpers_zq\n\nfrom calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                          "def test_helpers():\n    assert calc_helpers_zq.SEVEN == 7\n",
}
"""A project whose tests import a package named nowhere in its metadata and on no index, only in
the README: a directory of its own (the rules install what an import error names from the index)."""


def _turn(text: str, name: str, **arguments: object) -> dict[str, str]:
    return {"content": text + "\n" + GLM.render_calls([ToolCall(name=name, arguments=arguments)])}


def _script(path: Path, turns: list[dict[str, str]]) -> str:
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def _dojo(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def cache(env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    return env_cache


def test_the_agent_plan_launches_and_rebuilds_without_it(make_repo, tmp_path: Path, cache: Path) -> None:
    """The rules install the project, but its tests fail to import `calc_helpers_zq`, which no index
    has: validation fails. The agent, in a sandbox on the layer the rules built, reads the README,
    tries the install, and submits the rules' commands plus `pip install ./vendor/helpers`; the
    launch builds that from scratch."""
    repo = make_repo("needs-helpers", NEEDS_HELPERS, DATE)
    rules = analyse(repo, datetime.fromisoformat(DATE))
    model = _script(tmp_path / "agent.json", [
        _turn("Plan: 1. read the README 2. install what it names 3. run the tests 4. submit.", "bash",
              command="cat README.md"),
        _turn("The README names the vendored helpers.", "bash",
              command="swedojo-overlay && pip install -q ./vendor/helpers && pip install -q --no-deps --no-build-isolation"
                      " -e . && python -m pytest -q -p no:cacheprovider"),
        _turn("The suite passes.", "submit_setup",
              install_commands=[*rules.install_commands, "pip install ./vendor/helpers"],
              rebuild_commands=rules.rebuild_commands, test_command=rules.test_command, log_parser="pytest"),
    ])
    out = tmp_path / "out"
    code, output = _dojo("launch", str(repo), "--out", str(out), "--backend", "local", "--agent-model", model)
    assert code == 0, output
    assert "the plan is the setup agent's" in output
    spec = EnvSpec.model_validate_json((out / "envspec.json").read_text())
    assert spec.test_status == {"tests/test_calc.py::test_add": TestStatus.PASSED,
                                "tests/test_calc.py::test_helpers": TestStatus.PASSED}
    assert spec.install_commands == [*rules.install_commands, "pip install ./vendor/helpers", "pip install pip"]
    assert spec.rebuild_commands[:2] == ["swedojo-overlay", *rules.rebuild_commands]
    assert spec.resolved_dependencies["calc-helpers-zq"] == "1.0" and spec.resolution_date == ""
    assert spec.setup_agent is not None and spec.setup_agent.stage == "validate"
    assert spec.setup_agent.model == model and "no test passed" in spec.setup_agent.failure
    assert spec.attempts == [f"the rules: [validate] {spec.setup_agent.failure}"]
    trajectory = Trajectory.model_validate_json(Path(spec.setup_agent.trajectory).read_text())
    assert Path(spec.setup_agent.trajectory).parent == out
    assert trajectory.exit_status == ExitStatus.SUBMITTED and trajectory.policy == "setup"
    assert "no test passed" in trajectory.task_prompt and "No module named 'calc_helpers_zq'" in trajectory.task_prompt
    assert "2 passed" in trajectory.steps[1].observation  # the install worked in its sandbox, network on
    log = (out / "build.log").read_text()
    assert "==> setup agent (scripted:" in log and "==> the setup agent's plan" in log

    code, output = _dojo("launch", str(repo), "--out", str(out), "--rebuild")  # no agent: the spec's commands
    assert code == 0, output
    assert "rebuilt from the EnvSpec" in output
    assert json.loads((out / "rebuild.json").read_text())["same"] is True


def test_an_agent_without_a_plan_fails_the_launch_in_one_line(make_repo, tmp_path: Path, cache: Path) -> None:
    """No build file: the rules fail at analyse. The agent looks around but runs out of steps."""
    repo = make_repo("bare", {"README.md": "run ./check.sh\n", "check.sh": "echo ok\n"})
    code, output = _dojo("launch", str(repo), "--out", str(tmp_path / "no-agent"), "--backend", "local")
    assert code == 1 and "no setup agent is configured" in output
    model = _script(tmp_path / "agent.json", [_turn("Look.", "bash", command="ls"),
                                              _turn("Look again.", "bash", command="cat README.md")])
    agent = ModelSetupAgent(load_backend(model), SetupAgentSettings(max_steps=1), name=model)
    out = tmp_path / "out"
    with pytest.raises(AnalyseError) as caught:
        launch(str(repo), out, backend="local", agent=agent)
    message = caught.value.message
    assert "\n" not in message and ": no build or dependency file the rules know" in message
    assert message.endswith(f"; the setup agent ({model}) found no plan: it stopped at 1 steps (limit max_steps=1) "
                            f"without submitting one (trajectory: {out / 'setup-agent.json'})")
    assert caught.value.log_path == out / "build.log" and "==> setup agent (scripted:" in (out / "build.log").read_text()
    trajectory = Trajectory.model_validate_json((out / "setup-agent.json").read_text())
    assert trajectory.exit_status == ExitStatus.LIMIT_STEPS and "check.sh" in trajectory.steps[0].observation
    assert not (out / "envspec.json").exists()


def test_a_bad_agent_model_is_refused_before_the_launch(make_repo, tmp_path: Path) -> None:
    repo = make_repo("bare", {"README.md": "nothing\n"})
    code, output = _dojo("launch", str(repo), "--out", str(tmp_path / "out"), "--agent-model",
                         f"scripted:{tmp_path / 'missing.json'}")
    assert code == 2 and "--agent-model" in output and "missing.json" in output
    assert not (tmp_path / "out" / "build.log").exists()
