"""Routing replay (R3): routes recorded while generating force a full training forward pass to the
rollout's logprobs, on a tiny GLM-5 (sigmoid router with a selection bias) and a tiny Qwen3-MoE
(softmax router).

Tolerance: the forced pass matches the rollout logprobs within 1e-6 in float32, not bitwise. The
rollout is computed incrementally (a cached prefill, then one token per forward) and the training
pass over the whole sequence at once; CPU matmuls of other shapes round differently in the last
bits (measured: 4.8e-7 at most here). Where both sides run the same shapes the match is bitwise:
a pass forced to its own free routes equals the free pass (torch.equal), and so do a free and a
forced pass up to the first token whose experts differ.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from swedojo.agent.backends.base import Generation, Message, SamplingParams
from swedojo.agent.backends.inprocess import InProcessBackend
from swedojo.agent.backends.routing import (
    NO_EXPERT,
    RoutingRecorder,
    RoutingReplayError,
    find_routers,
    forced_routing,
)
from swedojo.agent.backends.tiny import build_tiny

ARCHS = ("glm_moe_dsa", "qwen3_moe")
ROLLOUT_TOLERANCE = 1e-6


def _rollout(arch: str) -> tuple[InProcessBackend, Generation]:
    """Two turns on a fresh tiny model with routing recorded; the second turn's generation."""
    model, tokenizer = build_tiny(arch, seed=0)
    backend = InProcessBackend(model, tokenizer, name=f"tiny:{arch}", record_routing=True)
    messages = [Message.system("You are a coding agent."), Message.user("The version parser breaks on '1.2.'")]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=40, seed=1)
    first = backend.generate(messages, sampling, conversation_id="r3")
    messages += [first.message(), Message.observation("FAILED tests/test_version.py::test_parse")]
    second = backend.generate(messages, sampling.model_copy(update={"seed": 2}), conversation_id="r3")
    context = first.prompt_token_ids + first.token_ids
    assert second.prompt_token_ids[: len(context)] == context and second.usage.cached_tokens > 0
    assert second.routed_experts[: len(first.routed_experts)] == first.routed_experts  # routes only grow
    return backend, second


