"""Test-log parsers: map a framework's output to test id -> status, and read its own summary.

`parse_log(name, log)` is the single entry point; each parser is registered by name in `PARSERS`
and the `EnvSpec.log_parser` field names the one to use. `SUMMARIES` holds, per parser, a reader of
the framework's own closing counts (`TALLIES`, for a parser whose ids are not one per test, what
its parse accounts for). `check_summary` raises `SummaryMismatchError` when the summary's total is
not the parsed one (launch validation fails on it rather than guess); `check_counts` lists every
disagreement, per status and with the exit code, for the build log. A new parser is one function
and one line in `PARSERS`, plus one in `SUMMARIES` where its framework prints totals.

Test ids per framework: pytest node ids; `Class#method` for surefire; `package::Test/sub` for Go;
`binary::path` for cargo; the ctest name; `file::Suite > test` for jest and vitest, `file::Suite
test` (mocha's full title) for mocha (file is the path from the work tree, `_test_file`);
`Suite > test` for TAP (node's test runner, ava), `file > test > subtest` for node-tap;
`file > Suite` for uvu (which names only failing tests); the test's name for tape; `test_a (module.Class)` for unittest and
the runners built on it.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel

from swedojo.schema import TestStatus
from swedojo.testrun.errors import SummaryMismatchError

LogParser = Callable[[str], dict[str, TestStatus]]

IDS_REVISION = 1
"""Bumped when a parser's ids change (1: JavaScript test files by their path from the work tree):
a validated environment's baseline of another revision is validated again (`EnvSpec.ids_revision`)."""

WORST_FIRST = [TestStatus.ERROR, TestStatus.FAILED, TestStatus.XPASS, TestStatus.SKIPPED,
               TestStatus.XFAIL, TestStatus.PASSED]
"""Statuses from worst to best: a test seen several times keeps the worst."""


def _record(results: dict[str, TestStatus], test: str, status: TestStatus) -> None:
    """A test seen with several statuses (reruns, teardown errors, name clashes) keeps the worst."""
    previous = results.get(test)
    if previous is None or WORST_FIRST.index(status) < WORST_FIRST.index(previous):
        results[test] = status


class Counts(BaseModel):
    """Test counts; a field is None when the framework's summary does not state it."""

    total: int | None = None
    """Tests reported."""
    passed: int | None = None
    """Tests that passed."""
    failed: int | None = None
    """Tests that failed (including errors when `errors` is None)."""
    errors: int | None = None
    """Tests that errored (setup/teardown, crashes), when the framework counts them apart."""
    skipped: int | None = None
    """Tests skipped, ignored, disabled or todo."""
    xfailed: int | None = None
    """Expected failures (pytest)."""
    xpassed: int | None = None
    """Unexpected passes (pytest)."""


def counts_of(results: dict[str, TestStatus]) -> Counts:
    """Counts of parsed results, every field filled."""
    return _counted(list(results.values()))


def _counted(statuses: list[TestStatus]) -> Counts:
    tally = Counter(statuses)
    return Counts(
        total=len(statuses), passed=tally[TestStatus.PASSED], failed=tally[TestStatus.FAILED],
        errors=tally[TestStatus.ERROR], skipped=tally[TestStatus.SKIPPED],
        xfailed=tally[TestStatus.XFAIL], xpassed=tally[TestStatus.XPASS],
    )


# --- pytest text (-rA and -v) -------------------------------------------------------------------

_STATUS = r"(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)"
# Parametrised ids may hold spaces inside their brackets: "test_p[a b]".
_NODE_ID = r"(\S+?(?:\[.*?\])?)"
_PYTEST_RA = re.compile(rf"^{_STATUS}\s+{_NODE_ID}(?:\s+-\s+.*)?$")
_PYTEST_VERBOSE = re.compile(rf"^{_NODE_ID}\s+{_STATUS}(?:\s+\(.*\))?(?:\s+\[\s*\d+%\])?$")
_PYTEST_SUMMARY = re.compile(r"^=+ (.*?) in [\d.]+s(?: \([^)]*\))? =+$")
_PYTEST_KEYS = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "errors",
                "errors": "errors", "xfailed": "xfailed", "xpassed": "xpassed"}


def parse_pytest(log: str) -> dict[str, TestStatus]:
    """Read `pytest -rA` short summary lines and `-v` result lines.

    `-rA` alone gives no ids for skipped tests ("SKIPPED [2] file.py:12: reason"); `-v` lines do.
    """
    results: dict[str, TestStatus] = {}
    for raw in log.splitlines():
        line = raw.strip()
        match = _PYTEST_RA.match(line)
        if match:
            status, test = TestStatus(match.group(1)), match.group(2)
        else:
            match = _PYTEST_VERBOSE.match(line)
            if not match or "::" not in match.group(1):
                continue
            test, status = match.group(1), TestStatus(match.group(2))
        if "::" not in test and status != TestStatus.ERROR:
            continue  # "SKIPPED [1] file.py:12: reason"; a bare path is a collection ERROR
        _record(results, test, status)
    return results


def summary_pytest(log: str) -> Counts | None:
    """The closing "=== 1 failed, 5 passed, 1 skipped in 0.1s ===" line."""
    found = None
    for line in log.splitlines():
        match = _PYTEST_SUMMARY.match(line.strip())
        if match:
            found = match.group(1)
    if found is None:
        return None
    counts = {field: 0 for field in set(_PYTEST_KEYS.values())}
    for part in found.split(","):
        words = part.split()
        if len(words) == 2 and words[0].isdigit() and words[1] in _PYTEST_KEYS:
            counts[_PYTEST_KEYS[words[1]]] += int(words[0])
    return Counts(**counts)


# --- JUnit XML (pytest --junitxml, Maven surefire, Gradle) ---------------------------------------

_XML_BLOCK = re.compile(r"<testsuites\b.*?</testsuites>|<testsuite\b.*?</testsuite>|<testsuite\b[^>]*/>", re.DOTALL)


