"""Tests that need a toolchain: skipped where it is missing, failed where CI says every one is installed."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tools(*tools: str) -> None:
    """Skip the test when a command it needs is not on the PATH; under SWEDOJO_REQUIRE_TOOLCHAINS=1
    (make test, CI, where `scripts/system_deps.sh test` installs them all) fail it instead."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    if os.environ.get("SWEDOJO_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"SWEDOJO_REQUIRE_TOOLCHAINS=1 but {', '.join(missing)} is not installed: run "
                    "`bash scripts/system_deps.sh test`", pytrace=False)
    pytest.skip(f"{', '.join(missing)} is not installed here")
