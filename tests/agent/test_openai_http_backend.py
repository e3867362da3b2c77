"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 serving canned vLLM-style answers,
and against a strict stand-in of a hosted API that refuses vLLM's extra fields."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image
from provider_standins import OpenAIStandin, Turn

from swedojo.agent.backends import (
    Message,
    Role,
    SamplingParams,
    ThinkingHistory,
    TransientBackendError,
    UnknownBackendSpecError,
    load_backend,
)
from swedojo.agent.backends.openai_http import (
    RAW_ARGUMENTS_KEY,
    OpenAIHTTPBackend,
    ServerRequestError,
)
from swedojo.schema import ToolCall

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "glm-5",
    "prompt_token_ids": [1, 2, 3],
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "token_ids": [10, 11, 12, 13],
            "logprobs": {"content": [{"token": t, "logprob": -0.5 * i} for i, t in enumerate("abcd")]},
            "message": {
                "role": "assistant",
                "reasoning_content": " check the files ",
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
                    {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "not json"}},
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}},
}


class _Server(ThreadingHTTPServer):
    requests: list[dict]
    status: int = 200
    generating: bool = False
    """Answer nothing, as an engine still generating, until the client goes (then set `client_gone`)."""
    client_gone: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:
        pass

    def _reply(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.server.requests.append({"path": self.path})
        self._reply(200, {"object": "list", "data": [{"id": "glm-5", "object": "model", "owned_by": "vllm"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if self.server.generating:  # an engine notices its client went away, and aborts the request
            self.connection.settimeout(30)
            try:
                if self.connection.recv(1) == b"":
                    self.server.client_gone.set()
            except OSError:
                self.server.client_gone.set()
            return
        if self.server.status != 200:
            self._reply(self.server.status, {"error": {"message": "busy"}})
        else:
            self._reply(200, COMPLETION)


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.requests = []
    httpd.client_gone = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_round_trip_with_reasoning_tool_calls_token_ids_and_logprobs(server):
    backend = load_backend(_url(server))
    assert isinstance(backend, OpenAIHTTPBackend) and backend.base_url.endswith("/v1")
    earlier = Message(
        role=Role.ASSISTANT, reasoning="plan", content="", tool_calls=[ToolCall(name="bash", arguments={"command": "pwd"}, call_id="c0")]
    )
    messages = [Message.system("sys"), Message.user("fix"), earlier, Message.observation("/testbed", call_id="c0")]
    params = SamplingParams(temperature=0.6, top_k=20, seed=4, stop=["</answer>"], max_new_tokens=64)
    generation = backend.generate(messages, params)

    assert [r["path"] for r in server.requests] == ["/v1/models", "/v1/chat/completions"]
    body = server.requests[1]["body"]
    assert body["model"] == "glm-5" and body["max_tokens"] == 64 and body["top_k"] == 20 and body["seed"] == 4
    assert body["return_token_ids"] is True and body["logprobs"] is True
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "clear_thinking": False}
    assert body["messages"][2] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "plan",
        "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}],
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c0", "content": "/testbed"}

    assert generation.reasoning == "check the files"
    assert generation.tool_calls[0] == ToolCall(name="bash", arguments={"command": "ls"}, call_id="call_1")
    assert generation.tool_calls[1].arguments == {RAW_ARGUMENTS_KEY: "not json"}
    assert generation.token_ids == [10, 11, 12, 13] and generation.prompt_token_ids == [1, 2, 3]
    assert generation.logprobs == [0.0, -0.5, -1.0, -1.5] and generation.logprob_kind.value == "server"
    assert generation.finish_reason.value == "stop"
    usage = generation.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.prefill_tokens, usage.completion_tokens) == (3, 2, 1, 4)

    again = OpenAIHTTPBackend(_url(server) + "/v1", model="served", api_key="k")
    again.generate([Message.user("x")], SamplingParams(thinking=False, history=ThinkingHistory.INTERLEAVED))
    last = server.requests[-1]
    assert last["body"]["model"] == "served" and last["auth"] == "Bearer k"
    assert last["body"]["chat_template_kwargs"] == {"enable_thinking": False, "clear_thinking": True}


def test_server_errors_are_typed(server):
    backend = OpenAIHTTPBackend(_url(server), model="m")
    server.status = 503
    with pytest.raises(TransientBackendError):
        backend.generate([Message.user("x")], SamplingParams())
    server.status = 400
    with pytest.raises(ServerRequestError):
        backend.generate([Message.user("x")], SamplingParams())
    server.shutdown()
    server.server_close()
    with pytest.raises(TransientBackendError):
        OpenAIHTTPBackend(_url(server), model="m", timeout=2).generate([Message.user("x")], SamplingParams())


def test_a_request_in_flight_is_cut_when_its_unit_of_work_is_given_up(server):
    """A cancelled batch or an instance out of time closes the episode's sandbox scope from another
    thread; a turn waiting on the server went on waiting (up to the backend's timeout, ten minutes)
    while the server generated on for nobody. Now its connection is shut: the turn ends `cancelled`
    at once and the server sees its client gone (vLLM and SGLang then abort the request)."""
    from swedojo.agent.backends.base import FinishReason
    from swedojo.sandboxes.scope import SandboxScope, scoped

    server.generating = True
    backend = OpenAIHTTPBackend(_url(server), model="m", engine="vllm", timeout=60)
    scope, answers = SandboxScope(), []

    def turn() -> None:
        with scoped(scope):
            answers.append(backend.generate([Message.user("fix the bug")], SamplingParams()))

    thread = threading.Thread(target=turn)
    thread.start()
    for _ in range(500):
        if server.requests:
            break
        thread.join(0.01)
    assert server.requests, "the request never reached the server"
    scope.close("the batch was cancelled")
    thread.join(10)
    assert not thread.is_alive(), "the turn still waits on the server"
    assert answers[0].finish_reason == FinishReason.CANCELLED and answers[0].content == ""
    assert server.client_gone.wait(10), "the server never saw the client go"
    with scoped(scope):  # asked in a scope closed already: no request at all
        assert backend.generate([Message.user("x")], SamplingParams()).finish_reason == FinishReason.CANCELLED
    assert len(server.requests) == 1


def test_a_hosted_model_from_the_command_line_spec(server, monkeypatch):
    """`--model URL#name` names the served model; the key comes from the variable `--api-key-env` names."""
    monkeypatch.setenv("MY_PROVIDER_KEY", "secret-1")
    backend = load_backend(f"{_url(server)}/v1#hosted-model", api_key_env="MY_PROVIDER_KEY")
    backend.generate([Message.user("x")], SamplingParams(max_new_tokens=8))
    last = server.requests[-1]
    assert last["path"] == "/v1/chat/completions"  # the #name is not part of the address
    assert last["body"]["model"] == "hosted-model" and last["auth"] == "Bearer secret-1"
    monkeypatch.setenv("OPENAI_API_KEY", "secret-2")
    load_backend(_url(server)).generate([Message.user("x")], SamplingParams(max_new_tokens=8))
    assert server.requests[-1]["auth"] == "Bearer secret-2"


def test_a_screenshot_reaches_a_model_that_takes_images_and_only_such_a_model(server, tmp_path):
    png = tmp_path / "shot.png"
    Image.new("RGB", (4, 3), (200, 30, 30)).save(png)
    messages = [Message.user("Fix the page."), Message.observation("Screenshot saved as s.png.", "call_1", [str(png)])]
    load_backend(f"{_url(server)}/v1?images=1#vision").generate(messages, SamplingParams(max_new_tokens=8))
    sent = server.requests[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == "vision"
    _, tool, shown = sent["body"]["messages"]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "Screenshot saved as s.png."}
    assert shown["role"] == "user" and shown["content"][0]["type"] == "text"
    url = shown["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png.read_bytes()
    load_backend(f"{_url(server)}/v1#text-only").generate(messages, SamplingParams(max_new_tokens=8))
    assert [m["role"] for m in server.requests[-1]["body"]["messages"]] == ["user", "tool"]
    with pytest.raises(UnknownBackendSpecError, match="images=0|1 or engine=vllm|sglang|openai, not vision=yes"):
        load_backend(f"{_url(server)}/v1?vision=yes")


def test_a_server_not_known_as_an_engine_gets_the_standard_fields_only():
    """A hosted API validates its requests: vLLM's extras (token ids, template kwargs, top_k, stop ids,
    reasoning sent back) would be a 400 there, and observations answer no call of its."""
    standin = OpenAIStandin([Turn(content="<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>",
                                  reasoning="The bug is in a.py."), Turn(content="done")], owned_by="system")
    params = SamplingParams(temperature=0.6, top_k=20, stop_token_ids=[7], seed=3, stop=["</x>"], max_new_tokens=32)
    with standin.serving():
        backend = load_backend(f"{standin.url}/v1#gpt-4o", api_key="test-key")
        first = backend.generate([Message.system("sys"), Message.user("fix")], params)
        assert backend.engine == "openai" and first.reasoning == "The bug is in a.py."
        assert first.logprobs == [-0.25] and first.token_ids == [] and first.logprob_kind.value == "provider"
        messages = [Message.system("sys"), Message.user("fix"), first.message(), Message.observation("a.py")]
        assert backend.generate(messages, params).content == "done"  # the strict server took both requests
        sent = [r for r in standin.requests if r["body"] is not None]
        assert [r["path"] for r in standin.requests].count("/v1/models") == 1  # asked once
        assert set(sent[-1]["body"]) == {"model", "messages", "max_tokens", "temperature", "top_p", "logprobs", "seed", "stop"}
        assert sent[-1]["body"]["messages"][2:] == [{"role": "assistant", "content": first.content},
                                                     {"role": "user", "content": "a.py"}]

        # told it is vLLM, the backend sends vLLM's fields, and a hosted API refuses them as it does
        told = load_backend(f"{standin.url}/v1?engine=vllm#gpt-4o", api_key="test-key")
        with pytest.raises(ServerRequestError, match="HTTP 400: .*Unrecognized request argument supplied: return_token_ids"):
            told.generate([Message.user("fix")], params)
        assert told.engine == "vllm" and [r["path"] for r in standin.requests].count("/v1/models") == 1


def test_an_engine_is_told_apart_by_its_model_list(server):
    server.requests.clear()
    backend = load_backend(f"{_url(server)}/v1#glm-5")
    backend.generate([Message.user("x")], SamplingParams(top_k=5))
    assert backend.engine == "vllm" and server.requests[0]["path"] == "/v1/models"
    body = server.requests[1]["body"]
    assert body["return_token_ids"] is True and body["top_k"] == 5 and "chat_template_kwargs" in body
