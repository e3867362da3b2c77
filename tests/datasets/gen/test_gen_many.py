"""`dojo gen` over several repositories: one unit each, one merged suite with provenance, units
that are done not run again, and the same suite on a real two-node Ray cluster as here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from genproject import git, make_project
from typer.testing import CliRunner, Result

from swedojo.cli import app
from swedojo.datasets.io import load_suite_file

WALK = ("--from", "history", "--last", "2", "--no-launch", "--timeout", "60")
"""The two newest commits: the refactor (no task) and the fix (one task); a unit ends done."""


def _gen(*args: str) -> Result:
    return CliRunner().invoke(app, ["gen", *args, *WALK])


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    """Two repositories with the same history: `acme/widgets` (by its origin) and `acme/shapes`."""
    widgets, _ = make_project(tmp_path / "w")
    git(widgets, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    shapes, _ = make_project(tmp_path / "s")
    return widgets, shapes


def _rows(suite: Path) -> list[dict]:
    return [json.loads(line) for line in suite.read_text().splitlines()]


def _units(out: Path) -> dict[str, dict]:
    return {u["name"]: u for u in json.loads((out / "units.json").read_text())["units"]}


def test_several_repos_give_one_merged_suite_with_provenance_and_each_ones_own_tasks(repos, tmp_path: Path) -> None:
    widgets, shapes = repos
    listed = tmp_path / "repos.txt"
    listed.write_text(f"# the second repository\n\n{shapes}  # acme/shapes\n")
    out = tmp_path / "many"
    result = _gen(str(widgets), "--repos", str(listed), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = _rows(out / "suite.jsonl")
    assert [(r["repo"], r["provenance"]) for r in rows] == [  # sorted by repository, then id
        ("acme/shapes", {"repo": str(shapes), "strategy": "history", "unit": "acme__shapes"}),
        ("acme/widgets", {"repo": str(widgets), "strategy": "history", "unit": "acme__widgets"}),
    ]
    for repo, row in zip((shapes, widgets), rows, strict=True):  # each task as `dojo gen REPO` alone makes it
        alone = tmp_path / f"alone-{row['provenance']['unit']}"
        assert _gen(str(repo), "--out", str(alone)).exit_code == 0
        (task,) = _rows(alone / "suite.jsonl")
        assert {k: v for k, v in row.items() if k != "provenance"} == task
        assert (out / row["provenance"]["unit"] / "journal").is_dir()  # the unit's own journal, as alone
    assert {name: (u["done"], u["runs"], u["kept"]) for name, u in _units(out).items()} == {
        "acme/widgets": (True, 1, 1), "acme/shapes": (True, 1, 1)}
    assert all(u["seconds"] > 0 for u in _units(out).values())  # where the run's time went, unit by unit
    assert json.loads((out / "yield.json").read_text())["kept_by_repo"] == {"acme/shapes": 1, "acme/widgets": 1}
    # `dojo eval` finds the units' repos through OUT/repos, as it does next to one repo's suite
    assert {i.instance_id for i in load_suite_file(out / "suite.jsonl").instances} == {r["instance_id"] for r in rows}
    ran = CliRunner().invoke(app, ["eval", "--suite", str(out / "suite.jsonl"), "--policy", "gold", "--out",
                                   str(tmp_path / "eval")])
    assert ran.exit_code == 0, ran.output
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["resolved"] == summary["total"] == 2


def test_a_rerun_skips_the_units_that_are_done_and_resumes_the_others(repos, tmp_path: Path) -> None:
    widgets, shapes = repos
    out = tmp_path / "many"
    (tmp_path / "one.txt").write_text(f"{widgets}\n")
    assert _gen("--repos", str(tmp_path / "one.txt"), "--out", str(out)).exit_code == 0  # one repo, as a unit
    journal = out / "acme__widgets" / "journal" / "acme__widgets.history.jsonl"
    before = (journal.stat().st_ino, journal.stat().st_mtime_ns, journal.read_bytes())

    # the new repository stops after one candidate of two: its unit is unfinished
    result = _gen(str(widgets), str(shapes), "--out", str(out), "--max-candidates", "1")
    assert result.exit_code == 0, result.output
    assert {n: (u["done"], u["runs"]) for n, u in _units(out).items()} == {
        "acme/widgets": (True, 1), "acme/shapes": (False, 1)}
    assert [r["repo"] for r in _rows(out / "suite.jsonl")] == ["acme/widgets"]

    result = _gen(str(widgets), str(shapes), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert {n: (u["done"], u["runs"]) for n, u in _units(out).items()} == {
        "acme/widgets": (True, 1), "acme/shapes": (True, 2)}
    assert (journal.stat().st_ino, journal.stat().st_mtime_ns, journal.read_bytes()) == before  # not run again
    resumed = (out / "acme__shapes" / "journal" / "acme__shapes.history.jsonl").read_text().splitlines()[1:]
    keys = [json.loads(line)["key"] for line in resumed if "key" in json.loads(line)]
    assert len(keys) == len(set(keys)) == 2  # the candidate judged before was replayed, not judged again
    assert [r["repo"] for r in _rows(out / "suite.jsonl")] == ["acme/shapes", "acme/widgets"]


def test_the_same_repository_twice_is_refused(repos, tmp_path: Path) -> None:
    widgets, _ = repos
    result = _gen(str(widgets), str(widgets), "--out", str(tmp_path / "many"))
    assert result.exit_code == 2 and "give each repository once" in result.output, result.output


def _with_second_node(cluster) -> None:
    """Node `second` added and alive; this process is left disconnected (the driver under test joins)."""
    import ray

    cluster.add_node("second")
    cluster.connect(ray)
    try:
        cluster.wait_for(ray, alive=2)
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_a_two_node_ray_cluster_gives_the_local_executors_merged_suite(repos, tmp_path: Path) -> None:
    from raycluster import RayCluster

    widgets, shapes = repos
    local = tmp_path / "local"
    assert _gen(str(widgets), str(shapes), "--out", str(local)).exit_code == 0
    with RayCluster(head_cpus=1) as cluster:
        _with_second_node(cluster)
        on_ray = tmp_path / "ray"
        # The driver is a process of its own, as a user's would be; it joins the cluster by address.
        ran = subprocess.run([sys.executable, "-m", "swedojo.cli", "gen", str(widgets), str(shapes), *WALK,
                              "--executor", "ray", "--address", cluster.address, "--out", str(on_ray)],
                             env=cluster.env, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (on_ray / "suite.jsonl").read_text() == (local / "suite.jsonl").read_text()
    assert {n: (u["done"], u["runs"]) for n, u in _units(on_ray).items()} == {
        "acme/widgets": (True, 1), "acme/shapes": (True, 1)}


@pytest.mark.slow
def test_a_worker_node_killed_mid_gen_loses_no_task_and_duplicates_none(repos, tmp_path: Path) -> None:
    import time

    from raycluster import RayCluster

    widgets, shapes = repos
    local = tmp_path / "local"
    assert _gen(str(widgets), str(shapes), "--out", str(local)).exit_code == 0
    on_ray = tmp_path / "ray"
    with RayCluster(head_cpus=0) as cluster:  # every unit runs on `second`, until it is lost
        _with_second_node(cluster)
        driver = subprocess.Popen([sys.executable, "-m", "swedojo.cli", "gen", str(widgets), str(shapes), *WALK,
                                   "--executor", "ray", "--address", cluster.address, "--out", str(on_ray)],
                                  env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while not any(len(p.read_text().splitlines()) > 1 for p in on_ray.glob("*/journal/*.jsonl")):
            assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[0]
            time.sleep(0.1)
        cluster.kill("second")  # a unit has judged a candidate there: lose the node under it
        cluster.add_node("third", ip="127.0.0.3")
        said = driver.communicate(timeout=300)[0]
    assert driver.returncode == 0, said
    assert (on_ray / "suite.jsonl").read_text() == (local / "suite.jsonl").read_text()
    for journal in on_ray.glob("*/journal/*.jsonl"):
        keys = [json.loads(line).get("key") for line in journal.read_text().splitlines()[1:] if line.strip()]
        keys = [k for k in keys if k]
        assert len(keys) == len(set(keys)) == 2, journal  # each candidate judged once, none lost
