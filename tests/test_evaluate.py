"""`dojo eval` end to end on a suite file: results, summary, sb-cli preds, bad input, resume, stop."""

import json
import os
import threading
import time

import pytest
from procs import running
from taskrepo import make_task_repo
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.datasets.registry import load_suite
from swedojo.evaluate import evaluate
from swedojo.settings import RunSettings


def _suite(tmp_path):
    mirror, task = make_task_repo(tmp_path / "mirror")
    good = task.to_swebench()
    missing = {**good, "instance_id": "ghost__repo-1", "repo": "ghost/repo"}
    broken = {**good, "instance_id": "owner__calc-2",
              "patch": good["patch"].replace("     return value\n", "-    return value * 2\n+    return value\n")}
    lines = [json.dumps(good), '{"instance_id": "owner__calc-bad", "repo": ', json.dumps(missing), json.dumps(broken)]
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return mirror, path


def _run(tmp_path, policy, out):
    mirror, path = _suite(tmp_path) if not (tmp_path / "suite.jsonl").exists() else (tmp_path / "mirror", tmp_path / "suite.jsonl")
    # --no-launch: the plain pytest environment; RepoLaunch's own tests cover launched environments
    return CliRunner().invoke(app, ["eval", "--suite", str(path), "--policy", policy, "--mirror", str(mirror), "--out", str(out), "--no-launch"])


def test_gold_eval_isolates_each_bad_instance(tmp_path):
    out = tmp_path / "run"
    result = _run(tmp_path, "gold", out)
    assert result.exit_code == 1, result.output  # an infra_error is never an exit 0
    assert "1 instance(s) ended in infra_error" in result.output
    assert "suite.jsonl:2" in result.output and "invalid JSON" in result.output
    rows = {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["owner__calc-1"]["status"] == "resolved"
    assert rows["ghost__repo-1"]["status"] == "infra_error"
    assert rows["owner__calc-1"]["repo"] == "owner/calc" and rows["ghost__repo-1"]["repo"] == "ghost/repo"
    assert "ghost/repo: no such repository" in rows["ghost__repo-1"]["error"]
    assert rows["owner__calc-2"]["status"] == "patch_failed"
    assert "does not apply" in rows["owner__calc-2"]["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 3 and summary["resolved"] == 1
    assert summary["counts"]["infra_error"] == 1 and summary["counts"]["patch_failed"] == 1
    assert summary["record_errors"][0].startswith("suite.jsonl:2")
    preds = json.loads((out / "preds.json").read_text())
    assert {p["instance_id"] for p in preds} == set(rows)
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in preds)
    assert "+    if value > high:" in next(p for p in preds if p["instance_id"] == "owner__calc-1")["model_patch"]
    assert json.loads((out / "trajectories" / "owner__calc-1.json").read_text())["group_id"] == "owner__calc-1"


def test_empty_policy_resolves_nothing_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "run"
    assert _run(tmp_path, "empty", out).exit_code == 1  # ghost__repo-1 is an infra_error
    first = (out / "results.jsonl").read_text()
    assert json.loads((out / "summary.json").read_text())["resolved"] == 0
    again = _run(tmp_path, "empty", out)
    assert again.exit_code == 1
    assert "evaluating 1 of 3 instances" in again.output and "(2 kept from the earlier run)" in again.output
    assert "ghost__repo-1: infra_error" in again.output and "owner__calc-1:" not in again.output  # only it ran again
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["instance_id"] for line in lines) == ["ghost__repo-1", "owner__calc-1", "owner__calc-2"]
    assert set(first.splitlines()) - set(lines) == {next(line for line in first.splitlines() if "ghost__repo-1" in line)}


