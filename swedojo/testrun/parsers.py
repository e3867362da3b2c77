"""Test-log parsers: map a framework's output to test id -> status, and read its own summary.

`parse_log(name, log)` is the single entry point; each parser is registered by name in `PARSERS`
and the `EnvSpec.log_parser` field names the one to use. `SUMMARIES` holds, per parser, a reader of
the framework's own closing counts, and `check_counts` compares the two (and the exit code), so a
parser that misses tests, or a log with forged result lines, is noticed.

Test ids per framework: pytest node ids; `Class#method` for surefire; `package::Test/sub` for Go;
`binary::path` for cargo; the ctest name; `file::Suite > test` for jest and vitest (file is the
base name: absolute paths differ between machines); `Suite > test` for TAP; `test_a (module.Class)`
for unittest and the runners built on it.
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

LogParser = Callable[[str], dict[str, TestStatus]]

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
    tally = Counter(results.values())
    return Counts(
        total=len(results), passed=tally[TestStatus.PASSED], failed=tally[TestStatus.FAILED],
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

def _json_report(log: str) -> dict[str, Any] | None:
    """The reporter's JSON object, found among whatever else the command printed."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", log):
        try:
            value, _ = decoder.raw_decode(log, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "testResults" in value:
            return value
    return None


def parse_jest(log: str) -> dict[str, TestStatus]:
    """`jest --json` (vitest's `--reporter=json` writes the same shape)."""
    report = _json_report(log)
    if report is None:
        return {}
    statuses = {"passed": TestStatus.PASSED, "failed": TestStatus.FAILED, "pending": TestStatus.SKIPPED,
                "skipped": TestStatus.SKIPPED, "todo": TestStatus.SKIPPED, "disabled": TestStatus.SKIPPED}
    results: dict[str, TestStatus] = {}
    for suite in report.get("testResults", []):
        file = PurePosixPath(suite.get("name") or suite.get("testFilePath") or "").name
        assertions = suite.get("assertionResults") or []
        if not assertions and suite.get("status") == "failed":
            _record(results, file, TestStatus.ERROR)  # the file failed to load: no test ran
        for case in assertions:
            title = " > ".join([*case.get("ancestorTitles", []), case.get("title", "")])
            _record(results, f"{file}::{title}", statuses.get(case.get("status"), TestStatus.ERROR))
    return results


def summary_jest(log: str) -> Counts | None:
    """numTotalTests, numPassedTests, numFailedTests, numPendingTests (+ numTodoTests)."""
    report = _json_report(log)
    if report is None:
        return None
    failed_files = sum(1 for suite in report.get("testResults", [])
                       if suite.get("status") == "failed" and not suite.get("assertionResults"))
    return Counts(
        total=report.get("numTotalTests", 0) + failed_files,
        passed=report.get("numPassedTests", 0),
        failed=report.get("numFailedTests", 0) + failed_files,
        skipped=report.get("numPendingTests", 0) + report.get("numTodoTests", 0),
    )


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


def parse_ctest(log: str) -> dict[str, TestStatus]:
    """ctest's "1/4 Test #1: name ....   Passed  0.01 sec" lines."""
    results: dict[str, TestStatus] = {}
    for line in log.splitlines():
        if match := _CTEST_LINE.match(line):
            _record(results, match.group(1), _ctest_status(match.group(2).strip()))
    return results


def summary_ctest(log: str) -> Counts | None:
    """"67% tests passed, 1 tests failed out of 3": the total leaves out disabled tests and counts
    skipped ones as passed, so only the total (plus disabled) and the failures are comparable."""
    lines = log.splitlines()
    for line in reversed(lines):
        if match := _CTEST_SUMMARY.match(line.strip()):
            disabled = sum(1 for other in lines if _CTEST_DISABLED.match(other))
            return Counts(total=int(match.group(2)) + disabled, failed=int(match.group(1)))
    return None


# --- TAP (node --test, tape, make check harnesses) ---------------------------------------------

_TAP_POINT = re.compile(r"^( *)(not ok|ok)\b\s*\d*\s*(?:-\s*)?(.*)$")
_TAP_SUBTEST = re.compile(r"^( *)# Subtest: (.*)$")
_TAP_COUNT = re.compile(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$")


def _tap_unescape(text: str) -> str:
    return text.replace("\\#", "#").replace("\\\\", "\\")


def _count_lines(log: str, pattern: re.Pattern[str]) -> dict[str, int]:
    """"# name N" lines of a closing block, last one wins."""
    found: dict[str, int] = {}
    for line in log.splitlines():
        if match := pattern.match(line.strip()):
            found[match.group(1)] = int(match.group(2))
    return found


def _tap_is_suite(lines: list[str], index: int, indent: int) -> bool:
    """node marks `describe` blocks with `type: 'suite'` in the YAML block after the point."""
    if index + 1 >= len(lines) or lines[index + 1].strip() != "---":
        return False
    for line in lines[index + 2:]:
        if line.strip() == "..." or len(line) - len(line.lstrip(" ")) <= indent:
            return False
        if line.strip() == "type: 'suite'":
            return True
    return False


def parse_tap(log: str) -> dict[str, TestStatus]:
    """TAP 13/14 with indented subtests; ids join the enclosing `# Subtest:` names with " > ".

    Suites (node's `describe`) are containers, not tests; a `# SKIP` or `# TODO` directive makes
    the point skipped. An escaped "\\#" in a name is not a directive.
    """
    lines = log.splitlines()
    results: dict[str, TestStatus] = {}
    headers: list[tuple[int, str]] = []  # open "# Subtest:" names with their indent
    for index, line in enumerate(lines):
        if match := _TAP_SUBTEST.match(line):
            indent = len(match.group(1))
            headers = [h for h in headers if h[0] < indent] + [(indent, _tap_unescape(match.group(2)))]
            continue
        match = _TAP_POINT.match(line)
        if not match:
            continue
        indent, verdict = len(match.group(1)), match.group(2)
        name, directive = (re.split(r"\s+#\s*", match.group(3), maxsplit=1) + [""])[:2]
        headers = [h for h in headers if h[0] < indent]
        test = " > ".join([h[1] for h in headers] + [_tap_unescape(name)])
        if _tap_is_suite(lines, index, indent):
            continue
        if directive.split(" ", 1)[0].upper() in ("SKIP", "TODO"):
            _record(results, test, TestStatus.SKIPPED)
        else:
            _record(results, test, TestStatus.PASSED if verdict == "ok" else TestStatus.FAILED)
    return results


def summary_tap(log: str) -> Counts | None:
    """node's closing "# tests 7 / # pass 4 / # fail 1 / # cancelled 0 / # skipped 1 / # todo 1"."""
    found = _count_lines(log, _TAP_COUNT)
    if "tests" not in found:
        return None
    return Counts(total=found["tests"], passed=found.get("pass"),
                  failed=found.get("fail", 0) + found.get("cancelled", 0),
                  skipped=found.get("skipped", 0) + found.get("todo", 0))


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


# --- unittest (-v; Django's runner and other scripts built on it print the same) ----------------

_UNITTEST_TEST = re.compile(r"^(\w+) \(([\w.]+)\)")
_UNITTEST_OUTCOME = re.compile(r"(ok|FAIL|ERROR|skipped '.*'|expected failure|unexpected success)$")
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
        if match := _UNITTEST_TEST.match(line):
            name, dotted = match.groups()
            pending = f"{name} ({dotted.removesuffix('.' + name)})"
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
    "cargo": parse_cargo,
    "ctest": parse_ctest,
    "tap": parse_tap,
    "automake": parse_automake,
    "unittest": parse_unittest,
}

SUMMARIES: dict[str, Callable[[str], Counts | None]] = {
    "pytest": summary_pytest,
    "pytest-junit": summary_junit,
    "surefire": summary_junit,
    "gotest": summary_go_test,
    "jest": summary_jest,
    "vitest": summary_jest,
    "cargo": summary_cargo,
    "ctest": summary_ctest,
    "tap": summary_tap,
    "automake": summary_automake,
    "unittest": summary_unittest,
}
"""Readers of each framework's own totals."""


class UnknownParserError(KeyError):
    """No parser is registered under the requested name."""


def parse_log(name: str, log: str) -> dict[str, TestStatus]:
    """Parse `log` with the parser registered as `name`."""
    try:
        parser = PARSERS[name]
    except KeyError:
        raise UnknownParserError(f"unknown log parser {name!r}; known: {', '.join(sorted(PARSERS))}") from None
    return parser(log)


_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def summary_mismatches(name: str, log: str, results: dict[str, TestStatus]) -> list[str]:
    """Every count the framework's own summary states that `results` does not reproduce (failures
    include errors when the framework does not count errors apart); empty when all agree or the
    log has no summary."""
    if name not in PARSERS:
        raise UnknownParserError(f"unknown log parser {name!r}; known: {', '.join(sorted(PARSERS))}")
    summary = SUMMARIES[name](log) if name in SUMMARIES else None
    if summary is None:
        return []
    got = counts_of(results).model_dump()
    if summary.errors is None:
        got["failed"] += got["errors"]
    return [f"{field}: summary says {value}, parsed {got[field]}"
            for field, value in summary.model_dump().items() if value is not None and value != got[field]]


def check_counts(name: str, log: str, results: dict[str, TestStatus], exit_code: int | None) -> list[str]:
    """Problems that make `results` doubtful; empty when parse, summary and exit code agree.

    Compares every count the framework's summary states with the parsed one (failures include
    errors when the framework does not count errors apart), then the exit code: 0 with failing
    tests, or non-zero with nothing failing, means some result was not read (or was forged).
    pytest counts a test that passed and then errored in teardown twice; such a run is flagged.
    """
    problems = summary_mismatches(name, log, results)
    failing = sum(1 for status in results.values() if status in _FAILING)
    if exit_code is None:
        problems.append("the test command did not finish (timeout or killed)")
    elif exit_code == 0 and failing:
        problems.append(f"exit code 0 but {failing} test(s) failed")
    elif exit_code != 0 and not failing:
        problems.append(f"exit code {exit_code} but no parsed test failed" +
                        ("" if results else " (no test was parsed)"))
    return problems
