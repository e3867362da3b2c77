"""The local backend without bubblewrap still runs a repository's tests: gold resolves the demo suite.

bubblewrap is made unavailable the way a machine without it is: `dojo eval` runs with a PATH, and
the directories its helpers are found in (`SWEDOJO_HELPER_PATH`), in which every program of
/usr/sbin, /usr/bin and /bin is found except `bwrap`. As root the sandbox user then
cannot see the harness's interpreter where only root may enter (pyenv under /root), so the tests
run with a reachable copy of it (`sandboxes/interpreter.py`), found as `python` and `python3`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import env_without

pytestmark = pytest.mark.slow


def test_gold_resolves_the_demo_suite_without_bubblewrap(tmp_path: Path) -> None:
    env = env_without(tmp_path, "bwrap")
    check = subprocess.run([sys.executable, "-c", "from swedojo.sandboxes.local import bubblewrap_problem; print(bubblewrap_problem())"],
                           env=env, capture_output=True, text=True, check=True)
    assert check.stdout.strip() == "bubblewrap (bwrap) is not installed"
    out = tmp_path / "run"
    dojo = str(Path(sys.executable).with_name("dojo"))
    result = subprocess.run([dojo, "eval", "--suite", "demo", "--policy", "gold", "--rewards", "resolved", "--out", str(out)],
                            env=env, capture_output=True, text=True, check=False, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "bubblewrap (bwrap) is not installed" in result.stderr  # the sandbox said what isolation it lacks
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] >= 8 and summary["resolved"] == summary["total"], summary
