"""Read SWE-bench predictions files for `dojo eval --predictions`: what another agent submitted.

Three shapes, as SWE-bench's harness and sb-cli take them: a JSON list of predictions, a JSON object
keyed by instance id (SWE-agent's `preds.json`; an entry may leave out its `instance_id`, the key
gives it), or JSONL, one prediction a line. Each prediction has `instance_id`, `model_patch` and
`model_name_or_path`, all strings; `model_patch` may also be null, which SWE-bench reads as "no
patch" and grades like an empty one. Other keys are ignored.

The file is read whole or refused: a malformed one raises `PredictionsError` with one line naming
the file, the line or entry, and what is wrong. Grading half a file would report a score for
predictions nobody made.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

FIELDS = ("instance_id", "model_patch", "model_name_or_path")


class PredictionsError(ValueError):
    """The predictions file cannot be used as a whole: missing, not JSON, or an entry is malformed."""


class Prediction(BaseModel):
    """One submitted patch, in sb-cli's field names."""

    instance_id: str
    """The task it is for."""
    model_name_or_path: str
    """Who made it (a model or agent name)."""
    model_patch: str | None
    """The diff to grade; None when the agent submitted none (SWE-bench's `patch_is_None`)."""


class PredictionsFile(BaseModel):
    """A predictions file as read: its predictions in file order, and what identifies its content."""

    path: str
    """The file, as given."""
    sha256: str
    """Hash of the file's bytes: a resumed run must grade the same predictions."""
    predictions: list[Prediction]
    """In file order; instance ids are unique."""

    @property
    def fingerprint(self) -> str:
        """What a run directory records for these predictions (`RunManifest.model`)."""
        return f"{self.path} sha256:{self.sha256}"

    @property
    def model_name(self) -> str:
        """The first prediction's `model_name_or_path`: SWE-bench names its run report after it."""
        return self.predictions[0].model_name_or_path

    def by_id(self) -> dict[str, Prediction]:
        """Predictions by instance id."""
        return {p.instance_id: p for p in self.predictions}

    def patches(self) -> dict[str, str]:
        """Instance id -> the patch to grade (a null patch is the empty one)."""
        return {p.instance_id: p.model_patch or "" for p in self.predictions}

    def match(self, instance_ids: list[str]) -> PredictionMatch:
        """Which of the run's instances have a prediction, which do not, and which predictions name
        no instance of the run (not in the suite, or left out by the selection)."""
        ours = set(instance_ids)
        predicted = {p.instance_id for p in self.predictions}
        return PredictionMatch(
            submitted=[i for i in instance_ids if i in predicted],
            not_submitted=[i for i in instance_ids if i not in predicted],
            unmatched=[p.instance_id for p in self.predictions if p.instance_id not in ours],
        )


class PredictionMatch(BaseModel):
    """A predictions file set against the instances of a run."""

    submitted: list[str]
    """Instances of the run with a prediction, in the run's order: these are graded."""
    not_submitted: list[str]
    """Instances of the run without a prediction: not graded, counted in the total and not
    resolved, as SWE-bench counts an instance nobody submitted."""
    unmatched: list[str]
    """Predictions for no instance of the run (not in the suite, or not selected), in file order: not graded."""

    def notes(self) -> list[str]:
        """One line for the instances without a prediction and one for the predictions without an
        instance, where there are any: neither is dropped unsaid."""
        notes = []
        if self.not_submitted:
            notes.append(f"{len(self.not_submitted)} instance(s) of the run have no prediction: not graded, counted as "
                         f"not resolved (not submitted): {_some(self.not_submitted)}")
        if self.unmatched:
            notes.append(f"{len(self.unmatched)} prediction(s) are for no instance of the run (not in the suite, or not "
                         f"selected): not graded: {_some(self.unmatched)}")
        return notes


