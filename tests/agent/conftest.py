"""Shared tiny models for the agent backend tests (built once per session, few MB each)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest
import torch

from swedojo.agent.backends.inprocess import InProcessBackend
from swedojo.agent.backends.tiny import TINY_ARCHS, build_tiny, build_tokenizer

torch.set_num_threads(1)


@cache
def _tiny_backend(arch: str) -> InProcessBackend:
    model, tokenizer = build_tiny(arch)
    return InProcessBackend(model, tokenizer, name=f"tiny:{arch}")


@pytest.fixture(scope="session")
def tiny() -> Callable[[str], InProcessBackend]:
    """The shared in-process backend of a tiny architecture (tests use their own conversation ids)."""
    return _tiny_backend


@pytest.fixture(params=TINY_ARCHS)
def backend(request) -> InProcessBackend:
    return _tiny_backend(request.param)


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()
