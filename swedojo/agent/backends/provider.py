"""Hosted models by provider name (`openai/gpt-4o`, `anthropic/claude-sonnet-4-5`, `gpt-4o`), through litellm.

litellm knows the providers: how each API is addressed and authenticated (keys from the usual
variables, OPENAI_API_KEY, ANTHROPIC_API_KEY, ...; another base URL from OPENAI_API_BASE,
ANTHROPIC_API_BASE, ...), how OpenAI's request maps onto each, which models call tools, and their
prices. This module uses it fully offline: litellm is imported with its remote fetches turned off
(the price map, Anthropic's beta headers, blog posts; it reads its bundled copies), no `.env`
loaded, and no tokenizer asked for (token counts come from the provider's usage).

Where the provider calls tools (litellm says the model does, or, for a model it does not know, that
the provider's API takes `tools`), the agent's tools go as `tools` and the calls come back
structured (`tool_format` is `native`); elsewhere the model writes OpenAI-style JSON calls in its
text (`openai`). Rate limits (429) and server errors (5xx, connection failures) are retried here
with exponential backoff (`retries` times; a `Retry-After` is honoured); any other 4xx ends the
instance with one line naming the provider's message (`ProviderRequestError`).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from swedojo.agent.backends.base import (
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    SamplingParams,
    Usage,
)
from swedojo.agent.backends.openai_http import _tool_call, standard_messages

OFFLINE_ENVIRONMENT = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_MODE": "PRODUCTION",
}
"""Set (unless the user set them) before litellm is imported: it fetches nothing on its own, reads
its bundled price map and configs, and loads no `.env` file (its DEV mode would)."""

_litellm_lock = threading.Lock()


def litellm_module() -> Any:
    """litellm, imported offline (see `OFFLINE_ENVIRONMENT`), its debug prints and HF tokenizer downloads off."""
    with _litellm_lock:
        for key, value in OFFLINE_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        import litellm

        litellm.suppress_debug_info = True
        litellm.disable_hf_tokenizer_download = True
        litellm.telemetry = False
        return litellm


class ProviderError(BackendError):
    """A provider model could not be resolved or reached."""


class UnknownProviderModelError(ProviderError):
    """litellm knows no provider for this name."""


class MissingKeyError(ProviderError):
    """The provider's API key is not in the environment."""


class ProviderRequestError(ProviderError):
    """The provider refused the request (a 4xx other than 429): asking again will not help."""


class ProviderUnavailableError(ProviderError):
    """The provider kept answering 429 or 5xx (or not at all) through every retry."""


_SPEC = re.compile(r"^[A-Za-z0-9][\w.\-:@]*(/[\w.\-:@]+)*$")


def provider_of(spec: str) -> tuple[str, str] | None:
    """(model, provider) when litellm resolves `spec` to a provider's model; None when it does not.

    A path (`./ckpt`, `/models/x`) is never a provider name; anything else is asked of litellm.
    """
    if not _SPEC.match(spec):
        return None
    litellm = litellm_module()
    try:
        model, provider, _, _ = litellm.get_llm_provider(spec)
    except Exception:  # noqa: BLE001 (litellm raises its BadRequestError for an unknown provider)
        return None
    return model, provider


def _retry_after(exc: BaseException) -> float | None:
    """Seconds a 429's `Retry-After` asks for, where the error carries the response's headers."""
    headers = getattr(exc, "headers", None) or getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)\s*[:-]\s*)+")
"""litellm's names for an error ahead of the provider's words: `litellm.BadRequestError: OpenAIException - `."""


def provider_message(exc: BaseException) -> str:
    """The provider's own words from a litellm error, on one line (its JSON error body read when it is one)."""
    text = _PREFIX.sub("", str(getattr(exc, "message", "") or exc)).strip()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            text = str(error["message"])
    line = " ".join(text.split())
    return line[:400] + ("..." if len(line) > 400 else "")


