"""The layering contract in pyproject.toml holds, and breaks when an import goes the wrong way."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, check=False)


def test_the_tree_keeps_its_layers() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_cycle_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "swedojo", tmp_path / "swedojo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    schema = tmp_path / "swedojo" / "schema.py"
    schema.write_text(schema.read_text() + "\nfrom swedojo.rewards import grading  # noqa: E402\n")
    result = _lint(tmp_path)
    assert result.returncode != 0 and "swedojo.schema -> swedojo.rewards" in result.stdout, result.stdout[-3000:]
