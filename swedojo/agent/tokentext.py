"""Text and ids through a Hugging Face tokenizer, as every chat format needs them."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from swedojo.agent.backends.base import BackendError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def single_ids(tokenizer: PreTrainedTokenizerBase, tokens: Iterable[str], missing: type[BackendError]) -> dict[str, int]:
    """The id of each of `tokens`, each of which must be one id in `tokenizer`; `missing` names the format's error."""
    ids: dict[str, int] = {}
    for token in tokens:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == tokenizer.unk_token_id or tokenizer.encode(
            token, add_special_tokens=False
        ) != [token_id]:
            raise missing(f"tokenizer has no single id for {token!r}")
        ids[token] = token_id
    return ids


class TokenizerText:
    """`encode` and `decode` of a chat format: untrusted text never becomes markup, and the segments
    of a conversation seen before are not tokenised again (every turn re-renders the whole of it)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self._lock = threading.Lock()  # `split_special_tokens` toggles state on the shared Rust tokenizer
        self._encode = lru_cache(maxsize=1024)(self._encode_uncached)

    def _encode_uncached(self, text: str, special: bool) -> tuple[int, ...]:
        with self._lock:
            return tuple(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=not special))

    def encode(self, text: str, *, special: bool) -> list[int]:
        """Ids of `text`; with `special` False, markup strings in it stay plain text (untrusted input)."""
        return list(self._encode(text, special)) if text else []

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
