"""Retained KV cache: cached, incremental logits equal a full recompute, for every tiny architecture."""

from __future__ import annotations

import pytest
import torch

from swedojo.agent.backends.base import Message, SamplingParams, ThinkingHistory
from swedojo.agent.backends.dsa import (
    AbsorbedDecodeGlmMoeDsaAttention,
    DeterministicGlmMoeDsaIndexer,
    deterministic_topk,
)
from swedojo.agent.backends.inprocess import (
    CheckpointMismatchError,
    ContextLengthError,
    EmptyPromptError,
    InProcessBackend,
    weights_version,
)
from swedojo.agent.backends.tiny import build_tiny
from swedojo.schema import Step

ATOL = 1e-4
OBSERVATION = "FAILED tests/test_version.py::test_parse - ValueError: invalid literal for int()"


def _full_logits(backend: InProcessBackend, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return backend.model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def _conversation(backend: InProcessBackend, conversation_id: str, turns: int, **params):
    """Run `turns` generate calls on a growing conversation; yield (messages, generation)."""
    messages = [Message.system("You are a coding agent."), Message.user("The version parser breaks on '1.2.'")]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, **params)
    for turn in range(turns):
        generation = backend.generate(messages, sampling.model_copy(update={"seed": turn}), conversation_id=conversation_id)
        yield messages, generation
        messages = [*messages, generation.message(), Message.observation(f"{OBSERVATION} #{turn}")]


def test_cached_turns_match_full_recompute(backend):
    conversation_id = f"exact-{backend.name}"
    backend.release(conversation_id)
    for turn, (messages, generation) in enumerate(_conversation(backend, conversation_id, turns=4)):
        if turn:
            assert generation.usage.cached_tokens > 0
            assert generation.usage.prefill_tokens < 40  # only the new observation and markers
        prompt = backend.chat.render([*messages, generation.message(), Message.observation("next")])
        cached = backend.next_token_logits(prompt, conversation_id=conversation_id)
        torch.testing.assert_close(cached, _full_logits(backend, prompt), atol=ATOL, rtol=0)
    if backend.model.config.model_type == "glm_moe_dsa":
        assert len(prompt) > 4 * backend.model.config.index_topk  # the sparse (top-k < context) case


def test_decode_step_logits_match_full_recompute(backend):
    """The logits of the last single-token decode step (kept by the backend) equal a full recompute."""
    conversation_id = f"decode-{backend.name}"
    backend.release(conversation_id)
    *_, (_, generation) = _conversation(backend, conversation_id, turns=2)
    fed = generation.prompt_token_ids + generation.token_ids[:-1]
    assert backend.cached_ids(conversation_id) == fed
    stored = backend.next_token_logits(fed, conversation_id=conversation_id)
    torch.testing.assert_close(stored, _full_logits(backend, fed), atol=ATOL, rtol=0)


def test_glm5_layers_are_patched(tiny):
    model = tiny("glm_moe_dsa").model
    indexers = [m for m in model.modules() if type(m).__name__.endswith("Indexer")]
    attentions = [m for m in model.modules() if type(m).__name__.endswith("Attention")]
    assert indexers and all(isinstance(m, DeterministicGlmMoeDsaIndexer) for m in indexers)
    assert attentions and all(isinstance(m, AbsorbedDecodeGlmMoeDsaAttention) for m in attentions)


def test_deterministic_topk_ignores_masked_columns_and_breaks_ties_by_position():
    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(-2, 3, (6, 40), generator=generator).float()  # many exact ties
    k = 9
    chosen = deterministic_topk(scores, k)
    # Reference: stable sort by value (descending), i.e. earliest position first among ties.
    reference = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]
    assert torch.equal(chosen.sort(dim=-1).values, reference.sort(dim=-1).values)
    padded = torch.cat([scores, torch.full((6, 80), float("-inf"))], dim=-1)  # a longer, masked row
    assert torch.equal(deterministic_topk(padded, k).sort(dim=-1).values, chosen.sort(dim=-1).values)


