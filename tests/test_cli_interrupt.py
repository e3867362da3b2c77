"""Ctrl-C during `dojo eval`: the first stops new instances, keeps what is done and says how to resume."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from background_job import AS_A_BACKGROUND_JOB

from swedojo.datasets.registry import load_suite

DOJO = str(Path(sys.executable).with_name("dojo"))
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "COLUMNS": "400", "PYTHONPATH": str(ROOT)}  # this checkout's code, one line per message


def _results(out: Path) -> set[str]:
    lines = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").is_file() else []
    return {json.loads(line)["instance_id"] for line in lines}


def test_a_first_ctrl_c_stops_new_instances_and_the_printed_command_resumes(tmp_path: Path) -> None:
    total = len(load_suite("demo").loaded.instances)
    out = tmp_path / "run"
    proc = subprocess.Popen([DOJO, "eval", "--suite", "demo", "--policy", "gold", "--out", str(out), "--workers", "1",
                             "--rewards", "resolved"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    while not _results(out) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[0]
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, output
    assert (out / "summary.json").is_file() and (out / "preds.json").is_file()
    done = _results(out)
    assert 1 <= len(done) < total, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["not_started"] == total - len(done) and summary["resolved"] == len(done)
    # the table's rate is over the instances the run got to, not those it never started
    assert f"{len(done)}/{len(done)} (100%; {total - len(done)} not started)" in output, output
    last = output.splitlines()[-1]
    assert last.startswith(f"stopped: {len(done)} of {total} instances done, {total - len(done)} not started; resume with: ")
    command = shlex.split(last.partition("resume with: ")[2])
    assert command[:2] == ["dojo", "eval"] and command[-2:] == ["--out", str(out)]

    resumed = subprocess.run([DOJO, *command[1:]], capture_output=True, text=True, env=ENV, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"evaluating {total - len(done)} of {total} instances" in resumed.stdout
    assert len(_results(out)) == total
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resolved"] == summary["total"] == total and summary["not_started"] == 0


def test_ctrl_c_during_dojo_run_keeps_the_steps_and_diff_so_far_and_prints_no_success(tmp_path: Path) -> None:
    from taskrepo import make_task_repo

    from swedojo.rundir import RunDir
    from swedojo.schema import ExitStatus, ToolCall, Trajectory
    from swedojo.tools.formats import get_format

    mirror, task = make_task_repo(tmp_path / "mirror")
    calls = [ToolCall(name="bash", arguments={"command": "echo 'started' >> calc.py"}),
             ToolCall(name="bash", arguments={"command": "sleep 120"}), ToolCall(name="submit", arguments={})]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": get_format("glm").render_calls([call])} for call in calls]))
    out = tmp_path / "run"
    proc = subprocess.Popen([*AS_A_BACKGROUND_JOB, DOJO, "run", "--repo", str(mirror / task.repo),
                             "--issue-text", "clamp is wrong", "--model", f"scripted:{script}", "--out", str(out), "--no-launch"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    saved = out / "trajectories"
    while proc.poll() is None and not any(json.loads(p.read_text())["steps"] for p in saved.glob("*.json")):
        time.sleep(0.05)
    time.sleep(1.0)  # into the second step's sleep
    assert proc.poll() is None, proc.communicate()[0]
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output

    [path] = RunDir(out).trajectory_files()
    trajectory = Trajectory.model_validate_json(path.read_text())
    assert trajectory.exit_status == ExitStatus.INTERRUPTED and len(trajectory.steps) == 1
    assert trajectory.stopped_by == "Ctrl-C (SIGINT) after 1 steps" and "+started" in trajectory.patch
    assert (out / "patch.diff").read_text() == trajectory.patch
    [result] = RunDir(out).read_results().values()
    assert result.exit_status == ExitStatus.INTERRUPTED and result.status.value == "not_graded" and not result.report.tiers
    assert json.loads((out / "summary.json").read_text())["total"] == 1
    assert "exit status: interrupted after 1 steps; stopped: Ctrl-C (SIGINT) after 1 steps" in output
    assert output.splitlines()[-1] == (f"interrupted: nothing was scored; the trajectory ({path}) and the diff so far "
                                       f"({out / 'patch.diff'}, {len(trajectory.patch.splitlines())} lines) are kept; look at it: dojo report {out}")
    assert "reward" not in output and "submitted" not in output and "Traceback" not in output

    report = subprocess.run([DOJO, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert report.returncode == 0 and "report of 1 instance" in report.stdout, report.stdout + report.stderr
    exported = subprocess.run([DOJO, "export", str(out), "--format", "messages"], capture_output=True, text=True, env=ENV,
                              timeout=120, check=False)  # kept out of training data, saying why
    assert exported.returncode == 0 and "interrupted: Ctrl-C (SIGINT) after 1 steps" in exported.stdout, exported.stdout


def test_ctrl_c_while_dojo_run_launches_the_environment_is_recorded_as_interrupted(tmp_path: Path) -> None:
    from swedojo.rundir import RunDir
    from swedojo.schema import ExitStatus, Trajectory

    repo = tmp_path / "slow"
    repo.mkdir()
    (repo / "Makefile").write_text("all:\n\ttrue\ntest:\n\techo validating; sleep 60\n.PHONY: all test\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    out = tmp_path / "run"
    proc = subprocess.Popen([*AS_A_BACKGROUND_JOB, DOJO, "run", "--repo", str(repo), "--issue-text", "it is slow",
                             "--model", "tiny:glm_moe_dsa", "--out", str(out), "--backend", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    build_log = out / "environment"
    deadline = time.monotonic() + 300
    while proc.poll() is None and "validating" not in "".join(p.read_text() for p in build_log.rglob("build.log")):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[0]
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert output.splitlines()[-1] == (f"interrupted while launching the environment (RepoLaunch): recorded as "
                                       f"interrupted, nothing scored; look at it: dojo report {out}"), output
    [result] = RunDir(out).read_results().values()
    assert result.exit_status == ExitStatus.INTERRUPTED and result.status.value == "not_graded"
    assert result.error == "interrupted while launching the environment: nothing was scored"
    [path] = RunDir(out).trajectory_files()
    trajectory = Trajectory.model_validate_json(path.read_text())
    assert trajectory.stopped_by == "Ctrl-C while launching the environment" and not trajectory.steps
    report = subprocess.run([DOJO, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert report.returncode == 0 and "report of 1 instance" in report.stdout, report.stdout + report.stderr
