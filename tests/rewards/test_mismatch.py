"""`dojo mismatch` on a real in-process run: cached rollout logprobs vs one full forward pass."""

import json

import pytest
from taskrepo import make_task_repo
from typer.testing import CliRunner

from swedojo.cli import app


@pytest.mark.parametrize("arch", ["glm_moe_dsa", "glm4_moe"])
def test_every_ratio_is_within_one_percent(tmp_path, arch):
    mirror, task = make_task_repo(tmp_path / "mirror")
    issue = tmp_path / "issue.md"
    issue.write_text("clamp(50, 0, 10) returns 50; it should return 10.\n")
    out = tmp_path / "run"
    ran = CliRunner().invoke(app, ["run", "--repo", str(mirror / task.repo), "--issue", str(issue),
                                   "--model", f"tiny:{arch}", "--out", str(out), "--max-steps", "2"])
    assert ran.exit_code == 0, ran.output
    result = CliRunner().invoke(app, ["mismatch", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["tokens"] > 0
    [path] = (out / "trajectories").glob("*.json")  # a run directory, as `dojo eval` writes one
    trajectory = json.loads(path.read_text())
    assert not any(s["usage"].get("prompt_reset") for s in trajectory["steps"])  # each prompt extended the last
    assert trajectory["policy_version"].startswith("sha256:")  # the weights the tokens came from
    assert {s["logprob_kind"] for s in trajectory["steps"]} == {"raw"}  # greedy: the model's own distribution
    assert 0.99 <= report["ratio_min"] <= report["ratio_max"] <= 1.01, report
    assert report["icepop_masked_fraction"] == 0.0


def test_a_run_without_trajectories_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["mismatch", str(tmp_path)])
    assert result.exit_code == 2 and "no trajectories" in result.output


def test_runs_with_nothing_a_model_sampled_are_refused_with_the_reason(tmp_path):
    mirror, task = make_task_repo(tmp_path / "mirror")
    suite = tmp_path / "suite.jsonl"
    suite.write_text(task.model_dump_json() + "\n")
    gold = tmp_path / "gold"
    ran = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--mirror", str(mirror), "--no-launch", "--policy", "gold",
                                   "--out", str(gold), "--rewards", "resolved"])
    assert ran.exit_code == 0, ran.output
    result = CliRunner().invoke(app, ["mismatch", str(gold)])
    assert result.exit_code == 2 and "no sampled tokens: policy gold ran no model" in result.output

    issue = tmp_path / "issue.md"
    issue.write_text("clamp(50, 0, 10) returns 50; it should return 10.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "Nothing to do."}] * 3))
    replayed = tmp_path / "replayed"
    CliRunner().invoke(app, ["run", "--repo", str(mirror / task.repo), "--issue", str(issue), "--model", f"scripted:{script}",
                             "--out", str(replayed), "--max-steps", "2"])
    result = CliRunner().invoke(app, ["mismatch", str(replayed)])
    assert result.exit_code == 2 and "the rollout logprobs are placeholders (replayed)" in result.output
