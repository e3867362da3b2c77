"""The test-execution layer on a real local sandbox: whole logs, selections, errors, the agent's shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from taskrepo import git, write_tree

from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import EnvSpec, TestStatus
from swedojo.testrun import run as testrun
from swedojo.testrun.command import MAX_SELECTION_BYTES, is_simple, selection, suite_command, selected_command
from swedojo.testrun.run import LogTooLargeError, passed, run_command, run_suite, run_tests

PYTEST = EnvSpec(repo="o/r", commit="HEAD", test_command=f"{sys.executable} -m pytest -rA -p no:cacheprovider", log_parser="pytest",
                 env_vars={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "repo", {
        "test_a.py": "import os\n\ndef test_ok():\n    pass\n\ndef test_var():\n    assert os.environ['MARK'] == 'spec'\n",
        "test_b.py": "def test_bad():\n    assert False\n",
    })
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tests")
    return root


def test_passed_is_the_one_definition() -> None:
    assert passed(TestStatus.PASSED) and passed(TestStatus.XFAIL)
    assert not passed(TestStatus.FAILED) and not passed(TestStatus.SKIPPED) and not passed(None)


def test_commands_for_the_suite_files_and_ids() -> None:
    assert suite_command(PYTEST) == f"{PYTEST.test_command} --continue-on-collection-errors"
    assert selected_command(PYTEST, ["t.py::a b"]) == f"{PYTEST.test_command} 't.py::a b'"
    assert selected_command(PYTEST, []) == suite_command(PYTEST)
    many = [f"tests/test_{i % 3}.py::test_{i}_{'x' * 40}" for i in range(2000)]
    assert selection(PYTEST, many) == ["tests/test_0.py", "tests/test_1.py", "tests/test_2.py"]
    assert selection(PYTEST, [f"name_{i}_{'x' * 40}" for i in range(2000)]) is None  # no file to fall back on
    assert len(selected_command(PYTEST, many[: MAX_SELECTION_BYTES // 80])) < MAX_SELECTION_BYTES + len(PYTEST.test_command) + 1
    go = PYTEST.model_copy(update={"test_command": "go test -json ./...", "log_parser": "gotest"})
    assert selected_command(go, ["pkg::TestA"]) == "go test -json ./..."  # the whole suite, read for the wanted ids
    compound = PYTEST.model_copy(update={"test_command": "cd src && python -m pytest -rA"})
    assert not is_simple(compound.test_command) and selected_command(compound, ["t.py::a"]) == compound.test_command
    assert is_simple("PYTHONPATH=. python -m pytest -rA 'a;b'") and not is_simple("pytest; echo done")


def test_a_log_over_the_terminal_cap_is_read_whole(repo: Path) -> None:
    lines = 20_000
    spec = PYTEST.model_copy(update={"test_command": f"for i in $(seq {lines}); do echo \"PASSED t.py::test_$i\"; done"})
    with LocalSandbox(repo, "HEAD", SandboxConfig(max_output_bytes=4_000)) as sandbox:
        run = run_suite(sandbox, spec)
        assert run.exit_code == 0 and run.exact
        assert len(run.statuses) == lines and all(s == TestStatus.PASSED for s in run.statuses.values())
        assert len(run.log.encode()) > 100 * 4_000
        assert sandbox.exec("ls .git | grep -c swedojo-tests").output.strip() == "1"  # one log, overwritten by each run


def test_a_log_over_the_bound_is_an_error_not_a_cut(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testrun, "MAX_LOG_BYTES", 10_000)
    spec = PYTEST.model_copy(update={"test_command": "head -c 20000 /dev/zero"})
    with LocalSandbox(repo, "HEAD") as sandbox, pytest.raises(LogTooLargeError, match="20000 bytes"):
        run_suite(sandbox, spec)


def test_a_compound_command_runs_whole_and_its_exit_leaves_the_shell(repo: Path) -> None:
    spec = PYTEST.model_copy(update={"test_command": "echo 'PASSED t.py::a'; echo 'FAILED t.py::b'; exit 3"})
    with LocalSandbox(repo, "HEAD") as sandbox:
        sandbox.exec("export KEPT=1")
        run = run_suite(sandbox, spec)
        assert run.exit_code == 3 and run.statuses == {"t.py::a": TestStatus.PASSED, "t.py::b": TestStatus.FAILED}
        assert sandbox.exec('echo "$KEPT"').output.strip() == "1"  # the same shell


def test_the_agents_shell_is_left_as_it_was_and_the_spec_applies(repo: Path) -> None:
    spec = PYTEST.model_copy(update={"env_vars": {**PYTEST.env_vars, "MARK": "spec"}})
    with LocalSandbox(repo, "HEAD") as sandbox:
        sandbox.exec("cd /tmp && export MARK=agent")
        run = run_tests(sandbox, spec, ["test_a.py"], agent_shell=True)
        assert run.statuses == {"test_a.py::test_ok": TestStatus.PASSED, "test_a.py::test_var": TestStatus.PASSED}
        assert run.exact and run.exit_code == 0
        assert sandbox.exec('pwd; echo "$MARK"').output.split() == ["/tmp", "agent"]


def test_ids_too_many_for_a_command_line_run_by_file(repo: Path) -> None:
    ids = ["test_a.py::test_ok", *(f"test_a.py::test_missing_{i}_{'x' * 60}" for i in range(1000))]
    with LocalSandbox(repo, "HEAD") as sandbox:
        sandbox.exec("export MARK=spec")
        run = run_tests(sandbox, PYTEST, ids)
    assert run.command.endswith(" test_a.py") and not run.exact
    assert run.passed("test_a.py::test_ok") and "test_b.py::test_bad" not in run.statuses


def test_work_tree_paths_are_made_relative(repo: Path) -> None:
    with LocalSandbox(repo, "HEAD") as sandbox:
        run = run_command(sandbox, PYTEST, f"echo \"PASSED $PWD/t.py::a\"")
    assert run.statuses == {"t.py::a": TestStatus.PASSED}


def test_the_package_runs_tests_nowhere_else() -> None:
    """Every consumer goes through swedojo.testrun: no other module parses a log or runs the test command."""
    found = subprocess.run(["grep", "-rlE", r"parse_log\(|exec\(.*test_command", "swedojo"],
                           capture_output=True, text=True, cwd=Path(__file__).parents[2]).stdout.split()
    assert sorted(f for f in found if not f.startswith("swedojo/testrun/")) == []


def test_an_unknown_id_does_not_hide_the_others(repo: Path) -> None:
    """pytest runs nothing when one id is unknown; the run is made again over the ids' files."""
    spec = PYTEST.model_copy(update={"env_vars": {**PYTEST.env_vars, "MARK": "spec"}})
    with LocalSandbox(repo, "HEAD") as sandbox:
        run = run_tests(sandbox, spec, ["test_a.py::test_ok", "test_a.py::test_gone"])
    assert run.command.endswith(" test_a.py") and not run.exact
    assert run.passed("test_a.py::test_ok") and "test_a.py::test_gone" not in run.statuses