def _xml_suites(log: str) -> Iterator[ET.Element]:
    """Every top-level <testsuite> in the log; XML may sit among other output or come as many files."""
    for match in _XML_BLOCK.finditer(log):
        try:
            root = ET.fromstring(match.group(0))
        except ET.ParseError:
            continue
        yield from (root.iter("testsuite") if root.tag == "testsuites" else [root])


def _junit_status(case: ET.Element) -> TestStatus:
    if case.find("error") is not None:
        return TestStatus.ERROR
    if case.find("failure") is not None:
        return TestStatus.FAILED
    skipped = case.find("skipped")
    if skipped is not None:
        return TestStatus.XFAIL if skipped.get("type") == "pytest.xfail" else TestStatus.SKIPPED
    return TestStatus.PASSED


def _pytest_node_id(case: ET.Element) -> str:
    """pytest's xunit1 `file` attribute lets us rebuild the node id; classes follow the module."""
    name, classname, file = case.get("name", ""), case.get("classname", ""), case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = str(PurePosixPath(file).with_suffix("")).replace("/", ".")
    classes = classname[len(module):].strip(".") if classname.startswith(module) else ""
    return "::".join(part for part in (file, *classes.split("."), name) if part)


def _parse_junit(log: str, test_id: Callable[[ET.Element], str]) -> dict[str, TestStatus]:
    results: dict[str, TestStatus] = {}
    for suite in _xml_suites(log):
        for case in suite.iter("testcase"):
            _record(results, test_id(case), _junit_status(case))
    return results


def parse_pytest_junit(log: str) -> dict[str, TestStatus]:
    """pytest's `--junitxml` report (run with `-o junit_family=xunit1` so ids are node ids)."""
    return _parse_junit(log, _pytest_node_id)


def parse_surefire(log: str) -> dict[str, TestStatus]:
    """Maven surefire / Gradle `TEST-*.xml` reports; ids are `Class#method` as `-Dtest=` takes them."""
    return _parse_junit(log, lambda case: f"{case.get('classname', '')}#{case.get('name', '')}")


