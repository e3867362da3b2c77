"""Fixtures: real git repositories made in the test, and an environment cache the sandboxes can reach."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from launch_helpers import commit_all, write_tree


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[..., Path]:
    """make_repo(name, files, date="2024-06-01T12:00:00Z") -> a git repo with one commit."""

    def make(name: str, files: dict[str, str], date: str = "2024-06-01T12:00:00Z") -> Path:
        root = write_tree(tmp_path / name, files)
        commit_all(root, "initial", date)
        return root

    return make


@pytest.fixture(scope="session")
def env_cache() -> Iterator[Path]:
    """Sandboxes run as another uid with a private /tmp: the cache lives in /var/tmp, searchable."""
    root = Path(tempfile.mkdtemp(prefix="swedojo-test-envs-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)
