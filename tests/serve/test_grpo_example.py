"""examples/grpo_step.py on the service's records: one GRPO step on the tiny model the service ran,
taught to solve the task in about half its samples, so the rewards the environment gives differ."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from taught import freeze_untaught, taught_checkpoint
from transformers import AutoModelForCausalLM

from swedojo.datasets.registry import load_suite

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_step.py"


def load_example():
    spec = importlib.util.spec_from_file_location("grpo_step", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["grpo_step"] = module
    spec.loader.exec_module(module)
    return module


def response_logprob(grpo, model, record) -> float:
    """The model's logprob of the record's sampled tokens (its loss mask), with the rollout's routes forced."""
    with torch.no_grad():
        fresh = grpo.token_logprobs(model, record, temperature=1.0)
    return float(fresh[torch.tensor(record.loss_mask, dtype=torch.bool)].sum())


@pytest.mark.docker
def test_one_grpo_step_on_served_records_moves_the_policy_towards_the_rewarded_turn(serve, tmp_path):
    # docker: the work tree is /testbed in every sandbox, so the served prompt is the one taught
    grpo = load_example()
    instance = load_suite("demo").loaded.instances[0]
    checkpoint = taught_checkpoint(tmp_path / "taught", instance, "minimal")
    client = serve(max_concurrent=2, backend="docker")
    batch = client.call("POST", "/batches", {
        "suite": "demo", "instance_ids": [instance.instance_id], "group_size": 8, "model": str(checkpoint),
        "rewards": "resolved", "tool_set": "minimal",
        "sampling": {"temperature": 1.0, "max_new_tokens": 400, "max_steps": 1, "seed": 0},
    })["batch_id"]
    lines = tmp_path / "groups.ndjson"
    with lines.open("w") as out:
        for group in client.stream(batch):
            out.write(json.dumps(group) + "\n")
    records = grpo.read_records(lines)
    assert len(records) == 8 and all(r.rollout_routed_experts for r in records)
    # the taught model applies the gold patch in some samples and looks around in the others: the
    # group's rewards differ as the environment graded them, and so do the advantages
    rewarded = next(r for r in records if r.reward == 1.0)
    unrewarded = next(r for r in records if r.reward == 0.0)
    assert {r.reward for r in records} == {0.0, 1.0}
    advantages = grpo.group_advantages(records)
    assert all(a > 0 if r.reward else a < 0 for r, a in zip(records, advantages))
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    # R3: with the rollout's routes forced, the policy that sampled the tokens gives their logprobs back
    fresh = grpo.token_logprobs(model, rewarded, temperature=1.0)
    mask = torch.tensor(rewarded.loss_mask, dtype=torch.bool)
    assert torch.allclose(fresh[mask], torch.tensor(rewarded.rollout_log_probs)[mask], atol=1e-3)
    rewarded_before, unrewarded_before = (response_logprob(grpo, model, r) for r in (rewarded, unrewarded))
    with torch.no_grad():
        loss_before = float(grpo.grpo_loss(model, records, temperature=1.0)[0])
    freeze_untaught(model)
    result = grpo.grpo_step(model, records, lr=1e-5, temperature=1.0)
    assert math.isfinite(result["loss"]) and result["tokens"] > 0
    changed = [name for name, p in model.named_parameters() if not torch.equal(p, before[name])]
    assert changed, "no weight moved"
    with torch.no_grad():
        assert float(grpo.grpo_loss(model, records, temperature=1.0)[0]) < loss_before
    assert response_logprob(grpo, model, rewarded) > rewarded_before
    assert response_logprob(grpo, model, unrewarded) < unrewarded_before
