"""Read and write suites in SWE-bench's file formats (JSON list, JSONL, Parquet).

Records may also be Multi-SWE-bench's, as that benchmark publishes them (`multi_swe_bench`); one
file holds records of one format. A bad record never stops a load: it becomes a `RecordError`
naming the record, and the rest loads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from swedojo.datasets import multi_swe_bench
from swedojo.schema import TaskInstance


class SuiteFormatError(Exception):
    """The suite file as a whole cannot be read (missing, unknown extension, not JSON at all)."""


class RecordError(BaseModel):
    """One record that could not be loaded."""

    where: str
    """File and line (JSONL) or index (JSON list, Parquet row)."""
    instance_id: str
    """The record's instance_id when it had one, else empty."""
    message: str
    """One line saying what is wrong."""

    def __str__(self) -> str:
        who = f" {self.instance_id}" if self.instance_id else ""
        return f"{self.where}{who}: {self.message}"


class LoadedSuite(BaseModel):
    """The instances that loaded and the records that did not."""

    instances: list[TaskInstance]
    """Valid instances, in file order."""
    errors: list[RecordError] = []
    """One entry per malformed record."""


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "record"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


_SWE_BENCH = "SWE-bench"
_MULTI_SWE_BENCH = "Multi-SWE-bench"


def _validate(records: Iterable[tuple[str, Any]]) -> LoadedSuite:
    instances: list[TaskInstance] = []
    errors: list[RecordError] = []
    seen: set[str] = set()
    file_format = ""
    for where, record in records:
        if isinstance(record, RecordError):
            errors.append(record)
            continue
        if not isinstance(record, dict):
            errors.append(RecordError(where=where, instance_id="", message=f"expected an object, got {type(record).__name__}"))
            continue
        iid = multi_swe_bench.record_id(record)
        record_format = _MULTI_SWE_BENCH if multi_swe_bench.is_multi_swe_bench(record) else _SWE_BENCH
        file_format = file_format or record_format
        if record_format != file_format:
            errors.append(RecordError(where=where, instance_id=iid, message=(
                f"a {record_format} record among {file_format} ones: a suite file holds one format")))
            continue
        try:
            if record_format == _MULTI_SWE_BENCH:
                record = multi_swe_bench.to_swebench_fields(record)
            instance = TaskInstance.model_validate(record)
        except ValidationError as exc:
            errors.append(RecordError(where=where, instance_id=iid, message=_one_line(exc)))
            continue
        except (ValueError, TypeError) as exc:
            errors.append(RecordError(where=where, instance_id=iid, message=str(exc)))
            continue
        if instance.instance_id in seen:
            errors.append(RecordError(where=where, instance_id=iid, message="duplicate instance_id"))
            continue
        seen.add(instance.instance_id)
        instances.append(instance)
    return LoadedSuite(instances=instances, errors=errors)


def _jsonl_records(path: Path) -> Iterable[tuple[str, Any]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as exc:
            yield where, RecordError(where=where, instance_id="", message=f"invalid JSON: {exc.msg} at column {exc.colno}")


def load_suite_file(path: Path) -> LoadedSuite:
    """Load a suite from .jsonl, .json (a list, or an object with an `instances` list) or .parquet."""
    if not path.is_file():
        raise SuiteFormatError(f"{path}: no such suite file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _validate(_jsonl_records(path))
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SuiteFormatError(f"{path}: invalid JSON: {exc.msg} at line {exc.lineno}") from exc
        if isinstance(data, dict) and isinstance(data.get("instances"), list):
            data = data["instances"]
        if not isinstance(data, list):
            raise SuiteFormatError(f"{path}: expected a JSON list of instances")
        return _validate((f"{path.name}[{i}]", r) for i, r in enumerate(data))
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        return _validate((f"{path.name} row {i}", r) for i, r in enumerate(rows))
    raise SuiteFormatError(f"{path}: unknown suite format {suffix!r} (use .jsonl, .json or .parquet)")


def write_suite_file(instances: Iterable[TaskInstance], path: Path) -> None:
    """Write instances as SWE-bench publishes them (test lists as JSON strings), by extension."""
    records = [inst.to_swebench() for inst in instances]
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    elif suffix == ".json":
        path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    else:
        raise SuiteFormatError(f"{path}: unknown suite format {suffix!r} (use .jsonl, .json or .parquet)")


def select_instances(instances: list[TaskInstance], ids: list[str], slice_: str | None = None,
                     limit: int | None = None) -> list[TaskInstance]:
    """`ids` (all when empty), then the `A:B` slice of what is left, then its first `limit`.

    ValueError names every id the suite does not hold and a malformed slice: a typo selects
    nothing silently nowhere.
    """
    if ids:
        known = {i.instance_id for i in instances}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ValueError(f"no instance {', '.join(map(repr, unknown))} in the suite ({len(known)} instances)")
        wanted = set(ids)
        instances = [i for i in instances if i.instance_id in wanted]
    if slice_ is not None:
        match = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", slice_)
        if not match:
            raise ValueError(f"--slice takes A:B (e.g. 0:10, :5, 20:), not {slice_!r}")
        start, stop = (int(part) if part else None for part in match.groups())
        instances = instances[start:stop]
    return instances[:limit] if limit is not None else instances
