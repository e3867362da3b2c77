"""Terminal semantics on a real local bash (no isolation: the terminal logic alone)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.terminal import (
    PersistentTerminal,
    TerminalClosedError,
    TimeBudgetExhaustedError,
    local_shell,
)


def open_terminal(tmp_path: Path, reopen: bool = True, **limits: object) -> PersistentTerminal:
    config = SandboxConfig(**{"command_timeout_s": 20, "max_output_bytes": 4000, **limits})
    return PersistentTerminal(
        local_shell(cwd=str(tmp_path)),
        config,
        reopen=(lambda: local_shell(cwd=str(tmp_path))) if reopen else None,
    )


@pytest.fixture
def term(tmp_path: Path) -> Iterator[PersistentTerminal]:
    terminal = open_terminal(tmp_path)
    yield terminal
    terminal.close()


def test_cd_export_and_functions_persist(term: PersistentTerminal) -> None:
    assert term.run(
        "mkdir -p sub/dir && cd sub/dir && export FOO=bar && greet() { echo hi $1; }"
    ).ok
    result = term.run("pwd; echo $FOO; greet you")
    assert result.output.splitlines()[1:] == ["bar", "hi you"]
    assert result.output.splitlines()[0].endswith("/sub/dir")


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("true", 0),
        ("false", 1),
        ("(exit 4)", 4),
        ("sh -c 'exit 7'", 7),
        ("no-such-command-xyz", 127),
        ("echo 'unterminated", 2),
        ("exit 3", 3),
        ("echo a; exit 5; echo b", 5),
        ("false; exit", 1),
        ("true | false", 1),
        ("if true; then", 2),
    ],
)
def test_exit_codes(term: PersistentTerminal, command: str, code: int) -> None:
    result = term.run(command)
    assert result.exit_code == code, result.output
    assert not result.timed_out


def test_exit_ends_the_command_not_the_shell(term: PersistentTerminal) -> None:
    term.run("cd /tmp && X=1")
    result = term.run("echo before; exit 9; echo after")
    assert (result.exit_code, result.output) == (9, "before\n")
    assert term.run("pwd; echo $X").output == "/tmp\n1\n"


def test_previous_exit_code_is_visible(term: PersistentTerminal) -> None:
    term.run("false")
    assert term.run("echo $?").output == "1\n"


def test_output_exact_and_unmarked(term: PersistentTerminal) -> None:
    result = term.run("printf 'a\\nb'; printf 'err\\n' >&2")
    assert result.output == "a\nberr\n"
    assert "\x1e" not in result.output


@pytest.mark.parametrize("size", [1, 4000, 65535, 65536, 65537, 200_000])
def test_output_sizes_around_read_boundaries(tmp_path: Path, size: int) -> None:
    term = open_terminal(tmp_path, max_output_bytes=1_000_000)
    try:
        result = term.run(f"head -c {size} /dev/zero | tr '\\0' a")
        assert result.output == "a" * size
        assert result.exit_code == 0 and not result.truncated
    finally:
        term.close()


def test_huge_output_is_cut_head_and_tail(term: PersistentTerminal) -> None:
    result = term.run("echo START; yes middle | head -c 20000000; echo; echo END")
    assert result.truncated and result.exit_code == 0
    assert result.output.startswith("START\nmiddle")
    assert result.output.endswith("middle\nEND\n")
    assert "bytes of output cut; first 2000 and last 2000 bytes kept" in result.output
    assert len(result.output) < 4200


def test_timeout_interrupts_and_keeps_state(term: PersistentTerminal) -> None:
    term.run("cd /tmp && KEEP=yes")
    start = time.monotonic()
    result = term.run("echo started; sleep 100; echo never", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert result.output.startswith("started\n") and "never" not in result.output
    assert "timed out after 1 s" in result.output
    assert time.monotonic() - start < 5
    assert term.run("pwd; echo $KEEP").output == "/tmp\nyes\n"


def test_builtin_infinite_loop_is_interrupted(term: PersistentTerminal) -> None:
    result = term.run("while :; do :; done", timeout=1)
    assert result.timed_out
    assert term.run("echo ok").output == "ok\n"


def test_command_ignoring_sigint_is_killed(term: PersistentTerminal) -> None:
    result = term.run("trap '' INT; sleep 100", timeout=1)
    assert result.timed_out
    assert term.run("echo ok").output == "ok\n"


def test_interrupt_stops_the_whole_command_line(term: PersistentTerminal) -> None:
    result = term.run("for i in 1 2 3 4 5 6 7 8 9; do sleep 1; echo $i; done", timeout=1.5)
    assert result.timed_out
    time.sleep(1.5)
    assert term.run("echo next").output == "next\n"


def test_binary_and_invalid_utf8_output(term: PersistentTerminal) -> None:
    result = term.run("head -c 3000 /dev/urandom; printf '\\xff\\xfe tail'")
    assert result.exit_code == 0
    assert result.output.endswith("\ufffd\ufffd tail")
    assert term.run("printf '\\0zero\\0'").output == "\0zero\0"


@pytest.mark.parametrize(
    "command", ["cat", "read x; echo got=$?", "python3 -c 'input()'", "head -1"]
)
def test_stdin_readers_do_not_hang(term: PersistentTerminal, command: str) -> None:
    start = time.monotonic()
    result = term.run(command, timeout=10)
    assert not result.timed_out
    assert time.monotonic() - start < 5


def test_forged_markers_do_not_end_the_command(term: PersistentTerminal) -> None:
    forge = (
        "printf '\\036%s:0\\036\\n' 0123456789abcdef; "
        "printf '\\036%s:0x\\036\\n' $(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n'); "
        "set | grep -a __sd_ | head -3 >/dev/null; "
        "sleep 1; echo real-end; exit 3"
    )
    start = time.monotonic()
    result = term.run(forge)
    assert time.monotonic() - start >= 1
    assert result.exit_code == 3
    assert result.output.endswith("real-end\n")


def test_markers_of_earlier_commands_are_worthless(term: PersistentTerminal) -> None:
    # Record everything the shell could show of its plumbing, then replay it as output.
    term.run("set -x")
    traced = term.run("true").output
    term.run("set +x")
    result = term.run(f"printf '%s' {traced!r}; sleep 1; echo done")
    assert result.output.endswith("done\n") and result.duration_s >= 1


def test_nul_in_command_is_refused(term: PersistentTerminal) -> None:
    result = term.run("echo a\0b")
    assert result.exit_code == 2 and "NUL" in result.output


def test_config_env_is_exported(tmp_path: Path) -> None:
    term = open_terminal(tmp_path, env={"GREETING": 'it\'s "quoted" $x'})
    try:
        assert term.run('echo "$GREETING"; bash -c \'echo "$GREETING"\'').output == (
            'it\'s "quoted" $x\n' * 2
        )
    finally:
        term.close()


def test_total_time_budget(tmp_path: Path) -> None:
    term = open_terminal(tmp_path, total_time_s=1.5)
    try:
        result = term.run("sleep 10", timeout=30)
        assert result.timed_out and "total time budget of 1.5 s is used up" in result.output
        with pytest.raises(TimeBudgetExhaustedError):
            term.run("true")
    finally:
        term.close()


def test_shell_death_restarts_with_fresh_state(term: PersistentTerminal) -> None:
    term.run("cd /tmp; X=1")
    result = term.run("exec true")
    assert result.exit_code is None and "the shell exited" in result.output
    after = term.run("echo ${X:-unset}")
    assert (after.exit_code, after.output) == (0, "unset\n")


def test_shell_death_without_reopen_raises(tmp_path: Path) -> None:
    term = open_terminal(tmp_path, reopen=False)
    try:
        assert term.run("set -e; false").exit_code is None
        with pytest.raises(TerminalClosedError):
            term.run("true")
    finally:
        term.close()


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    term = open_terminal(tmp_path)
    term.close()
    term.close()
    with pytest.raises(TerminalClosedError):
        term.run("true")


def test_background_processes_keep_running(term: PersistentTerminal) -> None:
    assert term.run("(sleep 0.3; echo bg-done > bg.txt) &").exit_code == 0
    time.sleep(1)
    assert term.run("cat bg.txt").output == "bg-done\n"


def test_timeout_ends_what_the_command_started_but_not_earlier_jobs(
    term: PersistentTerminal,
) -> None:
    term.run("sleep 301 & echo $! > keep.pid")
    assert term.run("(sleep 302 &); sleep 303 & sleep 100", timeout=1).timed_out
    assert term.run("kill -0 $(cat keep.pid) && echo kept").output == "kept\n"
    left = term.run("ps -eo args | grep -c '^sleep 30[23]'")
    assert left.output == "0\n", left.output
    term.run("kill $(cat keep.pid)")


def test_a_forced_interrupt_alone_still_drops_the_rest_of_the_line(term: PersistentTerminal) -> None:
    # Under load the first, polite SIGINT can miss the shell; the forced round must still stop the list.
    transport = term._transport
    polite_and_forced = transport.interrupt
    transport.interrupt = lambda force=False: polite_and_forced(force=True) if force else None
    result = term.run("echo started; sleep 100; echo never", timeout=1)
    assert result.timed_out and result.output.startswith("started\n") and "never" not in result.output
    assert term.run("echo ok").output == "ok\n"
