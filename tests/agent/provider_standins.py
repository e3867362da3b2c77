"""Stand-ins of hosted model APIs on 127.0.0.1, as strict as the real ones about what a request holds.

`OpenAIStandin` serves chat completions and refuses, with a 400 as OpenAI words it, any field
outside the standard request schema (vLLM's `return_token_ids`, `chat_template_kwargs`, `top_k`, a
message's `reasoning_content`), a malformed `tools` entry, and tool messages that answer no call
(or calls left unanswered). `AnthropicStandin` serves Anthropic's messages API with the same
strictness. Both answer from a script: assistant turns (text and tool calls) or error statuses
(429, 5xx, 400), one per request, and record every request with its arrival time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_FIELDS = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stream",
    "stream_options", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    "modalities", "audio", "prediction", "reasoning_effort", "service_tier", "web_search_options",
    "safety_identifier", "prompt_cache_key", "verbosity", "functions", "function_call",
})
"""The top-level fields of OpenAI's chat-completions request."""

OPENAI_MESSAGE_FIELDS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}

ANTHROPIC_FIELDS = frozenset({
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p", "top_k",
    "stop_sequences", "metadata", "stream", "thinking", "service_tier", "container", "mcp_servers",
})
"""The top-level fields of Anthropic's messages request."""


@dataclass
class Turn:
    """One scripted answer: an assistant turn, or an error status."""

    content: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(tool name, arguments) of each call."""
    status: int = 200
    """Not 200: answer this status with `error` instead of a turn."""
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 1000
    completion_tokens: int = 50
    reasoning: str = ""
    """OpenAI stand-in only: sent as `reasoning_content`, as some OpenAI-compatible servers do."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: Standin


