"""`dojo gen` end to end on a real repo made in the test: real git, real sandboxes, real pytest runs."""

from __future__ import annotations

import json
from pathlib import Path

from genproject import ISSUE_7, git
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.datasets.demo import DEMO_ORG, materialise_demo
from swedojo.datasets.gen import GenSettings, ModelRewrite, generate
from swedojo.datasets.gen.statements import changed_lines
from swedojo.datasets.io import load_suite_file

F2P_FIX = ["tests/test_geometry.py::test_clamp_high"]


def _eval(suite: Path, policy: str, out: Path) -> dict:
    result = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--policy", policy, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text())


def _journal(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / "journal" / name).read_text().splitlines()[1:]]


def test_mutations_give_valid_tasks_that_gold_resolves_and_empty_does_not(project, tmp_path):
    repo, shas = project
    out = tmp_path / "gen"
    result = CliRunner().invoke(app, ["gen", str(repo), "--from", "mutations", "--out", str(out),
                                      "--max-tasks", "3", "--seed", "1", "--timeout", "60"])
    assert result.exit_code == 0, result.output
    instances = load_suite_file(out / "suite.jsonl").instances
    assert len(instances) == 3
    assert [i.gen_strategy for i in instances].count("combined") == 1  # a fifth (rounded): two mutants
    head = shas["refactor"]
    generated = out / "repos" / "acme" / "shapes"
    for task in instances:
        assert task.repo == "acme/shapes" and task.test_patch == "" and task.environment_setup_commit == head
        # a root commit: no ancestor holds the clean code, so history cannot give the fix away
        assert git(generated, "rev-list", "--count", task.base_commit) == "1"
        assert git(generated, "diff", "--name-only", head, task.base_commit) == "shapes/geometry.py"
        assert task.FAIL_TO_PASS and task.PASS_TO_PASS and not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS)
        assert task.patch.startswith("diff --git a/shapes/geometry.py")
        assert all(line not in task.problem_statement for line in changed_lines(task.patch))
        assert task.FAIL_TO_PASS[0] in task.problem_statement
    assert len({frozenset(t.FAIL_TO_PASS) for t in instances}) == 3  # deduplicated by failing tests
    report = json.loads((out / "yield.json").read_text())
    single = report["strategies"]["mutation"]
    assert single["kept"] == 2 and single["candidates"] >= single["compiled"] >= single["broke_tests"] >= 2
    assert report["kept"] == 3 and report["tasks_per_min"] > 0
    (spec,) = (out / "envspecs").glob("*.json")
    assert json.loads(spec.read_text())["commit"] == head
    # `dojo eval` finds DIR/repos next to DIR/suite.jsonl by itself.
    gold = _eval(out / "suite.jsonl", "gold", tmp_path / "gold")
    assert gold["resolved"] == gold["total"] == 3
    empty = _eval(out / "suite.jsonl", "empty", tmp_path / "empty")
    assert empty["resolved"] == 0 and empty["total"] == 3


def test_history_keeps_the_fix_commit_and_nothing_else(project, tmp_path):
    repo, shas = project
    issues = tmp_path / "issues"
    issues.mkdir()
    (issues / "7.md").write_text(ISSUE_7)
    out = tmp_path / "gen"
    result = generate(str(repo), "history", GenSettings(out=out, timeout_s=60, issues_dir=issues))
    (task,) = result.instances
    assert task.instance_id == f"acme__shapes-{shas['fix'][:7]}"
    assert task.base_commit == shas["source_only"] and task.created_at.startswith("2024-01-05")
    assert task.FAIL_TO_PASS == F2P_FIX
    assert "tests/test_geometry.py::test_clamp_low" in task.PASS_TO_PASS and len(task.PASS_TO_PASS) == 11
    assert task.test_patch.startswith("diff --git a/tests/test_geometry.py") and "test_clamp_high" in task.test_patch
    assert task.patch.startswith("diff --git a/shapes/geometry.py") and "tests/" not in task.patch
    assert task.problem_statement == ISSUE_7  # the linked issue, found locally
    outcomes = {e["key"]: (e["outcome"], e.get("detail", "")) for e in _journal(out, "acme__shapes.history.jsonl")}
    assert outcomes == {
        shas["initial"]: ("not_qualified", "root commit"),
        shas["docs"]: ("not_qualified", "changes no tests"),
        shas["tests_only"]: ("not_qualified", "changes no source"),
        shas["source_only"]: ("not_qualified", "changes no tests"),
        shas["fix"]: ("kept", ""),
        shas["refactor"]: ("no_break", "no FAIL_TO_PASS test"),  # source + tests, but nothing goes fail -> pass
    }
    gold = _eval(out / "suite.jsonl", "gold", tmp_path / "gold")
    assert gold["resolved"] == gold["total"] == 1


