"""Shared test setup for the whole suite."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolchains import require_tools


@functools.cache
def _docker_answers() -> bool:
    from swedojo.sandboxes import docker_available

    return docker_available()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `tools(...)` need those commands (see `require_tools`). Docker-marked tests skip
    without an engine; under SWEDOJO_REQUIRE_DOCKER=1 (make test, CI) they fail."""
    if marker := item.get_closest_marker("tools"):
        require_tools(*marker.args)
    if item.get_closest_marker("docker") is None or _docker_answers():
        return
    if os.environ.get("SWEDOJO_REQUIRE_DOCKER") == "1":
        pytest.fail(
            "SWEDOJO_REQUIRE_DOCKER=1 but no Docker Engine answers: run `make docker-up`",
            pytrace=False,
        )
    pytest.skip("Docker Engine is not running (`make docker-up` starts one)")


@pytest.fixture(scope="session")
def npm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One npm cache for the session's installs (npm reads `npm_config_cache`), in its temp dir."""
    return tmp_path_factory.mktemp("npm-cache")


@pytest.fixture
def npm_env(npm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The session's npm cache for this test's npm runs (those of a local launch included)."""
    monkeypatch.setenv("npm_config_cache", str(npm_cache))
    yield {**os.environ}
