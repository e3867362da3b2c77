"""A sample whose grading is `not_scorable` (a listed test lacks a module, with the reference patch
too) is no evidence about the policy: the service never reports it as a zero reward."""

from __future__ import annotations

import json
from pathlib import Path

from taskrepo import make_task_repo

from swedojo.schema import ToolCall
from swedojo.tools.formats import get_format

GLM = get_format("glm")
FIX = {"command": "str_replace", "path": "calc.py", "old_str": "        return low\n    return value",
       "new_str": "        return low\n    if value > high:\n        return high\n    return value"}
OPTIONAL = 'import pytest\n\npytest.importorskip("swedojo_absent_dep")\n\n\ndef test_uses_dep():\n    assert True\n'


def _call(name: str, **arguments) -> str:
    return GLM.render_calls([ToolCall(name=name, arguments=arguments)])


def test_a_not_scorable_sample_is_an_infra_failure_and_its_group_is_dropped(serve, tmp_path):
    mirror, task = make_task_repo(tmp_path / "mirror")
    lines = OPTIONAL.splitlines(keepends=True)
    task.test_patch += ("diff --git a/test_optional.py b/test_optional.py\nnew file mode 100644\n--- /dev/null\n"
                        f"+++ b/test_optional.py\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}" for line in lines))
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, "test_optional.py::test_uses_dep"]
    suite = tmp_path / "suite.jsonl"
    suite.write_text(task.model_dump_json() + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": _call("str_replace_editor", **FIX)}, {"content": _call("submit")}]))
    client = serve(max_concurrent=2, mirror=mirror)
    batch = client.call("POST", "/batches", {"suite": str(suite), "group_size": 2, "model": f"scripted:{script}",
                                             "rewards": "resolved", "launch": False})["batch_id"]
    assert client.stream(batch) == []  # no group is reported
    report = client.call("GET", f"/batches/{batch}")
    assert report["state"] == "finished" and report["groups_dropped"] == 1 and report["infra_failures"] == 2
    logged = [json.loads(line) for line in (Path(report["directory"]) / "samples.jsonl").read_text().splitlines()]
    assert [(s["outcome"], s["status"]) for s in logged] == [("infra_error", "not_scorable")] * 2
    assert all("swedojo_absent_dep" in s["error"] for s in logged)
