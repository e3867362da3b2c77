"""Run directories written before `rundir` existed still load, and a resumed run sees the last result per instance."""

from swedojo.rundir import InstanceResult, RunDir
from swedojo.schema import EvalStatus

# A results.jsonl line as `dojo eval` wrote it when InstanceResult lived in `rollout`.
OLD_LINE = (
    '{"instance_id":"o__r-1","policy":"gold","status":"resolved","resolved":true,"exit_status":"submitted",'
    '"error":"","patch":"diff --git a/x b/x\\n","report":{"instance_id":"o__r-1","status":"resolved",'
    '"resolved":true,"fail_to_pass":{},"pass_to_pass":{},"test_exit_code":null,"tiers":[{"tier":0,'
    '"name":"format","score":1.0,"passed":true,"evidence":{}}],"reward":1.0,"error":"","log_tail":"",'
    '"duration_s":0.0},"duration_s":1.5}'
)


def test_an_old_line_loads_and_dumps_back_unchanged():
    """Unchanged but for fields added since, at their defaults (the result's `repo`, a tier's `scored`, the
    report's `missing_modules`, `standins`, `not_tests`, `tampering`, `unmatched_tests`, `needs_network`, `fails_at_base`, `environment_gaps`, `restored` and
    `test_duration_s`, the result's tokens and cost)."""
    now = OLD_LINE.replace('"instance_id":"o__r-1","policy"', '"instance_id":"o__r-1","repo":"","policy"')
    now = now.replace('"passed":true,"evidence"', '"passed":true,"scored":true,"evidence"')
    now = now.replace('"test_exit_code":null,', '"missing_modules":[],"standins":"","not_tests":{},"tampering":[],"unmatched_tests":[],'
                                                 '"needs_network":{},"fails_at_base":{},"environment_gaps":{},"restored":{},"test_exit_code":null,'
                                                 '"test_duration_s":0.0,')
    now = now.replace('"duration_s":1.5}', '"duration_s":1.5,"prompt_tokens":0,"completion_tokens":0,"cost_usd":null}')
    assert InstanceResult.model_validate_json(OLD_LINE).model_dump_json() == now


def test_read_results_keeps_the_last_line_per_instance_and_skips_a_cut_one(tmp_path):
    run_dir = RunDir(tmp_path)
    assert run_dir.read_results() == {}
    again = OLD_LINE.replace('"duration_s":1.5', '"duration_s":2.5')
    run_dir.results.write_text(f"{OLD_LINE}\n{again}\n{OLD_LINE[:40]}\n", encoding="utf-8")
    results = run_dir.read_results()
    assert list(results) == ["o__r-1"]
    assert results["o__r-1"].duration_s == 2.5 and results["o__r-1"].status == EvalStatus.RESOLVED
