"""Shared test material: the files of the test repository (each awkward in its own way) and test tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

from swedojo.sandboxes.base import Sandbox
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult
from swedojo.tools.builtin import BashTool

FILES: dict[str, bytes] = {
    "calc.py": b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "dup.py": b"x = 1\ny = 2\nx = 1\n",
    "tabs.py": b"def f():\n\treturn  1\n",
    "crlf.txt": b"alpha\r\nbeta\r\ngamma\r\n",
    "latin1.py": "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1"),
    "blob.bin": b"\x00\x01\x02",
    "pkg/mod.py": b"import os\n\nVALUE = os.sep\n",
    "pkg/sub/deep.py": b"DEEP = True\n",
    "tests/test_calc.py": b"from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(2, 3) == 1\n",
    ".gitignore": b"ignored/\n",
    # a test runner any sandbox user can execute (the harness's own Python may not be readable
    # there); it reports the way `pytest -rA` does, so the environment's `pytest` parser reads it
    "tests/run.sh": b"""#!/bin/sh
echo "TZ is $TZ"
status=0
for id in "$@"; do
  case "$id" in
    checks::add) test "$(expr 2 + 3)" = 5 ;;
    checks::sub) test "$(expr 2 - 3)" = 1 ;;
    'checks::param[a-b]') test -n "$id" ;;
    *) echo "ERROR: not found: $id"; status=4; continue ;;
  esac && echo "PASSED $id" || { echo "FAILED $id - assertion failed"; status=1; }
done
exit $status
""",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_tool(
    params: type[ToolParams], *, name: str = "probe", version: str = "1", returns: str = "text", doc: str = "Probe."
) -> Tool[ToolParams]:
    def run(self: Tool[ToolParams], sandbox: Sandbox, p: ToolParams, ctx: ToolContext) -> ToolResult:
        return ToolResult(output="")

    cls = type(
        "Probe",
        (Tool,),
        {"__doc__": doc, "name": name, "version": version, "returns": returns, "params": params, "run": run},
    )
    return cls()


class AlteredBashParams(ToolParams):
    command: str
    """The shell command to run."""
    timeout: int = 60
    """Seconds."""


class AlteredBash(BashTool):
    params = AlteredBashParams  # type: ignore[assignment]
