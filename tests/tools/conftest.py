"""A real git repository with awkward files, and a LocalSandbox on it: no mocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from toolfixtures import FILES, git

from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import EnvSpec
from swedojo.tools.base import ToolContext
from swedojo.tools.registry import ToolRegistry, ToolSetConfig


@pytest.fixture(scope="session")
def source_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("source")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    git(root, "config", "core.autocrlf", "false")
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root, git(root, "rev-parse", "HEAD")


@pytest.fixture
def sandbox(source_repo: tuple[Path, str]) -> Iterator[LocalSandbox]:
    with LocalSandbox(*source_repo) as box:
        yield box


@pytest.fixture
def ctx() -> ToolContext:
    env = EnvSpec(repo="t", commit="HEAD", test_command="sh tests/run.sh", log_parser="pytest")
    return ToolContext(env=env)


@pytest.fixture(scope="session")
def registry() -> ToolRegistry:
    return ToolSetConfig().build("swe")
