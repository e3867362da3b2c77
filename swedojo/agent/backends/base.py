"""The model backend contract: messages in, the next assistant message out, as text and as tokens.

Token in, token out: a backend that samples returns the exact token ids and their logprobs, and an
assistant message that carries them is rendered from those ids on the next turn, never from its
text, so the trajectory a trainer sees is the sequence the model actually produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from swedojo.schema import LogprobKind, ToolCall


class BackendError(Exception):
    """Base of the fatal errors a backend raises; model-visible problems are never exceptions."""


class TransientBackendError(BackendError):
    """The backend may answer if asked again (server overloaded, connection dropped): retry."""


class Role(str, Enum):
    """Who speaks; `observation` is a tool result (OpenAI's `tool` role)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    OBSERVATION = "observation"


class ThinkingHistory(str, Enum):
    """What happens to the reasoning of earlier assistant turns when the prompt is rendered."""

    PRESERVED = "preserved"
    """Keep every earlier turn's thinking (GLM-4.7/5 `clear_thinking=false`): prompts only grow."""
    INTERLEAVED = "interleaved"
    """Drop thinking of turns before the last user message (the default GLM template)."""


class FinishReason(str, Enum):
    """Why sampling stopped."""

    STOP = "stop"
    """A stop token or stop string was produced."""
    LENGTH = "length"
    """`max_new_tokens` was reached."""
    CANCELLED = "cancelled"
    """The unit of work it was for was given up (its sandbox scope closed: a batch cancelled, an
    instance out of time): sampling stopped at the next token."""


class Message(BaseModel):
    """One message of a conversation."""

    role: Role
    """Speaker."""
    content: str = ""
    """System prompt, user text, tool result, or the visible assistant answer (GLM tool-call markup included)."""
    reasoning: str = ""
    """Assistant thinking, without the `<think>` tags."""
    token_ids: list[int] | None = None
    """Assistant turns a backend sampled: the exact ids, stop token included; rendered verbatim."""
    thinking: bool = True
    """Assistant: whether the turn was generated with thinking open (`<think>` in its prompt)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Assistant: calls as a server structured them (OpenAI format); empty when they live in `content`."""
    tool_call_id: str = ""
    """Observation: the call this result answers (OpenAI `tool` messages need it)."""
    images: list[str] = Field(default_factory=list)
    """Observation: PNG files on this machine the result shows (screenshots). A backend whose model
    takes images sends them with the text; the others, and every chat format rendered to ids, read
    the text alone, which names each file."""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role=Role.SYSTEM, content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role=Role.USER, content=text)

    @classmethod
    def observation(cls, text: str, call_id: str = "", images: Sequence[str] = ()) -> Message:
        return cls(role=Role.OBSERVATION, content=text, tool_call_id=call_id, images=list(images))


class SamplingParams(BaseModel):
    """How to sample one assistant turn, and how to render the history for it."""

    temperature: float = Field(default=1.0, ge=0.0)
    """0 means greedy."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass; 1.0 turns it off."""
    top_k: int = Field(default=0, ge=0)
    """Keep the k most likely tokens; 0 turns it off."""
    max_new_tokens: int = Field(default=1024, ge=1)
    """Upper bound on sampled tokens, stop token included."""
    seed: int | None = None
    """Seed for this turn's sampling; None continues the backend's own generator."""
    stop: list[str] = Field(default_factory=list)
    """Stop strings; the text that completes one is kept (tokens are never cut)."""
    stop_token_ids: list[int] = Field(default_factory=list)
    """Stop tokens besides the chat format's (`<|user|>`, `<|observation|>`, `<|endoftext|>`)."""
    thinking: bool = True
    """Open a `<think>` block for this turn (False renders `</think>` right after `<|assistant|>`)."""
    history: ThinkingHistory = ThinkingHistory.PRESERVED
    """What to do with the reasoning of earlier turns."""


class Usage(BaseModel):
    """What one call cost; `Step.usage` takes `model_dump()` of it."""

    prompt_tokens: int = 0
    """Length of the prompt."""
    prefill_tokens: int = 0
    """Prompt tokens computed this call."""
    cached_tokens: int = 0
    """Prompt tokens served from the retained cache."""
    completion_tokens: int = 0
    """Tokens sampled."""
    seconds: float = 0.0
    """Wall time of the call."""
    prefill_seconds: float = 0.0
    """Part of `seconds` spent computing the prompt (time to first token), where the backend knows it."""
    cost_usd: float | None = None
    """What the call cost in US dollars at the provider's list price; None when unknown (never 0.0 for unknown)."""


RAW_ARGUMENTS_KEY = "_raw_arguments"
"""A server's tool-call arguments that are not a JSON object are passed on under this key, for the agent to reject."""


class Generation(BaseModel):
    """The next assistant message, as text and as the exact sampled tokens."""

    text: str = ""
    """Everything sampled, decoded (reasoning, `</think>`, answer), without the stop token."""
    reasoning: str = ""
    """Thinking part, stripped."""
    content: str = ""
    """Answer part, stripped; GLM tool-call markup stays in it for the tool parser."""
    thinking: bool = True
    """Whether the turn was generated with thinking open."""
    token_ids: list[int] = Field(default_factory=list)
    """Sampled ids, stop token included; empty when a server does not return them."""
    logprobs: list[float] = Field(default_factory=list)
    """One logprob per sampled id, from the distribution named by `logprob_kind`."""
    logprob_kind: LogprobKind = LogprobKind.NONE
    """Which distribution the logprobs come from."""
    prompt_token_ids: list[int] = Field(default_factory=list)
    """The prompt the model saw; empty when unknown."""
    routed_experts: list[list[list[int]]] = Field(default_factory=list)
    """MoE routing replay, when recorded: [tokens, layers, top_k] expert ids of every token fed to the
    model, i.e. `prompt_token_ids + token_ids[:-1]` (slime's `rollout_routed_experts`, -1 on dense
    layers); empty when not recorded."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls a server parsed (arguments that are not an object under RAW_ARGUMENTS_KEY); in-process
    backends leave them in `content`."""
    finish_reason: FinishReason = FinishReason.STOP
    """Why sampling stopped."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens and time."""

    def message(self) -> Message:
        """The assistant message to append to the conversation (keeps the token ids)."""
        return Message(
            role=Role.ASSISTANT,
            content=self.content,
            reasoning=self.reasoning,
            token_ids=list(self.token_ids) or None,
            thinking=self.thinking,
            tool_calls=list(self.tool_calls),
        )


@runtime_checkable
class ModelBackend(Protocol):
    """A model that continues a conversation.

    A backend may say how its model writes tool calls with a `tool_format` attribute (a name in
    `swedojo.tools.formats`); one whose `tool_format` is `native` calls tools through its API, and
    its `generate` takes the tools' schemas as `tools=` (OpenAI's `tools` entries).
    """

    name: str
    """Identifier recorded in trajectories (`Trajectory.model`)."""
    version: str
    """Version of the weights the tokens come from (`Trajectory.policy_version`); "" when unknown."""

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        """The next assistant message; state (a KV cache) may be kept per `conversation_id`."""
        ...

    def release(self, conversation_id: str) -> None:
        """Forget the state kept for a conversation."""
        ...
