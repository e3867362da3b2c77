"""`dojo gen` options as a user of `dojo eval` would type them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from swedojo.cli import app


def test_limit_is_the_number_of_tasks_to_make(tmp_path: Path) -> None:
    # an unknown --from stops the run right after the options are read, before any work
    result = CliRunner().invoke(app, ["gen", str(tmp_path), "--from", "nothing", "--out", str(tmp_path / "gen"), "--limit", "3"])
    assert result.exit_code == 2, result.output
    assert "generating up to 3 tasks" in result.output and "unknown --from 'nothing'" in result.output
