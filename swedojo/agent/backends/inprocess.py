"""In-process transformers backend with a retained KV cache per conversation.

Each conversation keeps one KV cache and the ids it holds. A new prompt is compared with those
ids: the cache is cropped to the longest common prefix (a changed earlier token must not leave
stale keys behind; transformers' `generate` only skips `cache length` tokens without checking
them) and only the remaining tokens are prefilled. With preserved thinking the prompt extends the
previous prompt and sampled tokens exactly, so a turn prefills only the new observation. Logits
equal a full recompute (tests check every supported architecture; GLM-5's DSA layers get a
deterministic indexer top-k and decode against the latent cache without re-expanding it, see
`dsa.py`). Long prompts are prefilled in chunks of `prefill_chunk` tokens to bound memory.

A decode step is most of an agent turn's time, so it avoids work that grows with the context:
the cache (`GrowableCache`) appends into spare room instead of `torch.cat`-ing the whole history
per token, and models on transformers' `sdpa` attention and `grouped_mm` experts get
`single_token_attention` (keys stored transposed, two matmuls) and `single_token_experts` (the
token's experts as plain matmuls) for one-token forwards; multi-token forwards are unchanged.

With `decode_batch` > 1, calls from several threads (concurrent episodes, each its own conversation
and cache) share one forward per decode step: see `batching.py`.

Logprobs are log_softmax(logits / temperature) of the sampled token, before top-k/top-p
truncation: the distribution a trainer recomputes at the rollout temperature. Greedy decoding
(temperature 0) reports log_softmax(logits).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.cache_utils import DynamicIndexedLayer, DynamicLayer
from transformers.integrations.moe import ExpertsInterface, grouped_mm_experts_forward
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

from swedojo.agent.backends.base import (
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    SamplingParams,
    Usage,
)
from swedojo.agent.backends.batching import DecodeScheduler, RowCaches
from swedojo.agent.backends.dsa import prepare_glm_moe_dsa
from swedojo.agent.backends.routing import RoutingRecorder
from swedojo.agent.chats import ChatFormat, chat_format_for
from swedojo.sandboxes import scope as sandbox_scope


class CheckpointNotFoundError(BackendError):
    """The checkpoint directory does not exist or has no config."""


class CheckpointMismatchError(BackendError):
    """A checkpoint's weights do not fit the loaded model (another architecture or size)."""


class ContextLengthError(BackendError):
    """The prompt does not fit in the model's context window."""


class EmptyPromptError(BackendError):
    """There is nothing to continue."""


MIN_ROOM = 256
"""Tokens a growable cache layer reserves at first."""


