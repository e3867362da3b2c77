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
    # verification is scored where the task leaves some test of the suite unlisted, else "not scored"
    assert all(t["scored"] or t["evidence"]["not_scored"] == "no other test passed at base" for vector in tiers for t in vector)


def test_empty_resolves_no_demo_task(tmp_path):
    summary, rows = _eval("empty", tmp_path / "empty", "--rewards", "resolved")
    assert summary["resolved"] == 0 and summary["counts"]["empty_patch"] == summary["total"]
    assert all(r["report"]["reward"] == 0.0 for r in rows)