def test_changed_earlier_token_crops_cache_and_matches_fresh_run(tiny):
    backend = tiny("glm_moe_dsa")
    conversation_id = "crop"
    backend.release(conversation_id)
    *_, (messages, last) = _conversation(backend, conversation_id, turns=3)
    history = [*messages, last.message(), Message.observation("ok")]
    original = backend.chat.render(history)
    backend.next_token_logits(original, conversation_id=conversation_id)
    assert backend.cached_ids(conversation_id) == original

    edited = list(history)
    edited[1] = Message.user("The version parser breaks on '1.3.'")  # one early token differs
    prompt = backend.chat.render(edited)
    divergence = next(i for i, (a, b) in enumerate(zip(original, prompt)) if a != b)
    generation = backend.generate(edited, SamplingParams(temperature=0, max_new_tokens=1), conversation_id=conversation_id)
    assert generation.usage.cached_tokens == divergence
    assert generation.usage.prefill_tokens == len(prompt) - divergence
    assert backend.cached_ids(conversation_id)[: len(prompt)] == prompt

    cropped = backend.next_token_logits(prompt, conversation_id=conversation_id)
    fresh = backend.next_token_logits(prompt, conversation_id="crop-fresh")
    torch.testing.assert_close(cropped, fresh, atol=1e-5, rtol=0)
    torch.testing.assert_close(cropped, _full_logits(backend, prompt), atol=ATOL, rtol=0)


def test_token_in_token_out_prompts_extend_previous_turn_exactly(tiny):
    backend = tiny("glm4_moe")
    chat = backend.chat
    conversation_id = "tito"
    backend.release(conversation_id)
    messages = [Message.system("agent"), Message.user("fix it")]
    previous: list[int] | None = None
    retokenised_differs = False
    for turn in range(5):
        generation = backend.generate(messages, SamplingParams(max_new_tokens=16, seed=turn), conversation_id=conversation_id)
        prompt = generation.prompt_token_ids
        if previous is not None:
            assert prompt[: len(previous)] == previous
        sampled = generation.token_ids
        assert len(generation.logprobs) == len(sampled) and all(lp <= 0 for lp in generation.logprobs)
        Step(index=turn, response_token_ids=sampled, response_logprobs=generation.logprobs, usage=generation.usage.model_dump(exclude={"cost_usd"}))
        retokenised_differs |= chat.encode(generation.text, special=True) != [t for t in sampled if t not in chat.stop_token_ids]
        # The model's own stop token decides which message comes next, as in the agent loop.
        if sampled[-1] == chat.ids["<|user|>"]:
            nxt = Message.user("go on")
        elif sampled[-1] == chat.ids["<|endoftext|>"]:
            sampled = sampled[:-1]  # end of text is never rendered in history
            nxt = Message.user("go on")
        else:
            nxt = Message.observation(f"exit code {turn}")
        messages = [*messages, generation.message(), nxt]
        previous = prompt + sampled
    assert retokenised_differs  # why the ids must be carried, not the text


def test_interleaved_history_crops_at_new_user_message_and_stays_exact(tiny):
    backend = tiny("qwen3_moe")
    conversation_id = "interleaved"
    backend.release(conversation_id)
    params = SamplingParams(max_new_tokens=10, seed=3, history=ThinkingHistory.INTERLEAVED)
    messages = [Message.user("first")]
    generation = backend.generate(messages, params, conversation_id=conversation_id)
    messages = [*messages, generation.message().model_copy(update={"reasoning": "thought"}), Message.user("second")]
    prompt = backend.chat.render(messages, history=ThinkingHistory.INTERLEAVED)
    assert prompt[: len(generation.prompt_token_ids) + 1] != generation.prompt_token_ids + generation.token_ids[:1]
    second = backend.generate(messages, params, conversation_id=conversation_id)
    assert second.usage.cached_tokens == len(generation.prompt_token_ids) - 1  # up to the dropped thinking
    logits = backend.next_token_logits(second.prompt_token_ids, conversation_id="interleaved-check")
    torch.testing.assert_close(logits, _full_logits(backend, second.prompt_token_ids), atol=ATOL, rtol=0)


def test_thinking_off_turn(tiny):
    backend = tiny("mixtral")
    generation = backend.generate([Message.user("hi")], SamplingParams(thinking=False, max_new_tokens=8, seed=0), conversation_id="nothink")
    assert generation.prompt_token_ids[-2:] == backend.chat.generation_prompt(False)
    assert generation.reasoning == "" and not generation.thinking
    assert generation.message().thinking is False


