"""Concurrent episodes on one in-process model, their decode steps batched: each episode gets the
logits, tokens and routes it would get alone.

Tolerance: a batched step's logits equal the unbatched step's within 1e-5 in float32, not bitwise.
Each row's attention runs on its own cache with the unbatched shapes (no padding, no mask), but the
projections, experts and LM head multiply a [rows, hidden] matrix instead of a [1, hidden] one, and
CPU matmul kernels block and accumulate differently for other shapes (measured: 2.4e-7 at most on
logits of order 1, a few float32 ulps). That is far below what moves a sampled token or an expert
choice, so tokens sampled with the same seed and the recorded routes are compared exactly.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
import torch

from swedojo.agent.backends.base import (
    Generation,
    Message,
    SamplingParams,
    ThinkingHistory,
)
from swedojo.agent.backends.inprocess import InProcessBackend
from swedojo.agent.backends.tiny import TINY_ARCHS, build_tiny

ATOL = 1e-5
EPISODES = 3
TURNS = 3


def _backend(arch: str, **options) -> InProcessBackend:
    model, tokenizer = build_tiny(arch, seed=0)
    return InProcessBackend(model, tokenizer, name=f"tiny:{arch}", record_routing=True, **options)


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_batched_decode_logits_equal_single_episode_logits(arch):
    backend = _backend(arch, max_conversations=2 * EPISODES)
    generator = torch.Generator().manual_seed(0)
    # different lengths; one shorter than GLM-5's index top-k (it selects every key)
    prompts = [torch.randint(0, 400, (n,), generator=generator).tolist() for n in (30, 57, 11)]
    for k, prompt in enumerate(prompts):
        backend.next_token_logits(prompt, conversation_id=f"alone-{k}")
        backend.next_token_logits(prompt, conversation_id=f"batched-{k}")
    for _ in range(8):
        tokens = [int(t) for t in torch.randint(0, 400, (EPISODES,), generator=generator)]
        batched = backend.decode_logits({f"batched-{k}": token for k, token in enumerate(tokens)})
        for k, token in enumerate(tokens):
            alone = backend.decode_logits({f"alone-{k}": token})[f"alone-{k}"]
            torch.testing.assert_close(batched[f"batched-{k}"], alone, atol=ATOL, rtol=0)
    for k, prompt in enumerate(prompts):
        assert backend.cached_ids(f"batched-{k}") == backend.cached_ids(f"alone-{k}")
        assert len(backend.cached_ids(f"batched-{k}")) == len(prompt) + 8
        # routes recorded per row land in their own episode, token for token
        alone, batched = (backend._conversations[f"{kind}-{k}"].routes for kind in ("alone", "batched"))
        assert torch.equal(torch.cat(batched), torch.cat(alone))


def _episode(backend: InProcessBackend, index: int, start: Barrier | None) -> list[Generation]:
    """A few turns of one episode; the last episode re-renders history (interleaved thinking, user
    follow-ups drop earlier reasoning), so its cache is cropped between turns."""
    interleaved = index == EPISODES - 1
    history = ThinkingHistory.INTERLEAVED if interleaved else ThinkingHistory.PRESERVED
    messages = [Message.system("You are a coding agent."), Message.user(f"Episode {index}: the parser breaks on '1.{index}.'")]
    generations = []
    if start:
        start.wait()
    for turn in range(TURNS):
        params = SamplingParams(temperature=1.0, max_new_tokens=24 + 8 * index, seed=100 * index + turn, history=history)
        generation = backend.generate(messages, params, conversation_id=f"episode-{index}")
        generations.append(generation)
        reply = Message.user(f"Still failing ({turn})") if interleaved else Message.observation(f"FAILED test_{turn}")
        messages = [*messages, generation.message(), reply]
    return generations


@pytest.mark.parametrize("arch", ["glm_moe_dsa", "qwen3_moe"])
def test_concurrent_episodes_sample_what_they_would_alone(arch):
    alone = _backend(arch)
    assert alone.scheduler is None  # one episode at a time: the unbatched path
    expected = [_episode(alone, index, None) for index in range(EPISODES)]

    batched = _backend(arch, decode_batch=EPISODES)
    start = Barrier(EPISODES)
    try:
        with ThreadPoolExecutor(EPISODES) as pool:
            got = list(pool.map(lambda index: _episode(batched, index, start), range(EPISODES)))
    finally:
        batched.close()
    assert max(batched.scheduler.batch_sizes) > 1, "no decode step was batched: the test shows nothing"

    for index, (mine, theirs) in enumerate(zip(got, expected)):
        for turn, (generation, reference) in enumerate(zip(mine, theirs)):
            assert generation.prompt_token_ids == reference.prompt_token_ids
            assert generation.token_ids == reference.token_ids, f"episode {index} turn {turn}"
            assert max(abs(a - b) for a, b in zip(generation.logprobs, reference.logprobs)) <= ATOL
            assert generation.routed_experts == reference.routed_experts
            assert len(generation.routed_experts) == len(generation.prompt_token_ids) + len(generation.token_ids) - 1
            if turn:
                assert generation.usage.cached_tokens > 0
        last = mine[-1]
        assert batched.cached_ids(f"episode-{index}") == last.prompt_token_ids + last.token_ids[:-1]
    # the interleaved episode's earlier reasoning was dropped: its later prompts re-render, not extend
    interleaved = got[-1]
    assert interleaved[1].prompt_token_ids[: len(interleaved[0].prompt_token_ids) + len(interleaved[0].token_ids)] != (
        interleaved[0].prompt_token_ids + interleaved[0].token_ids
    )


def test_a_failed_batch_fails_its_episodes_only_and_the_backend_goes_on():
    backend = _backend("qwen3_moe", decode_batch=EPISODES)
    failures = []

    def fail_first_batch(module, inputs):
        if inputs[0].shape[0] > 1 and not failures:
            failures.append(inputs[0].shape[0])
            raise RuntimeError("injected failure")

    handle = backend.model.lm_head.register_forward_pre_hook(fail_first_batch)
    start = Barrier(EPISODES)

    def one_turn(index: int) -> str:
        start.wait()
        messages = [Message.system("You are a coding agent."), Message.user(f"Episode {index}")]
        try:
            backend.generate(messages, SamplingParams(max_new_tokens=30, seed=index), conversation_id=f"e{index}")
        except RuntimeError as error:
            return str(error)
        return "ok"

    try:
        with ThreadPoolExecutor(EPISODES) as pool:
            outcomes = list(pool.map(one_turn, range(EPISODES)))
        assert failures and outcomes.count("injected failure") == failures[0]
        for index, outcome in enumerate(outcomes):  # a failed episode's half-fed cache is dropped
            assert (backend.cached_ids(f"e{index}") == []) == (outcome != "ok")
        handle.remove()
        again = backend.generate([Message.user("again")], SamplingParams(max_new_tokens=5, seed=0), conversation_id="e0")
        assert again.token_ids
    finally:
        handle.remove()
        backend.close()