def summary_junit(log: str) -> Counts | None:
    """Sum of the `tests/failures/errors/skipped` attributes of every suite (skipped is left out of
    the comparison: pytest counts xfails in it)."""
    totals = Counter()
    seen = False
    for suite in _xml_suites(log):
        seen = True
        for key in ("tests", "failures", "errors", "skipped"):
            totals[key] += int(suite.get(key, "0") or 0)
    if not seen:
        return None
    return Counts(total=totals["tests"], failed=totals["failures"], errors=totals["errors"],
                  passed=totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"])


# --- go test -json ------------------------------------------------------------------------------

def _json_lines(log: str) -> Iterator[dict[str, Any]]:
    for line in log.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                yield event


_GO_VERDICT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
_GO_BROKEN = re.compile(r"^FAIL\s+(\S+) \[(?:build|setup) failed\]")
"""A package that did not build: go prints this line outside the JSON events before Go 1.24."""
_GO_STATUS = {"pass": TestStatus.PASSED, "fail": TestStatus.FAILED, "skip": TestStatus.SKIPPED}


def _go_output(log: str) -> Iterator[str]:
    """The lines go test itself printed: the JSON events' output, and lines outside the events."""
    for line in log.splitlines():
        if not line.lstrip().startswith("{"):
            yield line
    for event in _json_lines(log):
        if event.get("Action") == "output":
            yield from str(event.get("Output", "")).splitlines()


def parse_go_test(log: str) -> dict[str, TestStatus]:
    """`go test -json` events; a package that fails with no failing test (build error) is an ERROR."""
    results: dict[str, TestStatus] = {}
    failed_packages: list[str] = []
    for event in _json_lines(log):
        action, package, test = event.get("Action"), event.get("Package", ""), event.get("Test")
        if action not in _GO_STATUS:
            continue
        if test:
            _record(results, f"{package}::{test}", _GO_STATUS[action])
        elif action == "fail":
            failed_packages.append(package)
    failed_packages += [m.group(1) for line in _go_output(log) if (m := _GO_BROKEN.match(line))]
    for package in failed_packages:
        if not any(test.startswith(f"{package}::") and status == TestStatus.FAILED
                   for test, status in results.items()):
            _record(results, package, TestStatus.ERROR)
    return results


def summary_go_test(log: str) -> Counts | None:
    """go's own verdict lines ("--- PASS: TestA (0.00s)", subtests indented) and its failed
    packages; a package that failed without any test's failing verdict (a build error, a panic
    outside tests) counts once as failed."""
    verdicts: dict[str, str] = {}
    for event in _json_lines(log):
        if event.get("Action") == "output" and (match := _GO_VERDICT.match(str(event.get("Output", "")))):
            verdicts[f"{event.get('Package', '')}::{match.group(2)}"] = match.group(1)
    failed = {e.get("Package", "") for e in _json_lines(log) if e.get("Action") == "fail" and not e.get("Test")}
    failed |= {m.group(1) for line in _go_output(log) if (m := _GO_BROKEN.match(line))}
    if not verdicts and not failed:
        return None
    untested = sum(1 for package in failed
                   if not any(t.startswith(f"{package}::") and v == "FAIL" for t, v in verdicts.items()))
    tally = Counter(verdicts.values())
    return Counts(total=len(verdicts) + untested, passed=tally["PASS"], failed=tally["FAIL"] + untested,
                  skipped=tally["SKIP"])


# --- jest / vitest JSON reporters ---------------------------------------------------------------

def _json_reports(log: str, key: str = "testResults") -> Iterator[dict[str, Any]]:
    """The reporter's JSON objects (those holding `key`), in order, found among whatever else the
    command printed: one per invocation of the runner."""
    decoder = json.JSONDecoder()
    at = log.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(log, at)
        except json.JSONDecodeError:
            value, end = None, at + 1
        if isinstance(value, dict) and key in value:
            yield value
        else:
            end = at + 1
        at = log.find("{", end)


def _json_report(log: str, key: str = "testResults") -> dict[str, Any] | None:
    """The first of `_json_reports`."""
    return next(_json_reports(log, key), None)


def _js_string(value: Any) -> str:
    """A title as JavaScript's String() makes it: old jest reports a `describe` given an array
    (or a number) with that value, not a string."""
    if isinstance(value, list):
        return ",".join(_js_string(item) for item in value)
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _test_file(path: str) -> str:
    """A JavaScript test file as ids name it: the path from the work tree as the run's log gives it
    (the run strips the work tree's own path from the log), so that two files of one name in two
    directories (`test/timezone.test.js`, `test/plugin/timezone.test.js`) stay two tests; a path
    still absolute (a file outside the work tree) keeps its name alone, the part that is the same on
    every machine."""
    file = PurePosixPath(path)
    return file.name if file.is_absolute() else str(file)


def _jest_report(report: dict[str, Any]) -> dict[str, TestStatus]:
    statuses = {"passed": TestStatus.PASSED, "failed": TestStatus.FAILED, "pending": TestStatus.SKIPPED,
                "skipped": TestStatus.SKIPPED, "todo": TestStatus.SKIPPED, "disabled": TestStatus.SKIPPED}
    results: dict[str, TestStatus] = {}
    seen: Counter[str] = Counter()
    for suite in report.get("testResults", []):
        file = _test_file(suite.get("name") or suite.get("testFilePath") or "")
        assertions = suite.get("assertionResults") or []
        if not assertions and suite.get("status") == "failed":
            _record(results, file, TestStatus.ERROR)  # the file failed to load: no test ran
        for case in assertions:
            titles = [*(case.get("ancestorTitles") or []), case.get("title", "")]
            test = f"{file}::{' > '.join(map(_js_string, titles))}"
            seen[test] += 1
            _record(results, test if seen[test] == 1 else f"{test} ({seen[test]})",
                    statuses.get(case.get("status"), TestStatus.ERROR))
    return results


def parse_jest(log: str) -> dict[str, TestStatus]:
    """`jest --json` (vitest's `--reporter=json` writes the same shape). A test named as one before
    it (the same titles, or files of one name in two directories) is `id (2)`, `id (3)`, in the
    report's order. Each report (one per invocation: a script may run some files under other
    settings, then the whole suite) is read on its own; a test in several keeps its worst status."""
    results: dict[str, TestStatus] = {}
    for report in _json_reports(log):
        for test, status in _jest_report(report).items():
            _record(results, test, status)
    return results


def tally_jest(log: str) -> Counts | None:
    """Where there are several reports, each one's tests counted in it, summed as the reports' own
    counts are (None for one report: the parse counts)."""
    reports = list(_json_reports(log))
    if len(reports) < 2:
        return None
    return _counted([status for report in reports for status in _jest_report(report).values()])


def summary_jest(log: str) -> Counts | None:
    """numTotalTests, numPassedTests, numFailedTests, numPendingTests (+ numTodoTests), summed over
    the reports."""
    reports = list(_json_reports(log))
    if not reports:
        return None
    total = Counts(total=0, passed=0, failed=0, skipped=0)
    for report in reports:
        failed_files = sum(1 for suite in report.get("testResults", [])
                           if suite.get("status") == "failed" and not suite.get("assertionResults"))
        total = Counts(total=(total.total or 0) + report.get("numTotalTests", 0) + failed_files,
                       passed=(total.passed or 0) + report.get("numPassedTests", 0),
                       failed=(total.failed or 0) + report.get("numFailedTests", 0) + failed_files,
                       skipped=(total.skipped or 0) + report.get("numPendingTests", 0) + report.get("numTodoTests", 0))
    return total


# --- mocha JSON reporter ------------------------------------------------------------------------

def _mocha_id(case: dict[str, Any]) -> str:
    """`file::fullTitle` (mocha joins the suite and test titles with spaces, as `--grep` matches)."""
    return f"{_test_file(case.get('file') or '')}::{case.get('fullTitle', '')}"


def parse_mocha(log: str) -> dict[str, TestStatus]:
    """`mocha --reporter json`, read from its `tests` list in run order: a test that failed has an
    `err`, one that never ran (pending) no `duration`; a test named as one before it in its file is
    `id (2)`, `id (3)`, as jest's are. A failed hook (`"before all" hook for "x"`) is an ERROR of
    its own: the tests it stopped never ran and are not reported."""
    report = _json_report(log, "stats")
    if report is None:
        return {}
    results: dict[str, TestStatus] = {}
    seen: Counter[str] = Counter()
    for case in report.get("tests") or []:
        test = _mocha_id(case)
        seen[test] += 1
        status = TestStatus.FAILED if case.get("err") else \
            TestStatus.PASSED if "duration" in case else TestStatus.SKIPPED
        _record(results, test if seen[test] == 1 else f"{test} ({seen[test]})", status)
    tests = {_mocha_id(case) for case in report.get("tests") or []}
    for case in report.get("failures") or []:
        if _mocha_id(case) not in tests:
            _record(results, _mocha_id(case), TestStatus.ERROR)
    return results


def summary_mocha(log: str) -> Counts | None:
    """The report's `stats` (tests, passes, failures, pending); a failed hook counts as a failure
    and is no test, so it is added to the total."""
    report = _json_report(log, "stats")
    if report is None:
        return None
    stats = report["stats"]
    tests = {_mocha_id(case) for case in report.get("tests") or []}
    hooks = sum(1 for case in report.get("failures") or [] if _mocha_id(case) not in tests)
    return Counts(total=stats.get("tests", 0) + hooks, passed=stats.get("passes", 0),
                  failed=stats.get("failures", 0), skipped=stats.get("pending", 0))


# --- uvu ----------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_UVU_FILE = re.compile(r"^(\S+\.[cm]?[jt]sx?)$")
_UVU_SUITE = re.compile(r"^(?: (.+?)  )?(?:[•✘] )*\s*\((\d+) / (\d+)\)$")
_UVU_COUNT = re.compile(r"^(Total|Passed|Skipped):\s+(\d+)$")


def _uvu_suites(log: str) -> Iterator[tuple[str, int, int]]:
    """(id, passed, run) of every suite line "[ Name ] • ✘ •  (2 / 3)" (skipped tests are not run)."""
    file = ""
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if match := _UVU_FILE.match(line):
            file = match.group(1)
        elif match := _UVU_SUITE.match(line):
            name = " > ".join(part for part in (file, match.group(1)) if part) or "(default suite)"
            yield name, int(match.group(2)), int(match.group(3))


def parse_uvu(log: str) -> dict[str, TestStatus]:
    """uvu's default reporter, whose ids are suites (`file > Suite`, or the file for its default
    suite): it prints a dot per passing test and names only the failing ones, so a passing test
    has no name to go by. A suite passes when all its tests did, fails when one failed (they are
    named in its FAIL lines in the log), and is skipped when it ran none."""
    results: dict[str, TestStatus] = {}
    for suite, passed, run in _uvu_suites(log):
        status = TestStatus.SKIPPED if run == 0 else TestStatus.PASSED if passed == run else TestStatus.FAILED
        _record(results, suite, status)
    return results


def tally_uvu(log: str) -> Counts:
    """The tests uvu's suite lines account for, to set against its closing Total/Passed."""
    suites = list(_uvu_suites(log))
    total, passed = sum(s[2] for s in suites), sum(s[1] for s in suites)
    return Counts(total=total, passed=passed, failed=total - passed)


def summary_uvu(log: str) -> Counts | None:
    """"Total: 6 / Passed: 4 / Skipped: 1" (Total leaves the skipped tests out)."""
    found = _count_lines(_ANSI.sub("", log), _UVU_COUNT)
    if "Total" not in found:
        return None
    return Counts(total=found["Total"], passed=found.get("Passed", 0), failed=found["Total"] - found.get("Passed", 0))


# --- cargo test (libtest) -----------------------------------------------------------------------

_CARGO_RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+) \((?:.*/)?([^/)]+?)(?:-[0-9a-f]{8,})?(?:\.exe)?\)")
_CARGO_RUNNING_OLD = re.compile(r"^\s*Running (?:\S*/)?([^/\s]+?)(?:-[0-9a-f]{8,})?(?:\.exe)?$")
"""Before cargo 1.58 (bullseye's 1.48): "Running target/debug/deps/calc-0a1b2c3d", no source file."""
_CARGO_DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)")
_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)(?:,.*)?$")
_CARGO_RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured")