def _full_pass(model, sequence: list[int], routes: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(float32 logits, routes taken) of one forward over `sequence[:-1]`, free or forced to `routes`."""
    recorder = RoutingRecorder(model)
    with torch.inference_mode(), recorder.recording():
        with forced_routing(model, routes) if routes is not None else nullcontext():
            logits = model(input_ids=torch.tensor([sequence[:-1]])).logits[0].float()
        return logits, recorder.take(len(sequence) - 1)


def _sampled_logprobs(logits: torch.Tensor, generation: Generation) -> torch.Tensor:
    """Logprobs (temperature 1) of the generation's sampled tokens under full-pass logits."""
    start = len(generation.prompt_token_ids) - 1
    targets = torch.tensor(generation.token_ids)[:, None]
    return torch.log_softmax(logits[start:], dim=-1).gather(1, targets)[:, 0]


def _expert_sets(routes: torch.Tensor) -> torch.Tensor:
    return routes.sort(dim=-1).values


@pytest.fixture(scope="module", params=ARCHS)
def rollout(request) -> tuple[InProcessBackend, Generation]:
    return _rollout(request.param)


def test_recorded_routes_have_slimes_shape(rollout):
    backend, generation = rollout
    routes = torch.tensor(generation.routed_experts)
    fed = len(generation.prompt_token_ids) + len(generation.token_ids) - 1
    config = backend.model.config
    assert tuple(routes.shape) == (fed, config.num_hidden_layers, config.num_experts_per_tok)
    moe_layers = sorted(find_routers(backend.model))
    assert moe_layers and 0 not in moe_layers  # the tiny models' first layer is dense
    assert bool((routes[:, 0] == NO_EXPERT).all())
    assert bool((routes[:, moe_layers] >= 0).all())


def test_forced_pass_reproduces_the_rollout_logprobs(rollout):
    backend, generation = rollout
    sequence = generation.prompt_token_ids + generation.token_ids
    recorded = torch.tensor(generation.routed_experts)
    free, free_routes = _full_pass(backend.model, sequence)
    forced, _ = _full_pass(backend.model, sequence, recorded)
    rollout_logprobs = torch.tensor(generation.logprobs)
    assert (_sampled_logprobs(forced, generation) - rollout_logprobs).abs().max() <= ROLLOUT_TOLERANCE
    # the unperturbed model routes the full pass as the rollout did, and forcing its own routes is bitwise free
    assert torch.equal(_expert_sets(free_routes), _expert_sets(recorded))
    assert torch.equal(free, _full_pass(backend.model, sequence, free_routes)[0])


@pytest.mark.parametrize(("arch", "parameter", "scale"), [
    ("glm_moe_dsa", "e_score_correction_bias", 0.03),
    ("glm_moe_dsa", "weight", 0.2),
    ("qwen3_moe", "weight", 0.2),
])
def test_perturbed_router_free_pass_differs_where_routing_differs(arch, parameter, scale):
    backend, generation = _rollout(arch)
    model = backend.model
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for router in find_routers(model).values():
            tensor = getattr(router, parameter)
            spread = tensor.std() if parameter == "weight" else 1.0
            tensor += scale * spread * torch.randn(tensor.shape, generator=generator)
    sequence = generation.prompt_token_ids + generation.token_ids
    recorded = torch.tensor(generation.routed_experts)
    free, free_routes = _full_pass(model, sequence)
    forced, _ = _full_pass(model, sequence, recorded)

    differs = (_expert_sets(free_routes) != _expert_sets(recorded)).any(dim=-1).any(dim=-1)
    assert differs[len(generation.prompt_token_ids) - 1 :].any(), "no sampled token re-routed: the test shows nothing"
    first = int(differs.nonzero()[0])
    # causal: up to the first re-routed token the two passes are the same computation
    assert torch.equal(free[:first], forced[:first])
    assert (torch.log_softmax(free[first], -1) - torch.log_softmax(forced[first], -1)).abs().max() > 1e-3

    rollout_logprobs = torch.tensor(generation.logprobs)
    forced_gap = (_sampled_logprobs(forced, generation) - rollout_logprobs).abs().max()
    free_gap = (_sampled_logprobs(free, generation) - rollout_logprobs).abs().max()
    if parameter == "e_score_correction_bias":
        # the bias only chooses experts; the forced experts' weights do not see it
        assert forced_gap <= ROLLOUT_TOLERANCE
    else:
        # the router's own (perturbed) probabilities weigh the forced experts: a small drift remains
        assert forced_gap <= 1e-3
    assert free_gap > 10 * forced_gap


def test_forced_routing_refuses_routes_that_do_not_fit(rollout):
    backend, generation = rollout
    sequence = generation.prompt_token_ids + generation.token_ids
    recorded = torch.tensor(generation.routed_experts)
    with pytest.raises(RoutingReplayError, match="routes for"):
        _full_pass(backend.model, sequence, recorded[:-1])
    with pytest.raises(RoutingReplayError, match="do not fit"):
        _full_pass(backend.model, sequence, recorded[:, :1])
    outside = recorded.clone()
    outside[0, -1, 0] = backend.model.config.num_experts_per_tok * 100
    with pytest.raises(RoutingReplayError, match="outside"):
        _full_pass(backend.model, sequence, outside)
    # a forced pass does not leave the routers patched
    free, _ = _full_pass(backend.model, sequence)
    assert torch.equal(free, _full_pass(backend.model, sequence)[0])


def test_an_agent_episodes_exported_routes_replay_its_logprobs(tmp_path):
    """A tiny GLM-5 runs the agent loop on a real repo; the routes the trajectory records, exported as
    `rollout_routed_experts`, force a full pass over the exported tokens to every rollout logprob."""
    from taskrepo import make_task_repo

    from swedojo.agent.loop import AgentConfig, LoopLimits, ModelPolicy
    from swedojo.agent.policies import RunContext
    from swedojo.repos import resolve_repo
    from swedojo.rewards.export import response_tokens, routed_experts
    from swedojo.sandboxes.environment import default_python_env

    mirror, task = make_task_repo(tmp_path)
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")
    model, tokenizer = build_tiny("glm_moe_dsa", seed=0)
    backend = InProcessBackend(model, tokenizer, name="tiny:glm_moe_dsa", record_routing=True)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=24, seed=3)
    policy = ModelPolicy(backend, AgentConfig(limits=LoopLimits(max_steps=3), sampling=sampling))
    with env.open(task.base_commit) as sandbox:
        trajectory = policy.solve(task, sandbox, RunContext(spec=env.spec))
    assert len(trajectory.steps) >= 2 and all(s.prompt_token_ids for s in trajectory.steps[1:])
    response_ids, mask, logprobs = response_tokens(trajectory)
    sequence = trajectory.initial_prompt_token_ids + response_ids
    routes = torch.tensor(routed_experts(trajectory))
    assert routes.shape[0] == len(sequence) - 1
    forced, _ = _full_pass(model, sequence, routes)
    start = len(trajectory.initial_prompt_token_ids) - 1
    replayed = torch.log_softmax(forced[start:], dim=-1).gather(1, torch.tensor(response_ids)[:, None])[:, 0]
    sampled = torch.tensor(mask, dtype=torch.bool)
    assert (replayed[sampled] - torch.tensor(logprobs)[sampled]).abs().max() <= ROLLOUT_TOLERANCE
