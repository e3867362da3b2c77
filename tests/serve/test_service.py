"""`dojo serve` end to end over HTTP: batches on the demo suite with a tiny model, infra failures
refilled or dropped, stale samples dropped after a weight bump, cancellation stopping sandboxes."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from conftest import Gate
from taskrepo import make_task_repo
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from swedojo.agent.backends.inprocess import weights_version
from swedojo.cli import app
from swedojo.datasets.registry import load_suite
from swedojo.rewards.export import response_tokens, routed_experts
from swedojo.schema import ToolCall, Trajectory
from swedojo.tools.formats import get_format

GLM = get_format("glm")
FIX = {"command": "str_replace", "path": "calc.py", "old_str": "        return low\n    return value",
       "new_str": "        return low\n    if value > high:\n        return high\n    return value"}


def call(name: str, **arguments) -> str:
    return GLM.render_calls([ToolCall(name=name, arguments=arguments)])


def gated_solver(tmp_path: Path, gate: Gate) -> str:
    """A scripted policy that waits at `gate`, then fixes the calc task and submits."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": call("bash", command=gate.command)},
                                  {"content": call("str_replace_editor", **FIX)}, {"content": call("submit")}]))
    return f"scripted:{script}"


def calc_suite(tmp_path: Path, ghost: bool = False) -> tuple[Path, Path]:
    """(mirror, suite file) of the calc task; `ghost` adds an instance whose repo is not in the mirror."""
    mirror, task = make_task_repo(tmp_path / "mirror")
    lines = [task.model_dump_json()]
    if ghost:
        lines.append(task.model_copy(update={"instance_id": "ghost__repo-1", "repo": "ghost/repo"}).model_dump_json())
    suite = tmp_path / "suite.jsonl"
    suite.write_text("\n".join(lines) + "\n")
    return mirror, suite


def test_a_batch_on_the_demo_suite_yields_every_group_with_records_that_rederive_from_disk(serve, tiny_checkpoint):
    client = serve(max_concurrent=2)
    schema = client.call("GET", "/openapi.json")
    assert {"/batches", "/batches/{batch_id}/groups", "/batches/{batch_id}/stream", "/weights"} <= set(schema["paths"])
    assert {"BatchRequest", "GroupOut", "SampleOut", "TokenRecord", "BatchReport"} <= set(schema["components"]["schemas"])
    ids = [i.instance_id for i in load_suite("demo").loaded.instances][:2]
    created = client.call("POST", "/batches", {
        "suite": "demo", "instance_ids": ids, "group_size": 2, "model": str(tiny_checkpoint), "weight_version": 3,
        "sampling": {"temperature": 1.0, "max_new_tokens": 16, "max_steps": 2},
    })
    assert created["groups"] == 2 and created["samples"] == 4
    streamed = client.stream(created["batch_id"])
    assert sorted(g["group_id"] for g in streamed) == sorted(ids)
    polled = client.call("GET", f"/batches/{created['batch_id']}/groups?cursor=0")
    assert polled["groups"] == streamed and polled["next_cursor"] == 2 and polled["done"]
    for group in streamed:
        assert len(group["samples"]) == 2 and group["refilled"] == 0
        for sample in group["samples"]:
            assert sample["outcome"] == "valid" and sample["status"] != "infra_error"
            assert sample["weight_version_start"] == sample["weight_version_end"] == 3
            assert sample["reward_tiers"] and sample["reward"] == sample["record"]["reward"]
            record = sample["record"]
            trajectory = Trajectory.model_validate_json(Path(sample["trajectory_path"]).read_text())
            ids_, mask, logprobs = response_tokens(trajectory)
            assert record["prompt_ids"] == trajectory.initial_prompt_token_ids
            assert (record["response_ids"], record["loss_mask"], record["rollout_log_probs"]) == (ids_, mask, logprobs)
            assert record["logprob_kind"] == "temperature" and sum(mask) > 0
            assert record["rollout_routed_experts"] == routed_experts(trajectory) is not None
            assert record["group_id"] == group["group_id"] and record["advantage"] == sample["advantage"]
    report = client.call("GET", f"/batches/{created['batch_id']}")
    assert report["state"] == "finished" and report["groups_done"] == 2 and report["groups_dropped"] == 0
    assert report["samples_started"] == 4 and report["infra_failures"] == report["stale_drops"] == 0