def parse_cargo(log: str) -> dict[str, TestStatus]:
    """`cargo test` output; ids are `binary::test path` so workspace crates do not clash. A bin
    target named as its crate's lib gets `binary (src/main.rs)` (old cargo, which does not name the
    file: `binary (2)`)."""
    statuses = {"ok": TestStatus.PASSED, "FAILED": TestStatus.FAILED, "ignored": TestStatus.SKIPPED}
    results: dict[str, TestStatus] = {}
    binary = ""
    seen: dict[str, list[str]] = {}  # binary -> the sources its runs came from
    for line in log.splitlines():
        if match := _CARGO_RUNNING.match(line) or _CARGO_RUNNING_OLD.match(line):
            name, source = (match.group(2), match.group(1)) if match.re is _CARGO_RUNNING else (match.group(1), "")
            sources = seen.setdefault(name, [])
            sources.append(source)
            clash = len(sources) > 1 and not (source and source == sources[0])
            binary = f"{name} ({source or len(sources)})" if clash else name
        elif match := _CARGO_DOCTESTS.match(line):
            binary = f"{match.group(1)} (doc)"
        elif match := _CARGO_TEST.match(line.strip()):
            name = re.sub(r" - should panic(?: with .*)?$", "", match.group(1))
            _record(results, f"{binary}::{name}" if binary else name, statuses[match.group(2)])
    return results


def summary_cargo(log: str) -> Counts | None:
    """Sum of the "test result:" line of every test binary."""
    totals = [0, 0, 0]
    seen = False
    for line in log.splitlines():
        if match := _CARGO_RESULT.match(line.strip()):
            seen = True
            for i in range(3):
                totals[i] += int(match.group(i + 1))
    if not seen:
        return None
    return Counts(total=sum(totals), passed=totals[0], failed=totals[1], skipped=totals[2])


# --- ctest --------------------------------------------------------------------------------------

_CTEST_LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (.+?) \.+\s*(?:\*\*\*)?(.+?)\s+[\d.]+ sec$")
_CTEST_SUMMARY = re.compile(r"^\d+% tests passed, (\d+) tests? failed out of (\d+)$")
_CTEST_DISABLED = re.compile(r"^\s*\d+ - .+ \(Disabled\)$")


def _ctest_status(text: str) -> TestStatus:
    if text == "Passed":
        return TestStatus.PASSED
    if text == "Skipped" or text.startswith("Not Run (Disabled)"):
        return TestStatus.SKIPPED
    if text.startswith("Not Run"):
        return TestStatus.ERROR  # the test executable is missing
    return TestStatus.FAILED  # Failed, Timeout, Exception: ...


_CTEST_OUTPUT = re.compile(r"^(\d+): (.*)$")
"""A line a test printed, as `ctest -V` shows it: the test's number, then the line."""
_CTEST_NUMBER = re.compile(r"^\s*\d+/\d+ Test\s+#(\d+): ")
_GTEST_CASE = re.compile(r"^\[\s*(OK|FAILED|SKIPPED)\s*\] (\S+\.\S+) \(\d+ ms\)$")
"""googletest's line closing one test: "[       OK ] Suite.Name (0 ms)"."""
_GTEST_STATUS = {"OK": TestStatus.PASSED, "FAILED": TestStatus.FAILED, "SKIPPED": TestStatus.SKIPPED}


_MARKED_CASE = re.compile(r"^\[\s*(pass|passed|ok|fail|failed|skip|skipped)\s*\]:?\s+(\S.*?)\s*$", re.IGNORECASE)
"""A hand-written harness's line: a status word in brackets, then what was checked ("[pass] Query int")."""
_MARKED_STATUS = {"pass": TestStatus.PASSED, "passed": TestStatus.PASSED, "ok": TestStatus.PASSED,
                  "fail": TestStatus.FAILED, "failed": TestStatus.FAILED,
                  "skip": TestStatus.SKIPPED, "skipped": TestStatus.SKIPPED}


