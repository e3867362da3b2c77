"""`dojo eval --predictions`: the demo suite's gold and empty patches, written out and graded back,
give the direct runs' verdicts; SWE-bench's files are written for both; what does not match is said."""

import hashlib
import json

import pytest
from typer.testing import CliRunner

from swedojo.cli import app


def _invoke(*args):
    return CliRunner().invoke(app, ["eval", "--suite", "demo", "--rewards", "resolved", "--workers", "2", *args])


def _rows(out):
    return {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def _verdicts(out):
    return {i: (r["status"], r["resolved"], r["report"]["fail_to_pass"], r["report"]["pass_to_pass"])
            for i, r in _rows(out).items()}


def _swebench_files(out, model):
    """The run report and every instance's report.json, by instance id."""
    run = json.loads((out / f"{model}.{out.name}.json").read_text())
    reports = {d.name: json.loads((d / "report.json").read_text()) for d in (out / "logs").iterdir()
               if (d / "report.json").is_file()}
    return run, reports


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    """The gold and empty policies run directly on the demo suite."""
    runs = {}
    for policy in ("gold", "empty"):
        out = tmp_path_factory.mktemp("direct") / policy
        result = _invoke("--policy", policy, "--out", str(out))
        assert result.exit_code == 0, result.output
        runs[policy] = out
    return runs


def test_gold_and_empty_graded_back_from_their_predictions_give_the_direct_verdicts(direct, tmp_path):
    gold_preds = direct["gold"] / "preds.json"
    # the empty run's predictions as JSONL with null patches: another shape SWE-bench takes
    empty_preds = tmp_path / "empty.jsonl"
    empty_preds.write_text("".join(json.dumps({**p, "model_patch": None}) + "\n"
                                   for p in json.loads((direct["empty"] / "preds.json").read_text())))
    for policy, preds in (("gold", gold_preds), ("empty", empty_preds)):
        out = tmp_path / f"graded-{policy}"
        result = _invoke("--predictions", str(preds), "--out", str(out))
        assert result.exit_code == 0, result.output
        assert _verdicts(out) == _verdicts(direct[policy])
        assert len(_verdicts(out)) == 10
        summary = json.loads((out / "summary.json").read_text())
        assert summary["policy"] == "predictions"
        assert summary["predictions"] == f"{preds} sha256:{hashlib.sha256(preds.read_bytes()).hexdigest()}"
        assert summary["not_submitted"] == summary["unmatched_predictions"] == []
        manifest = json.loads((out / "run.json").read_text())
        assert manifest["policy"] == "predictions" and manifest["model"] == summary["predictions"]
        # the predictions are graded as submitted, under their own model name
        regraded = {p["instance_id"]: p for p in json.loads((out / "preds.json").read_text())}
        assert all(p["model_name_or_path"] == policy for p in regraded.values())
        # SWE-bench's files say the same as the direct run's
        direct_run, direct_reports = _swebench_files(direct[policy], policy)
        run, reports = _swebench_files(out, policy)
        assert reports == direct_reports
        keys = ("total_instances", "submitted_instances", "completed_ids", "resolved_ids", "unresolved_ids",
                "empty_patch_ids", "error_ids", "incomplete_ids")
        assert {k: run[k] for k in keys} == {k: direct_run[k] for k in keys}
    gold_run, gold_reports = _swebench_files(direct["gold"], "gold")
    assert gold_run["resolved_instances"] == gold_run["completed_instances"] == gold_run["total_instances"] == 10
    assert all(r[i]["resolved"] and r[i]["patch_successfully_applied"] and not r[i]["tests_status"]["FAIL_TO_PASS"]["failure"]
               for i, r in gold_reports.items())
    empty_run, empty_reports = _swebench_files(direct["empty"], "empty")
    # SWE-bench never runs an empty patch: no report.json, counted apart
    assert empty_reports == {} and empty_run["empty_patch_instances"] == 10 and empty_run["completed_instances"] == 0
    # the test log is kept for every graded instance, empty ones included
    assert all((direct["empty"] / "logs" / i / "test_output.txt").is_file() for i in _rows(direct["empty"]))


def test_instances_without_a_prediction_and_predictions_without_an_instance_are_reported(direct, tmp_path):
    preds = json.loads((direct["gold"] / "preds.json").read_text())
    left_out = sorted(p["instance_id"] for p in preds)[:2]
    kept = [{**p, "model_name_or_path": "org/agent"} for p in preds if p["instance_id"] not in left_out]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(kept + [{"instance_id": "nobody__nothing-1", "model_patch": "", "model_name_or_path": "org/agent"}]))
    out = tmp_path / "partial"
    result = _invoke("--predictions", str(path), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"2 instance(s) of the run have no prediction: not graded, counted as not resolved (not submitted): " \
           f"{', '.join(left_out)}" in " ".join(result.output.split())
    assert "1 prediction(s) are for no instance of the run" in result.output and "nobody__nothing-1" in result.output
    assert "8/10" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 10 and summary["resolved"] == 8 and summary["not_started"] == 0
    assert sorted(summary["not_submitted"]) == left_out and summary["unmatched_predictions"] == ["nobody__nothing-1"]
    assert set(_rows(out)) == {p["instance_id"] for p in kept}
    run = json.loads((out / f"org__agent.{out.name}.json").read_text())  # named after the model, as SWE-bench does
    assert run["total_instances"] == 10 and run["submitted_instances"] == 8 and run["resolved_instances"] == 8
    assert run["incomplete_ids"] == left_out and run["schema_version"] == 2
    assert sorted(p.name for p in (out / "logs").iterdir()) == sorted(p["instance_id"] for p in kept)


def test_a_malformed_predictions_file_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"instance_id": "a", "model_patch": "", "model_name_or_path": "m"},
                                {"instance_id": "b", "model_patch": 42, "model_name_or_path": "m"}]))
    out = tmp_path / "run"
    result = _invoke("--predictions", str(path), "--out", str(out))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path} entry 1 (b): model_patch must be a string (or null for no patch), got a number"
    assert not out.exists()


def test_a_run_resumes_only_with_the_same_predictions_and_they_replace_the_policy(direct, tmp_path):
    preds = tmp_path / "preds.json"
    preds.write_text((direct["gold"] / "preds.json").read_text())
    out = tmp_path / "run"
    assert _invoke("--predictions", str(preds), "--out", str(out), "--instance", "swedojo-demo__ledger-1").exit_code == 0
    again = _invoke("--predictions", str(preds), "--out", str(out), "--instance", "swedojo-demo__ledger-1")
    assert again.exit_code == 0 and "evaluating 0 of 1 instances" in again.output
    preds.write_text(preds.read_text().replace("swedojo-demo__ledger-1", "swedojo-demo__ledger-9"))
    other = _invoke("--predictions", str(preds), "--out", str(out), "--instance", "swedojo-demo__ledger-1")
    assert other.exit_code == 2 and "was made by other inputs" in other.output and "model:" in other.output
    both = _invoke("--predictions", str(preds), "--policy", "gold", "--out", str(tmp_path / "both"))
    assert both.exit_code == 2 and "--predictions grades the file's patches: leave out --policy" in both.output
