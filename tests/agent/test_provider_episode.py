"""`dojo eval` with a provider's model (`--model openai/gpt-4o`) on a bundled demo task, the model a strict
stand-in of OpenAI's API on 127.0.0.1 that answers with native tool calls: the task resolved, its tokens and
cost in the trajectory, the results and the summary, and `--cost-limit` / `--token-limit` ending an instance."""

from __future__ import annotations

import json

import pytest
from provider_standins import OpenAIStandin, Turn
from typer.testing import CliRunner

from swedojo.agent.backends.provider import litellm_module
from swedojo.cli import app
from swedojo.schema import ExitStatus, Trajectory

TASK = "swedojo-demo__textkit-1"
OLD = "        return text\n    return text[: width - len(ellipsis)].rstrip() + ellipsis\n"
NEW = ("        return text\n    if width <= len(ellipsis):\n        return ellipsis[:width]\n"
       "    return text[: width - len(ellipsis)].rstrip() + ellipsis\n")
FIX = [
    Turn(content="Plan: 1. read truncate. 2. cut the ellipsis to the width. 3. run the tests.",
         tool_calls=[("bash", {"command": "grep -n 'ellipsis' textkit/wrap.py"})], prompt_tokens=1500, completion_tokens=60),
    Turn(tool_calls=[("str_replace_editor", {"command": "str_replace", "path": "textkit/wrap.py", "old_str": OLD,
                                             "new_str": NEW})], prompt_tokens=1800, completion_tokens=120),
    Turn(content="The fix is in; submitting.", tool_calls=[("submit", {})], prompt_tokens=2100, completion_tokens=15),
]


def gpt4o_cost(prompt: int, completion: int) -> float:
    entry = litellm_module().model_cost["gpt-4o"]
    return prompt * entry["input_cost_per_token"] + completion * entry["output_cost_per_token"]


@pytest.fixture
def strict_openai(monkeypatch):
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    standin = OpenAIStandin([])
    with standin.serving():
        monkeypatch.setenv("OPENAI_API_BASE", standin.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield standin


def _eval(out, *extra):
    return CliRunner().invoke(app, ["eval", "--suite", "demo", "--instance", TASK, "--policy", "model", "--model",
                                    "openai/gpt-4o", "--rewards", "resolved", "--out", str(out), *extra])


def test_a_provider_model_with_native_tool_calls_resolves_a_demo_task_and_its_cost_is_recorded(strict_openai, tmp_path):
    strict_openai.turns = list(FIX)
    out = tmp_path / "run"
    result = _eval(out)
    assert result.exit_code == 0, result.output

    requests = [r["body"] for r in strict_openai.requests if r["body"] is not None]
    assert len(requests) == 3
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"bash", "str_replace_editor", "submit"}
    assert "<tool_call>" not in requests[0]["messages"][0]["content"]  # the tools travel as `tools`, not in the prompt
    assert [m["role"] for m in requests[2]["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]

    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["status"] == "resolved" and row["exit_status"] == "submitted"
    expected = sum(gpt4o_cost(t.prompt_tokens, t.completion_tokens) for t in FIX)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (5400, 195)
    assert row["cost_usd"] == pytest.approx(expected)

    trajectory = Trajectory.model_validate_json((out / "trajectories" / f"{TASK}.json").read_text())
    assert trajectory.model == "openai/gpt-4o" and trajectory.logprob_kind.value == "provider"
    assert [[c.name for c in s.tool_calls] for s in trajectory.steps] == [["bash"], ["str_replace_editor"], ["submit"]]
    assert [s.cost_usd for s in trajectory.steps] == pytest.approx([gpt4o_cost(t.prompt_tokens, t.completion_tokens) for t in FIX])
    assert trajectory.steps[0].usage["prompt_tokens"] == 1500 and trajectory.steps[0].response_token_ids == []
    assert (trajectory.prompt_tokens, trajectory.completion_tokens) == (5400, 195)
    assert trajectory.cost_usd == pytest.approx(expected)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["resolved"] == 1 and summary["cost_unknown"] == []
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (5400, 195)
    assert summary["cost_usd"] == pytest.approx(expected)
    assert "model cost" in result.output and f"${expected:.4f}" in result.output


@pytest.mark.parametrize(("option", "value", "status", "said"), [
    ("--cost-limit", "0.005", ExitStatus.LIMIT_COST, "spent (limit max_cost_usd=0.005)"),
    ("--token-limit", "3000", ExitStatus.LIMIT_TOKENS, "3480 tokens, prompt and completion (limit max_total_tokens=3000)"),
])
def test_a_limit_stops_an_instance_with_a_clear_reason(strict_openai, tmp_path, option, value, status, said):
    strict_openai.turns = list(FIX)
    out = tmp_path / "run"
    result = _eval(out, option, value)
    assert result.exit_code == 0, result.output
    assert len([r for r in strict_openai.requests if r["body"] is not None]) == 2  # over the limit after turn 2
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["exit_status"] == status.value  # stopped before its submit (the work tree's diff is still graded)
    trajectory = Trajectory.model_validate_json((out / "trajectories" / f"{TASK}.json").read_text())
    assert trajectory.exit_status == status and len(trajectory.steps) == 2 and said in trajectory.stopped_by
    if option == "--cost-limit":
        spent = gpt4o_cost(1500, 60) + gpt4o_cost(1800, 120)
        assert trajectory.stopped_by == f"${spent:.6f} spent (limit max_cost_usd=0.005)"
        assert row["cost_usd"] == pytest.approx(spent)


def test_a_cost_limit_needs_a_model_whose_price_is_known(strict_openai, tmp_path):
    result = CliRunner().invoke(app, ["eval", "--suite", "demo", "--instance", TASK, "--policy", "model", "--model",
                                      "openai/in-house-model", "--cost-limit", "1", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "price of openai/in-house-model is not known" in result.output
    assert not strict_openai.requests


def test_a_provider_refusing_a_request_ends_the_instance_with_its_words(strict_openai, tmp_path):
    strict_openai.turns = [FIX[0], Turn(status=400, error="This model's maximum context length is 128000 tokens.")]
    out = tmp_path / "run"
    result = _eval(out)
    assert result.exit_code == 1, result.output  # an infra_error
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["status"] == "infra_error" and row["error"] == (
        "policy: model backend: ProviderRequestError: openai/gpt-4o: HTTP 400: This model's maximum context length "
        "is 128000 tokens.")
    assert row["prompt_tokens"] == 1500 and row["cost_usd"] == pytest.approx(gpt4o_cost(1500, 60))