def _cases_within(output: list[str]) -> dict[str, TestStatus]:
    """The tests one ctest test ran inside it, where its runner names them (a ctest test is often a
    whole suite's runner: one executable per suite), in the first of these forms its output has:
    googletest's closing lines ("[       OK ] Suite.Name (0 ms)", also cmocka's and utest.h's), TAP
    points, automake's "PASS: name", a status word in brackets before a name ("[pass] name")."""
    readers: list[Callable[[list[str]], dict[str, TestStatus]]] = [
        lambda lines: _marked(lines, _GTEST_CASE, lambda m: (m.group(2), _GTEST_STATUS[m.group(1)])),
        lambda lines: parse_tap("\n".join(lines)),
        lambda lines: _marked(lines, _AUTOMAKE_LINE, lambda m: (m.group(2), _AUTOMAKE_STATUS[m.group(1)])),
        lambda lines: _marked(lines, _MARKED_CASE, lambda m: (m.group(2), _MARKED_STATUS[m.group(1).lower()])),
    ]
    for read in readers:
        if found := read(output):
            return found
    return {}


def _marked(lines: list[str], pattern: re.Pattern[str],
            case: Callable[[re.Match[str]], tuple[str, TestStatus]]) -> dict[str, TestStatus]:
    results: dict[str, TestStatus] = {}
    for line in lines:
        if match := pattern.match(line.strip()):
            _record(results, *case(match))
    return results


def _ctest_results(log: str) -> tuple[dict[str, TestStatus], dict[str, TestStatus]]:
    """(ctest's tests, the tests inside them as `ctest test::inner test`). Inside tests are read
    from `ctest -V`, which prints every test's output with its number; without it there are none."""
    results: dict[str, TestStatus] = {}
    output: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for line in log.splitlines():
        if match := _CTEST_LINE.match(line):
            _record(results, match.group(1), _ctest_status(match.group(2).strip()))
            if number := _CTEST_NUMBER.match(line):
                names[number.group(1)] = match.group(1)
        elif match := _CTEST_OUTPUT.match(line):
            output.setdefault(match.group(1), []).append(match.group(2))
    within: dict[str, TestStatus] = {}
    for number, lines in output.items():
        if number in names:
            for case, status in _cases_within(lines).items():
                _record(within, f"{names[number]}::{case}", status)
    return results, within


def parse_ctest(log: str) -> dict[str, TestStatus]:
    """ctest's "1/4 Test #1: name ....   Passed  0.01 sec" lines, and with `ctest -V` the tests each
    one ran inside it (`name::Suite.Case` for googletest, `name::title` for TAP): the ctest test
    keeps its own status, so a benchmark naming it still finds it."""
    results, within = _ctest_results(log)
    return {**results, **within}


def ctest_own_ids(log: str) -> set[str]:
    """The ids ctest's summary counts: its own tests, not those inside them."""
    return set(_ctest_results(log)[0])


def summary_ctest(log: str) -> Counts | None:
    """"67% tests passed, 1 tests failed out of 3": the total leaves out disabled tests and counts
    skipped ones as passed, so only the total (plus disabled) and the failures are comparable."""
    lines = log.splitlines()
    for line in reversed(lines):
        if match := _CTEST_SUMMARY.match(line.strip()):
            disabled = sum(1 for other in lines if _CTEST_DISABLED.match(other))
            return Counts(total=int(match.group(2)) + disabled, failed=int(match.group(1)))
    return None


# --- TAP (node --test, node-tap, ava --tap, make check harnesses) --------------------------------

_TAP_POINT = re.compile(r"^( *)(not ok|ok)\b\s*\d*\s*(?:-\s*)?(.*)$")
_TAP_SUBTEST = re.compile(r"^( *)# Subtest: (.*)$")
_TAP_DIRECTIVE = re.compile(r"\s#\s*(SKIP|TODO|time=)", re.IGNORECASE)
_TAP_PLAN = re.compile(r"^1\.\.(\d+)")
_TAP_COUNT = re.compile(r"^# (tests|pass|fail|cancelled|skipped|skip|todo) +(\d+)$")
_NODE_TAP_SUMMARY = re.compile(r"^# \{ total: (\d+)((?:, \w+: \d+)*) \}$")


def _tap_unescape(text: str) -> str:
    return text.replace("\\#", "#").replace("\\\\", "\\")


def _count_lines(log: str, pattern: re.Pattern[str]) -> dict[str, int]:
    """"# name N" lines of a closing block, last one wins."""
    found: dict[str, int] = {}
    for line in log.splitlines():
        if match := pattern.match(line.strip()):
            found[match.group(1)] = int(match.group(2))
    return found


class _TapPoint(BaseModel):
    """One `ok` / `not ok` line and where it sits."""

    index: int = -1
    """Line number in the log (-1 until the point of a `# Subtest:` block is read)."""
    indent: int
    """Spaces before it: 4 more per subtest level."""
    path: list[str] = []
    """Names of the enclosing subtests, outermost first, then its own."""
    status: TestStatus = TestStatus.PASSED
    """PASSED, FAILED, or SKIPPED for a `# SKIP` / `# TODO` directive."""
    subtest: bool = False
    """It closes a `# Subtest:` block (it has points of its own above it)."""
    parent: int = -1
    """Index in the point list of the subtest it lies in (-1: the stream's top level)."""
    has_subtests: bool = False
    """Some `# Subtest:` block lies directly in it."""


