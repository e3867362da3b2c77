"""Suite files in SWE-bench formats; a malformed record is reported by name and the rest loads."""

import json

import pyarrow.parquet as pq
import pytest

from swedojo.datasets.io import SuiteFormatError, load_suite_file, write_suite_file
from swedojo.schema import TaskInstance


def _instances():
    return [
        TaskInstance(instance_id=f"o__n-{i}", repo="o/n", base_commit="c" * 40, FAIL_TO_PASS=[f"t.py::t{i}"], extra_field=i)
        for i in range(3)
    ]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_round_trip(tmp_path, suffix):
    path = tmp_path / f"suite{suffix}"
    write_suite_file(_instances(), path)
    loaded = load_suite_file(path)
    assert loaded.errors == []
    assert loaded.instances == _instances()
    if suffix == ".parquet":
        assert pq.read_table(path).num_rows == 3


def test_malformed_records_are_named_and_the_rest_loads(tmp_path):
    good = [json.dumps(i.to_swebench()) for i in _instances()]
    lines = [good[0], "{not json", json.dumps({"instance_id": "o__n-broken", "repo": "o/n"}), good[1],
             json.dumps({"instance_id": "o__n-badlist", "repo": "o/n", "base_commit": "c", "FAIL_TO_PASS": "[oops"}),
             good[1]]
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = load_suite_file(path)
    assert [i.instance_id for i in loaded.instances] == ["o__n-0", "o__n-1"]
    messages = [str(e) for e in loaded.errors]
    assert messages[0].startswith("suite.jsonl:2: invalid JSON")
    assert messages[1].startswith("suite.jsonl:3 o__n-broken: base_commit: Field required")
    assert messages[2].startswith("suite.jsonl:5 o__n-badlist:")
    assert messages[3] == "suite.jsonl:6 o__n-1: duplicate instance_id"


def test_unreadable_files_raise_a_clear_error(tmp_path):
    with pytest.raises(SuiteFormatError, match="no such suite file"):
        load_suite_file(tmp_path / "missing.jsonl")
    bad = tmp_path / "suite.csv"
    bad.write_text("x")
    with pytest.raises(SuiteFormatError, match="unknown suite format"):
        load_suite_file(bad)
