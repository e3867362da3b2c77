"""OpenAI-compatible chat-completions backend, for GLM served by vLLM or SGLang.

Asks for what token in, token out needs where the server offers it: vLLM's `return_token_ids`
(sampled ids per choice, `prompt_token_ids` on the response) and `logprobs`. Reasoning comes
back as `reasoning_content` (or `reasoning` in newer vLLM) and is sent back the same way, with
`clear_thinking` false, so a GLM-4.7/5 server keeps it in the prompt (preserved thinking) and its
prefix cache stays warm. Standard library only (`urllib`).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swedojo.agent.backends.base import (
    RAW_ARGUMENTS_KEY,
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    Role,
    SamplingParams,
    ThinkingHistory,
    TransientBackendError,
    Usage,
)
from swedojo.schema import ToolCall


class ServerRequestError(BackendError):
    """The server refused the request (4xx other than 429): retrying will not help."""


class ServerResponseError(BackendError):
    """The server answered with something that is not a chat completion."""


class OpenAIHTTPBackend:
    """Chat completions over HTTP; the server keeps any cache, so `release` has nothing to do."""

    def __init__(
        self, base_url: str, *, model: str | None = None, api_key: str | None = None, timeout: float = 600.0,
        images: bool = False,
    ) -> None:
        """`base_url` like `http://host:8000/v1` (`/v1` is added to a bare host); `model` defaults to the served one.

        `images`: the served model takes images; an observation's images (screenshots) follow it in a
        user message of image parts (data URLs), as chat completions accept images only from the user."""
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        path = parts.path if parts.path not in ("", "/") else "/v1"
        self.base_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.images = images
        self.name = base_url if model is None else f"{base_url}#{model}"
        self.version = ""  # the server does not say; a trainer that swaps weights passes its own in `dojo serve`

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        started = time.perf_counter()
        body: dict[str, Any] = {
            "model": self.model or self._served_model(),
            "messages": [wire for m in messages for wire in _wire_messages(m, self.images)],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": True,
            "return_token_ids": True,
            "chat_template_kwargs": {
                "enable_thinking": params.thinking,
                "clear_thinking": params.history == ThinkingHistory.INTERLEAVED,
            },
        }
        if params.top_k:
            body["top_k"] = params.top_k
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = params.stop
        if params.stop_token_ids:
            body["stop_token_ids"] = params.stop_token_ids
        data = self._request("POST", "/chat/completions", body)
        generation = _parse_completion(data, params.thinking)
        generation.usage.seconds = time.perf_counter() - started
        return generation

    def release(self, conversation_id: str) -> None:
        return None

    def _served_model(self) -> str:
        data = self._request("GET", "/models", None)
        try:
            self.model = str(data["data"][0]["id"])
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerResponseError(f"{self.base_url}/models lists no model") from exc
        return self.model

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        payload = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=payload, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            if exc.code == 429 or exc.code >= 500:
                raise TransientBackendError(f"{method} {path}: HTTP {exc.code}: {detail}") from exc
            raise ServerRequestError(f"{method} {path}: HTTP {exc.code}: {detail}") from exc
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            raise TransientBackendError(f"{method} {self.base_url}{path}: {exc}") from exc
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ServerResponseError(f"{method} {path}: not JSON: {raw[:200]!r}") from exc
        if not isinstance(data, dict):
            raise ServerResponseError(f"{method} {path}: expected a JSON object")
        return data


def _wire_messages(message: Message, images: bool) -> list[dict[str, Any]]:
    """The message in OpenAI's format; with `images`, an observation's images after it as a user message."""
    wire = [_wire_message(message)]
    if images and message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": "The image(s) the tool result above shows:"}]
        for path in message.images:
            data = base64.b64encode(Path(path).read_bytes()).decode()
            parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}})
        wire.append({"role": "user", "content": parts})
    return wire


def _wire_message(message: Message) -> dict[str, Any]:
    """A message in OpenAI's format (`observation` becomes `tool`)."""
    if message.role == Role.OBSERVATION:
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.role == Role.ASSISTANT:
        if message.reasoning:
            wire["reasoning_content"] = message.reasoning
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
                }
                for call in message.tool_calls
            ]
    return wire


def _tool_call(wire: dict[str, Any]) -> ToolCall:
    function = wire.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        arguments = {RAW_ARGUMENTS_KEY: raw}
    return ToolCall(name=str(function.get("name", "")), arguments=arguments, call_id=str(wire.get("id") or ""))


def _parse_completion(data: dict[str, Any], thinking: bool) -> Generation:
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ServerResponseError(f"no choices in response: {str(data)[:200]}") from exc
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    logprobs = [float(item["logprob"]) for item in ((choice.get("logprobs") or {}).get("content") or [])]
    usage = data.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Generation(
        text=f"{reasoning}</think>{content}" if reasoning else content,
        reasoning=reasoning.strip(),
        content=content.strip(),
        thinking=thinking,
        token_ids=[int(t) for t in choice.get("token_ids") or []],
        logprobs=logprobs,
        logprob_kind=LogprobKind.SERVER if logprobs else LogprobKind.NONE,
        prompt_token_ids=[int(t) for t in data.get("prompt_token_ids") or []],
        tool_calls=[_tool_call(call) for call in message.get("tool_calls") or []],
        finish_reason=FinishReason.LENGTH if choice.get("finish_reason") == "length" else FinishReason.STOP,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            prefill_tokens=prompt_tokens - cached,
            cached_tokens=cached,
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
    )
