"""examples/grpo_step.py on the service's records: one GRPO step on the tiny model the service ran."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from swedojo.datasets.registry import load_suite

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_step.py"


def load_example():
    spec = importlib.util.spec_from_file_location("grpo_step", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["grpo_step"] = module
    spec.loader.exec_module(module)
    return module


def test_one_grpo_step_on_served_records_has_a_finite_loss_and_moves_the_weights(serve, tiny_checkpoint, tmp_path):
    grpo = load_example()
    client = serve(max_concurrent=2)
    instance = load_suite("demo").loaded.instances[0].instance_id
    batch = client.call("POST", "/batches", {
        "suite": "demo", "instance_ids": [instance], "group_size": 3, "model": str(tiny_checkpoint), "rewards": "resolved",
        "sampling": {"temperature": 1.0, "max_new_tokens": 16, "max_steps": 1},
    })["batch_id"]
    lines = tmp_path / "groups.ndjson"
    with lines.open("w") as out:
        for group in client.stream(batch):
            out.write(json.dumps(group) + "\n")
    records = grpo.read_records(lines)
    assert len(records) == 3 and all(r.rollout_routed_experts for r in records)
    # The random tiny model never earns a reward, so every advantage of a served group is 0 and a
    # GRPO step is rightly a no-op; a trainer's reward is stood in for here to see the gradient flow.
    assert {r.reward for r in records} == {0.0} and grpo.group_advantages(records) == [0.0, 0.0, 0.0]
    rewarded = [r.model_copy(update={"reward": float(n)}) for n, r in enumerate(records)]
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    # R3: with the rollout's routes forced, the policy that sampled the tokens gives their logprobs back
    fresh = grpo.token_logprobs(model, records[0], temperature=1.0)
    mask = torch.tensor(records[0].loss_mask, dtype=torch.bool)
    assert torch.allclose(fresh[mask], torch.tensor(records[0].rollout_log_probs)[mask], atol=1e-3)
    result = grpo.grpo_step(model, rewarded, lr=1e-2, temperature=1.0)
    assert math.isfinite(result["loss"]) and result["tokens"] > 0
    changed = [name for name, p in model.named_parameters() if not torch.equal(p, before[name])]
    assert changed, "no weight moved"
