"""Piped `dojo eval` and `dojo gen` print a progress line at least every 10 s of work, naming the stage
(why `--rewards tiers` takes longer); on a terminal a live display shows the same."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from taskrepo import git, make_task_repo

from swedojo.progress import Heartbeat, RunProgress
from swedojo.schema import EvalStatus, TaskInstance

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


def test_run_progress_says_done_of_total_the_tallies_the_eta_and_each_running_stage() -> None:
    board = RunProgress(4)
    board.stage("a", "starting")
    board.stage("b", "grading")
    assert re.fullmatch(r"0 of 4 done; running a \(\d+s: starting\), b \(\d+s: grading\)", board.describe())
    board.finish("a", EvalStatus.RESOLVED)
    board.stage("c", "the gold policy at work")
    board.finish("b", EvalStatus.INFRA_ERROR)
    board.finish("c", EvalStatus.TIMED_OUT)
    assert re.fullmatch(r"3 of 4 done \(1 resolved, 1 error, 1 timed out\), ETA \d+s; running nothing", board.describe())
    assert board.eta_s() is not None and board.eta_s() >= 0


def test_the_eta_falls_while_the_run_waits_on_a_long_instance(monkeypatch) -> None:
    """Elapsed-per-done grew with every tick while nothing finished ("ETA grows while waiting"):
    the ETA is the instances left at the mean an instance took, less what the running ones did."""
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    board = RunProgress(4)
    for name in ("a", "b"):
        board.stage(name, "starting")
    clock[0] += 10
    board.finish("a", EvalStatus.RESOLVED)  # 10 s each, two at once
    board.stage("c", "starting")
    etas = []
    for _ in range(4):
        etas.append(board.eta_s())
        clock[0] += 2
    assert etas == sorted(etas, reverse=True) and etas[0] > etas[-1], etas
    assert etas[0] == (3 * 10 - 10 - 0) / 2  # b has run its mean, c nothing yet


def _slow_task(tmp_path: Path, seconds: int) -> tuple[Path, Path, TaskInstance]:
    """(mirror, suite file, task) where the failing-to-passing test takes `seconds`."""
    mirror, task = make_task_repo(tmp_path / "mirror")
    slow = task.model_copy(update={"test_patch": task.test_patch.replace(
        "+def test_clamp_high():\n", f"+def test_clamp_high():\n+    __import__('time').sleep({seconds})\n")})
    suite = tmp_path / "suite.jsonl"
    suite.write_text(slow.model_dump_json() + "\n")
    return mirror, suite, task


@pytest.mark.slow
def test_piped_eval_and_gen_print_progress_every_10_seconds(tmp_path: Path) -> None:
    mirror, suite, task = _slow_task(tmp_path, 25)
    env = {**os.environ, "COLUMNS": "200"}
    run = subprocess.run([DOJO, "eval", "--suite", str(suite), "--mirror", str(mirror), "--no-launch", "--policy", "gold",
                          "--rewards", "tiers", "--out", str(tmp_path / "run")], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    beats = _beats(run.stdout)
    assert len(beats) >= 2 and all(b - a <= 11 for (a, _), (b, _) in zip([(0, "")] + beats, beats)), run.stdout
    # the tiers' whole-suite run at base and the grading each take 25 s: each is named while it runs
    stages = [re.fullmatch(r"0 of 1 done; running owner__calc-1 \(\d+s: (.+)\)", what) for _, what in beats]
    assert all(stages), beats
    assert {"baseline suite run for tier 3 (the whole suite at base)", "grading"} <= {m[1] for m in stages}, beats

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


def _on_a_terminal(command: list[str]) -> str:
    """Everything `command` wrote to a pseudo-terminal, as rich sees a user's terminal."""
    main, other = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"}
    proc = subprocess.Popen(command, stdin=other, stdout=other, stderr=other, env=env)
    os.close(other)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the process closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert proc.wait(timeout=600) == 0, b"".join(chunks)[-3000:]
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_eval_on_a_terminal_shows_a_live_display_of_what_runs(tmp_path: Path) -> None:
    mirror, suite, _ = _slow_task(tmp_path, 3)
    shown = _on_a_terminal([DOJO, "eval", "--suite", str(suite), "--mirror", str(mirror), "--no-launch",
                            "--policy", "gold", "--rewards", "resolved", "--out", str(tmp_path / "run")])
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    # the bar with done/total, the tallies and the ETA, and a line per running instance with its stage
    assert "evaluating" in plain and "0/1 0 resolved, 0 errors" in plain and "ETA -" in plain, plain
    assert re.search(r"owner__calc-1 +\d+s +grading", plain), plain
    assert "1/1 1 resolved, 0 errors" in plain, plain
    assert "\x1b[?25l" in shown  # rich hides the cursor while it redraws the display in place
    assert not re.search(r"\[\d\d:\d\d:\d\d \+\d+s\]", shown)  # no piped-style lines on a terminal
