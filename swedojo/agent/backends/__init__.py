"""Model backends: what `--model` names, behind one small protocol (`ModelBackend`).

Backends are imported when asked for, so using the HTTP or scripted backend does not load torch's
model code, and `chat.py` (which needs `base`) can be imported from here without a cycle.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any

from swedojo.agent.backends.base import (
    RAW_ARGUMENTS_KEY,
    BackendError,
    FinishReason,
    Generation,
    LogprobKind,
    Message,
    ModelBackend,
    Role,
    SamplingParams,
    ThinkingHistory,
    TransientBackendError,
    Usage,
)

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "BackendError",
    "FinishReason",
    "Generation",
    "LogprobKind",
    "Message",
    "ModelBackend",
    "Role",
    "SamplingParams",
    "ThinkingHistory",
    "TransientBackendError",
    "UnknownBackendSpecError",
    "Usage",
    "load_backend",
]


class UnknownBackendSpecError(BackendError):
    """The spec is not a checkpoint directory, an http(s) URL, `tiny:ARCH`, `scripted:FILE` or a provider's model."""


URL_OPTIONS = {"images": ("0", "1"), "engine": ("vllm", "sglang", "openai")}
"""What a `--model` URL's query may say, and the values each takes."""


def load_backend(spec: str, **options: Any) -> ModelBackend:
    """A backend from `--model`: a checkpoint directory, `http(s)://…`, `tiny:ARCH`, `scripted:FILE`,
    or a provider's model name (`openai/gpt-4o`, `anthropic/claude-sonnet-4-5`: `ProviderBackend`).

    `options` go to the backend's constructor (e.g. `device`, `dtype` for checkpoints,
    `retain_cache` or `seed` for in-process models, `model` (or `URL#model`) and `api_key_env` (the
    variable holding the API key, default OPENAI_API_KEY) for a URL, `images` (or `URL?images=1`:
    the served model takes images) and `engine` (or `URL?engine=vllm|sglang|openai`: whether the
    server takes vLLM's extra fields; else its `/v1/models` says, `OpenAIHTTPBackend`); `TinySize`
    fields for `tiny:`; `api_key_env`, `api_key`, `api_base`, `retries` for a provider's model,
    whose key is otherwise in the provider's usual variable). A scripted file is replayed with the
    tiny GLM tokenizer, so its trajectories carry token ids.
    """
    if spec.startswith(("http://", "https://")):
        from swedojo.agent.backends.openai_http import OpenAIHTTPBackend

        url, _, model = spec.partition("#")  # URL#model names the served model, as hosted APIs need
        if model:
            options.setdefault("model", model)
        parts = urllib.parse.urlsplit(url)
        for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            if value not in URL_OPTIONS.get(key, ()):
                said = " or ".join(f"{k}={'|'.join(v)}" for k, v in URL_OPTIONS.items())
                raise UnknownBackendSpecError(f"--model {spec!r}: the URL may only say {said}, not {key}={value}")
            options.setdefault(key, value == "1" if key == "images" else value)
        url = urllib.parse.urlunsplit(parts._replace(query=""))
        key_variable = options.pop("api_key_env", "OPENAI_API_KEY")
        if os.environ.get(key_variable):
            options.setdefault("api_key", os.environ[key_variable])
        return OpenAIHTTPBackend(url, **options)
    if spec.startswith("tiny:"):
        from swedojo.agent.backends.inprocess import InProcessBackend
        from swedojo.agent.backends.tiny import TinySize, build_tiny

        size = TinySize(**{k: options.pop(k) for k in list(options) if k in TinySize.model_fields})
        model, tokenizer = build_tiny(spec.removeprefix("tiny:"), size)
        return InProcessBackend(model, tokenizer, name=spec, **options)
    if spec.startswith("scripted:"):
        from swedojo.agent.backends.scripted import ScriptedBackend
        from swedojo.agent.backends.tiny import build_tokenizer

        return ScriptedBackend.from_file(spec.removeprefix("scripted:"), build_tokenizer())
    if Path(spec).is_dir():
        from swedojo.agent.backends.inprocess import InProcessBackend

        return InProcessBackend.from_pretrained(spec, **options)
    from swedojo.agent.backends.provider import MissingKeyError, ProviderBackend, provider_of

    if provider_of(spec) is not None:
        key_variable = options.pop("api_key_env", None)
        if key_variable:  # the key in a variable of the user's choosing, not the provider's usual one
            if not os.environ.get(key_variable):
                raise MissingKeyError(f"--model {spec}: {key_variable} (the variable --api-key-env names) is not set")
            options.setdefault("api_key", os.environ[key_variable])
        return ProviderBackend(spec, **options)
    raise UnknownBackendSpecError(
        f"--model {spec!r}: expected a checkpoint directory, an http(s):// URL, tiny:ARCH, scripted:FILE or a "
        "provider's model name as litellm knows it (openai/gpt-4o, anthropic/claude-sonnet-4-5, ...)"
    )