def _some(ids: list[str], shown: int = 10) -> str:
    """The first `shown` ids; summary.json lists them all."""
    more = f" and {len(ids) - shown} more (all in summary.json)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _type_name(value: Any) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
                                         int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _prediction(where: str, record: Any, key: str | None = None) -> Prediction:
    """One entry, checked field by field; `key`: its key in a JSON object keyed by instance id."""
    if not isinstance(record, dict):
        raise PredictionsError(f"{where}: expected an object with {', '.join(FIELDS)}, got {_type_name(record)}")
    if key is not None:
        record = {"instance_id": key, **record}
    missing = [f for f in FIELDS if f not in record]
    if missing:
        named = f" ({record['instance_id']})" if isinstance(record.get("instance_id"), str) else ""
        raise PredictionsError(f"{where}{named}: missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    for field in ("instance_id", "model_name_or_path"):
        if not isinstance(record[field], str) or not record[field].strip():
            what = "an empty string" if isinstance(record[field], str) else _type_name(record[field])
            raise PredictionsError(f"{where}: {field} must be a non-empty string, got {what}")
    if key is not None and record["instance_id"] != key:
        raise PredictionsError(f"{where}: its instance_id {record['instance_id']!r} is not its key")
    if record["model_patch"] is not None and not isinstance(record["model_patch"], str):
        raise PredictionsError(f"{where} ({record['instance_id']}): model_patch must be a string (or null for no patch), "
                               f"got {_type_name(record['model_patch'])}")
    return Prediction(instance_id=record["instance_id"], model_name_or_path=record["model_name_or_path"],
                      model_patch=record["model_patch"])


class _DuplicateKeyError(Exception):
    """A JSON object names a key twice (`json` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKeyError(key)
        found[key] = value
    return found


def _entries(path: Path, text: str) -> list[tuple[str, Any, str | None]]:
    """(where, record, key) per entry of the file, by its extension."""
    name = str(path)
    if path.suffix.lower() == ".jsonl":
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((f"{name}:{number}", json.loads(line, object_pairs_hook=_unique_keys), None))
            except json.JSONDecodeError as exc:
                raise PredictionsError(f"{name}:{number}: invalid JSON: {exc.msg} at column {exc.colno}") from None
            except _DuplicateKeyError as exc:
                raise PredictionsError(f"{name}:{number}: duplicate key {exc.args[0]!r} in one object") from None
        return entries
    if path.suffix.lower() != ".json":
        raise PredictionsError(f"{name}: unknown predictions format {path.suffix!r} (use .json or .jsonl)")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise PredictionsError(f"{name}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _DuplicateKeyError as exc:
        raise PredictionsError(f"{name}: duplicate key {exc.args[0]!r} in one object") from None
    if isinstance(data, list):
        return [(f"{name} entry {index}", record, None) for index, record in enumerate(data)]
    if isinstance(data, dict):
        return [(f"{name} entry {key!r}", record, key) for key, record in data.items()]
    raise PredictionsError(f"{name}: expected a JSON list of predictions or an object keyed by instance_id, "
                           f"got {_type_name(data)}")


def load_predictions(path: Path) -> PredictionsFile:
    """Read a predictions file whole; any problem raises `PredictionsError` (one line)."""
    if not path.is_file():
        raise PredictionsError(f"{path}: no such predictions file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PredictionsError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    predictions: list[Prediction] = []
    first: dict[str, str] = {}
    for where, record, key in _entries(path, text):
        prediction = _prediction(where, record, key)
        if prediction.instance_id in first:
            raise PredictionsError(f"{where}: duplicate instance_id {prediction.instance_id!r} "
                                   f"(first at {first[prediction.instance_id]})")
        first[prediction.instance_id] = where
        predictions.append(prediction)
    if not predictions:
        raise PredictionsError(f"{path}: holds no predictions")
    return PredictionsFile(path=str(path), sha256=hashlib.sha256(data).hexdigest(), predictions=predictions)
