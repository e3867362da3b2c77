"""The ChatML chat format of Qwen3 (and Qwen3-MoE), rendered straight to token ids.

    <|im_start|>system\\nS<|im_end|>\\n<|im_start|>user\\nU<|im_end|>\\n
    <|im_start|>assistant\\n<think>\\nR\\n</think>\\n\\nA\\n<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call><|im_end|>\\n
    <|im_start|>user\\n<tool_response>\\nO\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n<think>\\n

As in `chat.py` (GLM), the text between markup tokens is encoded on its own, untrusted text keeps
strings like `<|im_start|>` as plain text, and an assistant turn that carries its sampled ids is
copied verbatim, so every prompt extends the previous prompt plus its sampled tokens. A sampled turn
ends with `<|im_end|>`; the `\\n` the template writes after it belongs to the next prompt. Tool
results are `tool` messages in a user turn, consecutive ones sharing it, as Qwen3's template does.
Thinking on opens `<think>\\n` in the generation prompt (as the Qwen3 thinking templates do); off
writes the empty block `<think>\\n\\n</think>\\n\\n` (`enable_thinking=False`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from swedojo.agent.backends.base import BackendError, Message, Role, ThinkingHistory
from swedojo.agent.tokentext import TokenizerText, single_ids
from swedojo.schema import ToolCall

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CHATML_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
"""Every markup token the format writes; each must be one id in the tokenizer."""

STOP_TOKENS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")


class MissingChatMLTokenError(BackendError):
    """The tokenizer does not carry a ChatML markup token as a single id."""


class ChatMLChat(TokenizerText):
    """Renders conversations in Qwen3's ChatML as token ids, and splits sampled ids into parts."""

    name = "chatml"
    tool_format = "openai"
    """Calls are JSON objects in `<tool_call>` (Hermes style): the openai text format reads them."""

    @staticmethod
    def matches(tokenizer: PreTrainedTokenizerBase) -> bool:
        """The tokenizer's own chat template writes ChatML turns."""
        return "<|im_start|>" in str(getattr(tokenizer, "chat_template", None) or "")

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        super().__init__(tokenizer)
        self.ids = single_ids(tokenizer, CHATML_SPECIAL_TOKENS, MissingChatMLTokenError)
        self.stop_token_ids: frozenset[int] = frozenset(self.ids[t] for t in STOP_TOKENS)

    def render(
        self,
        messages: Sequence[Message],
        *,
        history: ThinkingHistory = ThinkingHistory.PRESERVED,
        thinking: bool | None = True,
    ) -> list[int]:
        """Prompt ids for `messages`, ending with the generation prompt unless `thinking` is None."""
        ids: list[int] = []
        last_user = max((i for i, m in enumerate(messages) if m.role == Role.USER), default=-1)
        for index, message in enumerate(messages):
            previous = messages[index - 1].role if index else None
            following = messages[index + 1].role if index + 1 < len(messages) else None
            keep_reasoning = history == ThinkingHistory.PRESERVED or index > last_user
            ids += self._message(message, previous, following, keep_reasoning)
        if thinking is not None:
            ids += self.generation_prompt(thinking)
        return ids

    def generation_prompt(self, thinking: bool) -> list[int]:
        opened = [self.ids["<|im_start|>"], *self.encode("assistant\n", special=False), self.ids["<think>"]]
        if thinking:
            return [*opened, *self.encode("\n", special=False)]
        return [*opened, *self.encode("\n\n", special=False), self.ids["</think>"], *self.encode("\n\n", special=False)]

    def _turn(self, role: str, content: str, *, special: bool) -> list[int]:
        return [
            self.ids["<|im_start|>"],
            *self.encode(f"{role}\n{content}", special=special),
            self.ids["<|im_end|>"],
            *self.encode("\n", special=False),
        ]

    def _message(self, message: Message, previous: Role | None, following: Role | None, keep_reasoning: bool) -> list[int]:
        if message.role == Role.SYSTEM:
            return self._turn("system", message.content, special=True)
        if message.role == Role.USER:
            return self._turn("user", message.content, special=False)
        if message.role == Role.OBSERVATION:
            opening = [] if previous == Role.OBSERVATION else [self.ids["<|im_start|>"], *self.encode("user", special=False)]
            closing = [] if following == Role.OBSERVATION else [self.ids["<|im_end|>"], *self.encode("\n", special=False)]
            return [
                *opening,
                *self.encode("\n", special=False),
                self.ids["<tool_response>"],
                *self.encode(f"\n{message.content}\n", special=False),
                self.ids["</tool_response>"],
                *closing,
            ]
        return self._assistant(message, keep_reasoning)

    def _assistant(self, message: Message, keep_reasoning: bool) -> list[int]:
        if message.token_ids is not None and (keep_reasoning or not message.reasoning):
            sampled = list(message.token_ids)
            if not sampled or sampled[-1] not in self.stop_token_ids:
                sampled.append(self.ids["<|im_end|>"])  # cut off by the length limit: close the turn
            return [*self.generation_prompt(message.thinking), *sampled, *self.encode("\n", special=False)]
        reasoning = message.reasoning.strip() if keep_reasoning else ""
        return [
            self.ids["<|im_start|>"],
            *self.encode("assistant\n", special=False),
            self.ids["<think>"],
            *self.encode(f"\n{reasoning}\n", special=True),
            self.ids["</think>"],
            *self._answer(f"\n\n{message.content.strip()}", message.tool_calls),
            *self.encode("\n", special=False),
        ]

    def _answer(self, text: str, tool_calls: Sequence[ToolCall]) -> list[int]:
        """The visible answer, each call on a new line, `<|im_end|>`."""
        ids = self.encode(text, special=True)
        for call in tool_calls:
            ids += [*self.encode("\n", special=False), *self.tool_call(call)]
        return [*ids, self.ids["<|im_end|>"]]

    def tool_call(self, call: ToolCall) -> list[int]:
        """`<tool_call>\\n{"name": NAME, "arguments": {…}}\\n</tool_call>` (Hermes style, as Qwen3 writes)."""
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        return [self.ids["<tool_call>"], *self.encode(f"\n{body}\n", special=False), self.ids["</tool_call>"]]

    def sampled_ids(self, reasoning: str, content: str, tool_calls: Sequence[ToolCall], thinking: bool) -> list[int]:
        """The ids a Qwen3 model would sample for this turn after the generation prompt, `<|im_end|>` included."""
        if not thinking:
            return self._answer(content.strip(), tool_calls)
        reasoning_ids = [*self.encode(f"{reasoning.strip()}\n", special=True), self.ids["</think>"]]
        return [*reasoning_ids, *self._answer(f"\n\n{content.strip()}", tool_calls)]

    def split(self, sampled: Sequence[int], thinking: bool) -> tuple[str, str, str]:
        """(text, reasoning, content) of sampled ids; a trailing stop token is not part of the text."""
        body = list(sampled)
        if body and body[-1] in self.stop_token_ids:
            body.pop()
        text = self.decode(body)
        if not thinking:
            return text, "", text.strip()
        end = self.ids["</think>"]
        if end not in body:
            return text, text.strip(), ""
        cut = body.index(end)
        return text, self.decode(body[:cut]).strip(), self.decode(body[cut + 1 :]).strip()
