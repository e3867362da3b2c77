"""The contracts: SWE-bench field names, JSON-encoded test lists, unknown fields kept."""

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.datasets.demo import WEB_DEMO, load_demo_tasks
from swedojo.schema import ALL_SCHEMAS, TaskInstance, TaskKind


def test_test_lists_accept_json_strings_and_lists():
    a = TaskInstance(instance_id="x", repo="o/n", base_commit="abc", FAIL_TO_PASS='["t::a", "t::b"]', PASS_TO_PASS="[]")
    b = TaskInstance(instance_id="x", repo="o/n", base_commit="abc", FAIL_TO_PASS=["t::a", "t::b"])
    assert a.FAIL_TO_PASS == b.FAIL_TO_PASS == ["t::a", "t::b"]
    assert a.PASS_TO_PASS == []


def test_unknown_fields_are_kept_and_written_back():
    record = {"instance_id": "x", "repo": "o/n", "base_commit": "abc", "difficulty": "<15 min", "image": "img:1",
              "FAIL_TO_PASS": '["t::a"]'}
    inst = TaskInstance.model_validate(record)
    out = inst.to_swebench()
    assert out["difficulty"] == "<15 min" and out["image"] == "img:1"
    assert out["FAIL_TO_PASS"] == '["t::a"]'
    assert TaskInstance.model_validate(out) == inst


def test_the_task_kind_is_told_by_checks_and_never_written():
    code, front_end = load_demo_tasks()[0], load_demo_tasks(WEB_DEMO)[0]
    assert code.kind == TaskKind.CODE and front_end.kind == TaskKind.FRONT_END
    # a derived name, not a field: a record read and written back does not gain it
    assert "kind" not in code.to_swebench() and "kind" not in front_end.to_swebench()
    assert front_end.model_copy(update={"checks": None}).kind == TaskKind.CODE


def test_bad_test_list_is_rejected():
    with pytest.raises(ValidationError, match="FAIL_TO_PASS"):
        TaskInstance(instance_id="x", repo="o/n", base_commit="abc", FAIL_TO_PASS='{"a": 1}')


def test_dojo_schema_prints_every_contract():
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    schemas = json.loads(result.output)
    assert set(schemas) == set(ALL_SCHEMAS)
    assert "FAIL_TO_PASS" in schemas["TaskInstance"]["properties"]