def _tap_points(lines: list[str]) -> list[_TapPoint]:
    """Every point with its nesting. A description's ` # SKIP` / ` # TODO` is a directive and
    node-tap's ` # time=` a comment; any other `#` (escaped or not: ava does not escape) is part
    of the name. A block the stream never closed (a crash) keeps index -1: it has no result."""
    points: list[_TapPoint] = []
    blocks: list[tuple[int, str, int]] = []  # open `# Subtest:` blocks: (indent, name, slot in `points`)
    for index, line in enumerate(lines):
        if match := _TAP_SUBTEST.match(line):
            indent = len(match.group(1))
            while blocks and blocks[-1][0] >= indent:
                blocks.pop()
            parent = blocks[-1][2] if blocks else -1
            if parent >= 0:
                points[parent].has_subtests = True
            points.append(_TapPoint(indent=indent, subtest=True, parent=parent))
            blocks.append((indent, _tap_unescape(match.group(2)), len(points) - 1))
            continue
        match = _TAP_POINT.match(line)
        if not match:
            continue
        indent, description = len(match.group(1)), match.group(3)
        directive = _TAP_DIRECTIVE.search(description)
        name = _tap_unescape(description[:directive.start()] if directive else description).strip()
        if directive and directive.group(1).upper() in ("SKIP", "TODO"):
            status = TestStatus.SKIPPED
        else:
            status = TestStatus.PASSED if match.group(2) == "ok" else TestStatus.FAILED
        while blocks and blocks[-1][0] > indent:
            blocks.pop()
        if blocks and blocks[-1][0] == indent:  # the point that closes a `# Subtest:` block
            _, header, slot = blocks.pop()
            points[slot].index, points[slot].status = index, status
            points[slot].path = [*(b[1] for b in blocks), name or header]
            continue
        points.append(_TapPoint(index=index, indent=indent, status=status, parent=blocks[-1][2] if blocks else -1,
                                path=[*(b[1] for b in blocks), name]))
    return points


def _tap_is_suite(lines: list[str], point: _TapPoint) -> bool:
    """node marks `describe` blocks with `type: 'suite'` in the YAML block after the point."""
    if point.index + 1 >= len(lines) or lines[point.index + 1].strip() != "---":
        return False
    for line in lines[point.index + 2:]:
        if line.strip() == "..." or len(line) - len(line.lstrip(" ")) <= point.indent:
            return False
        if line.strip() == "type: 'suite'":
            return True
    return False


def parse_tap(log: str) -> dict[str, TestStatus]:
    """TAP 13/14 with indented subtests, every point a test (node's test runner, ava --tap, make
    check harnesses); ids join the enclosing `# Subtest:` names with " > ". Suites (node's
    `describe`) are containers, not tests."""
    lines = log.splitlines()
    results: dict[str, TestStatus] = {}
    for point in _tap_points(lines):
        if point.index >= 0 and not _tap_is_suite(lines, point):
            _record(results, " > ".join(point.path), point.status)
    return results


def tally_tap(log: str) -> Counts:
    """What node's summary counts: every test point, also those whose names another shares (its
    TAP names no file: `test('adds')` in two files gives one id, with the worse status)."""
    lines = log.splitlines()
    return _counted([p.status for p in _tap_points(lines) if p.index >= 0 and not _tap_is_suite(lines, p)])


def summary_tap(log: str) -> Counts | None:
    """node's closing "# tests 7 / # pass 4 / # fail 1 / # cancelled 0 / # skipped 1 / # todo 1";
    from another producer (whose "# tests" may count assertions or leave skips out) only the plan
    `1..N` of a stream without subtests."""
    found = _count_lines(log, _TAP_COUNT)
    if "tests" in found and "cancelled" in found:
        return Counts(total=found["tests"], passed=found.get("pass"),
                      failed=found.get("fail", 0) + found["cancelled"],
                      skipped=found.get("skipped", 0) + found.get("todo", 0))
    lines = log.splitlines()
    plans = [int(m.group(1)) for line in lines if (m := _TAP_PLAN.match(line))]
    nested = any(_TAP_SUBTEST.match(line) or (_TAP_POINT.match(line) and line.startswith(" ")) for line in lines)
    return Counts(total=plans[-1]) if plans and not nested else None


def summary_ava(log: str) -> Counts | None:
    """ava's (supertap's) closing block: the plan `1..N` counts every test, todo ones too; its
    "# tests" leaves the todo ones out and its "# fail" counts them, so only the plan and "# pass"
    compare."""
    plans = [int(m.group(1)) for line in log.splitlines() if (m := _TAP_PLAN.match(line))]
    if not plans:
        return None
    return Counts(total=plans[-1], passed=_count_lines(log, _TAP_COUNT).get("pass", 0))


def parse_node_tap(log: str) -> dict[str, TestStatus]:
    """node-tap (`tap --reporter=tap`), where assertions are points too: a test is a subtest with no
    subtest in it (its assertions are not tests), or a point (an assertion, a skipped or todo
    subtest) lying among subtests, as tap counts them; ids are the file then the subtest names."""
    points = _tap_points(log.splitlines())
    results: dict[str, TestStatus] = {}
    for point in points:
        among_subtests = point.subtest or point.parent < 0 or points[point.parent].has_subtests
        if point.index >= 0 and among_subtests and not point.has_subtests:
            _record(results, " > ".join(point.path), point.status)
    return results


def tally_node_tap(log: str) -> Counts:
    """What tap's summary counts: the points that close no subtest (assertions, skipped and todo
    subtests), wherever they lie."""
    return _counted([p.status for p in _tap_points(log.splitlines()) if p.index >= 0 and not p.subtest])


def summary_node_tap(log: str) -> Counts | None:
    """tap's closing "# { total: 8, pass: 5, fail: 1, todo: 1, skip: 1 }" (it counts assertions)."""
    for line in reversed(log.splitlines()):
        if match := _NODE_TAP_SUMMARY.match(line.strip()):
            found = {k: int(v) for k, v in re.findall(r"(\w+): (\d+)", match.group(2))}
            return Counts(total=int(match.group(1)), passed=found.get("pass", 0), failed=found.get("fail", 0),
                          skipped=found.get("skip", 0) + found.get("todo", 0))
    return None


_TAPE_TEST = re.compile(r"^# (?:(SKIP|TODO) )?(.+)$")


