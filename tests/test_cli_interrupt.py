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
