"""`dojo export`: hand-built run directories with sampled tokens, exported and read back."""

import json
import math

import pyarrow.parquet as pq
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.rewards.advantages import AdvantageConfig
from swedojo.rewards.export import TOKEN_SCHEMA, TokenRecord, export_tokens, read_token_records
from swedojo.rundir import InstanceResult, RunManifest
from swedojo.schema import EvalStatus, ExitStatus, LogprobKind, RewardReport, Step, TierScore, ToolCall, Trajectory


def _trajectory(instance_id: str, seed: int, **changes) -> Trajectory:
    steps = [
        Step(index=0, phase="plan", reasoning="Look at clamp first.", content="Listing files.",
             tool_calls=[ToolCall(name="bash", arguments={"command": "ls"}, call_id="call_0")], observation="calc.py",
             response_token_ids=[seed + 1, seed + 2, seed + 3], response_logprobs=[-0.1, -0.25, -1.5], logprob_kind=LogprobKind.TEMPERATURE),
        Step(index=1, phase="execute", reasoning="", content="", error="unknown tool 'bsh'",
             prompt_token_ids=[90, 91], response_token_ids=[seed + 4], response_logprobs=[-2.0], logprob_kind=LogprobKind.TEMPERATURE),
        Step(index=2, phase="submit", reasoning="The fix is in.", content="Submitting.",
             tool_calls=[ToolCall(name="submit", call_id="call_2")],
             prompt_token_ids=[92, 93, 94], response_token_ids=[seed + 5, seed + 6], response_logprobs=[-0.5, -0.0625], logprob_kind=LogprobKind.TEMPERATURE),
    ]
    fields = dict(instance_id=instance_id, policy="model", model="tiny-moe", policy_version="step-40",
                  system_prompt="You fix bugs.", task_prompt="clamp ignores high", initial_prompt_token_ids=[1, 2, seed],
                  steps=steps, tool_fingerprints={"bash": "fp-bash", "submit": "fp-submit"}, toolset_fingerprint="fp-all",
                  exit_status=ExitStatus.SUBMITTED, patch="diff --git a/x b/x\n")
    return Trajectory(**{**fields, **changes})


def _result(instance_id: str, reward: float, status: EvalStatus = EvalStatus.UNRESOLVED) -> InstanceResult:
    tiers = [TierScore(tier=0, name="format", score=1.0, passed=True),
             TierScore(tier=2, name="tests", score=reward, passed=reward == 1.0),
             TierScore(tier=4, name="runtime", score=0.0, passed=False, scored=False)]  # no browser for code: absent
    report = RewardReport(instance_id=instance_id, status=status, resolved=reward == 1.0, tiers=tiers, reward=reward)
    return InstanceResult(instance_id=instance_id, policy="model", status=status, resolved=reward == 1.0,
                          exit_status=ExitStatus.SUBMITTED, report=report)


def _write_run(run_dir, rows: list[tuple[Trajectory, InstanceResult]]) -> None:
    (run_dir / "trajectories").mkdir(parents=True)
    manifest = RunManifest(suite="s", suite_sha256="0" * 64, policy="model", model="tiny-moe", rewards="resolved",
                           swedojo_version="0")
    (run_dir / "run.json").write_text(manifest.model_dump_json())
    for trajectory, result in rows:
        (run_dir / "trajectories" / f"{trajectory.instance_id}.json").write_text(trajectory.model_dump_json())
    (run_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for _, r in rows))


def _runs(tmp_path):
    """Two rollouts of a suite: `a` splits its group, `b` is flat, `c` and `e` do not add up, `d` is infra."""
    r0, r1 = tmp_path / "r0", tmp_path / "r1"
    bad_logprobs = _trajectory("t__c-1", 300)
    bad_logprobs.steps[0].response_logprobs = [-0.1, -0.2]
    empty_turn = _trajectory("t__e-1", 500)
    empty_turn.steps[1].response_token_ids, empty_turn.steps[1].response_logprobs = [], []
    _write_run(r0, [(_trajectory("t__a-1", 100), _result("t__a-1", 1.0, EvalStatus.RESOLVED)),
                    (_trajectory("t__b-1", 200), _result("t__b-1", 0.0)),
                    (bad_logprobs, _result("t__c-1", 1.0, EvalStatus.RESOLVED))])
    infra = _result("t__d-1", 0.0, EvalStatus.INFRA_ERROR)
    infra.error = "sandbox: docker daemon gone"
    _write_run(r1, [(_trajectory("t__a-1", 110), _result("t__a-1", 0.0)),
                    (_trajectory("t__b-1", 210), _result("t__b-1", 0.0)),
                    (_trajectory("t__d-1", 400), infra),
                    (empty_turn, _result("t__e-1", 0.0))])
    return r0, r1


