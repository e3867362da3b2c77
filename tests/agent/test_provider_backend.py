"""Hosted models by provider name (`ProviderBackend`, litellm) against strict stand-ins of their APIs on 127.0.0.1.

The stand-ins refuse what the real APIs refuse (a field outside the schema, a tool message that
answers no call, a call left unanswered), so a request that passes here is one the provider takes.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from provider_standins import AnthropicStandin, OpenAIStandin, Turn

import swedojo
from swedojo.agent.backends import (
    Message,
    SamplingParams,
    UnknownBackendSpecError,
    load_backend,
)
from swedojo.agent.backends.provider import (
    MissingKeyError,
    ProviderBackend,
    ProviderRequestError,
    ProviderUnavailableError,
    litellm_module,
)
from swedojo.schema import LogprobKind, ToolCall
from swedojo.tools.registry import ToolSetConfig

TOOLS = [spec.openai() for spec in ToolSetConfig().build("swe").specs()]
SAMPLING = SamplingParams(temperature=0.0, max_new_tokens=256)


def price(model: str, prompt: int, completion: int) -> float:
    """What litellm's bundled price map says `prompt` + `completion` tokens of `model` cost."""
    entry = litellm_module().model_cost[model]
    return prompt * entry["input_cost_per_token"] + completion * entry["output_cost_per_token"]


