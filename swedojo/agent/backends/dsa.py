"""GLM-5 (DSA) with a retained KV cache: an exact (deterministic) indexer top-k, sparse absorbed
decoding and blocked prefill.

1. Exactness.

Root cause of cached logits differing from a full recompute (~0.1-0.4 on tiny random weights when
`index_topk` is smaller than the context, exact when it covers it), read in transformers 5.24's
`GlmMoeDsaIndexer.forward`:

- The index score of key t for a query is `sum_h w_h * relu(q_h . k_t)`. Whenever every head's dot
  product is negative the score is exactly 0.0, so many keys tie, and for queries whose head
  weights are all negative those zeros are the *largest* scores, straddling the top-k boundary.
- `index_scores.topk(k)` breaks ties in an unspecified order that depends on the tensor's shape:
  a row of a [S, T] score matrix has T = 40 columns in a 40-token chunk and T = 120 in a 120-token
  full pass (the extra columns are the masked future, -inf), and torch's CPU top-k picks different
  members of the tie for different T although the visible scores are bitwise equal. Measured: at
  layer 0, where the inputs are identical, rows 25, 34, 35 of a 120-token sequence selected
  different keys in a 40-token prefill than in the full pass (e.g. {3, 4} vs {0, 5}, all scored 0.0).
  A different selection changes the attention output, hence the next layer's hidden states, the
  cached keys, and every later logit.
- Checked and not at fault: the indexer key cache (`DynamicIndexedLayer.update_indexer` concatenates
  and `crop` trims it with the attention cache) and the causal mask for a multi-token prefill with a
  cache (`create_causal_mask` gives [B, 1, S, past + S]; the indexer masks future keys to -inf). Rows
  with fewer visible keys than k also pick masked keys, but the causal mask keeps those masked.

Fix: select by value, then break ties by position (earliest first), which depends only on the
scores of visible keys. The set of the k largest values is unique, so its smallest member (the
k-th value) is too; keep every score above it and the earliest ties equal to it.

What it cannot remove: two *different* scores within float rounding of each other at the boundary.
A cached step and a full pass round differently (matmul blocking depends on the shapes), so such
a near-tie can still flip. Measured over a 15-turn tiny-model conversation: of 870 decode-step
selections, 63 had exact ties at the boundary (now deterministic) and 2 had relative gaps under
2e-6; in the 40-turn benchmark such a flip moves a sampled token's logprob by 2e-3 to 3e-3. Only
batch-invariant kernels (or float64) would close that.

2. Decode speed. The MLA cache holds compressed latents c_t (kv_lora_rank wide). Upstream's
eager/SDPA path expands the whole cache through `kv_b_proj` into per-head keys and values on
every forward, so one decoded token costs O(T * heads * (d_nope + d_v) * kv_lora_rank) per layer:
as much as re-prefilling the history's linear part every few tokens. For single-token steps we
absorb `kv_b_proj` into the query and the output instead (as serving engines do):
q.k_t = (W_uk^T q_nope).c_t + q_rope.k_rope_t and out = W_uv (sum_t p_t c_t), which is the same
attention, reordered; and only the k selected latents are gathered and attended (the others have
probability zero anyway), so the attention costs O(k * heads * kv_lora_rank) whatever the context
length. What stays O(T) per step is the indexer itself (T * index_heads * index_head_dim).

3. Multi-token speed (prefill). Upstream scores the indexer for all S queries at once, broadcasting
the keys to every query (a copy of S*T*D floats), and attends with an [S, T] mask. We do both one
block of `QUERY_BLOCK` queries at a time: a block only scores and attends the keys up to its own
last position (later ones are causally masked for the whole block, which skips the upper half of
a prompt's attention), and its intermediates stay small. That matters on CPU beyond cache
locality: a tensor over ~32 MB is a fresh mmap each time, and its page faults cost more than the
arithmetic on it (measured: a [1024, 12k] matmul output took 55 ms freshly allocated, 18 ms
reused). The top-k stays row by row as in section 1, so blocking breaks no tie differently
(the float near-ties of section 1 remain).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import (
    GlmMoeDsaAttention,
    GlmMoeDsaIndexer,
    apply_rotary_pos_emb_interleave,
)

from swedojo.agent.backends.batching import RowCaches

QUERY_BLOCK = 64
"""Queries scored and attended together in a multi-token forward (see section 3)."""


def deterministic_topk(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest scores along the last dim, ties broken by position (earliest first).

    Rows whose k-th and (k+1)-th largest values differ have a unique answer, which plain top-k
    gives; only the others (ties straddling the boundary) are redone by position. An unsorted
    top-(k+1) finds those rows (its smallest value occurs twice) without sorting or another pass
    over the scores; elsewhere dropping that smallest value leaves the top k.
    """
    length = scores.shape[-1]
    if k >= length:  # every key is selected
        return torch.arange(length, device=scores.device).expand(*scores.shape[:-1], length)
    values, indices = scores.topk(k + 1, dim=-1, sorted=False)
    smallest, position = values.min(dim=-1, keepdim=True)
    ambiguous = (values == smallest).sum(dim=-1) > 1
    keep = torch.ones_like(values, dtype=torch.bool).scatter_(-1, position, False)
    indices = indices[keep].view(*scores.shape[:-1], k)
    if bool(ambiguous.any()):
        rows, row_kth = scores[ambiguous], smallest[ambiguous]  # tied: the k-th value is the smallest
        above = rows > row_kth
        tied = rows == row_kth
        missing = k - above.sum(dim=-1, keepdim=True)
        chosen = above | (tied & (tied.cumsum(dim=-1) <= missing))
        indices[ambiguous] = chosen.nonzero()[:, 1].view(-1, k)  # exactly k per row, in position order
    return indices


