"""The `[INST]` chat format of Mixtral and Llama-2 style models, rendered straight to token ids.

    <s>[INST] S\\n\\nU [/INST]A[TOOL_CALLS] [{"name": …, "arguments": …}]</s>[INST] O1\\n\\nO2 [/INST]

As in `chat.py` (GLM) and `chatml.py`, the text between markup is encoded on its own, untrusted text
(user messages, tool results) keeps markup strings as plain text, and an assistant turn that carries
its sampled ids is copied verbatim, so every prompt extends the previous prompt plus its sampled
tokens. The format has no system role: the system prompt opens the first user turn, followed by a
blank line (as Mixtral's template does), and is encoded with it as plain text. Tool results are
user turns, consecutive ones sharing one turn, separated by a blank line. A turn ends with `</s>`, the stop token; the next `[INST]` follows
it directly. Tool calls are written as Mistral's function-calling models write them
(`[TOOL_CALLS]` and a JSON list); the format has no thinking, so reasoning is never rendered and
`thinking` only matters in that no `<think>` is opened.

Markup (`[INST]`, `[/INST]`, `[TOOL_CALLS]`) is one id where the tokenizer has it as a token (newer
Mistral tokenizers), else its text's ids (Mixtral v0.1 and Llama-2 tokenize `[INST]` as text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from swedojo.agent.backends.base import BackendError, Message, Role, ThinkingHistory
from swedojo.agent.tokentext import TokenizerText
from swedojo.schema import ToolCall

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

MARKUP: tuple[str, ...] = ("[INST]", "[/INST]", "[TOOL_CALLS]")
"""Markup the format writes: one id when the tokenizer has the token, else its text."""


class MissingBosEosTokenError(BackendError):
    """The tokenizer has no single-id beginning- or end-of-sequence token."""


class InstChat(TokenizerText):
    """Renders conversations in the Mixtral/Llama `[INST]` format as token ids, and splits sampled ids."""

    name = "inst"
    tool_format = "openai"
    """Calls are JSON objects, as Mixtral and Llama function calling write them."""

    @staticmethod
    def matches(tokenizer: PreTrainedTokenizerBase) -> bool:
        """The tokenizer's own chat template writes `[INST]` turns."""
        return "[INST]" in str(getattr(tokenizer, "chat_template", None) or "")

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        super().__init__(tokenizer)
        bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        if bos is None or eos is None:
            raise MissingBosEosTokenError("an [INST] chat needs the tokenizer's bos and eos tokens")
        self.bos, self.eos = int(bos), int(eos)
        self.stop_token_ids: frozenset[int] = frozenset({self.eos})
        self.markup: dict[str, list[int]] = {}
        for token in MARKUP:
            token_id = tokenizer.convert_tokens_to_ids(token)
            single = token_id is not None and token_id != tokenizer.unk_token_id
            self.markup[token] = [token_id] if single else self.encode(token, special=False)

    def render(
        self,
        messages: Sequence[Message],
        *,
        history: ThinkingHistory = ThinkingHistory.PRESERVED,
        thinking: bool | None = True,
    ) -> list[int]:
        """Prompt ids for `messages`, ending with `[/INST]`; with `thinking` None a last user turn
        stays open (`history` changes nothing: earlier reasoning is never rendered)."""
        ids = [self.bos]
        system = "".join(m.content for m in messages if m.role == Role.SYSTEM)
        turn: list[str] = []  # the texts of the user turn being written
        for message in messages:
            if message.role == Role.SYSTEM:
                continue
            if message.role != Role.ASSISTANT:
                if system and not turn:
                    message_text, system = f"{system}\n\n{message.content}", ""
                else:
                    message_text = message.content
                turn.append(message_text)
                continue
            if turn:
                ids += self._user_turn(turn, closed=True)
                turn = []
            ids += self._assistant(message)
        if turn:
            ids += self._user_turn(turn, closed=thinking is not None)
        return ids

    def _user_turn(self, texts: list[str], *, closed: bool) -> list[int]:
        """`[INST] T1\n\nT2 [/INST]`; the text between the markup is encoded as one piece, as the
        tokenizer splits the template's text, and as plain text (a tool result cannot forge markup)."""
        body = " " + "\n\n".join(texts) + (" " if closed else "")
        return [*self.markup["[INST]"], *self.encode(body, special=False), *(self.markup["[/INST]"] if closed else [])]

    def _assistant(self, message: Message) -> list[int]:
        if message.token_ids is not None:
            sampled = list(message.token_ids)
            if not sampled or sampled[-1] != self.eos:
                sampled.append(self.eos)  # cut off by the length limit: close the turn
            return sampled
        return self._answer(message.content.strip(), message.tool_calls)

    def _answer(self, text: str, tool_calls: Sequence[ToolCall]) -> list[int]:
        """The visible answer, then the calls as `[TOOL_CALLS] [{…}, …]`, then `</s>`."""
        ids = self.encode(text, special=True)
        if tool_calls:
            body = json.dumps([{"name": c.name, "arguments": c.arguments} for c in tool_calls], ensure_ascii=False)
            ids += [*self.markup["[TOOL_CALLS]"], *self.encode(f" {body}", special=False)]
        return [*ids, self.eos]

    def sampled_ids(self, reasoning: str, content: str, tool_calls: Sequence[ToolCall], thinking: bool) -> list[int]:
        """The ids a model of this format would sample after `[/INST]`, `</s>` included (no reasoning)."""
        return self._answer(content.strip(), tool_calls)

    def split(self, sampled: Sequence[int], thinking: bool) -> tuple[str, str, str]:
        """(text, reasoning, content) of sampled ids: the format has no reasoning part."""
        body = list(sampled)
        if body and body[-1] == self.eos:
            body.pop()
        text = self.decode(body)
        return text, "", text.strip()
