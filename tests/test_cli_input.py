"""Bad input to any `dojo` command: one line that says what is wrong, exit status 2, no traceback;
and the commands that took their input wrongly (`sandbox exec`'s words, a stopped run's rate)."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest
from taskrepo import git, make_task_repo
from typer.testing import CliRunner, Result

from swedojo.cli import app
from swedojo.datasets.io import write_suite_file


def _dojo(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def _one_line_error(result: Result, *fragments: str) -> str:
    """The command failed for its input: exit 2 and one `error:` line naming `fragments`, no traceback."""
    assert result.exit_code == 2, (result.output, result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(f in errors[0] for f in fragments), result.output
    assert "Traceback" not in result.output and "╭" not in result.output, result.output  # rich's traceback box
    return errors[0]


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A path no command can make a directory at, whoever runs the test (root too): its parent is a file."""
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "out"


def test_an_out_that_cannot_be_made_is_one_line_for_eval_run_and_launch(tmp_path: Path, blocked: Path) -> None:
    mirror, _ = make_task_repo(tmp_path / "mirror")
    repo = mirror / "owner" / "calc"
    (tmp_path / "issue.md").write_text("clamp() ignores the upper bound\n")
    commands = {
        "eval": ["eval", "--suite", "demo", "--policy", "gold", "--out", str(blocked)],
        "run": ["run", "--repo", str(repo), "--issue", str(tmp_path / "issue.md"), "--model", "tiny:glm_moe_dsa",
                "--no-launch", "--out", str(blocked)],
        "launch": ["launch", str(repo), "--backend", "local", "--out", str(blocked)],
    }
    for name, args in commands.items():
        line = _one_line_error(_dojo(*args), f"--out {blocked}", "Not a directory")
        assert line == f"error: --out {blocked}: cannot create the directory (Not a directory)", name


def test_launch_of_a_missing_repository_exits_2_like_the_other_commands(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    _one_line_error(_dojo("launch", str(missing), "--backend", "local", "--out", str(tmp_path / "out")),
                    f"{missing}: no such repository")
    (tmp_path / "issue.md").write_text("something is wrong\n")
    _one_line_error(_dojo("run", "--repo", str(missing), "--issue", str(tmp_path / "issue.md"), "--model",
                          "tiny:glm_moe_dsa", "--out", str(tmp_path / "run")), f"{missing}: no such repository")


def test_an_unknown_model_is_one_line_for_eval_as_for_run(tmp_path: Path) -> None:
    _one_line_error(_dojo("eval", "--suite", "demo", "--policy", "model", "--model", "claude-3",
                          "--out", str(tmp_path / "run")), "--model 'claude-3'")
    assert not (tmp_path / "run").exists()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again on leaving: nothing listens there


@pytest.mark.timeout(60)  # before: `ray.init` waited for the cluster for ever
def test_a_ray_address_where_nothing_listens_fails_at_once(tmp_path: Path) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    line = _one_line_error(_dojo("eval", "--suite", "demo", "--policy", "gold", "--executor", "ray", "--address",
                                 address, "--out", str(tmp_path / "run")), f"no Ray cluster at {address}")
    assert "Connection refused" in line
    assert not (tmp_path / "run").exists()  # refused before the run directory is made


@pytest.mark.timeout(60)  # before: `ray.init` waited for ever on a port where an HTTP server listens
@pytest.mark.parametrize("answer", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", b""])
def test_a_ray_address_where_something_else_listens_fails_at_once(tmp_path: Path, answer: bytes) -> None:
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"

        def serve() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    with connection:
                        connection.recv(64)
                        connection.sendall(answer)  # an HTTP/1 server's answer, or a close

        threading.Thread(target=serve, daemon=True).start()
        line = _one_line_error(_dojo("eval", "--suite", "demo", "--policy", "gold", "--executor", "ray", "--address",
                                     address, "--out", str(tmp_path / "run")), f"no Ray cluster at {address}")
    assert "does not speak gRPC as Ray does" in line and ("HTTP/1.1" in line if answer else "closed" in line)
    assert not (tmp_path / "run").exists()


def test_a_mirror_of_the_wrong_layout_says_the_layout_it_wants(tmp_path: Path) -> None:
    mirror, task = make_task_repo(tmp_path / "mirror")
    flat = tmp_path / "flat"
    flat.mkdir()
    (mirror / "owner" / "calc").rename(flat / "calc")  # MIRROR/name, not MIRROR/owner/name
    suite = tmp_path / "suite.jsonl"
    write_suite_file([task], suite)
    line = _one_line_error(_dojo("eval", "--suite", str(suite), "--policy", "gold", "--mirror", str(flat),
                                 "--out", str(tmp_path / "run")), "owner/calc: no such repository")
    assert "MIRROR/owner/name" in line and f"{flat / 'calc'} is there: move it to {flat / 'owner' / 'calc'}" in line
    launched = _dojo("launch", "owner/calc", "--mirror", str(flat), "--backend", "local", "--out", str(tmp_path / "l"))
    assert "MIRROR/owner/name" in _one_line_error(launched, "owner/calc: no such repository")


def test_sandbox_exec_passes_the_words_after_the_dashes_as_they_are(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    mirror, _ = make_task_repo(tmp_path / "mirror")
    repo = mirror / "owner" / "calc"
    (repo / "f").write_text("a b\n")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "a file with a space in a line")
    monkeypatch.chdir(repo)  # as README shows it: no --repo, the repository the command runs in
    argv = _dojo("sandbox", "exec", "--backend", "local", "--", "sh", "-c", "grep -q 'a b' f && echo found")
    assert argv.exit_code == 0 and argv.output == "found\n", argv.output
    line = _dojo("sandbox", "exec", "--backend", "local", "--", "grep -c 'a b' f | sed s/1/one/")
    assert line.exit_code == 0 and line.output == "one\n", line.output  # one word: a command line for bash
    monkeypatch.chdir(tmp_path)
    _one_line_error(_dojo("sandbox", "exec", "--backend", "local", "--", "true"), "--repo", "inside a git repository")


def test_help_piped_at_80_columns_shows_every_option_whole() -> None:
    """Piped (`dojo eval --help | less`), rich laid the options table out in 80 columns and cut
    names to `--perceptual-mod…`: a reader could not tell which option it was."""
    import os
    import subprocess
    import sys

    import typer.main

    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_WIDTH"} | {"COLUMNS": "80"}
    for name in ("eval", "run", "gen"):
        shown = subprocess.run([sys.executable, "-m", "swedojo.cli", name, "--help"], capture_output=True, text=True,
                               env=env, check=True).stdout
        options = [o for p in typer.main.get_command(app).commands[name].params for o in p.opts if o.startswith("--")]
        assert options and all(o in shown for o in options), [o for o in options if o not in shown]
        assert "…" not in shown


@pytest.mark.parametrize(("args", "said"), [
    (["eval"], "Missing option '--suite'."),
    (["eval", "--suite", "demo", "--bogus"], "No such option: --bogus"),
    (["eval", "--suite", "demo", "--workers", "x"], "Invalid value for '--workers'"),
    (["launch", "--out"], "Option '--out' requires an argument."),
])
def test_a_usage_error_is_one_line_and_exit_2_as_other_bad_input(args: list[str], said: str) -> None:
    result = _dojo(*args)
    line = _one_line_error(result, said)
    assert result.output.strip() == line  # no usage block above it, no box
