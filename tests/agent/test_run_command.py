"""`dojo run` end to end: a real repo, a real sandbox, the scripted and the tiny in-process model."""

import json

from taskrepo import make_task_repo
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.schema import ExitStatus, Trajectory
from swedojo.tools.formats import get_format
from swedojo.schema import ToolCall

GLM = get_format("glm")


def _call(name, **arguments):
    return GLM.render_calls([ToolCall(name=name, arguments=arguments)])


def _setup(tmp_path):
    mirror, task = make_task_repo(tmp_path / "mirror")
    issue = tmp_path / "issue.md"
    issue.write_text("clamp(50, 0, 10) returns 50; it should return 10.\n")
    return mirror / task.repo, issue


def test_run_with_scripted_model_fixes_the_issue(tmp_path):
    repo, issue = _setup(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"reasoning": "Look first.", "content": "Plan: read, fix, test.\n" + _call("bash", command="grep -n 'return' calc.py")},
        {"content": _call("str_replace_editor", command="str_replace", path="calc.py",
                          old_str="        return low\n    return value",
                          new_str="        return low\n    if value > high:\n        return high\n    return value")},
        {"content": _call("submit")},
    ]))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(issue), "--model", f"scripted:{script}", "--out", str(out), "--no-launch"])
    assert result.exit_code == 0, result.output
    assert "exit status: submitted" in result.output
    trajectory = Trajectory.model_validate_json((out / "trajectory.json").read_text())
    assert trajectory.exit_status == ExitStatus.SUBMITTED
    assert "+    if value > high:" in (out / "patch.diff").read_text()
    report = json.loads((out / "report.json").read_text())
    assert [(t["name"], t["passed"], t["scored"]) for t in report["tiers"]] == [
        ("format", True, True), ("static", True, True), ("tests", False, False), ("verification", False, False),
        ("runtime", False, False), ("visual", False, False)]
    assert report["reward"] == 1.0


def test_run_with_tiny_in_process_model_respects_limits_and_records_tokens(tmp_path):
    repo, issue = _setup(tmp_path)
    out = tmp_path / "out"
    # no --no-launch: a repo with no build or dependency file gets the plain environment, said so
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(issue), "--model", "tiny:glm_moe_dsa",
                                      "--out", str(out), "--max-steps", "2"])
    assert result.exit_code == 0, result.output
    assert "the plain Python environment (--no-launch, or no build file to launch from)" in result.output
    trajectory = Trajectory.model_validate_json((out / "trajectory.json").read_text())
    # a random model writes junk: the run ends on a limit, never by accident of a crash
    assert trajectory.exit_status in (ExitStatus.LIMIT_STEPS, ExitStatus.FORMAT_ERRORS, ExitStatus.SUBMITTED)
    assert 1 <= len(trajectory.steps) <= 2
    assert trajectory.initial_prompt_token_ids
    for step in trajectory.steps:
        assert step.response_token_ids and len(step.response_logprobs) == len(step.response_token_ids)
        assert all(lp <= 0.0 for lp in step.response_logprobs)
        assert step.usage["prefill_tokens"] + step.usage["cached_tokens"] == step.usage["prompt_tokens"]
    if len(trajectory.steps) == 2:
        assert trajectory.steps[1].usage["cached_tokens"] > 0  # the retained cache served the history


def test_run_with_a_missing_issue_file_is_a_clear_error(tmp_path):
    repo, _ = _setup(tmp_path)
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(tmp_path / "nope.md"), "--model", "scripted:x"])
    assert result.exit_code == 2 and "no such issue file" in result.output


def test_run_says_what_was_scored_and_keeps_its_files_when_the_model_stops_answering(tmp_path):
    repo, issue = _setup(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": _call("bash", command="echo '<!-- note -->' >> README.md")}]))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(issue), "--model", f"scripted:{script}", "--out", str(out), "--no-launch"])
    assert result.exit_code == 0, result.output
    assert "exit status: infra_error" in result.output and "model backend: ScriptExhaustedError" in result.output
    assert "not_graded: reward 0.00 from format 0.00\n" in result.output  # the run did not end by a submit
    assert "static not scored: no Python file changed outside the tests" in result.output
    assert "tests not scored: a raw issue names no test that checks the fix" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "not_graded" and [t["scored"] for t in report["tiers"]] == [True, False, False, False, False, False]
    assert "README.md" in (out / "patch.diff").read_text()


def test_run_says_which_limit_ended_it(tmp_path):
    repo, issue = _setup(tmp_path)
    chatter = tmp_path / "chatter.json"  # no tool call in any turn: format errors
    chatter.write_text(json.dumps([{"content": f"Thinking about it ({i})."} for i in range(20)]))
    busy = tmp_path / "busy.json"  # a valid call every turn, never a submit
    busy.write_text(json.dumps([{"content": _call("bash", command="ls")} for _ in range(20)]))
    ends = {}
    for name, script, steps in (("chatter", chatter, "20"), ("busy", busy, "4")):
        out = tmp_path / name
        result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(issue), "--model", f"scripted:{script}",
                                          "--out", str(out), "--max-steps", steps, "--no-launch"])
        assert result.exit_code == 0, result.output
        ends[name] = (result.output, Trajectory.model_validate_json((out / "trajectory.json").read_text()))
    output, trajectory = ends["chatter"]
    said = "3 turns in a row without a valid tool call (limit max_format_errors=3)"
    assert trajectory.exit_status == ExitStatus.FORMAT_ERRORS and trajectory.stopped_by == said
    assert f"exit status: format_errors after 3 steps; stopped: {said}" in output
    output, trajectory = ends["busy"]
    assert trajectory.exit_status == ExitStatus.LIMIT_STEPS and trajectory.stopped_by == "4 steps (limit max_steps=4)"
    assert "exit status: limit_steps after 4 steps; stopped: 4 steps (limit max_steps=4)" in output
