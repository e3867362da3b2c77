"""`dojo gen` options as a user of `dojo eval` would type them."""

from __future__ import annotations

import json
from pathlib import Path

from genproject import git
from typer.testing import CliRunner, Result

from swedojo.cli import app
from swedojo.datasets.io import load_suite_file


def test_limit_is_the_number_of_tasks_to_make(tmp_path: Path) -> None:
    # an unknown --from stops the run right after the options are read, before any work
    result = CliRunner().invoke(app, ["gen", str(tmp_path), "--from", "nothing", "--out", str(tmp_path / "gen"), "--limit", "3"])
    assert result.exit_code == 2, result.output
    assert "generating up to 3 tasks" in result.output and "unknown --from 'nothing'" in result.output


def _gen(*args: str) -> Result:
    return CliRunner().invoke(app, ["gen", *args, "--no-launch", "--timeout", "60"])


def test_history_judges_the_newest_commits_first_and_names_tasks_after_the_origin_remote(project, tmp_path: Path) -> None:
    repo, shas = project  # six commits, the fix the last but one; the checkout's directory is acme/shapes
    git(repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    out = tmp_path / "gen"
    result = _gen(str(repo), "--from", "history", "--max-candidates", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    (task,) = load_suite_file(out / "suite.jsonl").instances
    assert task.instance_id == f"acme__widgets-{shas['fix'][:7]}" and task.repo == "acme/widgets"
    judged = [json.loads(line)["key"] for line in (out / "journal" / "acme__widgets.history.jsonl").read_text().splitlines()[1:]]
    assert judged == [shas["refactor"], shas["fix"]]  # not the root commit and the docs commit after it


def test_the_default_out_is_named_after_an_https_origin_too(project, tmp_path: Path, monkeypatch) -> None:
    repo, _ = project
    git(repo, "remote", "add", "origin", "https://github.com/acme/widgets.git")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["gen", str(repo), "--from", "nothing"])  # stops before any work
    assert result.exit_code == 2 and f"-> {Path('gen') / 'acme__widgets'}" in result.output, result.output


def test_a_repository_that_gives_no_task_says_so_and_fails(project, tmp_path: Path) -> None:
    repo, shas = project
    walk = f"{shas['initial']}..{shas['docs']}"  # a commit that changes documentation only
    result = _gen(str(repo), "--from", "history", "--range", walk, "--out", str(tmp_path / "gen"))
    assert result.exit_code == 1, result.output
    said = result.output.replace("\n", "")  # rich wraps the line at the terminal's width
    assert "no tasks: history made none from acme/shapes in commits" in said and walk in said, result.output
