"""In-process transformers backend with a retained KV cache per conversation.

Each conversation keeps one KV cache and the ids it holds. A new prompt is compared with those
ids: the cache is cropped to the longest common prefix (a changed earlier token must not leave
stale keys behind; transformers' `generate` only skips `cache length` tokens without checking
them) and only the remaining tokens are prefilled. With preserved thinking the prompt extends the
previous prompt and sampled tokens exactly, so a turn prefills only the new observation. Logits
equal a full recompute (tests check every supported architecture; GLM-5's DSA layers get a
deterministic indexer top-k and decode against the latent cache without re-expanding it, see
`dsa.py`). Long prompts are prefilled in chunks of `prefill_chunk` tokens to bound memory.

Logprobs are log_softmax(logits / temperature) of the sampled token, before top-k/top-p
truncation: the distribution a trainer recomputes at the rollout temperature. Greedy decoding
(temperature 0) reports log_softmax(logits).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from swedojo.agent.backends.base import (
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    SamplingParams,
    Usage,
)
from swedojo.agent.backends.dsa import prepare_glm_moe_dsa
from swedojo.agent.chat import GlmChat


class CheckpointNotFoundError(BackendError):
    """The checkpoint directory does not exist or has no config."""


class ContextLengthError(BackendError):
    """The prompt does not fit in the model's context window."""


class EmptyPromptError(BackendError):
    """There is nothing to continue."""


@dataclass
class _Conversation:
    cache: DynamicCache
    ids: list[int] = field(default_factory=list)
    """Tokens whose keys and values are in `cache`, in order."""
    logits: torch.Tensor | None = None
    """Next-token logits after the last of `ids`."""


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


class InProcessBackend:
    """A transformers causal LM in this process, GLM chat format, one retained KV cache per conversation."""

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
    ) -> None:
        """`retain_cache` False re-prefills the whole prompt every call (the baseline benchmarks compare)."""
        prepare_glm_moe_dsa(model)
        self.model = model.eval()
        self.chat = GlmChat(tokenizer)
        self.name = name
        self.retain_cache = retain_cache
        self.max_conversations = max_conversations
        self.prefill_chunk = prefill_chunk
        self.device = next(model.parameters()).device
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._generator = torch.Generator(self.device).manual_seed(seed)
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._lock = threading.Lock()

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
        stop_ids = self.chat.stop_token_ids | set(params.stop_token_ids)
        longest_stop = max((len(s.encode()) for s in params.stop), default=0)
        sampled: list[int] = []
        logprobs: list[float] = []
        finish = FinishReason.LENGTH
        with self._lock, torch.inference_mode(), self._state(conversation_id) as conversation:
            logits, cached = self._prefill(conversation, prompt)
            prefilled_at = time.perf_counter()
            while len(sampled) < budget:
                token, logprob = sample_token(logits, params, generator)
                sampled.append(token)
                logprobs.append(logprob)
                if token in stop_ids or (longest_stop and self._ends_with_stop(sampled, params.stop, longest_stop)):
                    finish = FinishReason.STOP
                    break
                if len(sampled) < budget:
                    logits = self._forward(conversation, [token])
        text, reasoning, content = self.chat.split(sampled, params.thinking)
        return Generation(
            text=text,
            reasoning=reasoning,
            content=content,
            thinking=params.thinking,
            token_ids=sampled,
            logprobs=logprobs,
            logprob_kind=LogprobKind.TEMPERATURE if params.temperature > 0 else LogprobKind.RAW,
            prompt_token_ids=prompt,
            finish_reason=finish,
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
        conversation = self._conversations.pop(conversation_id, None) or _Conversation(
            DynamicCache(config=self.model.config)
        )
        yield conversation
        if self.retain_cache:
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
                conversation.cache = DynamicCache(config=self.model.config)
            else:
                conversation.cache.crop(common - len(conversation.ids))  # 5.x: a negative count removes
            del conversation.ids[common:]
        for start in range(common, len(prompt), self.prefill_chunk):
            logits = self._forward(conversation, prompt[start : start + self.prefill_chunk])
        return logits, common  # the loop ran at least once: common < len(prompt)

    def _forward(self, conversation: _Conversation, ids: list[int]) -> torch.Tensor:
        output = self.model(
            input_ids=torch.tensor([ids], device=self.device),
            cache=conversation.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        conversation.ids += ids
        conversation.logits = output.logits[0, -1].float()
        return conversation.logits

    def _ends_with_stop(self, sampled: list[int], stops: list[str], longest: int) -> bool:
        # A stop string of n bytes spans at most n byte-level tokens, plus one for a split character.
        tail = self.chat.decode(sampled[-(longest + 1) :])
        return any(stop in tail for stop in stops)
