"""The foundation's promise: on the bundled demo suite, gold resolves everything and empty nothing."""

import json

from typer.testing import CliRunner

from swedojo.cli import app


def _eval(policy, out, *extra):
    result = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", policy, "--out", str(out), "--workers", "2", *extra])
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text()), [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]


def test_gold_resolves_every_demo_task_with_full_reward(tmp_path):
    summary, rows = _eval("gold", tmp_path / "gold")
    assert summary["total"] >= 8 and summary["resolved"] == summary["total"]
    assert all(r["report"]["reward"] == 1.0 for r in rows)
    tiers = [r["report"]["tiers"] for r in rows]
    assert all(t["passed"] for vector in tiers for t in vector if t["scored"])
    assert all([t["name"] for t in vector if t["scored"]][:3] == ["format", "static", "tests"] for vector in tiers)
    # verification is scored where the task leaves some test of the suite unlisted, else "not scored";
    # the browser tiers judge front-end tasks only
    why = {"verification": "no other test passed at base", "runtime": "not a front-end task", "visual": "not a front-end task"}
    assert all(t["scored"] or t["evidence"]["not_scored"] == why[t["name"]] for vector in tiers for t in vector)
    # Its message export is a whole conversation: the prompts an agent would have had, then the calls.
    exported = CliRunner().invoke(app, ["export", str(tmp_path / "gold"), "--format", "messages"])
    assert exported.exit_code == 0, exported.output
    first = json.loads((tmp_path / "gold" / "messages.jsonl").read_text().splitlines()[0])
    roles = [m["role"] for m in first["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and roles.count("assistant") == 2, roles
    from swedojo.datasets.registry import load_suite

    issue = next(i for i in load_suite("demo").loaded.instances if i.instance_id == first["instance_id"]).problem_statement
    assert issue.strip() in first["messages"][1]["content"] and "# Tools" in first["messages"][0]["content"]


def test_empty_resolves_no_demo_task(tmp_path):
    summary, rows = _eval("empty", tmp_path / "empty", "--rewards", "resolved")
    assert summary["resolved"] == 0 and summary["counts"]["empty_patch"] == summary["total"]
    assert all(r["report"]["reward"] == 0.0 for r in rows)


def test_the_demo_names_what_went_wrong(tmp_path):
    from swedojo.cli import demo_problems
    from swedojo.evaluate import Summary
    from swedojo.rundir import InstanceResult, RunDir
    from swedojo.schema import EvalStatus, ExitStatus, RewardReport

    failed = InstanceResult(instance_id="d-1", policy="gold", status=EvalStatus.UNRESOLVED, resolved=False,
                            exit_status=ExitStatus.SUBMITTED, error="tests timed out after 900s",
                            report=RewardReport(instance_id="d-1", status=EvalStatus.UNRESOLVED))
    RunDir(tmp_path).results.write_text(failed.model_dump_json() + "\n")

    def summary(policy, resolved):
        return Summary(suite="demo", policy=policy, total=10, resolved=resolved, resolved_rate=resolved / 10, counts={})

    assert demo_problems("gold", summary("gold", 9), tmp_path) == [
        "gold resolved 9/10 demo tasks (it must resolve all): d-1: unresolved tests timed out after 900s"]
    assert demo_problems("empty", summary("empty", 1), tmp_path) == ["empty resolved 1/10 demo tasks (it must resolve none)"]
    assert demo_problems("gold", summary("gold", 10), tmp_path) == demo_problems("empty", summary("empty", 0), tmp_path) == []