def parse_tape(log: str) -> dict[str, TestStatus]:
    """tape, whose points are assertions under a "# name" comment per test (also for subtests):
    a test fails when one of its assertions did, is skipped when marked `# SKIP` or `# TODO`, and
    passes otherwise (with no assertion too). The comments after the plan are the summary."""
    results: dict[str, TestStatus] = {}
    test = ""
    for line in log.splitlines():
        if _TAP_PLAN.match(line):
            break
        if match := _TAPE_TEST.match(line):
            test = match.group(2).strip()
            _record(results, test, TestStatus.SKIPPED if match.group(1) else TestStatus.PASSED)
        elif test and (match := _TAP_POINT.match(line)) and not match.group(1) and match.group(2) == "not ok" \
                and not _TAP_DIRECTIVE.search(match.group(3)) and results[test] != TestStatus.SKIPPED:
            _record(results, test, TestStatus.FAILED)
    return results


def tally_tape(log: str) -> Counts:
    """What tape's summary counts: assertions, a todo one among the passes."""
    points = [p for p in _tap_points(log.splitlines()) if p.index >= 0]
    failed = sum(1 for p in points if p.status == TestStatus.FAILED)
    return Counts(total=len(points), passed=len(points) - failed, failed=failed)


def summary_tape(log: str) -> Counts | None:
    """tape's closing "# tests 5 / # pass 4 / # fail 1" (assertions)."""
    found = _count_lines(log, _TAP_COUNT)
    if "tests" not in found:
        return None
    return Counts(total=found["tests"], passed=found.get("pass", 0), failed=found.get("fail", 0))


# --- automake test harness (`make check`) -------------------------------------------------------

_AUTOMAKE_LINE = re.compile(r"^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): (.+)$")
_AUTOMAKE_COUNT = re.compile(r"^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):\s+(\d+)$")
_AUTOMAKE_STATUS = {"PASS": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "SKIP": TestStatus.SKIPPED,
                    "XFAIL": TestStatus.XFAIL, "XPASS": TestStatus.XPASS, "ERROR": TestStatus.ERROR}


def parse_automake(log: str) -> dict[str, TestStatus]:
    """automake's parallel harness: "PASS: test_name" lines, one per test (or TAP point)."""
    results: dict[str, TestStatus] = {}
    for line in log.splitlines():
        if match := _AUTOMAKE_LINE.match(line.strip()):
            _record(results, match.group(2), _AUTOMAKE_STATUS[match.group(1)])
    return results


def summary_automake(log: str) -> Counts | None:
    """The "# TOTAL: 3 / # PASS: 2 / ..." block."""
    found = _count_lines(log, _AUTOMAKE_COUNT)
    if "TOTAL" not in found:
        return None
    return Counts(total=found["TOTAL"], passed=found.get("PASS", 0), failed=found.get("FAIL", 0),
                  errors=found.get("ERROR", 0), skipped=found.get("SKIP", 0),
                  xfailed=found.get("XFAIL", 0), xpassed=found.get("XPASS", 0))


# --- a Makefile's test target -------------------------------------------------------------------

def parse_make(log: str) -> dict[str, TestStatus]:
    """`make test` of a plain Makefile runs what the project wrote: TAP streams (`prove`, programs
    that print TAP) and automake-style "PASS: name" lines are both read. A run that prints neither
    is one test, the command itself (`testrun.run.WHOLE_SUITE`)."""
    results = parse_tap(log)
    for test, status in parse_automake(log).items():
        _record(results, test, status)
    return results


def summary_make(log: str) -> Counts | None:
    """automake's closing block where there is one, else TAP's plan when only TAP was printed."""
    if (found := summary_automake(log)) is not None:
        return found
    return summary_tap(log) if not parse_automake(log) else None


# --- unittest (-v; Django's runner and other scripts built on it print the same) ----------------

UNITTEST_TEST = re.compile(r"^(\S+) \(([\w.]+?)(?:\.\1)?\)(?=\s|$)")
"""A test's line: its name (any characters but spaces: generated tests have `test_HTML_(Simple)`;
a test module unittest could not import is named by its dotted name), then its class, which
Python 3.11+ ends with the name again (`(module.Class.name)`, read as `(module.Class)`)."""
_UNITTEST_OUTCOME = re.compile(r"(ok|FAIL|ERROR|skipped (?:'.*'|\".*\")|expected failure|unexpected success)$")
_UNITTEST_STATUS = {"ok": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                    "skipped": TestStatus.SKIPPED, "expected failure": TestStatus.XFAIL,
                    "unexpected success": TestStatus.XPASS}
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_CLOSING = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")
_UNITTEST_KEYS = {"failures": "failed", "errors": "errors", "skipped": "skipped",
                  "expected failures": "xfailed", "unexpected successes": "xpassed"}


def parse_unittest(log: str) -> dict[str, TestStatus]:
    """Read `test_a (module.Class) ... ok` lines as `test_a (module.Class)` (SWE-bench's form; Python
    3.11+ prints `(module.Class.test_a)`). A test's first docstring line, or its own output, may
    stand between its name and the outcome, on the same line or the next ones."""
    results: dict[str, TestStatus] = {}
    pending = ""
    for raw in log.splitlines():
        line = raw.rstrip()
        if match := UNITTEST_TEST.match(line):
            pending = f"{match[1]} ({match[2]})"
        # the outcome ends the line that holds " ... " (the test's output may run into it), or stands alone
        outcome = _UNITTEST_OUTCOME.search(line.split(" ... ", 1)[1]) if " ... " in line \
            else _UNITTEST_OUTCOME.fullmatch(line.strip())
        if pending and outcome:
            word = outcome.group(1)
            _record(results, pending, _UNITTEST_STATUS["skipped" if word.startswith("skipped") else word])
            pending = ""
    return results