class DeterministicGlmMoeDsaIndexer(GlmMoeDsaIndexer):
    """`GlmMoeDsaIndexer` whose top-k does not depend on how the sequence was chunked."""

    @torch.no_grad()
    def forward(
        self,
        hidden_states: torch.Tensor,
        q_resid: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache=None,
    ) -> torch.Tensor:
        # Upstream's scores (transformers 5.24) in a cheaper order (section 3): per block of queries,
        # one [b*H, D] x [D, T] matmul (upstream broadcasts the keys to every query first, a copy of
        # S*T*D floats), ReLU in place, and the positive softmax scale moved from the scores onto
        # the [S, H] head weights.
        batch_size, seq_len, _ = hidden_states.shape
        cos, sin = position_embeddings
        q = self.wq_b(q_resid).view(batch_size, seq_len, self.n_heads, self.head_dim)
        q_rot, q_pass = torch.split(q, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
        k = self.k_norm(self.wk(hidden_states)).unsqueeze(2)
        k_rot, k_pass = torch.split(k, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = torch.cat([q_rot, q_pass], dim=-1).float()
        k = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
        if cache is not None:
            k = cache.update_indexer(k, self.layer_idx)
        keys = k.float().transpose(-1, -2)  # with a cache: a view of its keys, stored transposed
        length, past = keys.shape[-1], keys.shape[-1] - seq_len
        weights = self.weights_proj(hidden_states.to(self.weights_proj.weight.dtype)).float()
        weights = weights * (self.n_heads**-0.5 * self.softmax_scale)
        picks = []
        for start in range(0, seq_len, QUERY_BLOCK):
            stop = min(seq_len, start + QUERY_BLOCK)
            # Later keys are causally masked for the whole block; the earliest k positions stay, as
            # rows that see fewer than k keys select them (masked ties, broken by position).
            width = min(length, max(past + stop, self.index_topk))
            rows = (stop - start) * self.n_heads
            scores = torch.matmul(q[:, start:stop].reshape(batch_size, rows, -1), keys[..., :width]).relu_()
            scores = scores.view(batch_size, stop - start, self.n_heads, width)
            index_scores = torch.matmul(weights[:, start:stop].unsqueeze(-2), scores).squeeze(-2)
            mask = attention_mask[:, start:stop, :width]
            if mask.dtype == torch.bool:
                index_scores.masked_fill_(~mask, float("-inf"))
            else:
                index_scores += mask
            picks.append(deterministic_topk(index_scores, self.index_topk))
        return torch.cat(picks, dim=1).to(torch.int32)


def _select(states: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Rows of single-head `states` [B, 1, T, d] at `indices` [B, S, k]: [B, S, k, d]. index_select
    copies whole rows; a gather with indices expanded over d, the batched equivalent, is ten times
    slower here."""
    rows = [row[0].index_select(0, chosen.reshape(-1)).view(*chosen.shape, -1) for row, chosen in zip(states, indices)]
    return rows[0].unsqueeze(0) if len(rows) == 1 else torch.stack(rows)


class AbsorbedDecodeGlmMoeDsaAttention(GlmMoeDsaAttention):
    """`GlmMoeDsaAttention` that decodes single tokens against the latent cache without expanding it,
    and attends a multi-token forward block by block; a batched decode step (`RowCaches`) row by row."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor,
        cache=None,
        position_ids: torch.Tensor | None = None,
        prev_topk_indices: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        if self.config._attn_implementation not in ("eager", "sdpa"):
            return super().forward(
                hidden_states, position_embeddings, attention_mask, cache=cache, position_ids=position_ids,
                prev_topk_indices=prev_topk_indices, **kwargs,
            )
        if isinstance(cache, RowCaches):
            return self._rows(hidden_states, position_embeddings, cache, position_ids, prev_topk_indices, **kwargs)
        # Projections, RoPE, cache and indexer exactly as upstream (transformers 5.24).
        batch_size, seq_length = hidden_states.shape[:-1]
        q_resid = self.q_a_layernorm(self.q_a_proj(hidden_states))
        q_states = self.q_b_proj(q_resid).view(batch_size, seq_length, -1, self.qk_head_dim).transpose(1, 2)
        q_pass, q_rot = torch.split(q_states, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        kv_pass, k_rot = torch.split(
            self.kv_a_proj_with_mqa(hidden_states), [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1
        )
        latents = self.kv_a_layernorm(kv_pass).view(batch_size, 1, seq_length, self.kv_lora_rank)
        k_rot = k_rot.view(batch_size, 1, seq_length, self.qk_rope_head_dim)
        cos, sin = position_embeddings
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)
        if cache is not None:
            latents, k_rot = cache.update(latents, k_rot, self.layer_idx)
        if self.indexer is not None:
            topk_indices = self.indexer(
                hidden_states, q_resid, position_embeddings, attention_mask[:, 0, :, :], position_ids, cache=cache
            )
        elif prev_topk_indices is None:
            raise ValueError("Shared DSA layers require top-k indices from a previous full indexer layer.")
        else:
            topk_indices = prev_topk_indices
        selected = topk_indices.long()
        if seq_length == 1:
            output = self._sparse(q_pass, q_rot, latents, k_rot, attention_mask[:, 0], selected)
        else:
            output = self._dense(q_pass, q_rot, latents, k_rot, attention_mask, selected)
        return self.o_proj(output.reshape(batch_size, seq_length, -1)), None, topk_indices

    def _rows(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        cache: RowCaches,
        position_ids: torch.Tensor | None,
        prev_topk_indices: list[torch.Tensor] | None,
        **kwargs,
    ) -> tuple[torch.Tensor, None, list[torch.Tensor]]:
        """A batched decode step (`batching.py`): each row attends through its own cache, with the
        all-visible mask an unbatched decode step gets, so a row computes what it would alone. The
        rows' top-k indices are a list (a row with fewer than k keys selects fewer), which the next
        layer's `_rows` takes as `prev_topk_indices`."""
        cos, sin = position_embeddings
        outputs, picks = [], []
        for row, row_cache in enumerate(cache.rows):
            visible = torch.ones((1, 1, 1, row_cache.get_seq_length() + 1), dtype=torch.bool, device=hidden_states.device)
            output, _, topk = self.forward(
                hidden_states[row : row + 1],
                (cos[row : row + 1], sin[row : row + 1]),
                visible,
                cache=row_cache,
                position_ids=None if position_ids is None else position_ids[row : row + 1],
                prev_topk_indices=None if prev_topk_indices is None else prev_topk_indices[row],
                **kwargs,
            )
            outputs.append(output)
            picks.append(topk)
        return torch.cat(outputs), None, picks

    def _dense(
        self,
        q_pass: torch.Tensor,
        q_rot: torch.Tensor,
        latents: torch.Tensor,
        k_rot: torch.Tensor,
        attention_mask: torch.Tensor,
        selected: torch.Tensor,
    ) -> torch.Tensor:
        """Upstream's expanded attention under the top-k mask, one block of queries at a time
        (section 3): [B, S, H, v_head_dim].

        The sparse form (`_sparse`) does less arithmetic once a block sees more than
        k * (2 * kv_lora_rank + rope) / (qk_head_dim + v_head_dim) keys (~4k for the benchmark's tiny
        GLM-5), but on CPU its gathers and 16-row matmuls made prompts up to 12k slower, not faster.
        """
        seq_length, length = q_pass.shape[2], latents.shape[2]
        query = torch.cat((q_pass, q_rot), dim=-1)
        keys, values = self.expand_kv(latents, k_rot)
        outputs = []
        for start in range(0, seq_length, QUERY_BLOCK):
            stop = min(seq_length, start + QUERY_BLOCK)
            end = length - seq_length + stop  # later keys are causally masked for the whole block
            chosen = selected.new_zeros((*selected.shape[:1], stop - start, length), dtype=torch.bool)
            chosen = chosen.scatter_(-1, selected[:, start:stop], True)[..., :end].unsqueeze(1)
            mask = attention_mask[:, :, start:stop, :end]
            if mask.dtype == torch.bool:
                mask = mask & chosen
            else:
                mask = mask.masked_fill(~chosen, torch.finfo(query.dtype).min)
            outputs.append(
                F.scaled_dot_product_attention(
                    query[:, :, start:stop], keys[:, :, :end], values[:, :, :end], attn_mask=mask, scale=self.scaling
                )
            )
        return torch.cat(outputs, dim=2).transpose(1, 2)

    def _sparse(
        self,
        q_pass: torch.Tensor,
        q_rot: torch.Tensor,
        latents: torch.Tensor,
        k_rot: torch.Tensor,
        rows: torch.Tensor,
        selected: torch.Tensor,
    ) -> torch.Tensor:
        """Sparse, absorbed attention (section 2) of S queries to their k selected keys each, from the
        [B, S, T] mask rows: [B, S, H, v_head_dim]."""
        picked, picked_rot = _select(latents, selected), _select(k_rot, selected)  # [B, S, k, *]
        visible = rows.gather(-1, selected).unsqueeze(2)  # [B, S, 1, k]
        weight = self.kv_b_proj.weight.view(-1, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank)
        w_uk, w_uv = weight[:, : self.qk_nope_head_dim], weight[:, self.qk_nope_head_dim :]
        q_latent = torch.einsum("bhsn,hnr->bshr", q_pass, w_uk)
        scores = q_latent @ picked.transpose(-1, -2) + q_rot.transpose(1, 2) @ picked_rot.transpose(-1, -2)
        scores = scores * self.scaling
        if visible.dtype == torch.bool:
            scores = scores.masked_fill(~visible, float("-inf"))
        else:
            scores = scores + visible
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q_pass.dtype)
        return torch.einsum("bshr,hvr->bshv", probs @ picked, w_uv)


def prepare_glm_moe_dsa(model: nn.Module) -> int:
    """Give every GLM-5 DSA layer of `model` the deterministic top-k, absorbed decoding and blocked
    attention; returns how many DSA layers `model` has (also when an earlier call patched them)."""
    count = 0
    for module in model.modules():
        if type(module) is GlmMoeDsaIndexer:
            module.__class__ = DeterministicGlmMoeDsaIndexer
        elif type(module) is GlmMoeDsaAttention:
            module.__class__ = AbsorbedDecodeGlmMoeDsaAttention
        count += isinstance(module, GlmMoeDsaAttention)
    return count