@pytest.mark.docker
def test_a_seeded_batch_submitted_again_samples_the_same_tokens_with_decode_steps_batched(serve, tiny_checkpoint):
    # docker: every sandbox's work tree is /testbed, so the prompts are the same (the local backend's
    # work tree is a fresh temp path, which the task prompt names)
    client = serve(max_concurrent=2, backend="docker")
    instance = load_suite("demo").loaded.instances[0].instance_id

    def responses() -> dict[str, list[int]]:
        batch = client.call("POST", "/batches", {
            "suite": "demo", "instance_ids": [instance], "group_size": 2, "model": str(tiny_checkpoint),
            "rewards": "resolved", "sampling": {"temperature": 1.0, "max_new_tokens": 16, "max_steps": 2, "seed": 7},
        })["batch_id"]
        [group] = client.stream(batch)
        return {s["sample_id"].rsplit("__", 1)[1]: s["record"]["response_ids"] for s in group["samples"]}

    first, again = responses(), responses()
    assert first == again and set(first) == {"s0", "s1"}
    assert first["s0"] != first["s1"]  # each sample its own seed
    assert client.service._models[str(tiny_checkpoint)].scheduler.max_batch == 2


def test_a_checkpoint_the_trainer_saved_over_is_what_the_next_batch_samples_from(serve, tiny_checkpoint, tmp_path):
    checkpoint = Path(shutil.copytree(tiny_checkpoint, tmp_path / "policy"))
    client = serve(max_concurrent=2)
    instance = load_suite("demo").loaded.instances[0].instance_id

    def weights_of_a_sample(version: int) -> list[str]:
        batch = client.call("POST", "/batches", {
            "suite": "demo", "instance_ids": [instance], "group_size": 1, "model": str(checkpoint),
            "weight_version": version, "rewards": "resolved",
            "sampling": {"max_new_tokens": 8, "max_steps": 1},
        })["batch_id"]
        [group] = client.stream(batch)
        return group["samples"][0]["record"]["weight_versions"]

    first = weights_of_a_sample(0)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)  # the trainer's step
    model.save_pretrained(checkpoint)
    stepped = weights_of_a_sample(1)
    assert first == [weights_version(AutoModelForCausalLM.from_pretrained(tiny_checkpoint))]
    assert stepped == [weights_version(model)] != first


def test_an_infra_failure_is_refilled_and_a_group_with_no_valid_sample_is_dropped(serve, tmp_path):
    gate = Gate(81)
    mirror, suite = calc_suite(tmp_path, ghost=True)
    client = serve(max_concurrent=3, mirror=mirror)
    batch = client.call("POST", "/batches", {"suite": str(suite), "group_size": 3, "model": gated_solver(tmp_path, gate),
                                             "rewards": "resolved", "launch": False})["batch_id"]
    gate.wait(3)  # the calc group's three samples are in flight
    # A real storage fault for one sample: its trajectory file cannot be written (a directory is in the way).
    directory = Path(client.call("GET", f"/batches/{batch}")["directory"])
    (directory / "trajectories" / "owner__calc-1__s1.json").mkdir(parents=True)
    gate.release(3)
    gate.release(1)  # the refill of the failed sample
    groups = client.stream(batch)
    report = client.call("GET", f"/batches/{batch}")
    assert [g["group_id"] for g in groups] == ["owner__calc-1"]
    samples = groups[0]["samples"]
    assert sorted(s["sample_id"].split("/")[1] for s in samples) == ["owner__calc-1__s0", "owner__calc-1__s2",
                                                                     "owner__calc-1__s3"]
    assert all(s["outcome"] == "valid" and s["status"] == "resolved" and s["reward"] == 1.0 for s in samples)
    assert all(s["record"] is None and "placeholders" in s["record_error"] for s in samples)  # scripted: no sampled logprobs
    assert groups[0]["refilled"] == 1
    # the ghost group: every sample failed to get a sandbox, so it is dropped, not reported with zero rewards
    assert report["state"] == "finished" and report["groups_done"] == 1 and report["groups_dropped"] == 1
    assert report["dropped"][0]["group_id"] == "ghost__repo-1" and "0 of 3" in report["dropped"][0]["reason"]
    assert report["infra_failures"] == 4 and report["samples_refilled"] == 1 and report["samples_started"] == 7
    logged = [json.loads(line) for line in (directory / "samples.jsonl").read_text().splitlines()]
    errors = {s["sample_id"].split("/")[1]: s["error"] for s in logged if s["outcome"] == "infra_error"}
    assert "IsADirectoryError" in errors["owner__calc-1__s1"]
    assert all("ghost/repo: no such repository" in errors[f"ghost__repo-1__s{n}"] for n in range(3))


