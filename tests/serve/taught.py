"""A tiny checkpoint taught to answer one task's prompt with one of two turns, about half each: the
gold fix (a `git apply` of the gold patch) or a look around (`git status`). Its rollouts earn real,
different rewards within a group, which a random tiny model never does.

Teaching fits only the last layer's MoE block, the final norm and the LM head. Everything below
keeps its random weights, so what reaches that block at every position of the two turns is
computed once, and a thousand steps on those features take seconds. The two turns share their
first tokens; where they part (`apply` or `status`), the fitted distribution is about 50/50.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from swedojo.agent.backends import SamplingParams
from swedojo.agent.backends.tiny import build_tiny
from swedojo.agent.base import RunContext
from swedojo.agent.chats import chat_format_for
from swedojo.agent.loop import AgentConfig, ModelPolicy
from swedojo.schema import TaskInstance, ToolCall

WORKDIR = "/testbed"
"""The docker backend's work tree, which the task prompt names."""


def episode_prompt(chat, instance: TaskInstance, tool_set: str) -> list[int]:
    """The first prompt a served episode of `instance` renders (system, task, generation prompt)."""
    teacher = SimpleNamespace(name="teacher", version="")  # `start` only records these
    episode = ModelPolicy(teacher, AgentConfig(tool_set=tool_set)).start(
        instance, SimpleNamespace(workdir=WORKDIR), RunContext())
    sampling = SamplingParams()
    return chat.render(episode.messages, history=sampling.history, thinking=sampling.thinking)


def taught_modules(model: torch.nn.Module) -> tuple[torch.nn.Module, ...]:
    """The modules teaching fits: the last layer's MoE block, the final norm and the LM head."""
    return model.model.layers[-1].mlp, model.model.norm, model.lm_head


def freeze_untaught(model: torch.nn.Module) -> None:
    """Train only what teaching fitted. The fitted head is sharp in the random layers' features, so a
    step that also moves those layers measures how sensitive a random network is, not what GRPO did."""
    model.requires_grad_(False)
    for module in taught_modules(model):
        module.requires_grad_(True)


def taught_checkpoint(directory: Path, instance: TaskInstance, tool_set: str, steps: int = 1000) -> Path:
    """Save the taught model and its tokenizer in `directory`."""
    model, tokenizer = build_tiny("glm_moe_dsa")
    chat = chat_format_for(tokenizer)
    prompt = episode_prompt(chat, instance, tool_set)
    turns = [chat.sampled_ids("", "", [ToolCall(name="bash", arguments={"command": command})], True)
             for command in (f"git apply <<'EOF'\n{instance.patch}EOF", "git status")]
    block, norm, head = taught_modules(model)
    seen: list[tuple[torch.Tensor, ...]] = []
    hooks = [block.register_forward_hook(lambda _m, args, out: seen.append((args[0], out))),
             norm.register_forward_pre_hook(lambda _m, args: seen.append((args[0],)))]
    features = []  # per turn: (the block's input, the residual stream it adds to, the turn's ids)
    start = len(prompt) - 1  # the last prompt position predicts a turn's first token
    with torch.no_grad():
        for turn in turns:
            model(input_ids=torch.tensor([(prompt + turn)[:-1]]))
            (block_in, block_out), (stream,) = seen[-2:]
            features.append((block_in[:, start:], (stream - block_out)[:, start:], torch.tensor(turn)))
    for hook in hooks:
        hook.remove()
    model.requires_grad_(False)
    fitted = [*block.parameters(), *norm.parameters(), *head.parameters()]
    for parameter in fitted:
        parameter.requires_grad_(True)
    optimizer = torch.optim.Adam(fitted, lr=1e-2)
    tokens = sum(len(turn) for turn in turns)
    model.train()
    for _ in range(steps):
        loss = sum(-torch.log_softmax(head(norm(stream + block(block_in)))[0].float(), -1).gather(-1, ids[:, None]).sum()
                   for block_in, stream, ids in features) / tokens
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval().requires_grad_(True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