def test_unknown_suite_and_policy_are_clear_errors(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--suite", str(tmp_path / "nope.jsonl")])
    assert r.exit_code == 2 and "no such suite file" in r.output
    r = CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", "psychic"])
    assert r.exit_code == 2 and "unknown policy 'psychic'" in r.output


def test_replay_reproduces_a_recorded_run_and_refuses_other_tools(tmp_path):
    gold = tmp_path / "gold"
    assert _run(tmp_path, "gold", gold).exit_code == 1
    mirror, path = tmp_path / "mirror", tmp_path / "suite.jsonl"
    replay = tmp_path / "replay"
    args = ["eval", "--suite", str(path), "--policy", "replay", "--trajectories", str(gold / "trajectories"),
            "--mirror", str(mirror), "--out", str(replay), "--no-launch", "--instance", "owner__calc-1"]
    assert CliRunner().invoke(app, args).exit_code == 0
    row = json.loads((replay / "results.jsonl").read_text())
    assert row["status"] == "resolved"
    assert row["patch"] == json.loads((gold / "results.jsonl").read_text().splitlines()[0])["patch"]
    # a recording whose tool signature differs is refused, naming the tool
    recorded = gold / "trajectories" / "owner__calc-1.json"
    data = json.loads(recorded.read_text())
    data["tool_fingerprints"]["bash"] = "0" * 64
    recorded.write_text(json.dumps(data))
    refused = tmp_path / "refused"
    assert CliRunner().invoke(app, [*args[:-5], "--out", str(refused), "--no-launch", "--instance", "owner__calc-1"]).exit_code == 1
    row = json.loads((refused / "results.jsonl").read_text())
    assert row["status"] == "infra_error" and "changed: bash" in row["error"]


def test_a_resume_with_other_inputs_is_refused_and_restart_sets_the_old_run_aside(tmp_path):
    out = tmp_path / "run"
    _run(tmp_path, "empty", out)
    refused = _run(tmp_path, "gold", out)
    assert refused.exit_code == 2 and "was made by other inputs (policy: 'empty' -> 'gold')" in refused.output
    assert {json.loads(line)["policy"] for line in (out / "results.jsonl").read_text().splitlines()} == {"empty"}
    mirror, path = tmp_path / "mirror", tmp_path / "suite.jsonl"
    restarted = CliRunner().invoke(app, ["eval", "--suite", str(path), "--policy", "gold", "--mirror", str(mirror),
                                         "--out", str(out), "--no-launch", "--restart"])
    assert "evaluating 3 of 3 instances" in restarted.output, restarted.output
    assert json.loads((out / "run.json").read_text())["policy"] == "gold"
    assert json.loads((out / "summary.json").read_text())["resolved"] == 1
    (previous,) = out.glob("previous-*")
    assert {json.loads(line)["policy"] for line in (previous / "results.jsonl").read_text().splitlines()} == {"empty"}
    # SWE-bench's files went aside with the rest: the run report named after the policy, the per-instance logs
    assert (previous / "empty.run.json").is_file() and not (out / "empty.run.json").exists()
    assert json.loads((out / "gold.run.json").read_text())["resolved_ids"] == ["owner__calc-1"]
    assert sorted(p.name for p in (previous / "logs").iterdir()) == ["ghost__repo-1", "owner__calc-1", "owner__calc-2"]
    assert not (out / "logs" / "ghost__repo-1" / "report.json").exists()  # an infra_error: SWE-bench writes none


def test_an_infra_error_is_tried_again_once_its_cause_is_fixed(tmp_path):
    mirror, path = _suite(tmp_path)
    out = tmp_path / "run"
    args = ["eval", "--suite", str(path), "--policy", "gold", "--out", str(out), "--no-launch", "--instance", "owner__calc-1"]
    wrong = CliRunner().invoke(app, [*args, "--mirror", str(tmp_path / "nowhere")])
    assert wrong.exit_code == 1 and "infra_error" in wrong.output
    right = CliRunner().invoke(app, [*args, "--mirror", str(mirror)])
    assert right.exit_code == 0, right.output
    assert json.loads((out / "summary.json").read_text())["resolved"] == 1


def test_selection_by_id_slice_and_limit(tmp_path):
    mirror, path = _suite(tmp_path)
    base = ["eval", "--suite", str(path), "--policy", "empty", "--mirror", str(mirror), "--no-launch", "--rewards", "resolved"]
    typo = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a"), "--instance", "owner__calc-l"])
    assert typo.exit_code == 2 and "no instance 'owner__calc-l' in the suite (3 instances)" in typo.output
    sliced = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "b"), "--slice", "1:", "--limit", "1"])
    assert "evaluating 1 of 1 instances" in sliced.output, sliced.output
    assert [json.loads(line)["instance_id"] for line in (tmp_path / "b" / "results.jsonl").read_text().splitlines()] == ["ghost__repo-1"]
    bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "c"), "--slice", "one:two"])
    assert bad.exit_code == 2 and "--slice takes A:B" in bad.output
    assert CliRunner().invoke(app, ["--version"]).output.startswith("swedojo ")


