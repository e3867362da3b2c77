"""`dojo launch --repos FILE`: one environment per repository and commit, each a unit of its own;
a rerun launches only those not ready; the same report from a real two-node Ray cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import C_OK, DATE, commit_all, write_tree
from typer.testing import CliRunner, Result

from swedojo.cli import app

pytestmark = pytest.mark.tools("make", "gcc")

BROKEN = {"Makefile": "all: runner\nrunner: runner.c\n\t$(CC) -o runner runner.c\ntest: runner\n\t./runner\n",
          "runner.c": "int main(void) { return missing(); }\n"}
"""Does not compile: its launch fails at the repo layer, every time."""


@pytest.fixture
def listing(tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`repos.txt`: `acme/ok` at HEAD and at its first commit, and `acme/broken`, in a mirror."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    ok = write_tree(tmp_path / "mirror" / "acme" / "ok", C_OK)
    first = commit_all(ok, "ok", DATE)
    write_tree(ok, {"README": "a later commit\n"})
    commit_all(ok, "readme", DATE)
    commit_all(write_tree(tmp_path / "mirror" / "acme" / "broken", BROKEN), "broken", DATE)
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# what to launch\nacme/ok\nacme/ok {first}  # the first commit\n\nacme/broken\n")
    return listing


def _launch(listing: Path, out: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, ["launch", "--repos", str(listing), "--out", str(out), "--backend", "local",
                                    "--mirror", str(listing.parent / "mirror"), *extra])


def _units(out: Path) -> dict[str, dict]:
    return {u["unit"]: u for u in json.loads((out / "launches.json").read_text())["units"]}


def test_each_repository_and_commit_is_a_unit_and_a_rerun_launches_only_those_not_ready(listing: Path, tmp_path: Path) -> None:
    out = tmp_path / "envs"
    first = _launch(listing, out)
    assert first.exit_code == 1, first.output  # one launch failed: the command says so
    assert "2 of 3 environments ready" in first.output and "failed acme/broken: install:" in first.output
    units = _units(out)
    sha = listing.read_text().split()[6]
    assert list(units) == ["acme__ok", f"acme__ok@{sha}", "acme__broken"]
    ok, pinned, broken = units.values()
    assert (ok["done"], ok["runs"], ok["tests"], ok["passed"]) == (True, 1, 1, 1)
    assert pinned["done"] and pinned["sha"] == sha != ok["sha"]
    assert not broken["done"] and broken["error"].startswith("install:") and "missing" in broken["error"]
    for unit in ("acme__ok", f"acme__ok@{sha}"):
        assert json.loads((out / unit / "envspec.json").read_text())["commit"] == units[unit]["sha"]

    again = _launch(listing, out)
    assert again.exit_code == 1 and "launching 1 of 3 environments (2 ready from an earlier run)" in again.output
    assert {u: (s["done"], s["runs"]) for u, s in _units(out).items()} == {
        "acme__ok": (True, 1), f"acme__ok@{sha}": (True, 1), "acme__broken": (False, 2)}


def test_a_list_that_cannot_be_used_is_one_line_and_exit_2(listing: Path, tmp_path: Path) -> None:
    twice = tmp_path / "twice.txt"
    twice.write_text("acme/ok\nacme/ok\n")
    for given, said in [(twice, "give each repository and commit once"),
                        (tmp_path / "none.txt", "no such file")]:
        result = _launch(given, tmp_path / "out")
        assert result.exit_code == 2 and said in result.output, result.output
    both = CliRunner().invoke(app, ["launch", "acme/ok", "--repos", str(listing), "--out", str(tmp_path / "o")])
    assert both.exit_code == 2 and "give one REPO or --repos FILE" in both.output


@pytest.mark.slow
def test_a_two_node_ray_cluster_launches_the_list_as_here(listing: Path, tmp_path: Path) -> None:
    import ray
    from raycluster import RayCluster

    here = tmp_path / "here"
    assert _launch(listing, here).exit_code == 1
    with RayCluster(head_cpus=1) as cluster:
        cluster.add_node("second")
        cluster.connect(ray)
        try:
            cluster.wait_for(ray, alive=2)  # both nodes up before the driver under test joins
        finally:
            ray.shutdown()
        on_ray = tmp_path / "ray"
        ran = subprocess.run([sys.executable, "-m", "swedojo.cli", "launch", "--repos", str(listing), "--out", str(on_ray),
                              "--backend", "local", "--mirror", str(listing.parent / "mirror"),
                              "--executor", "ray", "--address", cluster.address],
                             env=cluster.env, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 1 and "2 of 3 environments ready" in ran.stderr, ran.stdout + ran.stderr
    fields = ("done", "sha", "tests", "passed")
    assert {u: [s[f] for f in fields] for u, s in _units(on_ray).items()} == \
        {u: [s[f] for f in fields] for u, s in _units(here).items()}
