"""What `dojo launch` says when it cannot build, and what it says it built: one true reason on
every backend, the cause on the console, a plain-text build log, and the runtime the environment
really gets. Real repos made in the test, the CLI run as a subprocess with its output piped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import C_OK, DATE
from mounts import churning_work_trees

from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.local import BUILD_LIMITS
from swedojo.sandboxes.local import LocalConfinement, bubblewrap_problem

DOJO = str(Path(sys.executable).with_name("dojo"))
GRADLE = {"build.gradle": "plugins { id 'java' }\n", "src/main/java/X.java": "class X {}\n"}
NODE = {"package.json": '{"name": "n", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
        "test/a.test.js": "const test = require('node:test');\ntest('ok', () => {});\n"}
C_BROKEN = {"Makefile": "CFLAGS = -fdiagnostics-color=always\nall: runner\nrunner: runner.c\n\t$(CC) $(CFLAGS) -o runner runner.c\n"
                        "test: runner\n\t./runner\n.PHONY: all test\n",
            "runner.c": "int main(void) { return undefined_thing; }\n"}


def _launch(repo: Path, out: Path, backend: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEDOJO_CACHE": str(cache), "COLUMNS": "400"}  # one line per message
    return subprocess.run([DOJO, "launch", str(repo), "--out", str(out), "--backend", backend], env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def _failure(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, run.stdout + run.stderr
    return " ".join(run.stderr.split())  # the console may wrap


@pytest.mark.docker
def test_a_language_without_a_recipe_gets_the_same_true_reason_on_both_backends(make_repo, tmp_path: Path,
                                                                                env_cache: Path) -> None:
    repo = make_repo("gradlerepo", GRADLE, DATE)
    said = {backend: _failure(_launch(repo, tmp_path / backend, backend, env_cache)) for backend in ("local", "docker")}
    reason = "launch failed at stage install: no environment recipe for java (gradle) yet, on any backend"
    assert all(reason in text for text in said.values()), said
    assert said["local"].replace("/local/", "/docker/") == said["docker"]


def test_a_failed_build_shows_its_cause_on_the_console_and_the_build_log_is_plain_text(make_repo, tmp_path: Path,
                                                                                        env_cache: Path) -> None:
    repo = make_repo("broken", C_BROKEN, DATE)
    text = _failure(_launch(repo, tmp_path / "out", "local", env_cache))
    assert "error: ‘undefined_thing’ undeclared" in text and "\x1b" not in text, text
    log = (tmp_path / "out" / "build.log").read_text()
    assert "undefined_thing" in log and "\x1b" not in log


def test_a_parse_that_cannot_account_for_the_runners_summary_fails_validation(make_repo, tmp_path: Path,
                                                                             env_cache: Path) -> None:
    """A TAP runner that plans 3 tests and reports 2 (its third result line is not TAP): no guess."""
    runner = C_OK["runner.c"].replace(r"1..1\nok 1 - fine\n", r"1..3\nok 1 - fine\nok 2 - also\nthird: ok\n")
    text = _failure(_launch(make_repo("short", {**C_OK, "runner.c": runner}, DATE), tmp_path / "out", "local", env_cache))
    assert "launch failed at stage validate: test run 1: the runner's own summary counts 3 tests, parser 'make' read 2" \
        in text, text
    assert "per-test results would be guesses" in text
    assert "third: ok" in (tmp_path / "out" / "build.log").read_text()


def test_a_command_run_into_the_build_log_leaves_its_escapes_out(tmp_path: Path) -> None:
    log = BuildLog(tmp_path / "build.log")
    assert log.run(r"printf '\033[1;31mnpm error\033[0m code ETARGET\n'", tmp_path, dict(os.environ), 60) == 0
    log.close()
    assert "npm error code ETARGET\n" in (tmp_path / "build.log").read_text()


@pytest.mark.skipif(bubblewrap_problem() is not None or os.geteuid() != 0,
                    reason="the race is bubblewrap's, and churning mounts needs root")
def test_a_build_step_survives_work_trees_unmounted_on_the_host_meanwhile(tmp_path: Path) -> None:
    """A fresh bubblewrap for each build step raced other sandboxes' work trees unmounting (a few
    steps in a hundred failed before running anything); such a start is tried again."""
    log = BuildLog(tmp_path / "build.log")
    (tmp_path / "work").mkdir()
    (tmp_path / "root").mkdir()
    confinement = LocalConfinement(BUILD_LIMITS, tmp_path / "root", tmp_path / "work")
    try:
        with churning_work_trees():
            codes = [log.run("true", tmp_path / "work", dict(os.environ), 60, confinement) for _ in range(100)]
    finally:
        confinement.close()
        log.close()
    assert codes == [0] * 100, (tmp_path / "build.log").read_text()[-2000:]


@pytest.mark.parametrize("files", [NODE, C_OK], ids=["node", "c"])
def test_the_analysis_names_the_runtime_the_environment_gets(make_repo, tmp_path: Path, env_cache: Path,
                                                            files: dict[str, str]) -> None:
    out = tmp_path / "out"
    run = _launch(make_repo("repo", files, DATE), out, "local", env_cache)
    assert run.returncode == 0, run.stderr
    analysed = json.loads((out / "analysis.json").read_text())["runtime_version"]
    built = json.loads((out / "envspec.json").read_text())["runtime_version"]
    assert analysed == built and built, (analysed, built)
    assert f" {built}, 1 tests" in " ".join(run.stderr.split())
    assert f"runtime on the local backend: {'javascript' if files is NODE else 'c'} {built}" in (out / "build.log").read_text()


def test_a_piped_launch_names_the_running_step_every_10_seconds(make_repo, tmp_path: Path, env_cache: Path) -> None:
    slow = {**C_OK, "Makefile": C_OK["Makefile"].replace("\t$(CC)", "\tsleep 12; $(CC)")}  # the repo layer takes 12 s
    run = _launch(make_repo("slow", slow, DATE), tmp_path / "out", "local", env_cache / tmp_path.name)
    assert run.returncode == 0, run.stderr
    beats = re.findall(r"^\[\d\d:\d\d:\d\d \+\d+s\] launch \S+ \(local\): (.+) \(\d+s in this step\)$", run.stderr, re.MULTILINE)
    assert any(step.startswith("repo layer in a fresh sandbox: make -j2") for step in beats), run.stderr
