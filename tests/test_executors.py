"""`dojo eval --executor ray` on a real Ray cluster started here: a head and a second worker node on
loopback. The demo suite's verdicts equal the local executor's; a worker node killed mid-run loses
no instance and duplicates none; a node that cannot see the run's paths ends the run clearly."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import ray
from raycluster import RayCluster
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.datasets.registry import load_suite
from swedojo.evaluate import evaluate
from swedojo.executors import RayExecutor, SharedFilesystemError
from swedojo.settings import RunSettings

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster():
    """Head (1 CPU) and node `second` (1 CPU); this process is connected to it as a driver."""
    with RayCluster(head_cpus=1) as cluster:
        cluster.add_node("second")
        cluster.connect(ray)
        try:
            cluster.wait_for(ray, alive=2)
            yield cluster
        finally:
            ray.shutdown()


def _rows(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _verdicts(rows):
    return {r["instance_id"]: (r["status"], r["resolved"], r["exit_status"], r["patch"]) for r in rows}


def test_ray_gives_the_local_executors_verdicts_on_the_demo_suite(cluster, tmp_path):
    demo = {i.instance_id for i in load_suite("demo").loaded.instances}
    for policy in ("gold", "empty"):
        local, on_ray = tmp_path / f"{policy}-local", tmp_path / f"{policy}-ray"
        ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", policy, "--rewards", "resolved",
                                       "--workers", "2", "--out", str(local)])
        assert ran.exit_code == 0, ran.output
        # The driver is a process of its own, as a user's would be; it joins the cluster by address.
        ran = subprocess.run([sys.executable, "-m", "swedojo.cli", "eval", "--suite", "demo", "--policy", policy,
                              "--rewards", "resolved", "--executor", "ray", "--address", cluster.address, "--out",
                              str(on_ray)], env=cluster.env, capture_output=True, text=True, timeout=600, check=False)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        rows = _rows(on_ray)
        assert sorted(r["instance_id"] for r in rows) == sorted(demo)  # each once
        assert _verdicts(rows) == _verdicts(_rows(local))
        assert {r["resolved"] for r in rows} == {policy == "gold"}
        summary = json.loads((on_ray / "summary.json").read_text())
        assert summary["total"] == len(demo) and summary["resolved"] == (len(demo) if policy == "gold" else 0)
        assert len(list((on_ray / "trajectories").glob("*.json"))) == len(demo)  # written by the workers


def test_a_worker_node_killed_mid_run_loses_no_instance_and_duplicates_none(cluster, tmp_path):
    suite = load_suite("demo")
    instances = suite.loaded.instances
    stages: list[tuple[str, str]] = []
    killed: list[str] = []

    def staged(instance, what):
        stages.append((instance.instance_id, what))
        if what == "starting on second" and not killed:  # an instance is at work there: lose the node under it
            cluster.kill("second")
            killed.append(instance.instance_id)

    out = tmp_path / "run"
    run = RunSettings(suite="demo", executor="ray", address=cluster.address, out=out).prepare()
    summary = evaluate(run, on_stage=staged)

    assert killed, f"no instance started on the second node: {stages}"
    assert cluster.nodes["second"].poll() is not None
    rows = _rows(out)
    assert sorted(r["instance_id"] for r in rows) == sorted(i.instance_id for i in instances)  # none lost, none twice
    assert all(r["status"] == "resolved" for r in rows), [(r["instance_id"], r["status"], r["error"]) for r in rows]
    assert summary.resolved == summary.total == len(instances)
    lost = killed[0]
    starts = [what for instance_id, what in stages if instance_id == lost and what.startswith("starting on ")]
    assert starts == ["starting on second", "starting on head"], stages  # run again on the node that is left


def test_a_stopped_ray_run_starts_nothing_more_and_resumes_to_each_instance_once(cluster, tmp_path):
    suite = load_suite("demo")
    instances = suite.loaded.instances
    out, stop = tmp_path / "run", threading.Event()
    settings = RunSettings(suite="demo", rewards="resolved", executor="ray", address=cluster.address, out=out)
    first = evaluate(settings.prepare(), on_result=lambda r: stop.set(), stop=stop)
    # At most four were sent (two at work, one queued per CPU); after the stop none more, and those
    # still queued are called back.
    assert 1 <= len(_rows(out)) <= 4 and first.not_started == len(instances) - len(_rows(out))
    resumed = evaluate(settings.prepare())
    rows = _rows(out)
    assert sorted(r["instance_id"] for r in rows) == sorted(i.instance_id for i in instances)
    assert resumed.resolved == resumed.total == len(instances) and resumed.not_started == 0


def test_a_node_that_cannot_see_the_suite_repos_ends_the_run_clearly(cluster, tmp_path):
    elsewhere = tmp_path / "only-on-the-driver"  # as a mirror on a disk that the nodes do not share
    out = tmp_path / "run"
    ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--mirror", str(elsewhere), "--rewards", "resolved",
                                   "--executor", "ray", "--address", cluster.address, "--out", str(out), "--limit", "2"])
    assert ran.exit_code == 2, ran.output
    assert f"cannot see {elsewhere}" in ran.output and "shared filesystem" in ran.output
    assert not (out / "results.jsonl").exists() or not _rows(out)  # nothing recorded: a resume runs everything
    with pytest.raises(SharedFilesystemError, match="cannot see"):
        evaluate(RunSettings(suite="demo", limit=2, mirror=elsewhere, rewards="resolved", executor="ray",
                             address=cluster.address, out=out).prepare())


def test_executor_options_are_checked():
    ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--executor", "spark"])
    assert ran.exit_code == 2 and "unknown --executor 'spark'; choose local or ray" in ran.output
    ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--address", "127.0.0.1:1"])
    assert ran.exit_code == 2 and "--address is for --executor ray" in ran.output
    ran = CliRunner().invoke(app, ["eval", "--suite", "demo", "--executor", "ray", "--pool", "2", "--backend", "docker"])
    assert ran.exit_code == 2 and "--pool keeps warm sandboxes in this process" in ran.output


def test_a_ray_started_for_a_run_listens_on_loopback_only():
    """Ray binds its node's address, which it never lets be loopback on Linux: a run's own Ray
    listened on every interface (its GCS, raylet and workers reachable from the network)."""
    import os

    import psutil

    executor = RayExecutor(workers=1)
    assert executor._connect(ray)
    try:
        ray.get(ray.remote(lambda: 1).remote())  # a worker is started too
        processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
        listening = [(p.name(), c.laddr.ip) for p in processes for c in p.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN]
    finally:
        ray.shutdown()
    assert listening and all(ip in ("127.0.0.1", "::ffff:127.0.0.1", "::1") for _, ip in listening), listening
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ  # a cluster joined later is not confined
