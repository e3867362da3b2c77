"""OpenAI-compatible chat-completions backend, for GLM served by vLLM or SGLang, and any other such server.

An inference engine (vLLM, SGLang) is asked for what token in, token out needs: vLLM's
`return_token_ids` (sampled ids per choice, `prompt_token_ids` on the response) and `logprobs`,
with `chat_template_kwargs`, `top_k` and `stop_token_ids`. Reasoning comes back as
`reasoning_content` (or `reasoning` in newer vLLM) and is sent back the same way, with
`clear_thinking` false, so a GLM-4.7/5 server keeps it in the prompt (preserved thinking) and its
prefix cache stays warm. Every other server gets the standard chat-completions fields only (a
hosted API that validates its requests refuses anything else with a 400). Which one a server is,
`/v1/models` says: the engines name themselves in its `owned_by` (`vllm`, `sglang`); `engine=`
(`URL?engine=vllm|sglang|openai`) says it without asking. Standard library only (`urllib`).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
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
from swedojo.sandboxes import scope as sandbox_scope
from swedojo.schema import ToolCall


class ServerRequestError(BackendError):
    """The server refused the request (4xx other than 429): retrying will not help."""


class ServerResponseError(BackendError):
    """The server answered with something that is not a chat completion."""


ENGINES = ("vllm", "sglang")
"""Servers known to take the extra fields (`return_token_ids`, `chat_template_kwargs`, `top_k`,
`stop_token_ids`, `reasoning_content` in messages), by the name their `/v1/models` gives as `owned_by`."""

STANDARD = "openai"
"""`engine` of every other server: the standard fields only."""


class _RequestCancelledError(BackendError):
    """The request was cut because its unit of work was given up (never seen outside `generate`)."""


class _Connections:
    """urllib handlers that keep the connections they open, so another thread can cut them."""

    def __init__(self) -> None:
        self.opened: list[http.client.HTTPConnection] = []
        self.was_cut = False

        def tracked(base: type[http.client.HTTPConnection]) -> Any:
            def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
                if self.was_cut:  # cut before it opened: it never does
                    raise ConnectionAbortedError("the request was given up")
                self.opened.append(connection := base(host, **kwargs))
                return connection
            return make

        class Plain(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> Any:
                return self.do_open(tracked(http.client.HTTPConnection), req)

        class Secure(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> Any:
                return self.do_open(tracked(http.client.HTTPSConnection), req, context=self._context)  # type: ignore[attr-defined]

        self.opener = urllib.request.build_opener(Plain(), Secure())

    def cut(self) -> None:
        self.was_cut = True
        for connection in self.opened:
            if connection.sock is not None:
                with contextlib.suppress(OSError):  # closed already
                    connection.sock.shutdown(socket.SHUT_RDWR)


class OpenAIHTTPBackend:
    """Chat completions over HTTP; the server keeps any cache, so `release` has nothing to do."""

    def __init__(
        self, base_url: str, *, model: str | None = None, api_key: str | None = None, timeout: float = 600.0,
        images: bool = False, engine: str | None = None,
    ) -> None:
        """`base_url` like `http://host:8000/v1` (`/v1` is added to a bare host); `model` defaults to the served one.

        `images`: the served model takes images; an observation's images (screenshots) follow it in a
        user message of image parts (data URLs), as chat completions accept images only from the user.
        `engine`: `vllm` or `sglang` (the extra fields are sent) or `openai` (the standard ones only);
        None: as the server's `/v1/models` says, asked once."""
        if engine is not None and engine not in (*ENGINES, STANDARD):
            raise ValueError(f"engine {engine!r}: expected one of {', '.join((*ENGINES, STANDARD))}")
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        path = parts.path if parts.path not in ("", "/") else "/v1"
        self.base_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.images = images
        self.engine = engine
        self.name = base_url if model is None else f"{base_url}#{model}"
        self.version = ""  # the server does not say; a trainer that swaps weights passes its own in `dojo serve`

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default"
    ) -> Generation:
        started = time.perf_counter()
        try:
            return self._generate(messages, params, started)
        except _RequestCancelledError:
            return Generation(thinking=params.thinking, finish_reason=FinishReason.CANCELLED,
                              usage=Usage(seconds=time.perf_counter() - started))

    def _generate(self, messages: Sequence[Message], params: SamplingParams, started: float) -> Generation:
        if self.model is None or self.engine is None:
            self._ask_models()
        engine = self.engine in ENGINES
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [wire for m in messages for wire in _wire_messages(m, self.images)] if engine
            else standard_messages(messages, native=True, images=self.images),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": True,
        }
        if engine:
            body["return_token_ids"] = True
            body["chat_template_kwargs"] = {
                "enable_thinking": params.thinking,
                "clear_thinking": params.history == ThinkingHistory.INTERLEAVED,
            }
            if params.top_k:
                body["top_k"] = params.top_k
            if params.stop_token_ids:
                body["stop_token_ids"] = params.stop_token_ids
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = params.stop
        data = self._request("POST", "/chat/completions", body)
        generation = _parse_completion(data, params.thinking)
        generation.usage.seconds = time.perf_counter() - started
        return generation

    def release(self, conversation_id: str) -> None:
        return None

    def _ask_models(self) -> None:
        """`/v1/models`: the served model (when none was named) and whether an engine serves it
        (`owned_by` vllm or sglang); a server that does not answer it is a standard one."""
        try:
            data = self._request("GET", "/models", None)
        except (ServerRequestError, ServerResponseError):
            if self.model is None:
                raise
            data = {}
        listed = [m for m in data.get("data") or [] if isinstance(m, dict)]
        if self.model is None:
            if not listed or "id" not in listed[0]:
                raise ServerResponseError(f"{self.base_url}/models lists no model")
            self.model = str(listed[0]["id"])
        if self.engine is None:
            owners = {str(m.get("owned_by", "")).lower() for m in listed if m.get("id") == self.model} or \
                {str(m.get("owned_by", "")).lower() for m in listed}
            self.engine = next((e for e in ENGINES if e in owners), STANDARD)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        payload = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=payload, headers=headers, method=method)
        connections, scope = _Connections(), sandbox_scope.current()
        forget = scope.on_close(connections.cut) if scope is not None else (lambda: None)
        try:
            if scope is not None and scope.closed_because:
                raise _RequestCancelledError(scope.closed_because)
            with connections.opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except (OSError, http.client.HTTPException) as exc:  # urllib's errors, a connection cut or reset
            if scope is not None and scope.closed_because:
                raise _RequestCancelledError(scope.closed_because) from exc
            raise _request_error(method, self.base_url, path, exc) from exc
        finally:
            forget()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ServerResponseError(f"{method} {path}: not JSON: {raw[:200]!r}") from exc
        if not isinstance(data, dict):
            raise ServerResponseError(f"{method} {path}: expected a JSON object")
        return data