def _steps_back(record: TokenRecord) -> list[tuple[list[int], list[int], list[float]]]:
    """Split a record's response back into per-step (prompt ids, sampled ids, logprobs) by the loss mask.

    Every step after the first has prompt ids here, so mask runs mark the step boundaries.
    """
    steps: list[tuple[list[int], list[int], list[float]]] = []
    prompt: list[int] = []
    for i, (token, mask) in enumerate(zip(record.response_ids, record.loss_mask)):
        if mask == 0:
            assert record.rollout_log_probs[i] == 0.0
            prompt.append(token)
            continue
        if i == 0 or record.loss_mask[i - 1] == 0:
            steps.append((prompt, [], []))
            prompt = []
        steps[-1][1].append(token)
        steps[-1][2].append(record.rollout_log_probs[i])
    return steps


def _check_matches(record: TokenRecord, trajectory: Trajectory) -> None:
    assert record.prompt_ids == trajectory.initial_prompt_token_ids
    assert _steps_back(record) == [(s.prompt_token_ids, s.response_token_ids, s.response_logprobs) for s in trajectory.steps]
    assert record.response_length == len(record.response_ids) == len(record.loss_mask) == len(record.rollout_log_probs)
    assert record.num_turns == len(trajectory.steps)
    assert record.weight_versions == [trajectory.policy_version]
    assert record.tool_fingerprints == trajectory.tool_fingerprints
    assert record.toolset_fingerprint == trajectory.toolset_fingerprint
    assert (record.policy, record.model, record.status, record.exit_status) == ("model", "tiny-moe", "completed", "submitted")


def test_tokens_round_trip_through_jsonl_and_parquet(tmp_path):
    r0, r1 = _runs(tmp_path)
    summary = export_tokens([r0, r1], tmp_path / "out" / "tokens")
    jsonl, parquet = tmp_path / "out" / "tokens.jsonl", tmp_path / "out" / "tokens.parquet"
    assert summary.files == [jsonl, parquet] and summary.written == 4
    from_jsonl = read_token_records(jsonl)
    table = pq.read_table(parquet)
    assert table.schema.equals(TOKEN_SCHEMA)
    assert read_token_records(parquet) == from_jsonl
    assert [json.loads(line)["sample_id"] for line in jsonl.read_text().splitlines()] == table.column("sample_id").to_pylist()
    sources = {"r0/t__a-1": _trajectory("t__a-1", 100), "r0/t__b-1": _trajectory("t__b-1", 200),
               "r1/t__a-1": _trajectory("t__a-1", 110), "r1/t__b-1": _trajectory("t__b-1", 210)}
    assert [r.sample_id for r in from_jsonl] == list(sources)
    for record in from_jsonl:
        _check_matches(record, sources[record.sample_id])
    by_id = {r.sample_id: r for r in from_jsonl}
    assert by_id["r0/t__a-1"].response_ids == [101, 102, 103, 90, 91, 104, 92, 93, 94, 105, 106]
    assert by_id["r0/t__a-1"].loss_mask == [1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1]
    assert by_id["r0/t__a-1"].rollout_log_probs == [-0.1, -0.25, -1.5, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, -0.5, -0.0625]
    assert by_id["r0/t__a-1"].reward == 1.0 and by_id["r0/t__a-1"].reward_tiers == {"format": 1.0, "tests": 1.0}
    assert by_id["r0/t__a-1"].group_id == by_id["r1/t__a-1"].group_id == "t__a-1"
    advantage = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert by_id["r0/t__a-1"].advantage == advantage and by_id["r1/t__a-1"].advantage == -advantage
    assert by_id["r0/t__b-1"].advantage == by_id["r1/t__b-1"].advantage == 0.0
    assert [str(r) for r in summary.refused] == [
        "r0/t__c-1: step 0: 2 logprobs for 3 response tokens",
        "r1/t__e-1: step 1: empty response (a sampled turn has at least one token)",
    ]
    assert [str(s) for s in summary.skipped] == ["r1/t__d-1: infra_error: sandbox: docker daemon gone"]


def test_zero_variance_groups_are_left_out_when_asked(tmp_path):
    r0, r1 = _runs(tmp_path)
    summary = export_tokens([r0, r1], tmp_path / "tokens", AdvantageConfig(drop_zero_variance=True))
    assert summary.dropped == ["r0/t__b-1", "r1/t__b-1"]
    assert [r.sample_id for r in read_token_records(tmp_path / "tokens.parquet")] == ["r0/t__a-1", "r1/t__a-1"]


