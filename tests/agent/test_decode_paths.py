"""The backend's faster paths give the logits of the plain ones: growable cache, one-token attention
and experts, blocked DSA prefill."""

from __future__ import annotations

import types

import pytest
import torch
from transformers.integrations.moe import grouped_mm_experts_forward
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from swedojo.agent.backends import dsa
from swedojo.agent.backends.inprocess import (
    ATTENTION,
    MIN_ROOM,
    GrowableCache,
    GrowableIndexedLayer,
    GrowableLayer,
    InProcessBackend,
    append_with_room,
    single_token_attention,
    single_token_experts,
)
from swedojo.agent.backends.tiny import build_tiny

ATOL = 1e-4


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(20, 300, (1, n), generator=torch.Generator().manual_seed(seed))


def test_append_with_room_grows_geometrically_and_keeps_views():
    rows = [torch.randn(1, 2, 1, 4) for _ in range(MIN_ROOM + 5)]
    for transposed in (False, True):
        view, room = torch.empty(0), None
        rooms = set()
        for row in rows:
            view, room = append_with_room(view, room, row, transposed=transposed)
            rooms.add(room.data_ptr())
        assert view.shape == (1, 2, MIN_ROOM + 5, 4) and room.shape[-2] == 2 * (MIN_ROOM + 1)
        assert len(rooms) == 2  # one reallocation past the first room
        assert torch.equal(view, torch.cat(rows, dim=-2))
        assert (view.transpose(-1, -2).stride(-1) == 1) == transposed


def test_growable_cache_past_capacity_and_crop_matches_full_forward(backend):
    """Prefill, decode past the first room, crop, prefill again: logits equal one full forward."""
    model = backend.model
    ids = _ids(MIN_ROOM + 90)
    cache = GrowableCache(model.config, transposed_keys=backend.transposed_keys)
    kinds = {type(layer) for layer in cache.layers}
    assert kinds <= {GrowableLayer, GrowableIndexedLayer}
    with torch.inference_mode():
        model(input_ids=ids[:, :100], cache=cache, use_cache=True)
        first_room = cache.layers[-1]._key_room.shape[-2]
        for position in range(100, MIN_ROOM + 40):  # one token at a time, past the first room
            model(input_ids=ids[:, position : position + 1], cache=cache, use_cache=True)
        assert cache.layers[-1]._key_room.shape[-2] > first_room
        cache.crop(-30)  # as the backend does when a prompt diverges
        assert cache.get_seq_length() == MIN_ROOM + 10
        logits = model(input_ids=ids[:, MIN_ROOM + 10 :], cache=cache, use_cache=True).logits[0, -1]
        full = model(input_ids=ids).logits[0, -1]
    torch.testing.assert_close(logits, full, atol=ATOL, rtol=0)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_single_token_attention_matches_sdpa(transposed, mask):
    generator = torch.Generator().manual_seed(1)
    module = types.SimpleNamespace(num_key_value_groups=2, is_causal=True, training=False)
    query = torch.randn(2, 4, 1, 8, generator=generator)
    keys, values = torch.randn(2, 2, 37, 8, generator=generator), torch.randn(2, 2, 37, 8, generator=generator)
    if transposed:
        keys = keys.transpose(-1, -2).contiguous().transpose(-1, -2)
    visible = torch.rand(2, 1, 1, 37, generator=generator) > 0.3
    attention_mask = {None: None, "bool": visible, "float": torch.zeros(visible.shape).masked_fill(~visible, -1e9)}[mask]
    ours, _ = single_token_attention(module, query, keys, values, attention_mask, scaling=0.3)
    reference, _ = sdpa_attention_forward(module, query, keys.contiguous(), values, attention_mask, scaling=0.3)
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)


def test_single_token_experts_match_grouped_mm(tiny):
    experts = next(m for m in tiny("glm4_moe").model.modules() if hasattr(m, "gate_up_proj"))
    generator = torch.Generator().manual_seed(2)
    hidden = torch.randn(1, experts.hidden_dim, generator=generator)
    index = torch.tensor([[3, 1]])
    weights = torch.rand(1, 2, generator=generator)
    with torch.inference_mode():
        ours = single_token_experts(experts, hidden, index, weights)
        reference = grouped_mm_experts_forward(experts, hidden, index, weights)
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)


def test_dsa_blocked_prefill_matches_one_block(tiny, monkeypatch):
    model = tiny("glm_moe_dsa").model
    ids = _ids(150, seed=3)
    assert ids.shape[1] > 4 * model.config.index_topk  # sparse: each query keeps a fraction of the keys
    with torch.inference_mode():
        blocked = model(input_ids=ids).logits[0]
        monkeypatch.setattr(dsa, "QUERY_BLOCK", 1 << 20)
        whole = model(input_ids=ids).logits[0]
    torch.testing.assert_close(blocked, whole, atol=ATOL, rtol=0)


def test_backend_preparation_is_idempotent():
    """A second backend on the same model keeps GLM-5 on its own attention paths and the others on `ATTENTION`."""
    for arch, attention in (("glm_moe_dsa", "sdpa"), ("glm4_moe", ATTENTION)):
        model, tokenizer = build_tiny(arch)
        first, second = InProcessBackend(model, tokenizer), InProcessBackend(model, tokenizer)
        assert model.config._attn_implementation == attention
        assert first.transposed_keys == second.transposed_keys == (attention == ATTENTION)
