"""Fixtures: the project repo of `genproject`, fresh per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from genproject import make_project


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return make_project(tmp_path / "src")