def append_with_room(
    view: torch.Tensor, room: torch.Tensor | None, new: torch.Tensor, *, transposed: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`view` extended by `new` along dim -2, and the buffer it now lives in.

    `view` is the first entries of `room`; `new` is copied into the spare room after them, and a full
    room is replaced by one twice as large. An append thus copies the new tokens only (amortised),
    where `torch.cat` copies the whole cache on every decoded token. A `view` that is not (or no
    longer) the head of `room`, e.g. replaced by a beam reorder or a reset, is moved to a new room.
    `transposed` stores a new room's last two dims swapped in memory (the returned views keep the
    logical [..., tokens, dim] shape).
    """
    length, added = (view.shape[-2] if view.dim() == new.dim() else 0), new.shape[-2]
    fits = (
        room is not None
        and view.data_ptr() == room.data_ptr()
        and view.shape[:-2] == room.shape[:-2] == new.shape[:-2]
        and view.stride() == room.stride()
        and length + added <= room.shape[-2]
    )
    if not fits:
        capacity, width = max(2 * (length + added), MIN_ROOM), new.shape[-1]
        if transposed:
            grown = new.new_empty((*new.shape[:-2], width, capacity)).transpose(-1, -2)
        else:
            grown = new.new_empty((*new.shape[:-2], capacity, width))
        if length:
            grown[..., :length, :] = view
        room = grown
    room[..., length : length + added, :] = new
    return room[..., : length + added, :], room


class GrowableLayer(DynamicLayer):
    """`DynamicLayer` whose keys and values are views into buffers with spare room (`append_with_room`).

    `crop` is inherited: it slices the views, and the next append overwrites the dropped tail.
    `transposed_keys` keeps each head's keys as [dim, tokens] rows in memory (for `ATTENTION`).
    """

    def __init__(self, transposed_keys: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.transposed_keys = transposed_keys
        self._key_room: torch.Tensor | None = None
        self._value_room: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self._key_room = append_with_room(
            self.keys, self._key_room, key_states, transposed=self.transposed_keys
        )
        self.values, self._value_room = append_with_room(self.values, self._value_room, value_states)
        return self.keys, self.values


class GrowableIndexedLayer(DynamicIndexedLayer, GrowableLayer):
    """`DynamicIndexedLayer` (DSA: keys, values and indexer keys) with all three grown in place; the
    indexer keys are stored transposed, the [dim, tokens] operand the indexer multiplies by."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._indexer_room: torch.Tensor | None = None

    def update_indexer(self, indexer_key_states: torch.Tensor) -> torch.Tensor:
        if not self.is_indexer_initialized:
            self.lazy_initialization_indexer(indexer_key_states)
        self.indexer_keys, self._indexer_room = append_with_room(
            self.indexer_keys, self._indexer_room, indexer_key_states, transposed=True
        )
        return self.indexer_keys


class GrowableCache(DynamicCache):
    """`DynamicCache` whose full-attention and DSA layers grow in place; other layer kinds are kept."""

    def __init__(self, config: PreTrainedConfig, *, transposed_keys: bool = False) -> None:
        super().__init__(config=config)

        def growable(layer: object) -> object:
            if type(layer) is DynamicIndexedLayer:
                return GrowableIndexedLayer()
            if type(layer) is DynamicLayer:
                return GrowableLayer(transposed_keys=transposed_keys)
            return layer

        self.layers = [growable(layer) for layer in self.layers]


