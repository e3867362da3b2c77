"""Chat formats by tokenizer: the format a backend renders prompts in is the one the tokenizer's own
chat template writes, so a checkpoint is prompted as it was trained.

Each format is a module (`chat.py` for GLM, `chatml.py` for Qwen3's ChatML, `inst.py` for Mixtral's
and Llama-2's `[INST]`) and one entry in
`CHAT_FORMATS`; a format class has a `name`, a static `matches(tokenizer)`, and renders, splits
and encodes ids as `GlmChat` does (`ChatFormat`). Formats are tried in order; the first match wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from swedojo.agent.backends.base import BackendError, Message, ThinkingHistory
from swedojo.agent.chat import GlmChat
from swedojo.agent.chatml import ChatMLChat
from swedojo.agent.inst import InstChat
from swedojo.schema import ToolCall

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ChatFormat(Protocol):
    """What the in-process and scripted backends need of a chat format."""

    name: str
    tool_format: str
    """The tool-call text format (`tools.formats`) the template writes calls in: a policy on a model
    of this format parses and renders calls in it unless told otherwise."""
    stop_token_ids: frozenset[int]

    def render(self, messages: Sequence[Message], *, history: ThinkingHistory = ..., thinking: bool | None = ...) -> list[int]:
        """Prompt ids; an assistant message with token ids is copied verbatim (prompts only grow)."""
        ...

    def split(self, sampled: Sequence[int], thinking: bool) -> tuple[str, str, str]:
        """(text, reasoning, content) of sampled ids."""
        ...

    def sampled_ids(self, reasoning: str, content: str, tool_calls: Sequence[ToolCall], thinking: bool) -> list[int]:
        """The ids a model of this format would sample for a turn, stop token included."""
        ...

    def decode(self, ids: Iterable[int]) -> str: ...


CHAT_FORMATS: dict[str, type] = {
    ChatMLChat.name: ChatMLChat,
    GlmChat.name: GlmChat,
    InstChat.name: InstChat,
}
"""Registered chat formats, in the order they are tried."""


class UnknownChatFormatError(BackendError):
    """No registered chat format matches the tokenizer's chat template."""


def chat_format_for(tokenizer: PreTrainedTokenizerBase) -> ChatFormat:
    """The registered format whose `matches` accepts the tokenizer, built on it."""
    for format_class in CHAT_FORMATS.values():
        if format_class.matches(tokenizer):
            return format_class(tokenizer)
    template = str(getattr(tokenizer, "chat_template", None) or "")
    raise UnknownChatFormatError(
        f"no chat format ({', '.join(CHAT_FORMATS)}) matches this tokenizer's chat template "
        f"({template[:80]!r}{'…' if len(template) > 80 else ''})"
    )