def test_cli_refuses_and_names_mismatched_records(tmp_path):
    r0, r1 = _runs(tmp_path)
    out = tmp_path / "cli" / "tokens.jsonl"
    result = CliRunner().invoke(app, ["export", str(r0), str(r1), "--format", "tokens", "--out", str(out), "--no-std"])
    assert result.exit_code == 1, result.output
    assert "refused r0/t__c-1: step 0: 2 logprobs for 3 response tokens" in result.output
    assert "refused r1/t__e-1: step 1: empty response" in result.output
    assert "skipped r1/t__d-1" in result.output
    records = read_token_records(out.with_suffix(".parquet"))
    assert "r0/t__c-1" not in {r.sample_id for r in records}
    assert [r.advantage for r in records] == [0.5, 0.0, -0.5, 0.0]


def test_cli_messages_carry_reasoning_and_tool_calls(tmp_path):
    r0, _ = _runs(tmp_path)
    result = CliRunner().invoke(app, ["export", str(r0), "--format", "messages"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (r0 / "messages.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in records] == ["r0/t__a-1", "r0/t__b-1", "r0/t__c-1"]
    first = records[0]
    assert first["reward"] == 1.0 and first["resolved"] and first["reward_tiers"] == {"format": 1.0, "tests": 1.0}
    assert first["metadata"]["policy_version"] == "step-40" and first["metadata"]["tool_fingerprints"]["bash"] == "fp-bash"
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    plan = first["messages"][2]
    assert plan["reasoning_content"] == "Look at clamp first." and plan["content"] == "Listing files."
    call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}
    assert plan["tool_calls"] == [call]
    assert first["messages"][3] == {"role": "tool", "tool_call_id": "call_0", "content": "calc.py"}
    assert first["messages"][5] == {"role": "user", "content": "unknown tool 'bsh'"}
    assert first["messages"][6]["tool_calls"][0]["function"]["name"] == "submit"


def test_cli_rejects_a_directory_that_is_not_a_run(tmp_path):
    result = CliRunner().invoke(app, ["export", str(tmp_path), "--format", "tokens"])
    assert result.exit_code == 2
    assert "no results.jsonl" in result.output


def test_placeholder_unrecorded_and_mixed_logprobs_are_refused(tmp_path):
    replayed, unknown, mixed = _trajectory("t__r-1", 600), _trajectory("t__u-1", 700), _trajectory("t__m-1", 800)
    for step in replayed.steps:
        step.logprob_kind = LogprobKind.REPLAYED
    for step in unknown.steps:
        step.logprob_kind = None
    mixed.steps[1].logprob_kind = LogprobKind.RAW
    run = tmp_path / "r"
    _write_run(run, [(replayed, _result("t__r-1", 1.0, EvalStatus.RESOLVED)), (unknown, _result("t__u-1", 0.0)),
                     (mixed, _result("t__m-1", 0.0)), (_trajectory("t__a-1", 100), _result("t__a-1", 1.0, EvalStatus.RESOLVED))])
    summary = export_tokens([run], tmp_path / "tokens")
    assert [str(r) for r in summary.refused] == [
        "r/t__m-1: logprobs of different kinds in one trajectory: raw, temperature",
        "r/t__r-1: step 0: its logprobs are placeholders (replayed: no model sampled these tokens)",
        "r/t__u-1: step 0: the kind of its logprobs was not recorded",
    ]
    assert [(r.sample_id, r.logprob_kind) for r in read_token_records(tmp_path / "tokens.parquet")] == [("r/t__a-1", "temperature")]


def test_a_scripted_run_is_refused_as_tokens(tmp_path):
    """The scripted backend replays text: its 0.0 logprobs are labelled replayed and never reach a trainer."""
    from taskrepo import make_task_repo

    from swedojo.tools.formats import get_format

    mirror, task = make_task_repo(tmp_path / "mirror")
    suite = tmp_path / "suite.jsonl"
    suite.write_text(task.model_dump_json() + "\n")
    script = tmp_path / "script.json"
    glm = get_format("glm")
    script.write_text(json.dumps([
        {"content": "Plan: note it.\n" + glm.render_calls([ToolCall(name="bash", arguments={"command": "echo seen > NOTE"})])},
        {"content": glm.render_calls([ToolCall(name="submit", arguments={})])},
    ]))
    run = tmp_path / "run"
    ran = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--mirror", str(mirror), "--no-launch", "--policy", "model",
                                   "--model", f"scripted:{script}", "--out", str(run), "--rewards", "resolved"])
    assert ran.exit_code == 0, ran.output
    trajectory = Trajectory.model_validate_json((run / "trajectories" / f"{task.instance_id}.json").read_text())
    assert trajectory.steps and all(s.logprob_kind == LogprobKind.REPLAYED for s in trajectory.steps)
    result = CliRunner().invoke(app, ["export", str(run), "--format", "tokens", "--out", str(tmp_path / "tokens.jsonl"), "--no-std"])
    assert result.exit_code == 1 and "its logprobs are placeholders (replayed" in result.output, result.output
    assert read_token_records(tmp_path / "tokens.parquet") == []


