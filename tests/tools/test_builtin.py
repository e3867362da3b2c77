"""bash, search, run_tests and submit on a real LocalSandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from toolfixtures import git

from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import EnvSpec, ToolCall
from swedojo.tools.base import ToolContext, ToolResult
from swedojo.tools.registry import ToolRegistry


@pytest.fixture
def call(sandbox: LocalSandbox, ctx: ToolContext, registry: ToolRegistry):
    def run(name: str, **arguments: Any) -> ToolResult:
        return registry.dispatch(ToolCall(name=name, arguments=arguments), sandbox, ctx)

    return run


def test_bash_reports_output_and_exit_code(call) -> None:
    result = call("bash", command="echo out; echo err >&2; exit 3")
    assert result.output == "out\nerr\n[exit code: 3]" and not result.is_error


def test_bash_timeout_is_an_error(source_repo, ctx, registry) -> None:
    with LocalSandbox(*source_repo, SandboxConfig(command_timeout_s=1)) as box:
        result = registry.dispatch(ToolCall(name="bash", arguments={"command": "echo started; sleep 30"}), box, ctx)
    assert result.is_error and result.timed_out and "timed out" in result.output


def test_find_files_by_name_and_path_glob_skipping_ignored(sandbox, call) -> None:
    sandbox.write_file("ignored/skip.py", b"")
    sandbox.write_file("pkg/untracked.py", b"")
    by_name = call("search", command="find_files", pattern="*.py").output.splitlines()
    assert by_name == [
        "calc.py",
        "dup.py",
        "latin1.py",
        "pkg/mod.py",
        "pkg/sub/deep.py",
        "pkg/untracked.py",
        "tabs.py",
        "tests/test_calc.py",
    ]
    assert call("search", command="find_files", pattern="sub/*.py", path="pkg").output == "pkg/sub/deep.py"
    assert call("search", command="find_files", pattern="**/deep.py").output == "pkg/sub/deep.py"
    assert "No files match" in call("search", command="find_files", pattern="*.rs").output


def test_grep_with_context_include_and_case(call) -> None:
    result = call("search", command="grep", pattern="def (add|sub)", context=1)
    assert "calc.py:1:def add(a, b):" in result.output and "calc.py-2-    return a + b" in result.output
    assert "tests/test_calc.py" not in result.output  # `def test_add` is not `def add`
    assert (
        call("search", command="grep", pattern="ALPHA", include="*.txt", ignore_case=True).output == "crlf.txt:1:alpha"
    )
    assert "No lines match" in call("search", command="grep", pattern="nothing-like-this").output
    assert call("search", command="grep", pattern="(unclosed").is_error


def test_search_results_are_capped_with_a_note(call) -> None:
    call("bash", command="mkdir many && for i in $(seq 100 229); do printf 'needle\\nneedle\\n' > many/f$i.py; done")
    files = call("search", command="find_files", pattern="*.py", path="many").output.splitlines()
    assert len(files) == 101 and files[-1] == "[30 more files not shown; narrow the pattern or the path]"
    lines = call("search", command="grep", pattern="needle", path="many").output.splitlines()
    assert len(lines) == 201 and lines[-1] == "[60 more lines not shown; narrow the pattern or the path]"


def test_search_arguments_are_checked(call) -> None:
    assert call("search", command="find_files", pattern="*.py", context=2).rejected
    assert call("search", command="grep", pattern="x", path="../..").is_error
    assert "no such directory" in call("search", command="grep", pattern="x", path="nope").output


def test_run_tests_reports_each_named_test_and_the_log_tail(call) -> None:
    result = call("run_tests", tests=["checks::add", "checks::sub", "checks::param[a-b]"])
    assert "[exit code: 1]" in result.output and "1 FAILED, 2 PASSED" in result.output
    assert (
        "FAILED checks::sub" in result.output and "PASSED checks::add" not in result.output.split("--- log tail ---")[0]
    )
    assert "--- log tail ---" in result.output and "TZ is UTC" in result.output  # the spec's env_vars are set
    wrong_id = call("run_tests", tests=["checks::add", "checks::nope"])
    assert "Not found in the log (counted as failed; check the ids): checks::nope" in wrong_id.output


def test_run_tests_reports_a_file_or_class_by_the_tests_under_it(tmp_path: Path, registry: ToolRegistry) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "class TestClass:\n    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n\n"
        "    def test_c(self):\n        assert False\n\n\n"
        "class TestClassic:\n    def test_d(self):\n        pass\n\n\ndef test_e():\n    pass\n"
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "tests")
    env = EnvSpec(repo="t", commit="HEAD", test_command=f"{sys.executable} -m pytest -rA -p no:cacheprovider",
                  log_parser="pytest", env_vars={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with LocalSandbox(tmp_path, "HEAD") as box:
        def run(*tests: str) -> str:
            return registry.dispatch(ToolCall(name="run_tests", arguments={"tests": list(tests)}), box, ToolContext(env=env)).output

        by_class = run("tests/test_x.py::TestClass")
        assert "tests/test_x.py::TestClass: 1 FAILED, 2 PASSED" in by_class and "Not found" not in by_class, by_class
        by_file = run("tests/test_x.py")
        assert "tests/test_x.py: 1 FAILED, 4 PASSED" in by_file and "Not found" not in by_file, by_file
        nothing_under = run("tests/test_x.py::TestClass", "tests/test_x.py::TestNone")
        assert "Not found in the log (counted as failed; check the ids): tests/test_x.py::TestNone" in nothing_under
        assert "tests/test_x.py::TestClass: 1 FAILED, 2 PASSED" in nothing_under, nothing_under


def test_run_tests_leaves_the_terminal_where_it_was(sandbox, call) -> None:
    call("bash", command="cd pkg")
    call("run_tests", tests=["checks::add"])
    assert call("bash", command="pwd").output.startswith(f"{sandbox.workdir}/pkg")


def test_run_tests_needs_an_environment(sandbox, registry) -> None:
    result = registry.dispatch(ToolCall(name="run_tests", arguments={}), sandbox, ToolContext())
    assert result.is_error and "No test command" in result.output


def test_submit_returns_the_patch_and_marks_the_run(call, ctx) -> None:
    empty = call("submit")
    assert empty.submitted and empty.patch == "" and "empty" in empty.output
    call("str_replace_editor", command="str_replace", path="calc.py", old_str="a - b", new_str="b - a")
    result = call("submit")
    assert result.submitted and ctx.submitted
    assert "diff --git a/calc.py b/calc.py" in result.patch and "+    return b - a" in result.patch
    assert "1 file(s) changed" in result.output
