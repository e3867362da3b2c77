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
    """The spec is not a checkpoint directory, an http(s) URL, `tiny:ARCH` or `scripted:FILE`."""


def load_backend(spec: str, **options: Any) -> ModelBackend:
    """A backend from `--model`: a checkpoint directory, `http(s)://…`, `tiny:ARCH`, or `scripted:FILE`.

    `options` go to the backend's constructor (e.g. `device`, `dtype` for checkpoints,
    `retain_cache` or `seed` for in-process models, `model` (or `URL#model`) and `api_key_env` (the
    variable holding the API key, default OPENAI_API_KEY) for a URL, and `images` (or
    `URL?images=1`: the served model takes images, `OpenAIHTTPBackend`); `TinySize` fields for
    `tiny:`). A scripted file is replayed with the tiny GLM tokenizer, so its trajectories carry
    token ids.
    """
    if spec.startswith(("http://", "https://")):
        from swedojo.agent.backends.openai_http import OpenAIHTTPBackend

        url, _, model = spec.partition("#")  # URL#model names the served model, as hosted APIs need
        if model:
            options.setdefault("model", model)
        parts = urllib.parse.urlsplit(url)
        for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            if key != "images" or value not in ("0", "1"):
                raise UnknownBackendSpecError(f"--model {spec!r}: the URL may only say images=0 or images=1, not {key}={value}")
            options.setdefault("images", value == "1")
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
    raise UnknownBackendSpecError(
        f"--model {spec!r}: expected a checkpoint directory, an http(s):// URL, tiny:ARCH or scripted:FILE"
    )