def summary_unittest(log: str) -> Counts | None:
    """"Ran 5 tests in 0.01s" and the closing "OK (skipped=1)" / "FAILED (failures=1, errors=1)"."""
    total = None
    counts: dict[str, int] = {}
    for raw in log.splitlines():
        line = raw.strip()
        if match := _UNITTEST_RAN.match(line):
            total, counts = int(match.group(1)), {}
        elif total is not None and (match := _UNITTEST_CLOSING.match(line)):
            for part in (match.group(2) or "").split(","):
                key, _, value = part.strip().partition("=")
                if key in _UNITTEST_KEYS and value.isdigit():
                    counts[_UNITTEST_KEYS[key]] = int(value)
    if total is None:
        return None
    found = {field: counts.get(field, 0) for field in _UNITTEST_KEYS.values()}
    return Counts(total=total, passed=total - sum(found.values()), **found)


# --- registry and checks ------------------------------------------------------------------------

PARSERS: dict[str, LogParser] = {
    "pytest": parse_pytest,
    "pytest-junit": parse_pytest_junit,
    "surefire": parse_surefire,
    "gotest": parse_go_test,
    "jest": parse_jest,
    "vitest": parse_jest,
    "mocha": parse_mocha,
    "ava": parse_tap,
    "node-tap": parse_node_tap,
    "tape": parse_tape,
    "uvu": parse_uvu,
    "cargo": parse_cargo,
    "ctest": parse_ctest,
    "tap": parse_tap,
    "automake": parse_automake,
    "make": parse_make,
    "unittest": parse_unittest,
}

SUMMARIES: dict[str, Callable[[str], Counts | None]] = {
    "pytest": summary_pytest,
    "pytest-junit": summary_junit,
    "surefire": summary_junit,
    "gotest": summary_go_test,
    "jest": summary_jest,
    "vitest": summary_jest,
    "mocha": summary_mocha,
    "ava": summary_ava,
    "node-tap": summary_node_tap,
    "tape": summary_tape,
    "uvu": summary_uvu,
    "cargo": summary_cargo,
    "ctest": summary_ctest,
    "tap": summary_tap,
    "automake": summary_automake,
    "make": summary_make,
    "unittest": summary_unittest,
}
"""Readers of each framework's own totals."""

TALLIES: dict[str, Callable[[str], Counts | None]] = {"jest": tally_jest, "vitest": tally_jest, "uvu": tally_uvu,
                                                     "node-tap": tally_node_tap, "tape": tally_tape, "tap": tally_tap}
"""For a parser whose ids are not what its framework counts (uvu's are suites, tap and tape count
assertions, node's TAP names tests without their files): what the log it parsed accounts for, set
against the summary instead of its ids."""

SUMMARIZED_IDS: dict[str, Callable[[str], set[str]]] = {"ctest": ctest_own_ids}
"""For a parser whose ids include tests its framework's summary does not count (ctest's, the tests
inside its own): the ids it counts, whose parsed statuses are set against the summary."""


class UnknownParserError(KeyError):
    """No parser is registered under the requested name."""


def _known(name: str) -> None:
    if name not in PARSERS:
        raise UnknownParserError(f"unknown log parser {name!r}; known: {', '.join(sorted(PARSERS))}")


def parse_log(name: str, log: str) -> dict[str, TestStatus]:
    """Parse `log` with the parser registered as `name`."""
    _known(name)
    return PARSERS[name](log)


def _differences(name: str, log: str, results: dict[str, TestStatus]) -> dict[str, tuple[int, int]]:
    """Field -> (summary's count, parsed count) for every count the summary states that the parse
    does not match; failures include errors when the framework does not count errors apart."""
    summary = SUMMARIES[name](log) if name in SUMMARIES else None
    if summary is None:
        return {}
    if name in SUMMARIZED_IDS:
        counted = SUMMARIZED_IDS[name](log)
        results = {test: status for test, status in results.items() if test in counted}
    got = ((TALLIES[name](log) if name in TALLIES else None) or counts_of(results)).model_dump()
    if summary.errors is None and got["errors"] is not None:
        got["failed"] += got["errors"]
    return {field: (value, got[field]) for field, value in summary.model_dump().items()
            if value is not None and got[field] is not None and value != got[field]}


_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def check_counts(name: str, log: str, results: dict[str, TestStatus], exit_code: int | None) -> list[str]:
    """Problems that make `results` doubtful; empty when parse, summary and exit code agree.

    Compares every count the framework's summary states with the parsed one, then the exit code:
    0 with failing tests, or non-zero with nothing failing, means some result was not read (or
    was forged). pytest counts a test that passed and then errored in teardown twice, unittest
    each failing subtest: such runs are flagged here, and only `check_summary`'s total is binding.
    """
    _known(name)
    problems = [f"{field}: summary says {said}, parsed {got}"
                for field, (said, got) in _differences(name, log, results).items()]
    failing = sum(1 for status in results.values() if status in _FAILING)
    if exit_code is None:
        problems.append("the test command did not finish (timeout or killed)")
    elif exit_code == 0 and failing:
        problems.append(f"exit code 0 but {failing} test(s) failed")
    elif exit_code != 0 and not failing:
        problems.append(f"exit code {exit_code} but no parsed test failed" +
                        ("" if results else " (no test was parsed)"))
    return problems


STRICT_COUNTS = frozenset({"gotest", "cargo", "ctest", "surefire"})
"""Runners whose summary counts each test once in each status: any count the parse does not
reproduce is binding, not only the total."""


def check_summary(name: str, log: str, results: dict[str, TestStatus]) -> None:
    """SummaryMismatchError when the framework's summary counts another number of tests than the
    parse read (for `STRICT_COUNTS` runners: any other count). The total is what every framework
    counts one per test; a split between statuses may count outcomes instead (see `check_counts`).
    A parser opts in by registering a summary reader in `SUMMARIES` (and a tally in `TALLIES`
    when its ids are not one per test)."""
    _known(name)
    found = _differences(name, log, results)
    if "total" in found or (found and name in STRICT_COUNTS):
        said, got = found.get("total", (len(results), len(results)))
        others = "; ".join(f"{f} {s} vs {g}" for f, (s, g) in found.items() if f != "total")
        raise SummaryMismatchError(f"the runner's own summary counts {said} tests, parser {name!r} read {got}"
                                   + (f" ({others})" if others else "") + ": per-test results would be guesses")
