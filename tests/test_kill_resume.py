"""`kill -9` of a `dojo eval` driver at any moment, then the same command again: every instance exactly
once in results.jsonl, with the verdicts of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from swedojo.datasets.registry import load_suite
from swedojo.rundir import PAUSE_MID_RESULT

DOJO = str(Path(sys.executable).with_name("dojo"))
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "COLUMNS": "400", "PYTHONPATH": str(ROOT)}
TOTAL = len(load_suite("demo").loaded.instances)

pytestmark = pytest.mark.slow


def _command(out: Path) -> list[str]:
    return [DOJO, "eval", "--suite", "demo", "--policy", "gold", "--rewards", "resolved", "--workers", "2",
            "--out", str(out)]


def _lines(out: Path) -> list[str]:
    results = out / "results.jsonl"
    return results.read_text().split("\n") if results.is_file() else []


def _whole(out: Path) -> list[dict]:
    """The results a reader can parse (a line cut by a kill is not one)."""
    parsed = []
    for line in _lines(out):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return parsed


def _start(out: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(_command(out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**ENV, **env})


def _kill_when(proc: subprocess.Popen[str], ready) -> None:
    """kill -9 the driver as soon as `ready()` holds (it must still be running then)."""
    while not ready():
        assert proc.poll() is None, f"the run ended before the kill point: {proc.communicate()[0][-2000:]}"
        time.sleep(0.01)
    proc.kill()
    proc.communicate()


def _finish(out: Path) -> None:
    """The same command again, to the end; then every instance once, each resolved (gold)."""
    done = subprocess.run(_command(out), capture_output=True, text=True, env=ENV, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in _lines(out) if line]
    ids = Counter(json.loads(line)["instance_id"] for line in lines)  # every line parses: no cut one is left
    assert sorted(ids) == sorted(i.instance_id for i in load_suite("demo").loaded.instances)
    assert set(ids.values()) == {1}, ids
    assert {json.loads(line)["status"] for line in lines} == {"resolved"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resolved"] == summary["total"] == TOTAL and summary["not_started"] == 0
    assert len(json.loads((out / "preds.json").read_text())) == TOTAL


@pytest.mark.parametrize("after", [0, 1, TOTAL // 2])
def test_a_kill_after_some_results_and_a_rerun_give_each_instance_once(tmp_path: Path, after: int) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    _kill_when(proc, lambda: (out / "run.json").is_file() and len(_whole(out)) >= after)
    assert len(_whole(out)) < TOTAL
    _finish(out)


def test_a_kill_in_the_middle_of_a_write_leaves_a_cut_line_that_the_rerun_drops(tmp_path: Path) -> None:
    out, paused = tmp_path / "run", tmp_path / "paused"
    proc = _start(out, **{PAUSE_MID_RESULT: str(paused)})
    _kill_when(proc, paused.exists)
    cut = _lines(out)
    assert cut[-1] and not cut[-1].endswith("}"), cut  # half a line, no newline after it
    _finish(out)


def test_kills_at_several_points_of_one_run_then_a_rerun(tmp_path: Path) -> None:
    out, paused = tmp_path / "run", tmp_path / "paused"
    _kill_when(_start(out), lambda: len(_whole(out)) >= 2)
    _kill_when(_start(out, **{PAUSE_MID_RESULT: str(paused)}), paused.exists)
    _kill_when(_start(out), lambda: len(_whole(out)) >= 4)
    _finish(out)


def test_a_second_run_on_a_directory_in_use_is_refused_and_takes_over_once_the_first_is_killed(tmp_path: Path) -> None:
    out, paused = tmp_path / "run", tmp_path / "paused"
    first = _start(out, **{PAUSE_MID_RESULT: str(paused)})
    while not paused.exists():
        assert first.poll() is None, first.communicate()[0][-2000:]
        time.sleep(0.01)
    second = subprocess.run(_command(out), capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert second.returncode == 2, second.stdout[-2000:]
    assert f"is in use by another run (pid {first.pid})" in second.stdout
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    _finish(out)
