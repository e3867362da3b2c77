"""Predictions files in the three shapes SWE-bench takes, and the one-line error for each way one is malformed."""

import json

import pytest

from swedojo.datasets.predictions import PredictionsError, load_predictions

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
RECORDS = [
    {"instance_id": "o__r-1", "model_patch": PATCH, "model_name_or_path": "org/agent-7b"},
    {"instance_id": "o__r-2", "model_patch": "", "model_name_or_path": "org/agent-7b", "extra": 1},
    {"instance_id": "o__r-3", "model_patch": None, "model_name_or_path": "org/agent-7b"},
]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text", [
    ("preds.json", json.dumps(RECORDS)),
    ("preds.jsonl", "".join(json.dumps(r) + "\n\n" for r in RECORDS)),
    # SWE-agent's preds.json: keyed by instance id; an entry may leave its id to the key
    ("preds.json", json.dumps({r["instance_id"]: {k: v for k, v in r.items() if k != "instance_id" or n == 0}
                               for n, r in enumerate(RECORDS)})),
])
def test_every_shape_reads_the_same_predictions(tmp_path, name, text):
    loaded = load_predictions(_write(tmp_path, name, text))
    assert [p.instance_id for p in loaded.predictions] == ["o__r-1", "o__r-2", "o__r-3"]
    assert loaded.patches() == {"o__r-1": PATCH, "o__r-2": "", "o__r-3": ""}  # null: no patch, graded as empty
    assert loaded.predictions[2].model_patch is None
    assert loaded.model_name == "org/agent-7b"
    assert len(loaded.sha256) == 64 and loaded.fingerprint.endswith(f"sha256:{loaded.sha256}")


def test_the_hash_is_of_the_content(tmp_path):
    one = load_predictions(_write(tmp_path, "a.json", json.dumps(RECORDS)))
    same = load_predictions(_write(tmp_path, "b.json", json.dumps(RECORDS)))
    other = load_predictions(_write(tmp_path, "c.json", json.dumps(RECORDS[:2])))
    assert one.sha256 == same.sha256 != other.sha256


def _line(record):
    return json.dumps(record)


GOOD = RECORDS[0]


@pytest.mark.parametrize("name, text, message", [
    ("p.json", '[{"instance_id": "a",', "p.json: invalid JSON: Expecting property name enclosed in double quotes at line 1 column 22"),
    ("p.jsonl", _line(GOOD) + "\n{oops\n", "p.jsonl:2: invalid JSON: Expecting property name enclosed in double quotes at column 2"),
    ("p.json", '"just a string"', "p.json: expected a JSON list of predictions or an object keyed by instance_id, got a string"),
    ("p.json", "[]", "p.json: holds no predictions"),
    ("p.txt", _line(GOOD), "p.txt: unknown predictions format '.txt' (use .json or .jsonl)"),
    ("p.json", json.dumps([GOOD, [1, 2]]),
     "p.json entry 1: expected an object with instance_id, model_patch, model_name_or_path, got a list"),
    ("p.jsonl", _line(GOOD) + "\n" + _line({"instance_id": "b", "model_patch": ""}),
     "p.jsonl:2 (b): missing field model_name_or_path"),
    ("p.jsonl", _line({"model_name_or_path": "m"}), "p.jsonl:1: missing fields instance_id, model_patch"),
    ("p.json", json.dumps([{**GOOD, "instance_id": 7}]), "p.json entry 0: instance_id must be a non-empty string, got a number"),
    ("p.json", json.dumps([{**GOOD, "model_name_or_path": ""}]),
     "p.json entry 0: model_name_or_path must be a non-empty string, got an empty string"),
    ("p.json", json.dumps([{**GOOD, "model_patch": ["-a", "+b"]}]),
     "p.json entry 0 (o__r-1): model_patch must be a string (or null for no patch), got a list"),
    ("p.jsonl", _line({**GOOD, "model_patch": {"diff": PATCH}}),
     "p.jsonl:1 (o__r-1): model_patch must be a string (or null for no patch), got an object"),
    ("p.jsonl", _line(GOOD) + "\n" + _line(RECORDS[1]) + "\n" + _line(GOOD),
     "p.jsonl:3: duplicate instance_id 'o__r-1' (first at p.jsonl:1)"),
    ("p.json", json.dumps({"o__r-1": {**GOOD, "instance_id": "o__r-9"}}),
     "p.json entry 'o__r-1': its instance_id 'o__r-9' is not its key"),
    ("p.json", ('{"o__r-1": {"model_patch": "", "model_name_or_path": "m"}, '
                '"o__r-1": {"model_patch": "", "model_name_or_path": "m"}}'), "p.json: duplicate key 'o__r-1' in one object"),
])
def test_a_malformed_file_is_one_precise_line(tmp_path, monkeypatch, name, text, message):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, name, text)
    with pytest.raises(PredictionsError) as caught:
        load_predictions(tmp_path.joinpath(name).relative_to(tmp_path))
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(PredictionsError, match=r"nope\.json: no such predictions file$"):
        load_predictions(tmp_path / "nope.json")


def test_match_names_the_instances_without_a_prediction_and_the_predictions_without_an_instance(tmp_path):
    loaded = load_predictions(_write(tmp_path, "p.json", json.dumps(RECORDS)))
    match = loaded.match(["o__r-3", "o__r-4", "o__r-1"])
    assert match.submitted == ["o__r-3", "o__r-1"]  # in the run's order
    assert match.not_submitted == ["o__r-4"]
    assert match.unmatched == ["o__r-2"]
    notes = match.notes()
    assert len(notes) == 2 and "1 instance(s) of the run have no prediction" in notes[0] and notes[0].endswith("o__r-4")
    assert "1 prediction(s) are for no instance of the run" in notes[1] and notes[1].endswith("o__r-2")
    assert loaded.match(["o__r-1", "o__r-2", "o__r-3"]).notes() == []
