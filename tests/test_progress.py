"""Piped `dojo eval` and `dojo gen` print a progress line at least every 10 s of work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from taskrepo import git, make_task_repo

from swedojo.progress import Heartbeat

DOJO = str(Path(sys.executable).with_name("dojo"))
LINE = re.compile(r"^\[\d\d:\d\d:\d\d \+(?:(\d+)m)?(\d+)s\] (.*)$")


def _beats(output: str) -> list[tuple[int, str]]:
    return [(int(m[1] or 0) * 60 + int(m[2]), m[3]) for m in map(LINE.match, output.splitlines()) if m]


def test_a_heartbeat_reports_what_describe_says_and_survives_its_errors() -> None:
    lines: list[str] = []
    said = iter(["first", RuntimeError("boom")])

    def describe() -> str:
        value = next(said, "later")
        if isinstance(value, Exception):
            raise value
        return value

    with Heartbeat(describe, lines.append, every_s=0.05):
        time.sleep(0.2)
    assert [LINE.match(line)[3] for line in lines[:2]] == ["first", "(progress unavailable: RuntimeError)"]


@pytest.mark.slow
def test_piped_eval_and_gen_print_progress_every_10_seconds(tmp_path: Path) -> None:
    mirror, task = make_task_repo(tmp_path / "mirror")
    suite = tmp_path / "suite.jsonl"
    slow = task.model_copy(update={"test_patch": task.test_patch.replace(
        "+def test_clamp_high():\n", "+def test_clamp_high():\n+    __import__('time').sleep(25)\n")})
    suite.write_text(slow.model_dump_json() + "\n")
    env = {**os.environ, "COLUMNS": "200"}
    run = subprocess.run([DOJO, "eval", "--suite", str(suite), "--mirror", str(mirror), "--no-launch", "--policy", "gold",
                          "--rewards", "resolved", "--out", str(tmp_path / "run")], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    beats = _beats(run.stdout)
    assert len(beats) >= 2 and all(b - a <= 11 for (a, _), (b, _) in zip([(0, "")] + beats, beats)), run.stdout
    assert re.fullmatch(r"0 of 1 done; running owner__calc-1 \(\d+s\)", beats[0][1]), beats

    repo = mirror / task.repo
    (repo / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(4)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a slow test")
    gen = subprocess.run([DOJO, "gen", str(repo), "--from", "mutations", "--out", str(tmp_path / "gen"),
                          "--max-tasks", "2", "--timeout", "60"], env=env, capture_output=True, text=True, timeout=900,
                         check=False)
    assert gen.returncode == 0, gen.stdout[-2000:] + gen.stderr[-2000:]
    beats = _beats(gen.stdout)  # two baseline runs and every candidate run take 4 s or more
    assert len(beats) >= 2 and all(b - a <= 11 for (a, _), (b, _) in zip([(0, "")] + beats, beats)), gen.stdout
    assert all(re.fullmatch(r"building the environment and the baseline test runs|"
                            r"\d+ candidates judged, \d+ kept; last: \w+", what) for _, what in beats), beats