def _request_error(method: str, base_url: str, path: str, exc: OSError | http.client.HTTPException) -> BackendError:
    """The backend error a failed request is: the server's answer (transient or not), or the network's."""
    if isinstance(exc, urllib.error.HTTPError):
        detail = exc.read().decode(errors="replace")[:500]
        if exc.code == 429 or exc.code >= 500:
            return TransientBackendError(f"{method} {path}: HTTP {exc.code}: {detail}")
        return ServerRequestError(f"{method} {path}: HTTP {exc.code}: {detail}")
    return TransientBackendError(f"{method} {base_url}{path}: {exc}")


def image_message(paths: Sequence[str]) -> dict[str, Any]:
    """A user message of image parts (PNG data URLs) showing what a tool result saved."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": "The image(s) the tool result above shows:"}]
    for path in paths:
        data = base64.b64encode(Path(path).read_bytes()).decode()
        parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}})
    return {"role": "user", "content": parts}


def standard_messages(messages: Sequence[Message], *, native: bool, images: bool) -> list[dict[str, Any]]:
    """The conversation in OpenAI's standard format, as a strict server takes it (and litellm maps
    onto each provider's).

    Nothing outside the standard goes (reasoning stays out). With `native` tool calling, a result
    answers its call as a `tool` message, every call of an assistant turn is answered (a call that
    was never run, for its arguments were not a JSON object, is left out of the turn: the error that
    follows says so), and any other observation is a user message; without, observations are user
    messages and the calls stay in the text. With `images`, an observation's images follow as a user
    message once every call of the turn is answered.
    """
    wire: list[dict[str, Any]] = []
    pending: list[str] = []
    shown: list[dict[str, Any]] = []

    def settle() -> None:
        """Answer the calls left unanswered (an API refuses a turn whose calls are not all answered), then show images."""
        wire.extend({"role": "tool", "tool_call_id": call_id, "content": "(this call returned nothing)"} for call_id in pending)
        pending.clear()
        wire.extend(shown)
        shown.clear()

    for message in messages:
        if message.role == Role.OBSERVATION:
            if native and message.tool_call_id in pending:
                pending.remove(message.tool_call_id)
                wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
            else:
                settle()
                wire.append({"role": "user", "content": message.content})
            if images and message.images:
                shown.append(image_message(message.images))
            if not pending:
                settle()
            continue
        settle()
        if message.role != Role.ASSISTANT:
            wire.append({"role": message.role.value, "content": message.content})
            continue
        calls = [c for c in message.tool_calls if RAW_ARGUMENTS_KEY not in c.arguments] if native else []
        turn: dict[str, Any] = {"role": "assistant", "content": message.content or (None if calls else "(no text)")}
        if calls:
            turn["tool_calls"] = [{"id": c.call_id, "type": "function",
                                   "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                                  for c in calls]
            pending.extend(c.call_id for c in calls)
        wire.append(turn)
    settle()
    return wire


def _wire_messages(message: Message, images: bool) -> list[dict[str, Any]]:
    """The message as an engine takes it; with `images`, an observation's images after it as a user message."""
    wire = [_wire_message(message)]
    if images and message.images:
        wire.append(image_message(message.images))
    return wire


def _wire_message(message: Message) -> dict[str, Any]:
    """A message as an engine takes it (`observation` becomes `tool`, reasoning goes back as `reasoning_content`)."""
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
    token_ids = [int(t) for t in choice.get("token_ids") or []]
    # An engine's logprobs come with the ids of the tokens they score; without ids they are a provider's.
    kind = LogprobKind.NONE if not logprobs else LogprobKind.SERVER if token_ids else LogprobKind.PROVIDER
    return Generation(
        text=f"{reasoning}</think>{content}" if reasoning else content,
        reasoning=reasoning.strip(),
        content=content.strip(),
        thinking=thinking,
        token_ids=token_ids,
        logprobs=logprobs,
        logprob_kind=kind,
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
