"""`dojo run` in the repository's own environment: the one an `--env` spec names, else one it
launches; and a report whose tiers the console repeats, each not scored with its reason. A C
project (make, TAP) launches locally with nothing from the network; the CLI runs as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from launch_helpers import C_OK, DATE

from swedojo.rundir import RunDir
from swedojo.schema import ToolCall, Trajectory
from swedojo.tools.formats import get_format

DOJO = str(Path(sys.executable).with_name("dojo"))
ISSUE = "runner.c should say what it checks.\n"


def _dojo(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEDOJO_CACHE": str(cache), "COLUMNS": "400"}
    return subprocess.run([DOJO, *args], env=env, capture_output=True, text=True, timeout=900, check=False)


def _run(repo: Path, tmp_path: Path, cache: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], Trajectory]:
    """The agent looks at its environment, edits runner.c and submits."""
    glm = get_format("glm")
    calls = [ToolCall(name="bash", arguments={"command": 'echo "env=$SWEDOJO_ENV"'}),
             ToolCall(name="bash", arguments={"command": "echo '/* checks 1 */' >> runner.c"}),
             ToolCall(name="submit", arguments={})]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": glm.render_calls([call])} for call in calls]))
    (tmp_path / "issue.md").write_text(ISSUE)
    out = tmp_path / "run"
    run = _dojo("run", "--repo", str(repo), "--issue", str(tmp_path / "issue.md"), "--model", f"scripted:{script}",
                "--out", str(out), *more, cache=cache)
    assert run.returncode == 0, run.stdout + run.stderr
    [path] = RunDir(out).trajectory_files()
    return run, Trajectory.model_validate_json(path.read_text())


def test_run_works_in_the_environment_of_a_launch_given_with_env(make_repo, tmp_path: Path, env_cache: Path) -> None:
    repo = make_repo("crepo", C_OK, DATE)
    cache = env_cache / tmp_path.name
    assert _dojo("launch", str(repo), "--out", str(tmp_path / "env"), "--backend", "local", cache=cache).returncode == 0
    spec = json.loads((tmp_path / "env" / "envspec.json").read_text())
    run, trajectory = _run(repo, tmp_path, cache, "--env", str(tmp_path / "env" / "envspec.json"))
    assert f"env={spec['env_vars']['SWEDOJO_ENV']}\n" in trajectory.steps[0].observation
    assert f"environment: c {spec['runtime_version']} on the local backend, {spec['env_vars']['SWEDOJO_ENV']}" in run.stdout
    assert not (tmp_path / "run" / "environment").exists()  # nothing else was launched


def test_run_launches_the_repos_environment_and_its_report_says_what_was_scored(make_repo, tmp_path: Path,
                                                                                env_cache: Path) -> None:
    repo = make_repo("crepo", C_OK, DATE)
    run, trajectory = _run(repo, tmp_path, env_cache / tmp_path.name)
    [launched] = (tmp_path / "run" / "environment").glob("*/envspec.json")
    spec = json.loads(launched.read_text())
    assert spec["language"] == "c" and spec["test_status"] == {"fine": "PASSED"}
    assert f"env={spec['env_vars']['SWEDOJO_ENV']}\n" in trajectory.steps[0].observation  # not the harness's Python
    [result] = RunDir(tmp_path / "run").read_results().values()
    report = result.report.model_dump(mode="json")
    assert report["status"] == "not_graded"
    assert [(t["name"], t["scored"]) for t in report["tiers"]] == [
        ("format", True), ("static", False), ("tests", False), ("verification", False),
        ("runtime", False), ("visual", False)]
    scored = ", ".join(f"{t['name']} {t['score']:.2f}" for t in report["tiers"] if t["scored"])
    assert f"not_graded: reward {report['reward']:.2f} from {scored}\n" in run.stdout
    for tier in report["tiers"][1:]:  # the console gives each unscored tier's reason, as the report does
        assert f"  {tier['name']} not scored: {tier['evidence']['not_scored']}\n" in run.stdout
    assert "a raw issue names no test that checks the fix" in report["tiers"][2]["evidence"]["not_scored"]
