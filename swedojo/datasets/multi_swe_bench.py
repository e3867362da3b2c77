"""Multi-SWE-bench records, read as published and mapped to SWE-bench's field names.

A record is Multi-SWE-bench's when it has no `base_commit` and has one of the fields only that
benchmark uses (`org`, `base`, `fix_patch`). It maps to:

- `instance_id`: the record's own, else `{org}__{repo}-{number}` (the benchmark's form);
- `repo`: `org/repo`; `base_commit`: `base.sha`; `patch`: `fix_patch`; `test_patch` as is;
- `problem_statement`: the title and body of each resolved issue (an issue listed twice once);
- `FAIL_TO_PASS`: the names of `f2p_tests`, `s2p_tests` (skipped before) and `n2p_tests` (new
  tests), sorted and deduplicated; `PASS_TO_PASS`: the names of `p2p_tests`, sorted.
- `passed_at_base`: the names, of all four, whose statuses say the benchmark's run passed them at
  the base commit (`"run": "PASS"`), sorted.

Every original field is kept besides (a `TaskInstance` keeps unknown fields), `repo` aside, which
`org/repo` replaces. The test names are the benchmark's own parsers' (`testrun.names` matches them
to our parsers' ids when grading).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

MARKERS = ("org", "base", "fix_patch")
"""Fields that only Multi-SWE-bench's records have."""


class Base(BaseModel):
    """The pull request's base."""

    model_config = ConfigDict(extra="allow")

    sha: str
    """The commit the task starts from."""


class Issue(BaseModel):
    """An issue the pull request resolved."""

    model_config = ConfigDict(extra="allow")

    title: str = ""
    """Its title."""
    body: str | None = ""
    """Its text (None when it has none)."""


class MultiSweBenchRecord(BaseModel):
    """The fields of a Multi-SWE-bench record that the mapping reads; the others pass through."""

    model_config = ConfigDict(extra="allow")

    org: str
    """Owner of the repository."""
    repo: str
    """Name of the repository (without the owner)."""
    number: int
    """Pull request number."""
    instance_id: str = ""
    """`{org}__{repo}-{number}` in published files; made so when absent."""
    base: Base
    """The pull request's base."""
    fix_patch: str
    """Gold patch."""
    test_patch: str
    """Patch adding or changing the tests."""
    resolved_issues: list[Issue]
    """The issues the fix resolves: the problem statement."""
    f2p_tests: dict[str, Any]
    """Failing (or not run) before the fix, passing after: name -> statuses per run (`run`: at the
    base commit, `test`: with the test patch, `fix`: with both patches)."""
    p2p_tests: dict[str, Any]
    """Passing before and after."""
    s2p_tests: dict[str, Any] = {}
    """Skipped before, passing after."""
    n2p_tests: dict[str, Any] = {}
    """Absent before (new tests), passing after."""


def is_multi_swe_bench(record: dict[str, Any]) -> bool:
    """Whether `record` is in Multi-SWE-bench's format rather than SWE-bench's."""
    return "base_commit" not in record and any(field in record for field in MARKERS)


def record_id(record: dict[str, Any]) -> str:
    """The instance id `record` names or implies, for error messages; empty when it has none."""
    if record.get("instance_id"):
        return str(record["instance_id"])
    if all(record.get(field) not in (None, "") for field in ("org", "repo", "number")):
        return f"{record['org']}__{record['repo']}-{record['number']}"
    return ""


def _problem_statement(issues: list[Issue]) -> str:
    texts = [f"{issue.title}\n\n{issue.body or ''}".strip() for issue in issues]
    return "\n\n".join(dict.fromkeys(text for text in texts if text))


def to_swebench_fields(record: dict[str, Any]) -> dict[str, Any]:
    """`record` (Multi-SWE-bench's) with SWE-bench's fields set from it; pydantic.ValidationError
    when a field the mapping needs is missing or of the wrong type."""
    msb = MultiSweBenchRecord.model_validate(record)
    fail_to_pass = {*msb.f2p_tests, *msb.s2p_tests, *msb.n2p_tests}
    stages = (msb.f2p_tests, msb.p2p_tests, msb.s2p_tests, msb.n2p_tests)
    passed_at_base = {name for stage in stages for name, runs in stage.items()
                      if isinstance(runs, dict) and runs.get("run") == "PASS"}
    return {
        **record,
        "instance_id": msb.instance_id or f"{msb.org}__{msb.repo}-{msb.number}",
        "repo": f"{msb.org}/{msb.repo}",
        "base_commit": msb.base.sha,
        "patch": msb.fix_patch,
        "test_patch": msb.test_patch,
        "problem_statement": _problem_statement(msb.resolved_issues),
        "FAIL_TO_PASS": sorted(fail_to_pass),
        "PASS_TO_PASS": sorted(msb.p2p_tests),
        "passed_at_base": sorted(passed_at_base),
    }
