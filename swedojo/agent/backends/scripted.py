"""A backend that replays given responses, for tests and demos that must not depend on a model.

With a tokenizer it behaves like the in-process backend: prompts are rendered to ids in the chat
format of the tokenizer's template (`chats.py`), each response is encoded as the tokens a model
would have sampled (tool calls in the format's markup, a stop token at the end, logprob 0.0 each),
so the token plumbing downstream is real.
Without one it behaves like an OpenAI-compatible server: text and structured tool calls only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from swedojo.agent.backends.base import (
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    SamplingParams,
    Usage,
)
from swedojo.agent.chats import chat_format_for
from swedojo.schema import ToolCall

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ScriptExhaustedError(BackendError):
    """The conversation asked for more turns than the script has."""


class ScriptFileError(BackendError):
    """The script file is missing or not a list of responses."""


class ScriptedResponse(BaseModel):
    """One canned assistant turn."""

    reasoning: str = ""
    """Thinking text."""
    content: str = ""
    """Answer text; may already hold GLM tool-call markup."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Structured calls."""

    @classmethod
    def parse(cls, item: str | dict[str, Any]) -> ScriptedResponse:
        """A dict with the fields above, or a string `REASONING</think>CONTENT` (the `</think>` optional)."""
        if isinstance(item, dict):
            return cls.model_validate(item)
        if not isinstance(item, str):
            raise TypeError(f"a response is a string or an object, not {type(item).__name__}")
        reasoning, sep, content = item.partition("</think>")
        if not sep:
            return cls(content=item)
        return cls(reasoning=reasoning.removeprefix("<think>"), content=content)


class ScriptedBackend:
    """Replays responses in order, separately for each conversation id."""

    def __init__(
        self,
        responses: Sequence[ScriptedResponse | str | dict[str, Any]],
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        name: str = "scripted",
    ) -> None:
        self.responses = [r if isinstance(r, ScriptedResponse) else ScriptedResponse.parse(r) for r in responses]
        self.chat = chat_format_for(tokenizer) if tokenizer is not None else None
        self.name = name
        self.version = ""  # no weights: the text is replayed
        self._cursor: dict[str, int] = {}

    @classmethod
    def from_file(cls, path: str | Path, tokenizer: PreTrainedTokenizerBase | None = None) -> ScriptedBackend:
        """A JSON list, or JSON Lines, of responses (strings or objects)."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
            if text.lstrip().startswith("["):
                items = json.loads(text)
            else:
                items = [json.loads(line) for line in text.splitlines() if line.strip()]
            return cls(items, tokenizer, name=f"scripted:{file.name}")
        except (OSError, ValueError, TypeError, ValidationError) as exc:
            raise ScriptFileError(f"{file}: {exc}") from exc

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        started = time.perf_counter()
        turn = self._cursor.get(conversation_id, 0)
        if turn >= len(self.responses):
            raise ScriptExhaustedError(f"script has {len(self.responses)} responses; turn {turn + 1} was asked for")
        self._cursor[conversation_id] = turn + 1
        response = self.responses[turn]
        if self.chat is None:
            return Generation(
                text=f"{response.reasoning}</think>{response.content}" if response.reasoning else response.content,
                reasoning=response.reasoning.strip(),
                content=response.content.strip(),
                thinking=params.thinking,
                tool_calls=response.tool_calls,
                usage=Usage(seconds=time.perf_counter() - started),
            )
        prompt = self.chat.render(messages, history=params.history, thinking=params.thinking)
        ids = self.chat.sampled_ids(response.reasoning, response.content, response.tool_calls, params.thinking)
        text, reasoning, content = self.chat.split(ids, params.thinking)
        return Generation(
            text=text,
            reasoning=reasoning,
            content=content,
            thinking=params.thinking,
            token_ids=ids,
            logprobs=[0.0] * len(ids),
            logprob_kind=LogprobKind.REPLAYED,
            prompt_token_ids=prompt,
            finish_reason=FinishReason.STOP,
            usage=Usage(
                prompt_tokens=len(prompt),
                prefill_tokens=len(prompt),
                completion_tokens=len(ids),
                seconds=time.perf_counter() - started,
            ),
        )

    def release(self, conversation_id: str) -> None:
        self._cursor.pop(conversation_id, None)