class Standin:
    """A scripted API server; `requests` holds every request (path, headers, body, time)."""

    def __init__(self, turns: list[Turn], api_key: str = "test-key") -> None:
        self.turns = list(turns)
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.standin = self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def next_turn(self) -> Turn:
        with self.lock:
            if not self.turns:
                return Turn(status=400, error="the stand-in's script is exhausted")
            return self.turns.pop(0)

    def answer(self, handler: _Handler, path: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        raise NotImplementedError

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": []}

    @contextmanager
    def serving(self) -> Iterator[Standin]:
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        standin = self.server.standin
        standin.requests.append({"path": self.path, "headers": dict(self.headers), "body": None, "at": time.monotonic()})
        if self.path.rstrip("/").endswith("/models"):
            self._reply(200, standin.models())
        else:
            self._reply(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        standin = self.server.standin
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        standin.requests.append({"path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()})
        status, reply, headers = standin.answer(self, self.path, body)
        self._reply(status, reply, headers)


def _openai_error(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class OpenAIStandin(Standin):
    """OpenAI's chat completions, strict about the request; `owned_by` is what `/v1/models` says
    owns the model (OpenAI says `openai` or `system`, vLLM `vllm`, SGLang `sglang`)."""

    def __init__(self, turns: list[Turn], api_key: str = "test-key", model: str = "gpt-4o",
                 owned_by: str = "openai", strict: bool = True) -> None:
        super().__init__(turns, api_key)
        self.model, self.owned_by, self.strict = model, owned_by, strict

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": self.owned_by}]}

    def answer(self, handler: _Handler, path: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return 404, _openai_error(f"Invalid URL (POST {path})"), {}
        if self.api_key and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, _openai_error("Incorrect API key provided.", code="invalid_api_key"), {}
        if not isinstance(body, dict):
            return 400, _openai_error("We could not parse the JSON body of your request."), {}
        if self.strict:
            problem = openai_request_problem(body)
            if problem:
                return 400, _openai_error(problem), {}
        turn = self.next_turn()
        if turn.status != 200:
            kind = "rate_limit_exceeded" if turn.status == 429 else "server_error" if turn.status >= 500 else "invalid_request_error"
            return turn.status, _openai_error(turn.error or f"status {turn.status}", kind), turn.headers
        calls = [{"id": f"call_{len(self.requests)}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(arguments)}}
                 for i, (name, arguments) in enumerate(turn.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": turn.content or None, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        if turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop",
                                  "logprobs": None}
        if body.get("logprobs"):
            words = (turn.content or "x").split() or ["x"]
            choice["logprobs"] = {"content": [{"token": w, "logprob": -0.25, "bytes": list(w.encode()), "top_logprobs": []}
                                              for w in words], "refusal": None}
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", self.model), "choices": [choice], "system_fingerprint": "fp_standin",
            "usage": {"prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens,
                      "total_tokens": turn.prompt_tokens + turn.completion_tokens},
        }, {}


def openai_request_problem(body: dict[str, Any]) -> str:
    """What OpenAI's API would refuse in this chat-completions request, in its words; empty when nothing."""
    for key in body:
        if key not in OPENAI_FIELDS:
            return f"Unrecognized request argument supplied: {key}"
    if "model" not in body or "messages" not in body:
        return "you must provide a model parameter" if "model" not in body else "Missing required parameter: 'messages'."
    for tool in body.get("tools") or []:
        if set(tool) != {"type", "function"} or tool["type"] != "function":
            return f"Invalid 'tools': {json.dumps(tool)[:80]}"
        if not set(tool["function"]) <= {"name", "description", "parameters", "strict"} or "name" not in tool["function"]:
            return f"Invalid 'tools[].function': {json.dumps(tool['function'])[:80]}"
    pending: list[str] = []
    for index, message in enumerate(body["messages"]):
        role = message.get("role")
        allowed = OPENAI_MESSAGE_FIELDS.get(role)
        if allowed is None:
            return f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'."
        extra = sorted(set(message) - allowed)
        if extra:
            return f"Additional properties are not allowed ('{extra[0]}' was unexpected) - 'messages.{index}'"
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.")
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                try:
                    json.loads(call["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    return f"Invalid 'messages[{index}].tool_calls': arguments must be a JSON string"
                pending.append(call["id"])
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}")
    return ""


def _anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class AnthropicStandin(Standin):
    """Anthropic's messages API (`POST /v1/messages`, `x-api-key`), strict about the request."""

    def __init__(self, turns: list[Turn], api_key: str = "test-key", model: str = "claude-sonnet-4-5") -> None:
        super().__init__(turns, api_key)
        self.model = model

    def answer(self, handler: _Handler, path: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path.rstrip("/") != "/v1/messages":
            return 404, _anthropic_error(f"Not found: {path}", "not_found_error"), {}
        if handler.headers.get("x-api-key") != self.api_key:
            return 401, _anthropic_error("invalid x-api-key", "authentication_error"), {}
        if not handler.headers.get("anthropic-version"):
            return 400, _anthropic_error("anthropic-version: header is required"), {}
        if not isinstance(body, dict):
            return 400, _anthropic_error("request body is not JSON"), {}
        problem = anthropic_request_problem(body)
        if problem:
            return 400, _anthropic_error(problem), {}
        turn = self.next_turn()
        if turn.status != 200:
            kind = "rate_limit_error" if turn.status == 429 else "overloaded_error" if turn.status >= 500 else "invalid_request_error"
            return turn.status, _anthropic_error(turn.error or f"status {turn.status}", kind), turn.headers
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.content}] if turn.content else []
        content += [{"type": "tool_use", "id": f"toolu_{len(self.requests)}_{i}", "name": name, "input": arguments}
                    for i, (name, arguments) in enumerate(turn.tool_calls)]
        return 200, {
            "id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": "tool_use" if turn.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": turn.completion_tokens},
        }, {}


def anthropic_request_problem(body: dict[str, Any]) -> str:
    """What Anthropic's API would refuse in this messages request; empty when nothing."""
    for key in body:
        if key not in ANTHROPIC_FIELDS:
            return f"{key}: Extra inputs are not permitted"
    for key in ("model", "messages", "max_tokens"):
        if key not in body:
            return f"{key}: Field required"
    for tool in body.get("tools") or []:
        if "name" not in tool or "input_schema" not in tool or not set(tool) <= {"name", "description", "input_schema", "cache_control", "type"}:
            return f"tools: invalid tool {json.dumps(tool)[:80]}"
    expected = "user"
    pending: set[str] = set()
    for index, message in enumerate(body["messages"]):
        if message.get("role") != expected:
            return f"messages: roles must alternate between \"user\" and \"assistant\" (messages.{index})"
        expected = "assistant" if expected == "user" else "user"
        blocks = message["content"] if isinstance(message["content"], list) else [{"type": "text", "text": message["content"]}]
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if message["role"] == "user":
            if pending - answered:
                return (f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        f"{', '.join(sorted(pending - answered))}")
            if answered - pending:
                return f"messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(sorted(answered - pending))}"
            pending = set()
        else:
            pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return ""
