"""A minimal GRPO step in plain PyTorch on the rollout service's records (`dojo serve`).

    python examples/grpo_step.py --records groups.ndjson --checkpoint CKPT [--temperature 1.0] [--out CKPT2]

`--records`: the service's GroupOut lines (`GET /batches/{id}/stream`) or `dojo export --format
tokens` JSONL. For each sample: advantage = (r - mean) / (std + eps) over its group's rewards;
the new policy's logprob of every sampled token from one forward pass (with the rollout's routed
experts forced, R3, when the record has them); importance ratio against the rollout logprobs,
tokens whose ratio is outside [1/c, c] masked out on both sides (IcePop); the PPO-clipped
surrogate averaged over the sampled tokens that remain; one optimizer step.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from swedojo.agent.backends.routing import forced_routing
from swedojo.rewards.export import TokenRecord


def read_records(path: Path) -> list[TokenRecord]:
    """Token records from GroupOut lines (the service's stream) or token-record lines (`dojo export`)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if "samples" in item:
            records += [TokenRecord.model_validate(s["record"]) for s in item["samples"] if s.get("record")]
        elif line.strip():
            records.append(TokenRecord.model_validate(item))
    return records


def group_advantages(records: list[TokenRecord], eps: float = 1e-6) -> list[float]:
    """(r - mean) / (std + eps) within each group, std unbiased as torch.std computes it."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for record in records:
        rewards[record.group_id].append(record.reward)
    stats = {g: (torch.tensor(r).mean().item(), torch.tensor(r).std().item() if len(r) > 1 else 0.0)
             for g, r in rewards.items()}
    return [(r.reward - stats[r.group_id][0]) / (stats[r.group_id][1] + eps) for r in records]


def token_logprobs(model: torch.nn.Module, record: TokenRecord, temperature: float) -> torch.Tensor:
    """The model's logprob of every response token (one forward over all but the last token)."""
    ids = record.prompt_ids + record.response_ids
    inputs = torch.tensor([ids[:-1]])
    routes = forced_routing(model, record.rollout_routed_experts) if record.rollout_routed_experts else nullcontext()
    with routes:
        logits = model(input_ids=inputs, use_cache=False).logits[0].float()
    if record.logprob_kind == "temperature" and temperature > 0:
        logits = logits / temperature
    logprobs = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor(ids[1:])
    every = logprobs.gather(1, targets[:, None])[:, 0]
    return every[len(record.prompt_ids) - 1:]


def grpo_loss(model: torch.nn.Module, records: list[TokenRecord], temperature: float = 1.0, icepop_c: float = 2.0,
              clip_eps: float = 0.2) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss over the records and what it saw (tokens used, tokens masked by IcePop)."""
    advantages = group_advantages(records)
    total = torch.zeros(())
    used = masked = 0
    for record, advantage in zip(records, advantages):
        new = token_logprobs(model, record, temperature)
        old = torch.tensor(record.rollout_log_probs)
        mask = torch.tensor(record.loss_mask, dtype=torch.bool)
        ratio = torch.exp(new - old)
        kept = mask & (ratio.detach() >= 1 / icepop_c) & (ratio.detach() <= icepop_c)
        surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantage)
        total = total - (surrogate * kept).sum()
        used += int(kept.sum())
        masked += int((mask & ~kept).sum())
    loss = total / max(used, 1)
    return loss, {"tokens": used, "icepop_masked": masked}


def grpo_step(model: torch.nn.Module, records: list[TokenRecord], lr: float = 1e-3, **loss_options) -> dict[str, float]:
    """One optimizer step on the records; the loss and counts."""
    model.train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    loss, seen = grpo_loss(model, records, **loss_options)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()
    return {"loss": float(loss.detach()), **seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--temperature", type=float, default=1.0, help="The sampling temperature of the batch.")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, help="Save the stepped model here.")
    args = parser.parse_args()
    records = read_records(args.records)
    if not records:
        raise SystemExit(f"{args.records}: no token records")
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32)
    result = grpo_step(model, records, lr=args.lr, temperature=args.temperature)
    if not math.isfinite(result["loss"]):
        raise SystemExit(f"loss is not finite: {result}")
    if args.out:
        model.save_pretrained(args.out)
    print(" ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
