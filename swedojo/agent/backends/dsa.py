"""GLM-5 (DSA) with a retained KV cache: an exact (deterministic) indexer top-k, and absorbed MLA decoding.

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
2e-6; in the 40-turn benchmark one flip moved one sampled token's logprob by 3e-3. Only
batch-invariant kernels (or float64) would close that.

2. Decode speed. The MLA cache holds compressed latents c_t (kv_lora_rank wide). Upstream's
eager/SDPA path expands the whole cache through `kv_b_proj` into per-head keys and values on
every forward, so one decoded token costs O(T * heads * (d_nope + d_v) * kv_lora_rank) per layer:
as much as re-prefilling the history's linear part every few tokens. For single-token steps we
absorb `kv_b_proj` into the query and the output instead (as serving engines do):
q.k_t = (W_uk^T q_nope).c_t + q_rope.k_rope_t and out = W_uv (sum_t p_t c_t), which is the same
attention, reordered, at O(T * heads * kv_lora_rank). Prefill keeps the upstream path.
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


def deterministic_topk(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest scores along the last dim, ties broken by position (earliest first).

    Rows whose k-th value is not tied beyond the top k have a unique answer, which plain top-k
    gives; only the others (ties straddling the boundary) are redone by position.
    """
    k = min(k, scores.shape[-1])
    values, indices = scores.topk(k, dim=-1)
    kth = values[..., -1:]
    ambiguous = (scores >= kth).sum(dim=-1) > k
    if bool(ambiguous.any()):
        rows, row_kth = scores[ambiguous], kth[ambiguous]
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
        # Same scores as upstream (transformers 5.24); only the final selection differs.
        batch_size, seq_len, _ = hidden_states.shape
        cos, sin = position_embeddings
        q = self.wq_b(q_resid).view(batch_size, seq_len, self.n_heads, self.head_dim)
        q_rot, q_pass = torch.split(q, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
        k = self.k_norm(self.wk(hidden_states)).unsqueeze(2)
        k_rot, k_pass = torch.split(k, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = torch.cat([q_rot, q_pass], dim=-1)
        k = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
        if cache is not None:
            k = cache.update_indexer(k, self.layer_idx)
        scores = F.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * self.softmax_scale)
        weights = self.weights_proj(hidden_states.to(self.weights_proj.weight.dtype)).float() * (self.n_heads**-0.5)
        index_scores = torch.matmul(weights.unsqueeze(-2), scores).squeeze(-2)
        if attention_mask.dtype == torch.bool:
            index_scores = index_scores.masked_fill(~attention_mask, float("-inf"))
        else:
            index_scores = index_scores + attention_mask
        return deterministic_topk(index_scores, self.index_topk).to(torch.int32)


class AbsorbedDecodeGlmMoeDsaAttention(GlmMoeDsaAttention):
    """`GlmMoeDsaAttention` that decodes single tokens against the latent cache without expanding it."""

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
        batch_size, seq_length = hidden_states.shape[:-1]
        if seq_length != 1 or self.config._attn_implementation not in ("eager", "sdpa"):
            return super().forward(
                hidden_states, position_embeddings, attention_mask, cache=cache, position_ids=position_ids,
                prev_topk_indices=prev_topk_indices, **kwargs,
            )
        # Projections, RoPE, cache and indexer exactly as upstream (transformers 5.24).
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
        length = latents.shape[2]
        unselected = (
            topk_indices.new_ones((batch_size, seq_length, length), dtype=torch.bool)
            .scatter(-1, topk_indices.long(), False)
            .unsqueeze(1)
        )
        # Absorbed attention with the heads as rows, [B, 1, H, r] against the [B, 1, T, r] latents, so
        # the latents are never broadcast (copied) per head.
        weight = self.kv_b_proj.weight.view(-1, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank)
        w_uk, w_uv = weight[:, : self.qk_nope_head_dim], weight[:, self.qk_nope_head_dim :]
        q_latent = torch.einsum("bhsn,hnr->bshr", q_pass, w_uk)
        scores = q_latent @ latents.transpose(-1, -2) + q_rot.transpose(1, 2) @ k_rot.transpose(-1, -2)
        scores = scores * self.scaling
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask | unselected, float("-inf"))
        else:
            scores = (scores + attention_mask).masked_fill(unselected, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q_pass.dtype)
        output = torch.einsum("bshr,hvr->bshv", probs @ latents, w_uv).reshape(batch_size, seq_length, -1)
        return self.o_proj(output), None, topk_indices


def prepare_glm_moe_dsa(model: nn.Module) -> int:
    """Give every GLM-5 DSA layer of `model` the deterministic top-k and absorbed decoding; returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is GlmMoeDsaIndexer:
            module.__class__ = DeterministicGlmMoeDsaIndexer
        elif type(module) is GlmMoeDsaAttention:
            module.__class__ = AbsorbedDecodeGlmMoeDsaAttention
            count += 1
    return count
