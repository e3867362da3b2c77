"""The file editor on a real sandbox: exact matching, CRLF, non-UTF-8, and byte-exact undo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from toolfixtures import FILES

from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import ToolCall
from swedojo.tools.base import ToolContext, ToolResult
from swedojo.tools.registry import ToolRegistry


@pytest.fixture
def edit(sandbox: LocalSandbox, ctx: ToolContext, registry: ToolRegistry):
    def call(**arguments: Any) -> ToolResult:
        return registry.dispatch(ToolCall(name="str_replace_editor", arguments=arguments), sandbox, ctx)

    return call


def read(sandbox: LocalSandbox, rel: str) -> bytes:
    return (Path(sandbox.workdir) / rel).read_bytes()


def test_view_file_with_line_numbers_and_range(edit) -> None:
    whole = edit(command="view", path="calc.py")
    assert not whole.is_error
    assert "     1\tdef add(a, b):" in whole.output and "     6\t    return a - b" in whole.output
    part = edit(command="view", path="calc.py", view_range=[5, -1])
    assert "     5\tdef sub(a, b):" in part.output and "def add" not in part.output
    assert "lines 5-6 of 6" in part.output
    bad = edit(command="view", path="calc.py", view_range=[9, 10])
    assert bad.is_error and "has 6 lines" in bad.output


def test_view_directory_lists_two_levels_without_hidden(edit) -> None:
    listing = edit(command="view", path=".")
    assert not listing.is_error
    assert "./pkg/mod.py" in listing.output and "./pkg/sub" in listing.output
    assert "./pkg/sub/deep.py" not in listing.output and ".git" not in listing.output


def test_path_outside_the_repository_is_refused(edit) -> None:
    result = edit(command="view", path="../../../etc/passwd")
    assert result.is_error and "outside the repository" in result.output


def test_str_replace_refuses_multiple_matches_and_names_lines(sandbox, edit) -> None:
    result = edit(command="str_replace", path="dup.py", old_str="x = 1", new_str="x = 3")
    assert result.is_error
    assert "occurs 2 times" in result.output and "lines 1, 3" in result.output
    assert read(sandbox, "dup.py") == FILES["dup.py"]


def test_str_replace_refuses_overlapping_matches(sandbox, ctx, registry) -> None:
    sandbox.write_file("aaa.txt", b"aaa\n")
    result = registry.dispatch(
        ToolCall(name="str_replace_editor", arguments={"command": "str_replace", "path": "aaa.txt", "old_str": "aa"}),
        sandbox,
        ctx,
    )
    assert result.is_error and "occurs 2 times" in result.output


def test_str_replace_without_a_match_changes_nothing(sandbox, edit) -> None:
    result = edit(command="str_replace", path="calc.py", old_str="def mul(a, b):", new_str="")
    assert result.is_error and "not found" in result.output and "whitespace" not in result.output
    assert read(sandbox, "calc.py") == FILES["calc.py"]


def test_str_replace_is_whitespace_sensitive_and_points_at_the_near_match(sandbox, edit) -> None:
    # the file has a tab and two spaces; the model wrote four spaces and one space
    result = edit(command="str_replace", path="tabs.py", old_str="    return 1", new_str="    return 2")
    assert result.is_error
    assert "differs only in whitespace" in result.output and "line(s) 2" in result.output
    assert read(sandbox, "tabs.py") == FILES["tabs.py"]
    exact = edit(command="str_replace", path="tabs.py", old_str="\treturn  1", new_str="\treturn 2")
    assert not exact.is_error
    assert read(sandbox, "tabs.py") == b"def f():\n\treturn 2\n"


def test_str_replace_edits_and_shows_the_region(sandbox, edit) -> None:
    result = edit(command="str_replace", path="calc.py", old_str="    return a - b\n", new_str="    return a - b - 0\n")
    assert not result.is_error
    assert "     6\t    return a - b - 0" in result.output
    assert result.output.startswith("Edited calc.py.") and sandbox.workdir not in result.output
    assert read(sandbox, "calc.py") == FILES["calc.py"].replace(b"a - b", b"a - b - 0")


def test_crlf_file_matches_with_lf_and_keeps_crlf(sandbox, edit) -> None:
    result = edit(command="str_replace", path="crlf.txt", old_str="alpha\nbeta\n", new_str="alpha\nBETA\nbeta2\n")
    assert not result.is_error and "CRLF" in result.output
    assert read(sandbox, "crlf.txt") == b"alpha\r\nBETA\r\nbeta2\r\ngamma\r\n"
    edit(command="insert", path="crlf.txt", insert_line=0, new_str="zero")
    assert read(sandbox, "crlf.txt") == b"zero\r\nalpha\r\nBETA\r\nbeta2\r\ngamma\r\n"
    # the model may also send CRLF itself
    edit(command="str_replace", path="crlf.txt", old_str="gamma\r\n", new_str="delta\r\n")
    assert read(sandbox, "crlf.txt").endswith(b"beta2\r\ndelta\r\n")


def test_non_utf8_file_round_trips_as_latin1(sandbox, edit) -> None:
    view = edit(command="view", path="latin1.py")
    assert "name = 'café'" in view.output and "latin-1" in view.output
    result = edit(command="str_replace", path="latin1.py", old_str="name = 'café'", new_str="name = 'thé'")
    assert not result.is_error and "latin-1" in result.output
    assert read(sandbox, "latin1.py") == "# -*- coding: latin-1 -*-\nname = 'th\xe9'\n".encode("latin-1")
    unencodable = edit(command="str_replace", path="latin1.py", old_str="thé", new_str="茶")
    assert unencodable.is_error and "latin-1" in unencodable.output
    assert read(sandbox, "latin1.py") == "# -*- coding: latin-1 -*-\nname = 'th\xe9'\n".encode("latin-1")


def test_binary_file_is_refused(edit) -> None:
    result = edit(command="view", path="blob.bin")
    assert result.is_error and "binary" in result.output


def test_file_system_errors_come_back_as_values(sandbox, edit) -> None:
    missing = edit(command="str_replace", path="nope.py", old_str="x")
    assert missing.is_error and "nope.py: no such file" in missing.output
    sandbox.exec("chmod a-w calc.py")
    denied = edit(command="str_replace", path="calc.py", old_str="a + b", new_str="b + a")
    assert denied.is_error and "Permission denied" in denied.output


def test_undo_restores_bytes_exactly_edit_by_edit(sandbox, edit) -> None:
    originals = {rel: FILES[rel] for rel in ("crlf.txt", "latin1.py", "calc.py")}
    edit(command="str_replace", path="crlf.txt", old_str="beta", new_str="b")
    edit(command="str_replace", path="latin1.py", old_str="café", new_str="x")
    edit(command="insert", path="calc.py", insert_line=6, new_str="\n\ndef mul(a, b):\n    return a * b")
    after_first = read(sandbox, "calc.py")
    edit(command="str_replace", path="calc.py", old_str="a + b", new_str="b + a")
    assert not edit(command="undo_edit", path="calc.py").is_error
    assert read(sandbox, "calc.py") == after_first
    for rel, data in originals.items():
        assert not edit(command="undo_edit", path=rel).is_error
        assert read(sandbox, rel) == data
    nothing = edit(command="undo_edit", path="calc.py")
    assert nothing.is_error and "No edit" in nothing.output


def test_create_refuses_to_overwrite_and_undo_removes_it(sandbox, edit) -> None:
    assert edit(command="create", path="calc.py", file_text="oops").is_error
    assert read(sandbox, "calc.py") == FILES["calc.py"]
    created = edit(command="create", path="new/dir/file.py", file_text="print('hi')\n")
    assert not created.is_error and read(sandbox, "new/dir/file.py") == b"print('hi')\n"
    edit(command="undo_edit", path="new/dir/file.py")
    assert not (Path(sandbox.workdir) / "new/dir/file.py").exists()


def test_insert_positions_and_bounds(sandbox, edit) -> None:
    sandbox.write_file("noeol.txt", b"a\nb")
    edit(command="insert", path="noeol.txt", insert_line=2, new_str="c")
    assert read(sandbox, "noeol.txt") == b"a\nb\nc\n"
    edit(command="insert", path="noeol.txt", insert_line=1, new_str="x\ny\n")
    assert read(sandbox, "noeol.txt") == b"a\nx\ny\nb\nc\n"
    past = edit(command="insert", path="noeol.txt", insert_line=9, new_str="z")
    assert past.is_error and "has 5 lines" in past.output


def test_arguments_must_fit_the_command(sandbox, edit) -> None:
    missing = edit(command="str_replace", path="calc.py")
    assert missing.rejected and "needs old_str" in missing.output
    stray = edit(command="view", path="calc.py", file_text="x")
    assert stray.rejected and "does not take file_text" in stray.output