@pytest.fixture
def openai_env(monkeypatch):
    """A strict OpenAI stand-in, reached through litellm's usual variables; yields a function that serves a script."""
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    servers = []

    def serve(turns: list[Turn], **options) -> OpenAIStandin:
        standin = OpenAIStandin(turns, **options)
        servers.append(standin.serving())
        servers[-1].__enter__()
        monkeypatch.setenv("OPENAI_API_BASE", standin.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        return standin

    yield serve
    for serving in servers:
        serving.__exit__(None, None, None)


def test_native_tool_calls_through_a_strict_openai_server_with_tokens_cost_and_logprobs(openai_env):
    standin = openai_env([
        Turn(content="Plan: look first.", tool_calls=[("bash", {"command": "ls"}), ("bash", {"command": "pwd"})],
             prompt_tokens=1200, completion_tokens=40),
        Turn(content="Done.", prompt_tokens=1300, completion_tokens=10),
    ])
    backend = load_backend("openai/gpt-4o")
    assert isinstance(backend, ProviderBackend) and backend.tool_format == "native" and backend.priced
    messages = [Message.system("You fix bugs."), Message.user("Fix it.")]
    first = backend.generate(messages, SAMPLING, tools=TOOLS)

    sent = standin.requests[-1]["body"]
    assert sent["model"] == "gpt-4o" and sent["tools"] == TOOLS and sent["max_tokens"] == 256
    assert sent["logprobs"] is True and sent["temperature"] == 0.0
    assert [c.name for c in first.tool_calls] == ["bash", "bash"] and first.tool_calls[0].arguments == {"command": "ls"}
    assert first.content == "Plan: look first." and first.token_ids == [] and first.logprobs == [-0.25] * 3
    assert first.logprob_kind == LogprobKind.PROVIDER
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (1200, 40)
    assert first.usage.cost_usd == pytest.approx(price("gpt-4o", 1200, 40))

    # each call answered by its tool message, the verification note after them as a user message
    messages += [first.message(), Message.observation("a.py", first.tool_calls[0].call_id),
                 Message.observation("/work", first.tool_calls[1].call_id), Message.observation("Verification failed.")]
    second = backend.generate(messages, SAMPLING, tools=TOOLS)
    assert second.content == "Done." and second.tool_calls == []
    wire = standin.requests[-1]["body"]["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [m.get("tool_call_id") for m in wire[3:5]] == [c.call_id for c in first.tool_calls]
    assert second.usage.cost_usd == pytest.approx(price("gpt-4o", 1300, 10))


def test_reasoning_and_broken_calls_never_reach_a_strict_server(openai_env):
    """A turn's reasoning is not a standard field, and a call whose arguments were not JSON was never run."""
    standin = openai_env([Turn(content="ok"), Turn(content="ok")])
    backend = load_backend("openai/gpt-4o")
    turn = Message(role="assistant", content="", reasoning="Let me think.", tool_calls=[
        ToolCall(name="bash", arguments={"command": "ls"}, call_id="call_a"),
        ToolCall(name="bash", arguments={"_raw_arguments": '{"command": "l'}, call_id="call_b")])
    messages = [Message.user("Fix it."), turn, Message.observation("a.py", "call_a"),
                Message.observation("The arguments of tool call 'bash' are not a JSON object.")]
    assert backend.generate(messages, SAMPLING, tools=TOOLS).content == "ok"
    wire = standin.requests[-1]["body"]["messages"]
    assert not wire[1].get("content") and "reasoning_content" not in wire[1]
    assert wire[1]["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]
    # an observation for a call never answered (the run's last turn) still leaves the request valid
    backend.generate([Message.user("Fix it."), turn], SAMPLING, tools=TOOLS)
    assert standin.requests[-1]["body"]["messages"][-1]["role"] == "tool"


def test_a_model_without_tool_calling_writes_its_calls_in_text(openai_env):
    standin = openai_env([Turn(content='```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```'), Turn(content="ok")])
    backend = load_backend("openai/gpt-4o", native_tools=False)
    assert backend.tool_format == "openai"
    first = backend.generate([Message.user("Fix it.")], SAMPLING, tools=TOOLS)
    assert "tools" not in standin.requests[-1]["body"] and first.tool_calls == []
    backend.generate([Message.user("Fix it."), first.message(), Message.observation("a.py")], SAMPLING)
    assert [m["role"] for m in standin.requests[-1]["body"]["messages"]] == ["user", "assistant", "user"]


def test_a_model_litellm_does_not_price_has_an_unknown_cost_never_zero(openai_env):
    openai_env([Turn(content="ok", tool_calls=[("submit", {})])], model="in-house-model")
    backend = load_backend("openai/in-house-model")
    assert backend.tool_format == "native" and not backend.priced  # the provider's API has tools; no price
    generation = backend.generate([Message.user("Fix it.")], SAMPLING, tools=TOOLS)
    assert generation.tool_calls[0].name == "submit"
    assert generation.usage.completion_tokens == 50 and generation.usage.cost_usd is None


def test_anthropic_messages_api_with_tool_use_through_its_base_url(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    standin = AnthropicStandin([
        Turn(content="I will list the files.", tool_calls=[("bash", {"command": "ls"})], prompt_tokens=900, completion_tokens=30),
        Turn(content="All done.", prompt_tokens=950, completion_tokens=5),
    ])
    with standin.serving():
        monkeypatch.setenv("ANTHROPIC_API_BASE", standin.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        backend = load_backend("anthropic/claude-sonnet-4-5")
        assert backend.tool_format == "native" and backend.priced
        messages = [Message.system("You fix bugs."), Message.user("Fix it.")]
        first = backend.generate(messages, SamplingParams(temperature=0.0, max_new_tokens=128, seed=7), tools=TOOLS)
        sent = standin.requests[-1]["body"]
        assert sent["system"] == [{"type": "text", "text": "You fix bugs."}] and "seed" not in sent
        assert {t["name"] for t in sent["tools"]} == {t["function"]["name"] for t in TOOLS}
        bash = next(t for t in sent["tools"] if t["name"] == "bash")
        assert bash["input_schema"] == next(t for t in TOOLS if t["function"]["name"] == "bash")["function"]["parameters"]
        assert first.tool_calls == [ToolCall(name="bash", arguments={"command": "ls"}, call_id="toolu_1_0")]
        assert first.usage.cost_usd == pytest.approx(price("claude-sonnet-4-5", 900, 30))
        assert first.logprob_kind == LogprobKind.NONE  # Anthropic reports none

        messages += [first.message(), Message.observation("a.py", "toolu_1_0"), Message.observation("Keep going.")]
        second = backend.generate(messages, SAMPLING, tools=TOOLS)
        assert second.content == "All done."
        sent = standin.requests[-1]["body"]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1_0", "content": "a.py"}

        standin.turns.append(Turn(status=400, error="prompt is too long: 210000 tokens > 200000 maximum"))
        with pytest.raises(ProviderRequestError) as refused:
            backend.generate(messages, SAMPLING, tools=TOOLS)
        assert str(refused.value) == ("anthropic/claude-sonnet-4-5: HTTP 400: prompt is too long: 210000 tokens > "
                                      "200000 maximum")


def test_rate_limits_and_server_errors_are_retried_with_exponential_backoff(openai_env):
    standin = openai_env([Turn(status=429, error="Rate limit reached for gpt-4o"),
                          Turn(status=429, error="Rate limit reached for gpt-4o"),
                          Turn(content="finally")])
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # sleeps, and notes how long it was asked to
        waits.append(seconds)
        time.sleep(seconds)

    backend = load_backend("openai/gpt-4o", backoff_s=0.4, sleep=sleep)
    assert backend.generate([Message.user("Fix it.")], SAMPLING).content == "finally"
    times = [r["at"] for r in standin.requests if r["path"].endswith("/chat/completions")]
    assert len(times) == 3  # litellm's and the SDK's own retries are off: every attempt is ours
    assert waits == [0.4, 0.8]  # doubled each time
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] >= 0.4 and gaps[1] >= 0.8, gaps

    standin.turns += [Turn(status=503, error="The server is overloaded"), Turn(content="after a 503"),
                      Turn(status=429, error="slow down", headers={"Retry-After": "1"}), Turn(content="after waiting")]
    assert backend.generate([Message.user("Fix it.")], SAMPLING).content == "after a 503"
    started = time.monotonic()
    assert backend.generate([Message.user("Fix it.")], SAMPLING).content == "after waiting"
    assert time.monotonic() - started >= 1.0 and waits[-1] == 1.0  # Retry-After asked for more than the backoff

    standin.turns += [Turn(status=429, error="Rate limit reached for gpt-4o")] * 3
    bounded = load_backend("openai/gpt-4o", backoff_s=0.01, retries=2)
    with pytest.raises(ProviderUnavailableError, match=r"HTTP 429 on 3 attempts .*Rate limit reached for gpt-4o"):
        bounded.generate([Message.user("Fix it.")], SAMPLING)
    gone = load_backend("openai/gpt-4o", backoff_s=0.01, retries=1, api_base="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderUnavailableError, match=r"on 2 attempts .*Connection error"):
        gone.generate([Message.user("Fix it.")], SAMPLING)


def test_a_refused_request_is_one_line_with_the_providers_words_and_not_retried(openai_env):
    standin = openai_env([Turn(status=400, error="This model's maximum context length is 128000 tokens.\nReduce it.")])
    backend = load_backend("openai/gpt-4o", backoff_s=0.01)
    with pytest.raises(ProviderRequestError) as refused:
        backend.generate([Message.user("Fix it.")], SAMPLING)
    assert str(refused.value) == ("openai/gpt-4o: HTTP 400: This model's maximum context length is 128000 tokens. "
                                  "Reduce it.")
    assert len(standin.requests) == 1
    standin.api_key = "another-key"
    with pytest.raises(ProviderRequestError, match="HTTP 401: Incorrect API key provided"):
        backend.generate([Message.user("Fix it.")], SAMPLING)


def test_provider_names_keys_and_what_is_not_a_model(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="set ANTHROPIC_API_KEY"):
        load_backend("anthropic/claude-sonnet-4-5")
    with pytest.raises(MissingKeyError, match="MY_KEY .* is not set"):
        load_backend("gpt-4o", api_key_env="MY_KEY")
    monkeypatch.setenv("MY_KEY", "k")
    bare = load_backend("gpt-4o", api_key_env="MY_KEY")  # a bare name litellm knows is OpenAI's
    assert bare.provider == "openai" and bare.api_key == "k" and bare.name == "gpt-4o"
    for spec in ("no-such-model-anywhere", "./checkpoints/missing", str(tmp_path / "missing")):
        with pytest.raises(UnknownBackendSpecError, match="provider's model name"):
            load_backend(spec)


OFFLINE_PROBE = textwrap.dedent("""
    import json, os, socket, sys
    tried = []
    real_connect, real_lookup = socket.socket.connect, socket.getaddrinfo
    LOCAL = ("127.0.0.1", "localhost", "::1")

    def connect(self, address):
        if isinstance(address, tuple) and address[0] not in LOCAL:
            tried.append(str(address[0]))
            raise OSError("no network")
        return real_connect(self, address)

    def lookup(host, *args, **kwargs):
        if host not in LOCAL and host is not None:
            tried.append(str(host))
            raise socket.gaierror("no network")
        return real_lookup(host, *args, **kwargs)

    socket.socket.connect, socket.getaddrinfo = connect, lookup
    from swedojo.agent.backends import Message, SamplingParams, load_backend
    backend = load_backend("openai/gpt-4o")
    generation = backend.generate([Message.user("hi")], SamplingParams(max_new_tokens=8), tools=json.loads(sys.argv[1]))
    print(json.dumps({"tried": tried, "cost": generation.usage.cost_usd, "dotenv": os.environ.get("SWEDOJO_DOTENV_PROBE"),
                      "calls": [c.name for c in generation.tool_calls]}))
""")


def test_litellm_works_offline_reaching_nothing_but_the_servers_it_is_given(tmp_path):
    """Nothing at import or call time leaves loopback (no price map, beta headers or tokenizer fetched), and
    litellm's DEV mode does not load a `.env` from the working directory."""
    standin = OpenAIStandin([Turn(content="ok", tool_calls=[("submit", {})])])
    (tmp_path / ".env").write_text("SWEDOJO_DOTENV_PROBE=loaded\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "OPENAI_", "ANTHROPIC_"))}
    env.update(OPENAI_API_BASE=standin.url + "/v1", OPENAI_API_KEY="test-key",
               PYTHONPATH=str(Path(swedojo.__file__).parents[1]))  # the swedojo under test, from any cwd
    with standin.serving():
        probe = subprocess.run([sys.executable, "-c", OFFLINE_PROBE, json.dumps(TOOLS)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120, check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert seen["tried"] == [], f"litellm tried to reach {seen['tried']}"
    assert seen["calls"] == ["submit"] and seen["cost"] > 0
    assert seen["dotenv"] is None  # the working directory's .env (a repository's) stays out of the environment
