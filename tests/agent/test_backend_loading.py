"""`load_backend` specs, tiny checkpoints saved and loaded like real ones, and the scripted backend."""

from __future__ import annotations

import json

import pytest
import torch

from swedojo.agent.backends import (
    Message,
    ModelBackend,
    SamplingParams,
    UnknownBackendSpecError,
    load_backend,
)
from swedojo.agent.backends.inprocess import CheckpointNotFoundError, InProcessBackend
from swedojo.agent.backends.scripted import (
    ScriptedBackend,
    ScriptExhaustedError,
    ScriptFileError,
)
from swedojo.agent.backends.tiny import (
    TINY_ARCHS,
    UnknownTinyArchError,
    build_tiny,
    build_tokenizer,
    save_tiny,
)
from swedojo.schema import ToolCall


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_saved_tiny_checkpoint_loads_through_auto_classes(arch, tmp_path, tiny):
    save_tiny(arch, tmp_path)
    loaded = load_backend(str(tmp_path))
    assert isinstance(loaded, InProcessBackend) and isinstance(loaded, ModelBackend)
    assert type(loaded.chat.tokenizer).__name__ in ("PreTrainedTokenizerFast", "TokenizersBackend")
    reference = tiny(arch)
    assert loaded.chat.ids == reference.chat.ids
    prompt = reference.chat.render([Message.user("round trip")])
    torch.testing.assert_close(
        loaded.next_token_logits(prompt), reference.next_token_logits(prompt, conversation_id="roundtrip"), atol=1e-6, rtol=0
    )
    generation = loaded.generate([Message.user("round trip")], SamplingParams(max_new_tokens=3, seed=0))
    assert len(generation.token_ids) == 3


def test_tiny_models_are_reproducible_and_small():
    first, tokenizer = build_tiny("glm_moe_dsa", seed=7)
    second, _ = build_tiny("glm_moe_dsa", seed=7)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    assert sum(p.numel() * p.element_size() for p in first.parameters()) < 8 * 2**20
    assert build_tokenizer().get_vocab() == tokenizer.get_vocab()


def test_unknown_specs_fail_with_their_own_errors(tmp_path):
    with pytest.raises(UnknownBackendSpecError):
        load_backend("no/such/dir")
    with pytest.raises(UnknownTinyArchError):
        load_backend("tiny:llama")
    with pytest.raises(CheckpointNotFoundError):
        InProcessBackend.from_pretrained(tmp_path)
    with pytest.raises(ScriptFileError):
        load_backend(f"scripted:{tmp_path / 'missing.json'}")
    (tmp_path / "numbers.json").write_text("[1, 2]")
    with pytest.raises(ScriptFileError):
        load_backend(f"scripted:{tmp_path / 'numbers.json'}")


def test_scripted_backend_with_tokenizer_carries_token_ids(tmp_path):
    script = tmp_path / "script.jsonl"
    lines = [
        {"reasoning": "list files", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
        "<think>all good</think>Done.",
    ]
    script.write_text("\n".join(json.dumps(line) for line in lines))
    backend = load_backend(f"scripted:{script}")
    assert isinstance(backend, ScriptedBackend)
    chat = backend.chat
    messages = [Message.user("fix it")]
    first = backend.generate(messages, SamplingParams())
    assert first.reasoning == "list files"
    assert first.content == "<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>"
    assert first.token_ids[-1] == chat.ids["<|observation|>"] and first.logprobs == [0.0] * len(first.token_ids)
    assert first.prompt_token_ids == chat.render(messages)
    messages += [first.message(), Message.observation("a.py")]
    second = backend.generate(messages, SamplingParams())
    assert (second.reasoning, second.content) == ("all good", "Done.")
    assert second.token_ids[-1] == chat.ids["<|user|>"]
    assert second.prompt_token_ids[: len(first.prompt_token_ids) + len(first.token_ids)] == first.prompt_token_ids + first.token_ids
    with pytest.raises(ScriptExhaustedError):
        backend.generate(messages, SamplingParams())
    assert backend.generate(messages, SamplingParams(), conversation_id="other").reasoning == "list files"


def test_scripted_backend_text_only():
    call = ToolCall(name="bash", arguments={"command": "ls"}, call_id="c1")
    backend = ScriptedBackend([{"content": "run", "tool_calls": [call.model_dump()]}])
    generation = backend.generate([Message.user("x")], SamplingParams())
    assert generation.tool_calls == [call] and generation.token_ids == [] and generation.logprob_kind.value == "none"