def single_token_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa` attention, except for one query token without extras: two matmuls.

    A decode step reads every cached key once. SDPA's CPU kernel does that at a few GFLOP/s with
    small heads, and a [queries, dim] x [dim, tokens] matmul against keys stored transposed
    (`GrowableLayer(transposed_keys=True)`) streams them about twice as fast. Query heads are
    grouped per key head as `repeat_kv` pairs them, so no key is copied. Longer queries go to SDPA,
    with the keys made contiguous first (SDPA is slow on the transposed layout). Keys and values given
    as per-row lists (a batched decode step, `batching.RowCaches`) are attended row by row.
    """
    if isinstance(key, list):  # a batched decode step: each row attends to its own cache (`RowCaches`)
        rows = [
            single_token_attention(module, query[row : row + 1], key[row], value[row], None, dropout, scaling, **kwargs)[0]
            for row in range(len(key))
        ]
        return torch.cat(rows), None
    plain = kwargs.get("softcap") is None and kwargs.get("s_aux") is None and kwargs.get("sliding_window") is None
    if query.shape[2] != 1 or not plain or (dropout and module.training):
        if key.stride(-1) != 1:
            key = key.contiguous()
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    batch, heads, _, dim = query.shape
    key_heads = key.shape[1]
    grouped = query.reshape(batch, key_heads, heads // key_heads, dim) * (dim**-0.5 if scaling is None else scaling)
    scores = torch.matmul(grouped, key.transpose(-1, -2)).float()
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, float("-inf"))
        else:
            scores = scores + attention_mask
    output = torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value)
    return output.reshape(batch, heads, 1, -1).transpose(1, 2), None


def single_token_experts(
    self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """transformers' `grouped_mm` experts, except for one token: its k experts as plain matmuls.

    For one token, `grouped_mm` still sorts, counts and offsets tokens per expert and runs two
    grouped GEMMs over every expert's weights: a dozen ops, ~1 ms of a ~7 ms decode step here.
    """
    plain = self.has_gate and not (self.has_bias or self.is_transposed or self.has_post_expert_norm)
    if hidden_states.shape[0] != 1 or not plain or self._is_expert_parallel:
        return grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    output = None
    for expert, weight in zip(top_k_index[0].tolist(), top_k_weights[0]):
        hidden = self._apply_gate(F.linear(hidden_states, self.gate_up_proj[expert]))
        term = F.linear(hidden, self.down_proj[expert]) * weight
        output = term if output is None else output + term
    return output.to(hidden_states.dtype)


ATTENTION = EXPERTS = "swedojo_decode"
"""The attention (`single_token_attention`, with SDPA's masks) and experts (`single_token_experts`)
implementation the backend gives models that use transformers' `sdpa` and `grouped_mm` ones."""
AttentionInterface.register(ATTENTION, single_token_attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)
ExpertsInterface.register(EXPERTS, single_token_experts)


@dataclass
class _Conversation:
    cache: DynamicCache
    version: str
    """The weights (`weights_version`) its cache was computed with."""
    ids: list[int] = field(default_factory=list)
    """Tokens whose keys and values are in `cache`, in order."""
    logits: torch.Tensor | None = None
    """Next-token logits after the last of `ids`."""
    routes: list[torch.Tensor] = field(default_factory=list)
    """When routing is recorded: the experts each of `ids` was routed to, one [tokens, layers, top_k]
    tensor per forward call, rows aligned with `ids`."""

    def crop(self, length: int) -> None:
        """Forget the ids (and their routes) from `length` on; the caller crops the cache."""
        del self.ids[length:]
        kept, rows = [], 0
        for chunk in self.routes:
            if rows >= length:
                break
            kept.append(chunk[: length - rows])
            rows += len(kept[-1])
        self.routes = kept


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def sample_token(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> tuple[int, float]:
    """(token, logprob) from float32 next-token logits; see the module docstring for the logprob."""
    if params.temperature == 0.0:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    logprobs = torch.log_softmax(logits / params.temperature, dim=-1)
    kept = logprobs.clone()
    if params.top_k and params.top_k < kept.numel():
        kth = torch.topk(kept, params.top_k).values[-1]
        kept[kept < kth] = float("-inf")
    if params.top_p < 1.0:
        ordered, order = torch.sort(kept, descending=True)
        mass_before = torch.cumsum(ordered.softmax(dim=-1), dim=-1) - ordered.softmax(dim=-1)
        kept[order[mass_before >= params.top_p]] = float("-inf")
    token = int(torch.multinomial(kept.softmax(dim=-1), 1, generator=generator))
    return token, float(logprobs[token])


class _Turn:
    """One call's sampling: tokens drawn from successive logits until a stop token, a stop string or
    the budget. The unbatched loop and the decode scheduler (`batching.py`) both drive it."""

    def __init__(self, params: SamplingParams, generator: torch.Generator, budget: int, chat: ChatFormat,
                 scope: sandbox_scope.SandboxScope | None = None) -> None:
        self.params, self.generator, self.budget, self.chat = params, generator, budget, chat
        self.scope = scope
        """The calling unit of work's sandbox scope: once it closes, sampling stops (`CANCELLED`)."""
        self.stop_ids = chat.stop_token_ids | set(params.stop_token_ids)
        self.longest_stop = max((len(s.encode()) for s in params.stop), default=0)
        self.sampled: list[int] = []
        self.logprobs: list[float] = []
        self.finish = FinishReason.LENGTH

    def next_token(self, logits: torch.Tensor) -> int | None:
        """Sample from `logits`; the token to feed next, or None when the turn is over."""
        if self.scope is not None and self.scope.closed_because:
            self.finish = FinishReason.CANCELLED
            return None
        token, logprob = sample_token(logits, self.params, self.generator)
        self.sampled.append(token)
        self.logprobs.append(logprob)
        if token in self.stop_ids or (self.longest_stop and self._ends_with_stop()):
            self.finish = FinishReason.STOP
            return None
        return token if len(self.sampled) < self.budget else None

    def _ends_with_stop(self) -> bool:
        # A stop string of n bytes spans at most n byte-level tokens, plus one for a split character.
        tail = self.chat.decode(self.sampled[-(self.longest_stop + 1) :])
        return any(stop in tail for stop in self.params.stop)


def weights_version(model: PreTrainedModel) -> str:
    """A fingerprint of the weights: every parameter's name, shape, dtype and first values, hashed.

    Cheap for any size (a few values per tensor) and different after any training step, which
    moves nearly every tensor.
    """
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            head = parameter.detach().reshape(-1)[:16].to("cpu", torch.float32)
            digest.update(f"{name}:{tuple(parameter.shape)}:{parameter.dtype}".encode())
            digest.update(head.numpy().tobytes())
    return f"sha256:{digest.hexdigest()[:16]}"


class InProcessBackend:
    """A transformers causal LM in this process, in its tokenizer's chat format, one retained KV cache per conversation."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        name: str = "inprocess",
        retain_cache: bool = True,
        max_conversations: int = 4,
        prefill_chunk: int = 2048,
        seed: int = 0,
        record_routing: bool = False,
        decode_batch: int = 1,
    ) -> None:
        """`retain_cache` False re-prefills the whole prompt every call (the baseline benchmarks compare).

        `decode_batch` > 1 lets up to that many conversations generating at the same time (from their
        own threads) share one forward per decode step (`batching.py`); prefills stay one at a time.
        1 runs each call alone, the whole call under one lock.

        `record_routing` records the experts every token was routed to (MoE models; see `routing.py`)
        into `Generation.routed_experts`.

        `model` is prepared in place: GLM-5's DSA layers as in `dsa.py`, and a model on `sdpa`
        attention or `grouped_mm` experts gets `ATTENTION` or `EXPERTS` (the same for multi-token
        forwards, faster one-token ones).
        """
        self.dsa = bool(prepare_glm_moe_dsa(model))
        if not self.dsa and model.config._attn_implementation == "sdpa":
            model.set_attn_implementation(ATTENTION)
        if getattr(model.config, "_experts_implementation", None) == "grouped_mm":
            model.set_experts_implementation(EXPERTS)
        self.transposed_keys = model.config._attn_implementation == ATTENTION
        self.batchable = self.transposed_keys or (self.dsa and model.config._attn_implementation in ("eager", "sdpa"))
        """Whether decode steps of several conversations can share a forward (attention that reads per-row caches)."""
        self.model = model.eval()
        self.chat = chat_format_for(tokenizer)
        self.name = name
        self.version = weights_version(model)
        self.retain_cache = retain_cache
        self.max_conversations = max(max_conversations, decode_batch)
        self.prefill_chunk = prefill_chunk
        self.device = next(model.parameters()).device
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._generator = torch.Generator(self.device).manual_seed(seed)
        recorder = RoutingRecorder(model) if record_routing else None
        self._recorder = recorder if recorder is not None and recorder.routers else None
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._lock = threading.RLock()
        """Held by every forward, and by a whole call when decode steps are not batched."""
        self.scheduler = DecodeScheduler(self._forward_batch, decode_batch) if decode_batch > 1 else None
        """Batches the decode steps of concurrent calls; None when each call runs alone."""

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, device: str = "cpu", dtype: str | torch.dtype = "auto", **options
    ) -> InProcessBackend:
        """Load a checkpoint directory (config, weights, tokenizer) through the Auto classes."""
        directory = Path(path)
        if not (directory / "config.json").is_file():
            raise CheckpointNotFoundError(f"no checkpoint (config.json) in {directory}")
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        options.setdefault("name", str(directory))
        return cls(model.to(device), tokenizer, **options)

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        prompt = self.chat.render(messages, history=params.history, thinking=params.thinking)
        return self.generate_ids(prompt, params, conversation_id=conversation_id)

    def generate_ids(
        self, prompt: Sequence[int], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        """Token in: continue exactly `prompt` (which should end with the generation prompt)."""
        started = time.perf_counter()
        prompt = list(prompt)
        budget = params.max_new_tokens
        if self.context_length:
            budget = min(budget, self.context_length - len(prompt))
        generator = self._generator
        if params.seed is not None:
            generator = torch.Generator(self.device).manual_seed(params.seed)
        turn = _Turn(params, generator, budget, self.chat, sandbox_scope.current())
        scheduler = self.scheduler
        whole_call = self._lock if scheduler is None else nullcontext()
        with whole_call, torch.inference_mode(), self._state(conversation_id) as conversation:
            with self._lock:
                logits, cached = self._prefill(conversation, prompt)
            prefilled_at = time.perf_counter()
            if scheduler:
                scheduler.decode(conversation, turn, logits)
            else:
                while (token := turn.next_token(logits)) is not None:
                    logits = self._forward(conversation, [token])
            routed = torch.cat(conversation.routes).tolist() if self._recorder and conversation.routes else []
        sampled = turn.sampled
        text, reasoning, content = self.chat.split(sampled, params.thinking)
        return Generation(
            text=text,
            reasoning=reasoning,
            content=content,
            thinking=params.thinking,
            token_ids=sampled,
            logprobs=turn.logprobs,
            logprob_kind=LogprobKind.TEMPERATURE if params.temperature > 0 else LogprobKind.RAW,
            prompt_token_ids=prompt,
            routed_experts=routed,
            finish_reason=turn.finish,
            usage=Usage(
                prompt_tokens=len(prompt),
                prefill_tokens=len(prompt) - cached,
                cached_tokens=cached,
                completion_tokens=len(sampled),
                seconds=time.perf_counter() - started,
                prefill_seconds=prefilled_at - started,
            ),
        )

    def next_token_logits(self, prompt: Sequence[int], *, conversation_id: str = "default") -> torch.Tensor:
        """Float32 logits after `prompt`, through the same cache path as `generate` (for checks)."""
        with self._lock, torch.inference_mode(), self._state(conversation_id) as conversation:
            logits, _ = self._prefill(conversation, list(prompt))
            return logits.clone()

    def decode_logits(self, tokens: Mapping[str, int]) -> dict[str, torch.Tensor]:
        """Float32 logits after feeding each conversation its next token, all in one forward, as a
        batched decode step does (for checks; one conversation takes the unbatched path)."""
        with self._lock, torch.inference_mode():
            conversations = [self._conversations[conversation_id] for conversation_id in tokens]
            logits = self._forward_batch(conversations, list(tokens.values()))
            return {conversation_id: row.clone() for conversation_id, row in zip(tokens, logits)}

    def close(self) -> None:
        """Stop the decode scheduler's thread, if there is one."""
        if self.scheduler:
            self.scheduler.close()

    def load_weights(self, path: str | Path) -> str:
        """Copy the weights of the checkpoint at `path` (this model's architecture) into the model, in
        place; their `weights_version`. Cached conversations are not reused after (their keys came
        from the old weights): each one's next call prefills again. A turn being decoded finishes on
        the new weights, as a rollout engine's in-flight requests do across a weight update."""
        fresh = dict(AutoModelForCausalLM.from_pretrained(Path(path), dtype=self.model.dtype).named_parameters())
        with self._lock, torch.no_grad():
            for name, parameter in self.model.named_parameters():
                if name not in fresh or fresh[name].shape != parameter.shape:
                    raise CheckpointMismatchError(f"{path}: no parameter {name} of shape {tuple(parameter.shape)}")
            for name, parameter in self.model.named_parameters():
                parameter.copy_(fresh[name])
            self.version = weights_version(self.model)
            self._conversations.clear()
        return self.version

    def release(self, conversation_id: str) -> None:
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def cached_ids(self, conversation_id: str) -> list[int]:
        """The tokens the conversation's cache holds."""
        conversation = self._conversations.get(conversation_id)
        return list(conversation.ids) if conversation else []

    @contextmanager
    def _state(self, conversation_id: str) -> Iterator[_Conversation]:
        """The conversation's cache; dropped afterwards when not retained, or when a forward failed
        half-way (some layers would hold keys the id list does not)."""
        with self._lock:
            conversation = self._conversations.pop(conversation_id, None)
            if conversation is None or conversation.version != self.version:
                conversation = _Conversation(GrowableCache(self.model.config, transposed_keys=self.transposed_keys),
                                             self.version)
        yield conversation
        if self.retain_cache and conversation.version == self.version:
            with self._lock:
                self._conversations[conversation_id] = conversation
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)

    def _prefill(self, conversation: _Conversation, prompt: list[int]) -> tuple[torch.Tensor, int]:
        """Logits after `prompt` and how many of its tokens came from the cache."""
        if not prompt:
            raise EmptyPromptError("cannot continue an empty prompt")
        if self.context_length and len(prompt) >= self.context_length:
            raise ContextLengthError(f"prompt of {len(prompt)} tokens; the context is {self.context_length}")
        common = common_prefix_length(conversation.ids, prompt)
        if common == len(prompt) == len(conversation.ids) and conversation.logits is not None:
            return conversation.logits, common
        common = min(common, len(prompt) - 1)  # the last prompt token is fed again for its logits
        if common < len(conversation.ids):
            if common == 0:
                conversation.cache = GrowableCache(self.model.config, transposed_keys=self.transposed_keys)
            else:
                conversation.cache.crop(common - len(conversation.ids))  # 5.x: a negative count removes
            conversation.crop(common)
        for start in range(common, len(prompt), self.prefill_chunk):
            logits = self._forward(conversation, prompt[start : start + self.prefill_chunk])
        return logits, common  # the loop ran at least once: common < len(prompt)

    def _forward(self, conversation: _Conversation, ids: list[int]) -> torch.Tensor:
        with self._recorder.recording() if self._recorder else nullcontext():
            output = self.model(
                input_ids=torch.tensor([ids], device=self.device),
                cache=conversation.cache,
                use_cache=True,
                logits_to_keep=1,
            )
            if self._recorder:
                conversation.routes.append(self._recorder.take(len(ids)))
        conversation.ids += ids
        conversation.logits = output.logits[0, -1].float()
        return conversation.logits

    def _forward_batch(self, conversations: list[_Conversation], tokens: list[int]) -> list[torch.Tensor]:
        """Feed each conversation its token in one forward (see `batching.py`); each one's logits.

        Each row's position is its own conversation's length; the 4-D mask is a placeholder the
        mask builders pass through, since row-wise attention sees exactly its own cached keys. A
        model whose attention cannot take per-row caches runs the steps one by one.
        """
        with self._lock:
            if len(conversations) == 1 or not self.batchable:
                return [self._forward(conversation, [token]) for conversation, token in zip(conversations, tokens)]
            rows = len(conversations)
            placeholder = torch.ones((rows, 1, 1, 1), dtype=torch.bool, device=self.device)
            with self._recorder.recording() if self._recorder else nullcontext():
                output = self.model(
                    input_ids=torch.tensor([[token] for token in tokens], device=self.device),
                    position_ids=torch.tensor([[len(c.ids)] for c in conversations], device=self.device),
                    attention_mask={"indexed_attention": placeholder} if self.dsa else placeholder,
                    cache=RowCaches([c.cache for c in conversations]),
                    use_cache=True,
                    logits_to_keep=1,
                )
                routes = self._recorder.take(rows) if self._recorder else None
            logits = output.logits[:, -1].float()
            for row, (conversation, token) in enumerate(zip(conversations, tokens)):
                conversation.ids.append(token)
                conversation.logits = logits[row]
                if routes is not None:
                    conversation.routes.append(routes[row : row + 1])
            return list(logits)