class ProviderBackend:
    """A provider's chat model through litellm; the provider keeps any cache, so `release` does nothing."""

    def __init__(
        self, spec: str, *, api_key: str | None = None, api_base: str | None = None, timeout: float = 600.0,
        retries: int = 5, backoff_s: float = 1.0, max_backoff_s: float = 60.0, native_tools: bool | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`spec`: the provider's model name as litellm takes it (`openai/gpt-4o`, `anthropic/claude-...`).

        `api_key`, `api_base`: instead of the provider's variables. `retries`: attempts after the first
        for a 429, a 5xx or a connection failure, waiting `backoff_s` doubled each time (at most
        `max_backoff_s`; a `Retry-After` when longer). `native_tools`: call tools through the API
        (None: where litellm says the model, or for a model it does not know the provider, has it).
        """
        resolved = provider_of(spec)
        if resolved is None:
            raise UnknownProviderModelError(f"--model {spec!r}: no provider known for it")
        self.spec = spec
        self.model, self.provider = resolved
        self.api_key, self.api_base, self.timeout = api_key, api_base, timeout
        self.retries, self.backoff_s, self.max_backoff_s, self.sleep = retries, backoff_s, max_backoff_s, sleep
        if api_key is None:
            missing = self.litellm.validate_environment(spec).get("missing_keys") or []
            if missing:
                raise MissingKeyError(f"--model {spec}: set {' and '.join(missing)} (the {self.provider} API key)")
        try:
            info = dict(self.litellm.get_model_info(spec))
        except Exception:  # noqa: BLE001 (a model litellm has not mapped)
            info = {}
        params = set(self.litellm.get_supported_openai_params(model=self.model, custom_llm_provider=self.provider) or [])
        known_tools = info.get("supports_function_calling")
        self.native_tools = native_tools if native_tools is not None else (
            bool(known_tools) if known_tools is not None else "tools" in params)
        self.logprobs = "logprobs" in params
        self.images = bool(info.get("supports_vision"))
        self.priced = info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None
        """Whether litellm knows the model's price, so a run's cost is counted (and `--cost-limit` kept)."""
        self.tool_format = "native" if self.native_tools else "openai"
        self.name = spec
        self.version = ""

    @property
    def litellm(self) -> Any:
        """The module, looked up each time: the backend holds none, so it pickles (a Ray task's policy)."""
        return litellm_module()

    def generate(
        self, messages: Sequence[Message], params: SamplingParams, *, conversation_id: str = "default",
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Generation:
        started = time.perf_counter()
        request: dict[str, Any] = {
            "model": self.spec,
            "messages": standard_messages(messages, native=self.native_tools, images=self.images),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "timeout": self.timeout,
            "drop_params": True,  # what a provider does not take (a seed for Anthropic) is left out, not refused
            "num_retries": 0,
            "max_retries": 0,  # retried here, with backoff, and counted
        }
        if params.top_p < 1.0:
            request["top_p"] = params.top_p
        if params.seed is not None:
            request["seed"] = params.seed
        if params.stop:
            request["stop"] = params.stop[:4]  # OpenAI takes four at most
        if self.logprobs:
            request["logprobs"] = True
        if self.native_tools and tools:
            request["tools"] = list(tools)
        if self.api_key:
            request["api_key"] = self.api_key
        if self.api_base:
            request["api_base"] = self.api_base
        response = self._complete(request)
        generation = self._generation(response, params.thinking)
        generation.usage.seconds = time.perf_counter() - started
        return generation

    def release(self, conversation_id: str) -> None:
        return None

    def _complete(self, request: dict[str, Any]) -> Any:
        """One completion; 429, 5xx, timeouts and connection failures retried with exponential backoff."""
        exceptions = self.litellm.exceptions
        first = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                return self.litellm.completion(**request)
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                if isinstance(exc, (exceptions.APIConnectionError, exceptions.Timeout)):
                    kind = "no answer"
                elif isinstance(status, int) and (status in (408, 429) or status >= 500):
                    kind = f"HTTP {status}"
                elif isinstance(status, int) or isinstance(exc, exceptions.UnsupportedParamsError):
                    raise self._refused(exc) from exc
                else:
                    raise  # not an answer of the provider's: a fault here, shown as it is
                if attempt == self.retries:
                    raise ProviderUnavailableError(
                        f"{self.spec}: {kind} on {attempt + 1} attempts over {time.monotonic() - first:.0f}s: "
                        f"{provider_message(exc)}") from exc
                wait = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
                asked = _retry_after(exc)
                self.sleep(min(max(wait, asked), self.max_backoff_s) if asked is not None else wait)
        raise AssertionError("unreachable")

    def _refused(self, exc: BaseException) -> ProviderRequestError:
        status = getattr(exc, "status_code", None)
        code = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
        return ProviderRequestError(f"{self.spec}: {code}: {provider_message(exc)}")

    def _generation(self, response: Any, thinking: bool) -> Generation:
        try:
            choice = response.choices[0]
            message = choice.message
        except (AttributeError, IndexError) as exc:
            raise ProviderRequestError(f"{self.spec}: the answer holds no choice") from exc
        content = message.content or ""
        reasoning = getattr(message, "reasoning_content", None) or ""
        calls = [_tool_call(call.model_dump() if hasattr(call, "model_dump") else dict(call))
                 for call in (message.tool_calls or [])]
        logprobs_block = getattr(choice, "logprobs", None)
        items = getattr(logprobs_block, "content", None) or []
        logprobs = [float(item.logprob) for item in items if getattr(item, "logprob", None) is not None]
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        return Generation(
            text=content, reasoning=reasoning.strip(), content=content.strip(), thinking=thinking,
            logprobs=logprobs, logprob_kind=LogprobKind.PROVIDER if logprobs else LogprobKind.NONE,
            tool_calls=calls,
            finish_reason=FinishReason.LENGTH if choice.finish_reason == "length" else FinishReason.STOP,
            usage=Usage(prompt_tokens=prompt, prefill_tokens=prompt - cached, cached_tokens=cached,
                        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                        cost_usd=self._cost(response)),
        )

    def _cost(self, response: Any) -> float | None:
        """The call's price from litellm's price map; None for a model it does not price (never 0.0 for unknown)."""
        if not self.priced:
            return None
        try:
            return float(self.litellm.completion_cost(completion_response=response, model=self.spec))
        except Exception:  # noqa: BLE001 (litellm raises for what it cannot price)
            return None
