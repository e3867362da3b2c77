"""Multi-SWE-bench records load as published, mapped to SWE-bench's field names."""

import json

from swedojo.datasets.io import load_suite_file, write_suite_file

_RUNS = {"run": "FAIL", "test": "FAIL", "fix": "PASS"}
_PASSED_AT_BASE = {"run": "PASS", "test": "PASS", "fix": "PASS"}


def _record(number: int = 4310, **changes):
    record = {
        "org": "fmtlib", "repo": "fmt", "number": number, "state": "closed", "title": "Fix it",
        "base": {"label": "fmtlib:master", "ref": "master", "sha": "a" * 40},
        "resolved_issues": [{"number": 1, "title": "It breaks", "body": "Steps: ..."},
                            {"number": 1, "title": "It breaks", "body": "Steps: ..."},
                            {"number": 2, "title": "Also this", "body": None}],
        "fix_patch": "diff --git a/src/x.cc b/src/x.cc\n", "test_patch": "diff --git a/test/x.cc b/test/x.cc\n",
        "f2p_tests": {"format-test": _RUNS}, "s2p_tests": {"args-test": _RUNS},
        "n2p_tests": {"base-test": _RUNS, "format-test": _RUNS},
        "p2p_tests": {"std-test": _RUNS, "core-test": _PASSED_AT_BASE},
        "fixed_tests": {"format-test": _RUNS},
    }
    record.update(changes)
    return record


def _write(tmp_path, records):
    path = tmp_path / "fmtlib__fmt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_record_maps_to_swebench_fields_and_keeps_its_own(tmp_path):
    loaded = load_suite_file(_write(tmp_path, [_record(instance_id="fmtlib__fmt-4310")]))
    assert loaded.errors == []
    [task] = loaded.instances
    assert task.instance_id == "fmtlib__fmt-4310"
    assert task.repo == "fmtlib/fmt"
    assert task.base_commit == "a" * 40
    assert task.patch.startswith("diff --git a/src/x.cc")
    assert task.test_patch.startswith("diff --git a/test/x.cc")
    assert task.problem_statement == "It breaks\n\nSteps: ...\n\nAlso this"
    assert task.FAIL_TO_PASS == ["args-test", "base-test", "format-test"]
    assert task.PASS_TO_PASS == ["core-test", "std-test"]
    assert task.passed_at_base == ["core-test"]  # its `run` status: the benchmark's run at the base commit
    extras = task.model_extra or {}
    assert extras["org"] == "fmtlib" and extras["number"] == 4310 and extras["base"]["ref"] == "master"
    assert extras["fixed_tests"] == {"format-test": _RUNS}


def test_the_instance_id_is_made_in_the_benchmarks_form_when_absent(tmp_path):
    [task] = load_suite_file(_write(tmp_path, [_record(number=7)])).instances
    assert task.instance_id == "fmtlib__fmt-7"


def test_written_out_it_reloads_as_swebench(tmp_path):
    [task] = load_suite_file(_write(tmp_path, [_record()])).instances
    out = tmp_path / "out.jsonl"
    write_suite_file([task], out)
    assert load_suite_file(out).instances == [task]


def test_a_malformed_record_is_a_record_error_and_the_rest_loads(tmp_path):
    broken = _record(number=2, base={"ref": "master"})
    no_tests = _record(number=3)
    del no_tests["p2p_tests"]
    loaded = load_suite_file(_write(tmp_path, [_record(number=1), broken, no_tests]))
    assert [t.instance_id for t in loaded.instances] == ["fmtlib__fmt-1"]
    assert [str(e) for e in loaded.errors] == [
        "fmtlib__fmt.jsonl:2 fmtlib__fmt-2: base.sha: Field required",
        "fmtlib__fmt.jsonl:3 fmtlib__fmt-3: p2p_tests: Field required",
    ]


def test_a_file_mixing_formats_loads_its_first_records_format_only(tmp_path):
    swebench = {"instance_id": "o__n-1", "repo": "o/n", "base_commit": "c" * 40}
    loaded = load_suite_file(_write(tmp_path, [_record(number=1), swebench, _record(number=2)]))
    assert [t.instance_id for t in loaded.instances] == ["fmtlib__fmt-1", "fmtlib__fmt-2"]
    assert [str(e) for e in loaded.errors] == [
        "fmtlib__fmt.jsonl:2 o__n-1: a SWE-bench record among Multi-SWE-bench ones: a suite file holds one format"]
