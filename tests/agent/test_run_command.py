"""`dojo run` end to end: a real repo, a real sandbox, the scripted and the tiny in-process model."""

import json

from taskrepo import make_task_repo
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.rundir import RunDir
from swedojo.schema import ExitStatus, ToolCall, Trajectory
from swedojo.tools.formats import get_format

GLM = get_format("glm")


def _trajectory(out):
    """The run's one trajectory, where `dojo eval` keeps them."""
    [path] = RunDir(out).trajectory_files()
    return Trajectory.model_validate_json(path.read_text())


def _report(out):
    """The run's one result's report, as results.jsonl holds it."""
    [result] = RunDir(out).read_results().values()
    return result.report.model_dump(mode="json")


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
    trajectory = _trajectory(out)
    assert trajectory.exit_status == ExitStatus.SUBMITTED
    assert "+    if value > high:" in (out / "patch.diff").read_text()
    report = _report(out)
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
    trajectory = _trajectory(out)
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
    report = _report(out)
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
        ends[name] = (result.output, _trajectory(out))
    output, trajectory = ends["chatter"]
    said = "3 turns in a row without a valid tool call (limit max_format_errors=3)"
    assert trajectory.exit_status == ExitStatus.FORMAT_ERRORS and trajectory.stopped_by == said
    assert f"exit status: format_errors after 3 steps; stopped: {said}" in output
    output, trajectory = ends["busy"]
    assert trajectory.exit_status == ExitStatus.LIMIT_STEPS and trajectory.stopped_by == "4 steps (limit max_steps=4)"
    assert "exit status: limit_steps after 4 steps; stopped: 4 steps (limit max_steps=4)" in output


FIX = [
    {"reasoning": "Look first.", "content": "Plan: read, fix, submit.\n"
     + _call("bash", command="printf '\\033]0;pwned\\007title\\n'; grep -n 'return' calc.py")},
    {"content": _call("str_replace_editor", command="str_replace", path="calc.py",
                      old_str="        return low\n    return value",
                      new_str="        return low\n    if value > high:\n        return high\n    return value")},
    {"content": _call("submit")},
]
"""A run that fixes the issue; its first tool prints an escape sequence (a terminal title) before its result."""


def _run(tmp_path, *issue, stdin=None):
    repo, _ = _setup(tmp_path)
    script = tmp_path / "fix.json"
    script.write_text(json.dumps(FIX))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), *issue, "--model", f"scripted:{script}", "--out", str(out),
                                      "--no-launch"], input=stdin)
    assert result.exit_code == 0, result.output
    return out, result.output


def test_the_run_directory_is_one_that_report_export_and_mismatch_read(tmp_path):
    out, output = _run(tmp_path, "--issue-text", "clamp(50, 0, 10) returns 50; it should return 10.")
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["suite"] == "--issue-text" and manifest["policy"] == "model" and manifest["model"].startswith("scripted:")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 1 and summary["counts"]["not_graded"] == 1 and summary["not_started"] == 0
    [result] = RunDir(out).read_results().values()
    assert result.exit_status == ExitStatus.SUBMITTED and "+    if value > high:" in result.patch
    assert (out / "patch.diff").read_text() == result.patch == _trajectory(out).patch
    assert f"look at it: dojo report {out}; export it: dojo export {out} --format messages" in output

    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "report of 1 instance" in report.output, report.output
    assert "clamp(50, 0, 10)" in (out / "report" / "instances" / f"{result.instance_id}.html").read_text()
    exported = CliRunner().invoke(app, ["export", str(out), "--format", "messages"])
    assert exported.exit_code == 0 and "wrote 1 records" in exported.output, exported.output
    assert json.loads((out / "messages.jsonl").read_text())["instance_id"] == result.instance_id
    mismatch = CliRunner().invoke(app, ["mismatch", str(out)])  # it finds the trajectory: a scripted model's placeholders
    assert mismatch.exit_code == 2 and "the rollout logprobs are placeholders (replayed)" in mismatch.output


def test_each_step_is_shown_as_it_is_done_with_no_escape_sequence_reaching_the_terminal(tmp_path):
    _, output = _run(tmp_path, "--issue-text", "clamp(50, 0, 10) returns 50; it should return 10.")
    lines = output.splitlines()
    first = lines.index("step 1 (plan) · bash: printf '\\033]0;pwned\\007title\\n'; grep -n 'return' calc.py")
    assert lines[first + 1:first + 3] == ["    \\x1b]0;pwned\\x07title", "    2: return a + b"]  # the result's first lines
    assert lines[first + 3].startswith("step 2 · str_replace_editor: command=str_replace path=calc.py old_str= return low")
    assert "step 3 (submit) · submit" in lines and lines.index("step 3 (submit) · submit") < lines.index(
        next(line for line in lines if line.startswith("exit status: submitted")))
    assert "\x1b" not in output and "\x07" not in output


def test_the_issue_comes_from_standard_input_or_inline_text_given_once(tmp_path):
    issue = "clamp(50, 0, 10) returns 50; it should return 10."
    out, _ = _run(tmp_path / "stdin", "--issue", "-", stdin=issue + "\n")
    assert json.loads((out / "run.json").read_text())["suite"] == "stdin"
    assert issue in _trajectory(out).task_prompt
    repo, file = _setup(tmp_path / "errors")
    for given, said in ((["--issue", str(file), "--issue-text", issue], "give the issue once"), ([], "give the issue once"),
                        (["--issue-text", " \n"], "the issue (--issue-text) is empty")):
        result = CliRunner().invoke(app, ["run", "--repo", str(repo), *given, "--model", "scripted:x"])
        assert result.exit_code == 2 and said in result.output, result.output


def test_the_model_must_be_named(tmp_path):
    repo, issue = _setup(tmp_path)
    result = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue", str(issue), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Missing option '--model'" in result.output
    assert not (tmp_path / "out").exists()  # nothing ran, no tiny random model in its place


def test_a_directory_that_holds_a_run_is_not_written_over(tmp_path):
    out, _ = _run(tmp_path, "--issue-text", "clamp(50, 0, 10) returns 50; it should return 10.")
    repo = next((tmp_path / "mirror").glob("*/*"))
    again = CliRunner().invoke(app, ["run", "--repo", str(repo), "--issue-text", "x", "--model", "scripted:x", "--out", str(out)])
    assert again.exit_code == 2 and f"{out} holds a run already: use another --out" in again.output