def test_a_sample_started_before_a_weight_bump_is_dropped_as_stale_and_refilled(serve, tmp_path):
    gate = Gate(82)
    mirror, suite = calc_suite(tmp_path)
    client = serve(max_concurrent=1, mirror=mirror)
    batch = client.call("POST", "/batches", {"suite": str(suite), "group_size": 3, "model": gated_solver(tmp_path, gate),
                                             "rewards": "resolved", "launch": False, "weight_version": 0,
                                             "max_staleness": 0})["batch_id"]
    gate.wait(1)  # the first sample started at version 0
    assert client.call("POST", "/weights", {"version": 1}) == {"version": 1}
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.call("POST", "/weights", {"version": 0})
    assert refused.value.code == 409
    for _ in range(4):  # the stale one, two fresh ones, then its refill
        gate.release(1)
    groups = client.stream(batch)
    report = client.call("GET", f"/batches/{batch}")
    assert len(groups) == 1 and groups[0]["refilled"] == 1
    samples = groups[0]["samples"]
    assert len(samples) == 3 and all(s["weight_version_start"] == s["weight_version_end"] == 1 for s in samples)
    assert "owner__calc-1__s0" not in {s["sample_id"].split("/")[1] for s in samples}
    assert report["stale_drops"] == 1 and report["samples_refilled"] == 1 and report["infra_failures"] == 0
    logged = [json.loads(line) for line in (Path(report["directory"]) / "samples.jsonl").read_text().splitlines()]
    stale = [s for s in logged if s["outcome"] == "stale"]
    assert [(s["weight_version_start"], s["weight_version_end"]) for s in stale] == [(0, 1)]


def test_cancelling_a_batch_stops_its_sandboxes_and_reports_nothing_more(serve, tmp_path):
    gate = Gate(83)
    mirror, suite = calc_suite(tmp_path)
    client = serve(max_concurrent=2, mirror=mirror)
    batch = client.call("POST", "/batches", {"suite": str(suite), "group_size": 3, "model": gated_solver(tmp_path, gate),
                                             "rewards": "resolved", "launch": False})["batch_id"]
    gate.wait(2)
    with urllib.request.urlopen(client.request("DELETE", f"/batches/{batch}")) as response:
        assert json.load(response)["state"] == "cancelled"
    assert gate.gone()  # the commands in the batch's sandboxes went with them
    page = client.call("GET", f"/batches/{batch}/groups?cursor=0")
    assert page["groups"] == [] and page["done"]
    assert client.stream(batch) == []
    report = client.call("GET", f"/batches/{batch}")
    assert report["state"] == "cancelled" and report["groups_done"] == 0 and report["samples_started"] == 2


def test_a_bad_batch_is_refused_with_the_reason(serve, tmp_path):
    client = serve()
    with pytest.raises(urllib.error.HTTPError) as unknown:
        client.call("POST", "/batches", {"suite": "demo", "instance_ids": ["nope-1"], "model": "tiny:glm_moe_dsa"})
    assert unknown.value.code == 400 and "nope-1" in unknown.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as tools:
        client.call("POST", "/batches", {"suite": "demo", "model": "tiny:glm_moe_dsa", "tool_set": "everything"})
    assert tools.value.code == 400 and "unknown tool set 'everything'; known: minimal" in tools.value.read().decode()
    assert not list((tmp_path / "served").glob("batch-*")), "a refused batch left a directory"
    with pytest.raises(urllib.error.HTTPError) as missing:
        client.call("GET", "/batches/batch-0000")
    assert missing.value.code == 404