def test_sampling_is_seeded_and_logprobs_follow_temperature(tiny):
    backend = tiny("glm_moe_dsa")
    messages = [Message.user("hello")]
    params = SamplingParams(temperature=0.7, top_k=50, top_p=0.9, max_new_tokens=6, seed=11)
    first = backend.generate(messages, params, conversation_id="seed-a")
    again = backend.generate(messages, params, conversation_id="seed-b")
    assert first.token_ids == again.token_ids and first.logprobs == again.logprobs
    logits = backend.next_token_logits(first.prompt_token_ids, conversation_id="seed-c")
    expected = torch.log_softmax(logits / 0.7, dim=-1)[first.token_ids[0]]
    assert abs(first.logprobs[0] - float(expected)) < 1e-5
    assert first.logprob_kind.value == "temperature"

    greedy = backend.generate(messages, SamplingParams(temperature=0, max_new_tokens=1), conversation_id="seed-c")
    assert greedy.token_ids == [int(torch.argmax(logits))] and greedy.logprob_kind.value == "raw"
    top1 = backend.generate(messages, SamplingParams(top_k=1, max_new_tokens=1, seed=5), conversation_id="seed-c")
    assert top1.token_ids == greedy.token_ids


def test_stop_string_and_length_limits(tiny):
    backend = tiny("glm4_moe")
    messages = [Message.user("hello")]
    free = backend.generate(messages, SamplingParams(max_new_tokens=20, seed=2), conversation_id="stops")
    assert free.finish_reason.value == "length" and len(free.token_ids) == 20
    stop = backend.chat.decode(free.token_ids[4:6])
    stopped = backend.generate(messages, SamplingParams(max_new_tokens=20, seed=2, stop=[stop]), conversation_id="stops")
    assert stopped.finish_reason.value == "stop"
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)] and len(stopped.token_ids) <= 6
    assert stop in stopped.text


def test_retain_cache_off_prefills_everything(tiny):
    model = tiny("qwen3_moe").model
    backend = InProcessBackend(model, tiny("qwen3_moe").chat.tokenizer, retain_cache=False)
    messages = [Message.user("hello")]
    params = SamplingParams(max_new_tokens=4, seed=0)
    first = backend.generate(messages, params)
    second = backend.generate([*messages, first.message(), Message.observation("x")], params)
    assert second.usage.cached_tokens == 0 and second.usage.prefill_tokens == second.usage.prompt_tokens


def test_chunked_prefill_matches_full_recompute_and_context_is_bounded(tiny):
    shared = tiny("glm_moe_dsa")
    backend = InProcessBackend(shared.model, shared.chat.tokenizer, prefill_chunk=7)
    prompt = shared.chat.render([Message.system("agent"), Message.user(OBSERVATION * 2)])
    assert len(prompt) > 4 * 7
    torch.testing.assert_close(backend.next_token_logits(prompt), _full_logits(backend, prompt), atol=ATOL, rtol=0)
    backend.context_length = len(prompt)
    with pytest.raises(ContextLengthError):
        backend.generate([Message.system("agent"), Message.user(OBSERVATION * 2)], SamplingParams())
    with pytest.raises(EmptyPromptError):
        backend.generate_ids([], SamplingParams())


def test_loaded_weights_replace_the_models_in_place_and_no_cache_outlives_them(tmp_path):
    model, tokenizer = build_tiny("glm_moe_dsa")
    backend = InProcessBackend(model, tokenizer)
    *_, (messages, generation) = _conversation(backend, "before", turns=1)
    stepped, _ = build_tiny("glm_moe_dsa", seed=1)  # the same architecture, other weights
    stepped.save_pretrained(tmp_path / "stepped")
    assert backend.load_weights(tmp_path / "stepped") == weights_version(stepped) == backend.version
    prompt = backend.chat.render([*messages, generation.message(), Message.observation("next")])
    logits = backend.next_token_logits(prompt, conversation_id="before")  # prefilled again: no old keys
    assert backend.cached_ids("before") == prompt
    torch.testing.assert_close(logits, _full_logits(backend, prompt), atol=ATOL, rtol=0)
    other, _ = build_tiny("qwen3_moe")
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(CheckpointMismatchError, match="no parameter"):
        backend.load_weights(tmp_path / "other")
    assert backend.version == weights_version(stepped)  # nothing copied