def test_a_set_stop_starts_no_further_instance_and_the_files_cover_what_ran(tmp_path):
    suite = load_suite("demo")
    instances = suite.loaded.instances
    stop = threading.Event()
    run = RunSettings(suite="demo", policy="gold", rewards="resolved", workers=2, out=tmp_path).prepare()
    summary = evaluate(run, on_result=lambda result: stop.set(), stop=stop)
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) <= 2 < len(instances)  # the instances the two workers had begun, no more
    assert summary.total == len(instances) and summary.not_started == len(instances) - len(rows)
    assert json.loads((tmp_path / "summary.json").read_text())["not_started"] == summary.not_started
    assert {p["instance_id"] for p in json.loads((tmp_path / "preds.json").read_text())} == {r["instance_id"] for r in rows}


def test_skipped_records_are_in_the_rate_and_the_exit_code(tmp_path):
    mirror, task = make_task_repo(tmp_path / "mirror")
    path = tmp_path / "suite.jsonl"
    path.write_text(task.model_dump_json() + '\n{"instance_id": "owner__calc-bad", "repo": \n')
    base = ["eval", "--suite", str(path), "--policy", "gold", "--mirror", str(mirror), "--no-launch", "--rewards", "resolved"]
    result = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "all")])
    assert result.exit_code == 1, result.output
    assert "skipped record suite.jsonl:2" in result.output and "1/1 (100%; 1 suite record skipped)" in result.output
    assert result.output.splitlines()[-1].startswith("skipped 1 suite record that could not be read: left out of the resolved rate")
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert summary["total"] == 1 and summary["record_errors"][0].startswith("suite.jsonl:2")
    # named by id, the instances are all there whatever else could not be read
    named = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "named"), "--instance", task.instance_id])
    assert named.exit_code == 0 and "1/1 (100%)" in named.output, named.output


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_an_instance_over_its_budget_is_timed_out_and_its_sandboxes_are_stopped(tmp_path, backend):
    mirror, task = make_task_repo(tmp_path / "mirror")
    sleep = ["sleep", f"9{os.getpid()}"]  # a command line no other process here has
    hang = task.test_patch.replace("@@ -8,3 +8,7 @@", "@@ -8,3 +8,9 @@").replace(
        "+def test_clamp_high():\n", f"+def test_clamp_high():\n+    import subprocess\n+    subprocess.run({sleep!r})\n")
    slow = task.model_copy(update={"instance_id": "owner__calc-slow", "test_patch": hang})
    path = tmp_path / "suite.jsonl"
    path.write_text(slow.model_dump_json() + "\n" + task.model_dump_json() + "\n")
    out = tmp_path / "run"
    args = ["eval", "--suite", str(path), "--policy", "gold", "--mirror", str(mirror), "--no-launch", "--rewards",
            "resolved", "--backend", backend, "--out", str(out), "--instance-timeout", "20"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output  # a timeout is the instance's outcome, not the harness failing
    rows = {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["owner__calc-1"]["status"] == "resolved"
    timed_out = rows["owner__calc-slow"]
    assert timed_out["status"] == "timed_out" and not timed_out["resolved"]
    assert "over its 20 s budget" in timed_out["error"] and "+    if value > high:" in timed_out["patch"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["timed_out"] == 1 and summary["counts"]["infra_error"] == 0 and summary["resolved"] == 1
    assert "owner__calc-slow: timed_out" in result.output
    deadline = time.monotonic() + 60  # a liveness bound for the SIGKILLs sent, not a speed check
    while running(sleep) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(sleep) == []  # the test run in the stopped sandbox went with it
    if backend == "docker":
        from swedojo.sandboxes.docker import OWNER_PID_LABEL, api

        assert api().containers(all=True, filters={"label": f"{OWNER_PID_LABEL}={os.getpid()}"}) == []
    again = CliRunner().invoke(app, args)
    assert "evaluating 0 of 2 instances" in again.output  # a resumed run keeps the verdict


def _sampled(out) -> dict[str, list[int]]:
    """Per instance, every token the model sampled in the run at `out`."""
    return {path.stem: [t for step in json.loads(path.read_text())["steps"] for t in step["response_token_ids"]]
            for path in sorted((out / "trajectories").glob("*.json"))}


@pytest.mark.docker
def test_a_seeded_model_run_samples_the_same_whatever_the_workers_order_and_a_resume_keeps_its_seed(tmp_path):
    # docker: every work tree is /testbed, so the prompts are the same (a local sandbox's work tree
    # is a fresh temp path, which the task prompt names)
    ids = [i.instance_id for i in load_suite("demo").loaded.instances][:3]

    def run(out, seed: int, workers: int):
        return CliRunner().invoke(app, ["eval", "--suite", "demo", "--policy", "model", "--model", "tiny:glm_moe_dsa",
                                        "--max-steps", "1", "--rewards", "resolved", "--workers", str(workers),
                                        "--temperature", "1.0", "--seed", str(seed), "--backend", "docker",
                                        *(a for i in ids for a in ("--instance", i)),
                                        "--out", str(tmp_path / out)])

    for out, seed, workers in (("one", 5, 1), ("two", 5, 3), ("other", 6, 3)):
        result = run(out, seed, workers)
        assert result.exit_code == 0 and "resolved rate" in result.output, result.output
    one, two, other = (_sampled(tmp_path / out) for out in ("one", "two", "other"))
    assert set(one) == set(ids) and all(one.values())
    assert one == two  # the same seed, in whatever order three workers took the instances
    assert all(other[i] != one[i] for i in ids)  # another seed, other samples
    refused = run("one", 6, 1)
    assert refused.exit_code == 2 and "seed: 5 -> 6" in refused.output


def test_an_instance_id_that_is_a_path_writes_only_inside_the_run_directory(tmp_path):
    """Ids are names, not paths: `../../x` (from a suite or predictions file) names files in the run
    directory, and the report and a replay find them by the same mapping (`rundir.file_name`)."""
    mirror, task = make_task_repo(tmp_path / "mirror")
    escaping = {**task.to_swebench(), "instance_id": "../../escaped"}
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(escaping) + "\n")
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps([{"instance_id": "../../escaped", "model_name_or_path": "m",
                                  "model_patch": escaping["patch"]}]))
    out = tmp_path / "a" / "b" / "run"
    result = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--predictions", str(preds), "--mirror", str(mirror),
                                      "--out", str(out), "--no-launch"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "a" / "escaped").exists() and not (out / ".." / ".." / "escaped").exists()
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*escaped*"))
    assert written and all(p.startswith("a/b/run/") for p in written), written
    assert [d.name.startswith(".") for d in (out / "logs").iterdir()] == [False]
    assert (next((out / "logs").iterdir()) / "report.json").is_file()
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["instance_id"] == "../../escaped" and row["status"] == "resolved"
    # a replay reads the trajectory by the same mapping (a predictions run records no tools: refused for that)
    replayed = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--policy", "replay", "--trajectories",
                                        str(out / "trajectories"), "--mirror", str(mirror), "--out",
                                        str(tmp_path / "replayed"), "--no-launch"])
    assert "no recorded trajectory" not in replayed.output and "FingerprintMismatchError" in replayed.output
    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