def test_every_call_needs_the_token_and_a_batch_names_no_variable_of_the_services(serve, tmp_path):
    """A local process that reaches the port learns nothing and starts nothing without the token; a
    batch cannot pick a model server or an environment variable whose value the service would send."""
    client = serve()
    for token in ("", "not-the-token"):
        for method, path, body in [("GET", "/weights", None), ("GET", "/batches/batch-0000", None),
                                   ("POST", "/batches", {"suite": "demo", "model": "tiny:glm_moe_dsa"})]:
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(client.request(method, path, body, token=token))
            assert refused.value.code == 401, (token, path)
    assert not list((tmp_path / "served").glob("batch-*"))
    with pytest.raises(urllib.error.HTTPError) as variable:
        client.call("POST", "/batches", {"suite": "demo", "model": "http://127.0.0.1:9/v1", "api_key_env": "HOME"})
    assert variable.value.code == 422 and "api_key_env" in variable.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as server:
        client.call("POST", "/batches", {"suite": "demo", "model": "http://127.0.0.1:9/v1"})
    assert server.value.code == 400 and "not one of the service's endpoints" in server.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as provider:  # a hosted API billed to the service's key: the operator's call
        client.call("POST", "/batches", {"suite": "demo", "model": "openai/gpt-4o"})
    assert provider.value.code == 400 and "not one of the service's endpoints" in provider.value.read().decode()


def test_oversized_batches_are_refused_naming_the_bound(serve, tmp_path):
    from swedojo.serve.service import ServiceLimits

    client = serve(limits=ServiceLimits(max_group_size=8, max_batch_samples=12))
    for body, bound in [({"group_size": 300000}, "max_group_size=8"),
                        ({"group_size": 8}, "max_batch_samples=12")]:  # the demo suite's 10 instances x 8
        with pytest.raises(urllib.error.HTTPError) as refused:
            client.call("POST", "/batches", {"suite": "demo", "model": "tiny:glm_moe_dsa", **body})
        assert refused.value.code == 400 and bound in refused.value.read().decode()
    assert not list((tmp_path / "served").glob("batch-*"))


def test_a_batch_past_the_samples_queued_over_all_batches_is_refused(serve, tmp_path):
    """One caller's unfinished batch counts against the next: the bound is over the whole service."""
    from swedojo.serve.service import ServiceLimits

    gate = Gate(84)
    mirror, suite = calc_suite(tmp_path)
    client = serve(max_concurrent=2, mirror=mirror, limits=ServiceLimits(max_queued_samples=4))
    body = {"suite": str(suite), "group_size": 3, "model": gated_solver(tmp_path, gate), "rewards": "resolved",
            "launch": False}
    first = client.call("POST", "/batches", body)["batch_id"]
    gate.wait(2)
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.call("POST", "/batches", body)
    assert refused.value.code == 400 and "max_queued_samples=4" in refused.value.read().decode()
    with urllib.request.urlopen(client.request("DELETE", f"/batches/{first}")) as response:
        assert json.load(response)["state"] == "cancelled"
    assert gate.gone()
    assert len(list((tmp_path / "served").glob("batch-*"))) == 1  # the refused one left nothing


def test_dojo_serve_is_a_command():
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--max-concurrent" in result.output and "/openapi.json" in result.output


def test_dojo_serve_names_a_wrong_executor_in_one_line():
    for args, said in [(["--executor", "slurm"], "--executor 'slurm'"), (["--address", "127.0.0.1:1"], "--address")]:
        result = CliRunner().invoke(app, ["serve", *args])
        assert result.exit_code == 2 and said in result.output and "choose local, or ray" in result.output, result.output