def test_runs_scored_with_other_reward_settings_are_not_mixed(tmp_path):
    """The same gold patch earns another reward under tiers than under resolved: a trainer must not see both."""
    runs = {}
    for rewards in ("tiers", "resolved"):
        runs[rewards] = tmp_path / rewards
        ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", "gold", "--limit", "1", "--rewards", rewards,
                                       "--out", str(runs[rewards])])
        assert ran.exit_code == 0, ran.output
    out = ["--format", "messages", "--out", str(tmp_path / "messages.jsonl")]
    mixed = CliRunner().invoke(app, ["export", str(runs["tiers"]), str(runs["resolved"]), *out])
    assert mixed.exit_code == 2, mixed.output
    assert mixed.output.startswith(f"error: {runs['tiers']} and {runs['resolved']} were scored with different reward "
                                   'settings (rewards: {"mode":"gated","weights":{}} vs resolved)')
    assert len(mixed.output.splitlines()) == 1 and not (tmp_path / "messages.jsonl").exists()
    alone = CliRunner().invoke(app, ["export", str(runs["tiers"]), *out])
    assert alone.exit_code == 0 and "wrote 1 records" in alone.output, alone.output
    (runs["resolved"] / "run.json").unlink()
    unknown = CliRunner().invoke(app, ["export", str(runs["tiers"]), str(runs["resolved"]), *out])
    assert unknown.exit_code == 2 and f"{runs['resolved']}: no run.json, so the reward settings" in unknown.output
    assert "unknown" in unknown.output


def _with_routes(trajectory: Trajectory, rows_per_step: list[int]) -> Trajectory:
    """Give each step `rows` routing rows ([layers=2, top_k=2], layer 0 dense), numbered to be told apart."""
    counter = 0
    for step, rows in zip(trajectory.steps, rows_per_step):
        step.routed_experts = [[[-1, -1], [(counter + i) % 7, 7]] for i in range(rows)]
        counter += rows
    return trajectory


def test_routed_experts_are_exported_under_slimes_name(tmp_path):
    # 14 tokens: prompt 3, then steps of 0+3, 2+1 and 3+2; one row per token but the last
    routed = _with_routes(_trajectory("t__a-1", 100), [5, 3, 5])
    short = _with_routes(_trajectory("t__b-1", 200), [5, 3, 4])
    partial = _with_routes(_trajectory("t__c-1", 300), [5, 0, 5])
    run = tmp_path / "r0"
    _write_run(run, [(routed, _result("t__a-1", 1.0, EvalStatus.RESOLVED)), (short, _result("t__b-1", 0.0)),
                     (partial, _result("t__c-1", 0.0)), (_trajectory("t__d-1", 400), _result("t__d-1", 0.0))])
    summary = export_tokens([run], tmp_path / "out" / "tokens", AdvantageConfig(drop_zero_variance=False))
    records = {r.sample_id: r for r in read_token_records(tmp_path / "out" / "tokens.parquet")}
    assert records == {r.sample_id: r for r in read_token_records(tmp_path / "out" / "tokens.jsonl")}
    expected = [row for step in routed.steps for row in step.routed_experts]
    assert records["r0/t__a-1"].rollout_routed_experts == expected
    assert len(expected) == len(records["r0/t__a-1"].prompt_ids) + records["r0/t__a-1"].response_length - 1
    assert records["r0/t__d-1"].rollout_routed_experts is None  # not recorded: no column data, not an error
    assert sorted(str(r) for r in summary.refused) == [
        "r0/t__b-1: 12 rows of routed experts for 14 tokens (expected one per token but the last)",
        "r0/t__c-1: routed experts recorded for some steps only (missing: steps [1])",
    ]


def test_a_not_scorable_run_is_skipped_never_a_zero_reward(tmp_path):
    """A listed test the environment cannot run (with the reference patch too) says nothing of the
    agent: its 0.0 is no verdict, so it is skipped like infra_error, and named."""
    gap = _result("t__g-1", 0.0, EvalStatus.NOT_SCORABLE)
    gap.error = "1 listed test cannot run in this environment for want of dask"
    _write_run(tmp_path / "r0", [(_trajectory("t__a-1", 100), _result("t__a-1", 0.0)), (_trajectory("t__g-1", 600), gap)])
    summary = export_tokens([tmp_path / "r0"], tmp_path / "tokens")
    assert [r.sample_id for r in read_token_records(tmp_path / "tokens.jsonl")] == ["r0/t__a-1"]
    assert [str(s) for s in summary.skipped] == [f"r0/t__g-1: not_scorable: {gap.error}"]