def test_history_on_a_demo_repository_finds_its_bug_fix_commit(tmp_path):
    mirror = materialise_demo(tmp_path / "demo")
    fix = git(mirror / DEMO_ORG / "textkit", "log", "--format=%H", "--grep=^Fix ", "-n1")
    out = tmp_path / "gen"
    result = CliRunner().invoke(app, ["gen", f"{DEMO_ORG}/textkit", "--mirror", str(mirror), "--from", "history",
                                      "--range", f"{fix}~1..{fix}", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (task,) = load_suite_file(out / "suite.jsonl").instances
    assert task.instance_id == f"swedojo-demo__textkit-{fix[:7]}" and task.repo == f"{DEMO_ORG}/textkit"
    assert task.FAIL_TO_PASS and all(t.startswith("tests/test_wrap.py::") for t in task.FAIL_TO_PASS)
    assert (out / "repos" / DEMO_ORG / "textkit").is_dir()


def test_history_without_the_issue_writes_from_the_commit_and_the_failing_test(project, tmp_path):
    repo, shas = project
    out = tmp_path / "gen"
    result = generate(str(repo), "history", GenSettings(out=out, timeout_s=60, rev_range=f"{shas['source_only']}..{shas['fix']}"))
    (task,) = result.instances
    assert result.counts.evaluated == 1
    statement = task.problem_statement
    assert statement.startswith("Fix clamp ignoring the upper bound\n") and "#7" not in statement
    assert "`clamp(50, 0, 10)` returns `50` where `10` was expected" in statement
    assert F2P_FIX[0] in statement
    assert all(line not in statement for line in changed_lines(task.patch))


def test_a_killed_run_resumes_without_redoing_work_and_ends_with_the_same_suite(project, tmp_path):
    repo, _ = project
    settings = GenSettings(out=tmp_path / "resumed", seed=3, max_tasks=2, timeout_s=60)
    first = generate(str(repo), "mutations", settings.model_copy(update={"max_candidates": 2}))
    assert first.counts.interrupted and first.counts.evaluated == 2
    journal = (settings.out / "journal" / "acme__shapes.mutations.jsonl").read_text()
    second = generate(str(repo), "mutations", settings)
    assert not second.counts.interrupted and second.counts.reused == 2
    assert (settings.out / "journal" / "acme__shapes.mutations.jsonl").read_text().startswith(journal)
    whole = generate(str(repo), "mutations", settings.model_copy(update={"out": tmp_path / "whole"}))
    assert whole.counts.evaluated == second.counts.evaluated + 2
    assert (tmp_path / "whole" / "suite.jsonl").read_text() == (settings.out / "suite.jsonl").read_text()
    assert len(second.instances) == 2


class BuggyModel:
    """A stand-in for a model backend only: it always writes the same wrong body."""

    def complete(self, prompt: str) -> str:
        return "return None\n"


def test_model_rewrites_go_through_the_same_validation(project, tmp_path):
    repo, _ = project
    settings = GenSettings(out=tmp_path / "gen", max_tasks=1, timeout_s=60)
    result = generate(str(repo), "mutations", settings, strategies=[ModelRewrite(BuggyModel())])
    (task,) = result.instances
    assert task.gen_strategy == "model_rewrite" and "-llm-" in task.instance_id
    assert "+    return None" not in task.patch and "-    return None" in task.patch
    assert json.loads((settings.out / "yield.json").read_text())["strategies"]["model_rewrite"]["kept"] == 1


def test_a_relative_out_works(project, tmp_path, monkeypatch):
    """`--out gen-rel` (relative, as most people type it) once failed with "commit ... not found"."""
    repo, _ = project
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["gen", str(repo), "--from", "mutations", "--out", "gen-rel", "--max-tasks", "1",
                                      "--seed", "1", "--timeout", "60"])
    assert result.exit_code == 0, result.output
    assert len(load_suite_file(tmp_path / "gen-rel" / "suite.jsonl").instances) == 1


def test_the_same_seed_gives_the_same_tasks_one_or_two_candidates_at_a_time(project, tmp_path):
    repo, _ = project
    for workers in (1, 2):
        result = generate(str(repo), "mutations", GenSettings(out=tmp_path / f"w{workers}", seed=5, max_tasks=3,
                                                              workers=workers))
        assert len(result.instances) == 3
    assert (tmp_path / "w1" / "suite.jsonl").read_text() == (tmp_path / "w2" / "suite.jsonl").read_text()
    verdicts = [[(e["key"], e["outcome"], e.get("failing")) for e in _journal(tmp_path / f"w{w}", "acme__shapes.mutations.jsonl")
                 if "key" in e] for w in (1, 2)]
    assert verdicts[0] == verdicts[1]


def test_max_minutes_starts_no_candidate_past_the_budget_and_a_rerun_continues(project, tmp_path):
    repo, _ = project
    settings = GenSettings(out=tmp_path / "gen", max_tasks=1, max_minutes=0)
    first = generate(str(repo), "mutations", settings)
    assert first.counts.interrupted and first.counts.evaluated == 0 and not first.instances
    second = generate(str(repo), "mutations", settings.model_copy(update={"max_minutes": None}))
    assert not second.counts.interrupted and len(second.instances) == 1


def test_history_takes_a_merged_branch_as_one_change_against_its_first_parent(project, tmp_path):
    # Projects that merge pull requests have a first-parent line of merges: each merge is the PR's
    # whole change, here a test commit and a fix commit on a branch, neither a task on its own.
    repo, shas = project
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "negative-radius")
    (repo / "tests" / "test_circle.py").write_text(
        "import pytest\n\nfrom shapes.geometry import circle_area\n\n\n"
        "def test_negative_radius():\n    with pytest.raises(ValueError):\n        circle_area(-1)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Test negative radii", date="2024-02-01T00:00:00Z")
    geometry = (repo / "shapes" / "geometry.py").read_text()
    (repo / "shapes" / "geometry.py").write_text(geometry.replace(
        "def circle_area(radius):\n", "def circle_area(radius):\n    if radius < 0:\n        raise ValueError(radius)\n"))
    git(repo, "commit", "-qam", "Refuse negative radii", date="2024-02-02T00:00:00Z")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #9 from dev/negative-radius", "negative-radius",
        date="2024-02-03T00:00:00Z")
    merge = git(repo, "rev-parse", "HEAD")
    result = generate(str(repo), "history", GenSettings(out=tmp_path / "gen", timeout_s=60, rev_range=f"{base}..{merge}"))
    (task,) = result.instances
    assert task.instance_id == f"acme__shapes-{merge[:7]}" and task.base_commit == base
    assert task.FAIL_TO_PASS == ["tests/test_circle.py::test_negative_radius"]
    assert "raise ValueError(radius)" in task.patch and "test_negative_radius" in task.test_patch
    assert result.counts.evaluated == 1  # the first-parent walk sees the merge alone
