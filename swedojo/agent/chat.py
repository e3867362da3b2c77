"""The GLM chat format (GLM-4.5 … GLM-5), rendered straight to token ids.

    [gMASK]<sop><|system|>S<|user|>U<|assistant|><think>R</think>A<tool_call>…</tool_call>
    <|observation|><tool_response>O</tool_response><|assistant|><think>

The prompt is built segment by segment as ids: text between special tokens is encoded on its own
(which is also how a tokenizer splits the rendered text), and an assistant turn that carries the
ids it was sampled as is copied verbatim. So with preserved thinking every new prompt extends the
previous prompt plus its sampled tokens token for token, and a KV cache can be kept across turns.
Re-tokenising the decoded text instead could give other ids (GLM's template also strips
whitespace), and then the cache and the trainer would see a sequence the model never produced.
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

GLM_SPECIAL_TOKENS: tuple[str, ...] = (
    "[gMASK]",
    "<sop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<tool_response>",
    "</tool_response>",
    "<|endoftext|>",
)
"""Every token the format writes; each must be one id in the tokenizer."""

STOP_TOKENS: tuple[str, ...] = ("<|user|>", "<|observation|>", "<|endoftext|>")
"""An assistant span has no end-of-turn token: the next role marker (or end of text) ends it."""


class MissingSpecialTokenError(BackendError):
    """The tokenizer does not carry a GLM special token as a single id."""


class GlmChat(TokenizerText):
    """Renders conversations in the GLM format as token ids, and splits sampled ids into parts."""

    name = "glm"
    tool_format = "glm"
    """The tool-call text format (`tools.formats`) the template writes calls in."""

    @staticmethod
    def matches(tokenizer: PreTrainedTokenizerBase) -> bool:
        """The tokenizer's chat template is GLM's, or it has none and carries GLM's role tokens."""
        template = str(getattr(tokenizer, "chat_template", None) or "")
        if template:
            return "[gMASK]" in template
        return tokenizer.convert_tokens_to_ids("<|observation|>") not in (None, tokenizer.unk_token_id)

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """`tokenizer`: a Hugging Face tokenizer carrying `GLM_SPECIAL_TOKENS`."""
        super().__init__(tokenizer)
        self.ids = single_ids(tokenizer, GLM_SPECIAL_TOKENS, MissingSpecialTokenError)
        self.stop_token_ids: frozenset[int] = frozenset(self.ids[t] for t in STOP_TOKENS)

    def render(
        self,
        messages: Sequence[Message],
        *,
        history: ThinkingHistory = ThinkingHistory.PRESERVED,
        thinking: bool | None = True,
    ) -> list[int]:
        """Prompt ids for `messages`, ending with the generation prompt unless `thinking` is None.

        `thinking` True opens `<think>` for the new turn, False closes it at once (`</think>`).
        """
        ids = [self.ids["[gMASK]"], self.ids["<sop>"]]
        last_user = max((i for i, m in enumerate(messages) if m.role == Role.USER), default=-1)
        previous: Role | None = None
        for index, message in enumerate(messages):
            keep_reasoning = history == ThinkingHistory.PRESERVED or index > last_user
            following = messages[index + 1].role if index + 1 < len(messages) else None
            ids += self._message(message, previous, keep_reasoning, following)
            previous = message.role
        if thinking is not None:
            ids += self.generation_prompt(thinking)
        return ids

    def generation_prompt(self, thinking: bool) -> list[int]:
        return [self.ids["<|assistant|>"], self.ids["<think>" if thinking else "</think>"]]

    def _message(self, message: Message, previous: Role | None, keep_reasoning: bool, following: Role | None = None) -> list[int]:
        if message.role == Role.SYSTEM:
            return [self.ids["<|system|>"], *self.encode(message.content, special=True)]
        if message.role == Role.USER:
            return [self.ids["<|user|>"], *self.encode(message.content, special=False)]
        if message.role == Role.OBSERVATION:
            # Consecutive tool results share one role marker, as in the GLM template.
            marker = [] if previous == Role.OBSERVATION else [self.ids["<|observation|>"]]
            return [
                *marker,
                self.ids["<tool_response>"],
                *self.encode(message.content, special=False),
                self.ids["</tool_response>"],
            ]
        return self._assistant(message, keep_reasoning, following)

    def _assistant(self, message: Message, keep_reasoning: bool, following: Role | None = None) -> list[int]:
        if message.token_ids is not None and (keep_reasoning or not message.reasoning):
            sampled = list(message.token_ids)
            marker = {Role.USER: "<|user|>", Role.OBSERVATION: "<|observation|>"}.get(following) if following else None
            if sampled and marker and sampled[-1] == self.ids[marker]:
                sampled.pop()  # the next message writes this very role marker itself
            # Any other stop token stays: the context keeps what was sampled, token for token.
            return [*self.generation_prompt(message.thinking), *sampled]
        ids = [self.ids["<|assistant|>"]]
        reasoning = message.reasoning.strip() if keep_reasoning else ""
        if reasoning:
            ids += [self.ids["<think>"], *self.encode(reasoning, special=True)]
        ids.append(self.ids["</think>"])
        ids += self.encode(message.content.strip(), special=True)
        for call in message.tool_calls:
            ids += self.tool_call(call)
        return ids

    def tool_call(self, call: ToolCall) -> list[int]:
        """`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>`; non-strings as JSON."""
        ids = [self.ids["<tool_call>"], *self.encode(call.name, special=False)]
        for key, value in call.arguments.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            ids += [self.ids["<arg_key>"], *self.encode(key, special=False), self.ids["</arg_key>"]]
            ids += [self.ids["<arg_value>"], *self.encode(text, special=False), self.ids["</arg_value>"]]
        ids.append(self.ids["</tool_call>"])
        return ids

    def sampled_ids(self, reasoning: str, content: str, tool_calls: Sequence[ToolCall], thinking: bool) -> list[int]:
        """The ids a GLM model would sample for this turn after the generation prompt, stop token included."""
        ids: list[int] = []
        if thinking:
            ids += [*self.encode(reasoning.strip(), special=True), self.ids["</think>"]]
        ids += self.encode(content.strip(), special=True)
        for call in tool_calls:
            ids += self.tool_call(call)
        calls_tools = bool(tool_calls) or self.ids["<tool_call>"] in ids
        ids.append(self.ids["<|observation|>" if calls_tools else "<|user|>"])
        return ids

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
            return text, text.strip(), ""  # thinking never closed (length limit)
        cut = body.index(end)
        return text, self.decode(body[:cut]).strip(), self.decode(body[cut + 1 :]).strip()
