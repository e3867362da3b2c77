"""`dojo serve` on a Ray cluster: each sample's episode and grading run on the cluster's nodes while
the service alone writes batches, groups and samples; a node lost with samples on it loses and
duplicates none (Ray runs them again elsewhere). On a real two-node loopback cluster."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import Gate
from test_service import calc_suite, gated_solver

pytestmark = pytest.mark.slow


def test_samples_run_on_the_clusters_nodes_and_a_node_lost_under_them_loses_and_duplicates_none(serve, tmp_path):
    import ray
    from raycluster import RayCluster

    from swedojo.executors import RaySession

    gate = Gate(83)
    mirror, suite = calc_suite(tmp_path)
    with RayCluster(head_cpus=0) as cluster:  # the head runs no sample: they run on `second`, then `third`
        cluster.add_node("second", cpus=2)
        cluster.connect(ray)
        try:
            cluster.wait_for(ray, alive=2)
            session = RaySession(cluster.address)  # joins as this process is joined
            client = serve(max_concurrent=2, mirror=mirror, ray=session)
            with pytest.raises(urllib.error.HTTPError) as in_process:
                client.call("POST", "/batches", {"suite": str(suite), "model": "tiny:glm_moe_dsa"})
            assert in_process.value.code == 400 and "need a served model" in in_process.value.read().decode()
            batch = client.call("POST", "/batches", {"suite": str(suite), "group_size": 2, "launch": False,
                                                     "model": gated_solver(tmp_path, gate), "rewards": "resolved"})["batch_id"]
            gate.wait(2)  # both samples in flight on `second`
            cluster.kill("second")  # lost with both samples on it
            cluster.add_node("third", cpus=2, ip="127.0.0.3")
            gate.release(2)  # Ray ran them again on `third`: they are at the gate again
            groups = client.stream(batch)
            report = client.call("GET", f"/batches/{batch}")
        finally:
            ray.shutdown()
    assert [g["group_id"] for g in groups] == ["owner__calc-1"]
    samples = groups[0]["samples"]
    assert sorted(s["sample_id"].split("/")[1] for s in samples) == ["owner__calc-1__s0", "owner__calc-1__s1"]
    assert all(s["outcome"] == "valid" and s["status"] == "resolved" and s["reward"] == 1.0 for s in samples)
    assert report["state"] == "finished" and report["samples_started"] == 2 and report["infra_failures"] == 0
    logged = [json.loads(line) for line in (Path(report["directory"]) / "samples.jsonl").read_text().splitlines()]
    assert sorted(s["sample_id"] for s in logged) == sorted(s["sample_id"] for s in samples)  # each once


def test_cancelling_a_batch_cancels_its_tasks_on_the_nodes_and_frees_the_service(serve, tmp_path):
    import ray
    from raycluster import RayCluster

    from swedojo.executors import RaySession

    gate, after_gate = Gate(84), Gate(85)
    mirror, suite = calc_suite(tmp_path)
    (tmp_path / "after").mkdir()
    with RayCluster(head_cpus=0) as cluster:
        cluster.add_node("second", cpus=2, sigint_ignored=True)  # Ray's cancel must still reach its tasks
        cluster.connect(ray)
        try:
            cluster.wait_for(ray, alive=2)
            client = serve(max_concurrent=2, mirror=mirror, ray=RaySession(cluster.address))
            held = client.call("POST", "/batches", {"suite": str(suite), "group_size": 2, "launch": False,
                                                    "model": gated_solver(tmp_path, gate), "rewards": "resolved"})
            gate.wait(2)  # both samples in flight on `second`, filling the service's two worker threads
            with urllib.request.urlopen(client.request("DELETE", f"/batches/{held['batch_id']}")) as response:
                assert json.load(response)["state"] == "cancelled"
            assert gate.gone()  # the tasks were cancelled on the node: the commands in their sandboxes went
            after = client.call("POST", "/batches", {"suite": str(suite), "group_size": 2, "launch": False,
                                                     "model": gated_solver(tmp_path / "after", after_gate), "rewards": "resolved"})
            after_gate.release(2)  # runs only if the cancelled samples' threads were freed
            groups = client.stream(after["batch_id"])
        finally:
            ray.shutdown()
    assert [s["status"] for s in groups[0]["samples"]] == ["resolved", "resolved"]
    assert client.call("GET", f"/batches/{held['batch_id']}")["groups_done"] == 0
