"""Every log parser on output its framework really printed, with the framework's own counts checked.

Real output is made here where the toolchain runs on this machine (pytest, cargo, cmake + ctest
with gcc, node's test runner, Maven with its local repository; mocha, ava, node-tap and uvu
installed from the npm registry once per session). Where it cannot, the input is a fixture: jest
and vitest JSON captured from real runs on this machine (jest 30.5, vitest 4.1; paths replaced by
/testbed, stack traces cut), `go test -json` and automake logs written from the formats documented
by cmd/test2json and the automake manual.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from taskrepo import write_tree
from toolchains import require_tools

from swedojo.schema import TestStatus
from swedojo.testrun.errors import SummaryMismatchError
from swedojo.testrun.parsers import (
    PARSERS,
    SUMMARIES,
    Counts,
    check_counts,
    check_summary,
    counts_of,
    parse_log,
)

FIXTURES = Path(__file__).parent / "fixtures"

P, F, S, E, XF = TestStatus.PASSED, TestStatus.FAILED, TestStatus.SKIPPED, TestStatus.ERROR, TestStatus.XFAIL


def run(argv: list[str], cwd: Path, timeout: float = 300) -> tuple[str, int]:
    """Output as a shell's `2>&1` gives it (cargo puts its "Running" lines on stderr)."""
    proc = subprocess.run(argv, check=False, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    return proc.stdout, proc.returncode


def needs(tool: str) -> pytest.MarkDecorator:
    return pytest.mark.tools(tool)


PYTEST_SUITE = {
    "tests/test_mix.py": """
import pytest

def test_ok(): pass
def test_bad(): assert 1 == 2
@pytest.mark.skip(reason="not now")
def test_skipped(): pass
@pytest.mark.xfail
def test_expected_failure(): assert 0
@pytest.mark.parametrize("word", ["a b", "c"])
def test_param(word): assert word
class TestGroup:
    def test_method(self): pass
@pytest.fixture
def broken():
    raise RuntimeError("setup")
def test_setup_error(broken): pass
""",
}
PYTEST_EXPECTED = {
    "tests/test_mix.py::test_ok": P, "tests/test_mix.py::test_bad": F, "tests/test_mix.py::test_skipped": S,
    "tests/test_mix.py::test_expected_failure": XF, "tests/test_mix.py::test_param[a b]": P,
    "tests/test_mix.py::test_param[c]": P, "tests/test_mix.py::TestGroup::test_method": P,
    "tests/test_mix.py::test_setup_error": E,
}


def test_pytest_text_and_junit(tmp_path: Path) -> None:
    write_tree(tmp_path, PYTEST_SUITE)
    junit = tmp_path / "report.xml"
    log, code = run([sys.executable, "-m", "pytest", "-rA", "-v", "-p", "no:cacheprovider",
                     "-o", "junit_family=xunit1", f"--junitxml={junit}", "tests"], tmp_path)
    assert code == 1
    assert parse_log("pytest", log) == PYTEST_EXPECTED
    assert check_counts("pytest", log, PYTEST_EXPECTED, code) == []
    xml = "noise before\n" + junit.read_text() + "\nnoise after"
    assert parse_log("pytest-junit", xml) == PYTEST_EXPECTED
    assert check_counts("pytest-junit", xml, PYTEST_EXPECTED, code) == []
    # A forged result line is not in the summary; a failing run cannot claim exit code 0.
    forged = log + "\nPASSED tests/test_mix.py::test_forged\n"
    assert any("passed" in p for p in check_counts("pytest", forged, parse_log("pytest", forged), code))
    assert check_counts("pytest", log, PYTEST_EXPECTED, 0) == ["exit code 0 but 2 test(s) failed"]
    passing = {"tests/test_mix.py::test_ok": P}
    assert "no parsed test failed" in check_counts("pytest-junit", "", passing, 1)[0]


@needs("cargo")
def test_cargo(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
        "src/lib.rs": """
/// ```
/// assert_eq!(calc::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    #[test] fn adds() { assert_eq!(super::add(2, 2), 4); }
    #[test] fn breaks() { assert_eq!(super::add(2, 2), 5); }
    #[test] #[ignore] fn slow() {}
    #[test] #[should_panic] fn panics() { panic!("expected"); }
}
""",
        "tests/api.rs": "#[test] fn public_api() { assert_eq!(calc::add(1, 1), 2); }\n",
        # the bin target has the lib's name, and a test of the same path
        "src/main.rs": "fn main() {}\n#[cfg(test)]\nmod tests {\n    #[test] fn adds() {}\n}\n",
    })
    log, code = run(["cargo", "test", "--offline", "--no-fail-fast"], tmp_path)
    results = parse_log("cargo", log)
    assert results == {"calc::tests::adds": P, "calc::tests::breaks": F, "calc::tests::slow": S,
                       "calc::tests::panics": P, "api::public_api": P, "calc (doc)::src/lib.rs - add (line 2)": P,
                       "calc (src/main.rs)::tests::adds": P}
    assert code != 0 and check_counts("cargo", log, results, code) == []


def test_cargo_before_1_58_names_no_source() -> None:
    """bullseye's cargo 1.48: "Running target/debug/deps/NAME-HASH"; a bin named as the lib comes second."""
    log = """     Running target/debug/deps/calc-cb7d05e3d3498d52

running 2 tests
test tests::adds ... ok
test tests::breaks ... FAILED

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out

     Running target/debug/deps/calc-d140f2ecb05eb156

running 1 test
test tests::adds ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out

     Running target/debug/deps/outside-0a1b2c3d4e5f6071

running 1 test
test from_outside ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out
"""
    results = parse_log("cargo", log)
    assert results == {"calc::tests::adds": P, "calc::tests::breaks": F, "calc (2)::tests::adds": P,
                       "outside::from_outside": P}
    assert check_counts("cargo", log, results, 101) == []


@needs("ctest")
@needs("gcc")
def test_ctest(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "CMakeLists.txt": """cmake_minimum_required(VERSION 3.13)
project(demo C)
enable_testing()
add_executable(pass pass.c)
add_executable(fail fail.c)
add_test(NAME math.add COMMAND pass)
add_test(NAME math.broken COMMAND fail)
add_test(NAME disabled COMMAND pass)
set_tests_properties(disabled PROPERTIES DISABLED TRUE)
add_test(NAME skipped COMMAND sh -c "exit 77")
set_tests_properties(skipped PROPERTIES SKIP_RETURN_CODE 77)
""",
        "pass.c": "int main(void) { return 0; }\n",
        "fail.c": "int main(void) { return 1; }\n",
    })
    _, code = run(["sh", "-c", "cmake -S . -B build && cmake --build build"], tmp_path)
    assert code == 0
    log, code = run(["ctest", "--output-on-failure"], tmp_path / "build")
    results = parse_log("ctest", log)
    assert results == {"math.add": P, "math.broken": F, "disabled": S, "skipped": S}
    assert check_counts("ctest", log, results, code) == []
    assert "failed: summary says 1, parsed 0" in check_counts("ctest", log, {**results, "math.broken": P}, code)


@needs("ctest")
@needs("gcc")
def test_ctest_verbose_reads_the_tests_inside_each_ctest_test(tmp_path: Path) -> None:
    """A project may register a whole suite as one ctest test (its runner executable): `ctest -V`
    shows each test's output, and the googletest, TAP or "[pass] name" lines in it are read as tests of their own
    (`ctest test::inner test`), beside the ctest test's own result. Without them a suite of hundreds
    is two results, and one failing case fails the whole suite."""
    write_tree(tmp_path, {
        "CMakeLists.txt": """cmake_minimum_required(VERSION 3.13)
project(demo C)
enable_testing()
add_executable(gtest_like gtest_like.c)
add_executable(tap_like tap_like.c)
add_executable(marked marked.c)
add_executable(plain plain.c)
add_test(NAME unit COMMAND gtest_like)
add_test(NAME suite COMMAND tap_like)
add_test(NAME marked COMMAND marked)
add_test(NAME plain COMMAND plain)
""",
        "gtest_like.c": r"""#include <stdio.h>
int main(void) {
  puts("[==========] Running 3 tests from 1 test suite.");
  puts("[ RUN      ] Math.Adds"); puts("[       OK ] Math.Adds (0 ms)");
  puts("[ RUN      ] Math.Breaks"); puts("[  FAILED  ] Math.Breaks (1 ms)");
  puts("[ RUN      ] Math.Later"); puts("[  SKIPPED ] Math.Later (0 ms)");
  puts("[  FAILED  ] 1 test, listed below:"); puts("[  FAILED  ] Math.Breaks");
  return 1;
}
""",
        "tap_like.c": r"""#include <stdio.h>
int main(void) {
  puts("1..3"); puts("ok 1 - platform_output"); puts("# some output"); puts("ok 2 - async");
  puts("ok 3 - udp_ipv6 # SKIP no IPv6 here");
  return 0;
}
""",
        "marked.c": r"""#include <stdio.h>
int main(void) {
  puts("Name of play (1): Hamlet"); puts("[pass] Query int"); puts("[fail] Query double [1.5][2]");
  puts("[pass] Query int"); return 0;
}
""",
        "plain.c": "int main(void) { return 0; }\n",
    })
    _, code = run(["sh", "-c", "cmake -S . -B build && cmake --build build"], tmp_path)
    assert code == 0
    log, code = run(["ctest", "-V"], tmp_path / "build")
    results = parse_log("ctest", log)
    assert results == {"unit": F, "suite": P, "marked": P, "plain": P,
                       "unit::Math.Adds": P, "unit::Math.Breaks": F, "unit::Math.Later": S,
                       "suite::platform_output": P, "suite::async": P, "suite::udp_ipv6": S,
                       "marked::Query int": P, "marked::Query double [1.5][2]": F}
    assert check_counts("ctest", log, results, code) == []  # ctest's summary counts its own four
    quiet, _ = run(["ctest", "--output-on-failure"], tmp_path / "build")
    assert parse_log("ctest", quiet) == {"unit": F, "suite": P, "marked": P, "plain": P}  # no output, none inside


@needs("node")
def test_node_test_runner_tap(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "test/a.test.js": """const test = require('node:test');
const assert = require('node:assert');
test('adds', () => assert.strictEqual(1 + 2, 3));
test('breaks', () => assert.strictEqual(1 + 2, 4));
test('skipped one', { skip: 'later' }, () => {});
test('todo one', { todo: true }, () => {});
test.describe('group', () => {
  test.it('inner ok', () => {});
  test.it('inner # hash', () => {});
});
""",
        "test/b.test.js": "require('node:test')('b works', () => {});\n",
        # the same names again: node's TAP names no file, so they share one id, which keeps the worst status
        "test/c.test.js": "const test = require('node:test');\ntest('adds', () => {});\n"
                          "test('b works', () => { throw new Error('here'); });\n",
    })
    log, code = run(["node", "--test", "--test-reporter=tap"], tmp_path)
    results = parse_log("tap", log)
    assert results == {"adds": P, "breaks": F, "skipped one": S, "todo one": S, "group > inner ok": P,
                       "group > inner # hash": P, "b works": F}
    assert code == 1 and check_counts("tap", log, results, code) == []
    check_summary("tap", log, results)  # 9 tests counted, 7 ids: the points account for the summary


@pytest.mark.slow
@needs("mvn")
def test_maven_surefire(tmp_path: Path) -> None:
    """Real `mvn -o test` with JUnit 5 from the local Maven repository (skipped if it is not there)."""
    write_tree(tmp_path, {
        "pom.xml": """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>demo</artifactId><version>1.0</version>
  <properties><maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <dependencies><dependency><groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter</artifactId>
    <version>5.10.2</version><scope>test</scope></dependency></dependencies>
  <build><plugins>
    <plugin><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version></plugin>
    <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.11.0</version></plugin>
    <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
  </plugins></build>
</project>
""",
        "src/main/java/demo/Calc.java": "package demo;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n",
        "src/test/java/demo/CalcTest.java": """package demo;
import org.junit.jupiter.api.*;
import static org.junit.jupiter.api.Assertions.*;
class CalcTest {
  @Test void adds() { assertEquals(3, Calc.add(1, 2)); }
  @Test void broken() { assertEquals(4, Calc.add(1, 2)); }
  @Test @Disabled("later") void skipped() {}
  @Test void crashes() { throw new IllegalStateException("boom"); }
}
""",
    })
    command = ("mvn -o -B -q test; status=$?; find . -path '*/surefire-reports/TEST-*.xml' -exec cat {} +; "
               "exit $status")
    log, code = run(["sh", "-c", command], tmp_path, timeout=600)
    if "<testsuite" not in log:
        pytest.skip(f"offline Maven could not run here: {log.strip().splitlines()[-1:]}")
    results = parse_log("surefire", log)
    assert results == {"demo.CalcTest#adds": P, "demo.CalcTest#broken": F, "demo.CalcTest#skipped": S,
                       "demo.CalcTest#crashes": E}
    assert code != 0 and check_counts("surefire", log, results, code) == []


@pytest.mark.parametrize("name", ["jest", "vitest"])
def test_jest_and_vitest_json(name: str) -> None:
    log = "> npm test\n" + (FIXTURES / f"{name}.json").read_text() + "\nTest run finished\n"
    results = parse_log(name, log)
    assert results == {"sum.test.js::sum > adds": P, "sum.test.js::sum > breaks": F,
                       "sum.test.js::sum > skipped": S, "sum.test.js::sum > later": S,
                       "sum.test.js::top level": P, "broken.test.js": E}
    assert check_counts(name, log, results, 1) == []
    assert any("passed" in p for p in check_counts(name, log, {**results, "extra::x": P}, 1))
    twice = log + "\n" + (FIXTURES / f"{name}.json").read_text()  # a script that runs the runner twice
    assert parse_log(name, twice) == results and check_counts(name, twice, results, 1) == []
    check_summary(name, twice, results)  # each report's tests counted in it, as the reports count them


def test_go_test_json() -> None:
    log = (FIXTURES / "gotest.jsonl").read_text()
    results = parse_log("gotest", log)
    assert results == {
        "example.com/calc::TestAdd": P, "example.com/calc::TestDiv": F, "example.com/calc::TestDiv/by_one": P,
        "example.com/calc::TestDiv/by_zero": F, "example.com/calc::TestSlow": S,
        "example.com/calc/strutil::TestReverse": P, "example.com/calc/broken": E,
    }
    # go's own verdict lines and failed packages: 6 verdicts and a package that did not build
    assert SUMMARIES["gotest"](log) == Counts(total=7, passed=3, failed=3, skipped=1)
    assert check_counts("gotest", log, results, 1) == []
    assert check_counts("gotest", log, results, 0) == ["exit code 0 but 3 test(s) failed"]
    missed = {k: v for k, v in results.items() if k != "example.com/calc::TestSlow"}
    with pytest.raises(SummaryMismatchError, match=r"counts 7 tests, parser 'gotest' read 6 \(skipped 1 vs 0\)"):
        check_summary("gotest", log, missed)
    relabelled = {**results, "example.com/calc::TestSlow": P}  # the total agrees; for go, every count binds
    with pytest.raises(SummaryMismatchError, match=r"passed 3 vs 4; skipped 1 vs 0"):
        check_summary("gotest", log, relabelled)


def test_go_build_failure_printed_outside_the_events() -> None:
    """Before Go 1.24, a package that does not build is only a plain line among the JSON events."""
    log = ('# example.com/m/bad\nbad/bad.go:3:1: syntax error\nFAIL\texample.com/m/bad [build failed]\n'
           '{"Action":"output","Package":"example.com/m","Test":"TestOk","Output":"--- PASS: TestOk (0.00s)\\n"}\n'
           '{"Action":"pass","Package":"example.com/m","Test":"TestOk"}\n')
    results = parse_log("gotest", log)
    assert results == {"example.com/m::TestOk": P, "example.com/m/bad": E}
    assert check_counts("gotest", log, results, 2) == []


UNITTEST_SUITE = {
    "tests/__init__.py": "",
    "tests/test_mix.py": """
import unittest

class Calc(unittest.TestCase):
    def test_ok(self):
        pass

    def test_documented(self):
        \"\"\"A docstring's first line is printed between the name and the outcome.\"\"\"

    def test_prints(self):
        print("noise from the test", end="")

    def test_bad(self):
        self.assertEqual(1, 2)

    def test_broken(self):
        raise RuntimeError("boom")

    @unittest.skip("not here")
    def test_skipped(self):
        pass

    @unittest.skip("the C library's not available")
    def test_skipped_quoted(self):  # unittest prints the reason's repr: in double quotes here
        pass

    @unittest.expectedFailure
    def test_known_bug(self):
        self.assertTrue(False)


# Generated tests, as a suite that makes one per data file names them: characters no identifier has.
setattr(Calc, "test_Inline_HTML_(Simple)", lambda self: None)
setattr(Calc, "test_Tabs-and-spaces", lambda self: None)
""",
}


def test_unittest_verbose(tmp_path: Path) -> None:
    write_tree(tmp_path, UNITTEST_SUITE)
    log, code = run([sys.executable, "-m", "unittest", "-v", "tests.test_mix"], tmp_path)
    assert code == 1
    results = parse_log("unittest", log)
    expected = {f"{name} (tests.test_mix.Calc)": status for name, status in [
        ("test_ok", P), ("test_documented", P), ("test_prints", P), ("test_bad", F), ("test_broken", E),
        ("test_skipped", S), ("test_skipped_quoted", S), ("test_known_bug", XF),
        ("test_Inline_HTML_(Simple)", P), ("test_Tabs-and-spaces", P)]}
    assert results == expected, log
    assert check_counts("unittest", log, results, code) == []
    assert check_counts("unittest", log + "\ntest_forged (tests.test_mix.Calc) ... ok\n",
                        {**results, "test_forged (tests.test_mix.Calc)": P}, code) != []


def test_automake_harness() -> None:
    log = """make  check-TESTS
PASS: tests/parse
FAIL: tests/format
SKIP: tests/network
XFAIL: tests/legacy
============================================================================
Testsuite summary for demo 1.0
============================================================================
# TOTAL: 4
# PASS:  1
# SKIP:  1
# XFAIL: 1
# FAIL:  1
# XPASS: 0
# ERROR: 0
"""
    results = parse_log("automake", log)
    assert results == {"tests/parse": P, "tests/format": F, "tests/network": S, "tests/legacy": XF}
    assert check_counts("automake", log, results, 2) == []


def test_make_reads_tap_and_automake_lines_alike() -> None:
    """`make test` of a plain Makefile runs what the project wrote: both forms are tests."""
    log = "cc -o pool pool.c\nPASS: testOrder\nFAIL: basic/version.sh\n1..2\nok 1 - first\nnot ok 2 - second\n"
    results = parse_log("make", log)
    assert results == {"testOrder": P, "basic/version.sh": F, "first": P, "second": F}
    assert check_counts("make", log, results, 2) == []
    tap = "1..3\nok 1 - a\nok 2 - b\n"
    with pytest.raises(SummaryMismatchError):  # TAP's plan binds when only TAP was printed
        check_summary("make", tap, parse_log("make", tap))


def test_every_parser_is_checked_and_counts_add_up() -> None:
    assert set(PARSERS) == {"pytest", "pytest-junit", "surefire", "gotest", "jest", "vitest", "mocha", "ava",
                            "node-tap", "tape", "uvu", "cargo", "ctest", "tap", "automake", "make", "unittest"}
    assert set(PARSERS) == set(SUMMARIES), "every parser is held to its runner's own summary"
    counts = counts_of(PYTEST_EXPECTED)
    assert (counts.total, counts.passed, counts.failed, counts.errors, counts.skipped, counts.xfailed) == \
        (8, 4, 1, 1, 1, 1)


# --- JavaScript runners, installed from the npm registry once per session -----------------------

JS_RUNNERS = {"mocha": "11", "ava": "6", "tap": "21", "uvu": "0.5", "tape": "5"}


@pytest.fixture(scope="session")
def js_project(tmp_path_factory: pytest.TempPathFactory, npm_cache: Path) -> Path:
    """A project with mocha, ava, node-tap and uvu installed; each test writes its files in a folder of it."""
    require_tools("npm")
    root = tmp_path_factory.mktemp("js-runners")
    (root / "package.json").write_text('{"name": "runners", "version": "1.0.0", "type": "commonjs"}\n')
    log, code = run(["npm", "install", "--no-audit", "--no-fund", f"--cache={npm_cache}",
                     *(f"{name}@{version}" for name, version in JS_RUNNERS.items())], root, timeout=600)
    assert code == 0, log
    return root


def js_run(project: Path, folder: str, files: dict[str, str], command: str) -> tuple[str, int]:
    write_tree(project / folder, files)
    return run(["sh", "-c", command], project)


def assert_checked(name: str, log: str, results: dict[str, TestStatus], code: int) -> None:
    """The runner's own summary agrees with the parse, and a forged test or a missed one is caught."""
    assert check_counts(name, log, results, code) == [], log
    check_summary(name, log, results)
    with pytest.raises(SummaryMismatchError, match=f"parser '{name}' read {len(results) - 1}"):
        check_summary(name, log, dict(list(results.items())[1:]))


def test_mocha_json(js_project: Path) -> None:
    log, code = js_run(js_project, "mocha", {"a.spec.js": """const assert = require('assert');
describe('math', () => {
  it('adds', () => assert.strictEqual(1 + 2, 3));
  it('breaks', () => assert.strictEqual(1 + 2, 4));
  it.skip('skipped', () => {});
  it('pending');
  describe('inner', () => { it('deep # hash', () => { console.log('{"noise": 1}'); }); });
});
describe('hooked', () => {
  before(() => { throw new Error('setup'); });
  it('never runs', () => {});
});
it('top level', () => {});
describe('twice', () => { it('same title', () => {}); });
describe('twice', () => { it('same title', () => { throw new Error('the second'); }); });
"""}, "npx mocha --reporter json mocha/a.spec.js")
    results = parse_log("mocha", log)
    assert results == {"a.spec.js::top level": P, "a.spec.js::math adds": P, "a.spec.js::math breaks": F,
                       "a.spec.js::math skipped": S, "a.spec.js::math pending": S,
                       "a.spec.js::math inner deep # hash": P,
                       'a.spec.js::hooked "before all" hook for "never runs"': E,
                       "a.spec.js::twice same title": P, "a.spec.js::twice same title (2)": F}
    assert code == 3  # mocha exits with the number of failures
    assert_checked("mocha", log, results, code)


def test_ava_tap(js_project: Path) -> None:
    log, code = js_run(js_project, "ava", {
        "a.test.js": """const test = require('ava');
test('adds', t => { t.is(1 + 2, 3); });
test('breaks', t => { t.is(1 + 2, 4); });
test.skip('skipped', t => { t.pass(); });
test.todo('later');
test('has # hash', t => { t.pass(); });
""",
        "b.test.js": "const test = require('ava');\ntest('b works', t => { t.pass(); });\n",
    }, "npx ava --tap 'ava/*.test.js'")
    results = parse_log("ava", log)
    assert results == {"a › adds": P, "a › breaks": F, "a › skipped": S, "a › later": S, "a › has # hash": P,
                       "b › b works": P}
    assert code == 1
    assert_checked("ava", log, results, code)
    assert check_summary("tap", log, results) is None  # ava's "# tests" is not node's: only a flat plan counts


def test_node_tap(js_project: Path) -> None:
    log, code = js_run(js_project, "nodetap", {
        "a.test.js": """const t = require('tap');
t.test('adds', t => { t.equal(1 + 2, 3); t.end(); });
t.test('breaks', t => { t.equal(1 + 2, 4, 'sum is four'); t.end(); });
t.test('skipped', { skip: 'later' }, t => { t.end(); });
t.test('todo one', { todo: true }, t => { t.end(); });
t.test('group', async t => { t.test('inner ok', async t => { t.pass('fine'); }); });
""",
        "c.test.js": """const t = require('tap');
t.ok(true, 'top assertion');
t.test('group', async t => { t.test('one', async t => { t.pass('x'); t.pass('y'); }); });
""",
    }, "npx tap --reporter=tap --disable-coverage nodetap/")
    results = parse_log("node-tap", log)
    assert results == {"nodetap/a.test.js > adds": P, "nodetap/a.test.js > breaks": F,
                       "nodetap/a.test.js > skipped": S, "nodetap/a.test.js > todo one": S,
                       "nodetap/a.test.js > group > inner ok": P, "nodetap/c.test.js > top assertion": P,
                       "nodetap/c.test.js > group > one": P}
    assert code == 1
    assert check_counts("node-tap", log, results, code) == [], log
    check_summary("node-tap", log, results)  # tap counts assertions: 8, one of them failed
    cut = log.replace("ok 1 - top assertion", "")  # a line lost
    with pytest.raises(SummaryMismatchError, match="summary counts 8 tests, parser 'node-tap' read 7"):
        check_summary("node-tap", cut, parse_log("node-tap", cut))


def test_tape(js_project: Path) -> None:
    """tape's points are assertions (its summary counts them); a test is the "# name" above them."""
    log, code = js_run(js_project, "tape", {"a.js": """const test = require('tape');
test('adds', t => { t.equal(1 + 2, 3); t.equal(2 + 2, 4); t.end(); });
test('breaks', t => { t.equal(1 + 2, 4); t.equal(1, 1); t.end(); });
test('skipped', { skip: true }, t => { t.end(); });
test('todo one', { todo: true }, t => { t.ok(false); t.end(); });
test('outer', t => { t.test('inner', st => { st.ok(true, 'fine'); st.end(); }); t.end(); });
"""}, "npx tape tape/a.js")
    results = parse_log("tape", log)
    assert results == {"adds": P, "breaks": F, "skipped": S, "todo one": S, "outer": P, "inner": P}
    assert code == 1 and check_counts("tape", log, results, code) == []
    check_summary("tape", log, results)
    cut = log.replace("ok 2 should be strictly equal", "")  # an assertion line lost
    with pytest.raises(SummaryMismatchError, match="summary counts 6 tests, parser 'tape' read 5"):
        check_summary("tape", cut, parse_log("tape", cut))


UVU_FILES = {
    "a.js": """const { test, suite } = require('uvu');
const assert = require('uvu/assert');
test('adds', () => { assert.is(1 + 2, 3); });
test('breaks', () => { assert.is(1 + 2, 4); });
test.skip('skipped', () => {});
test.run();
const Math2 = suite('Math2');
Math2('mul', () => { assert.is(2 * 3, 6); });
Math2.run();
""",
    "sub/b.js": "const { test } = require('uvu');\ntest.skip('only skipped', () => {});\ntest.run();\n",
}


@pytest.mark.parametrize("color", ["NO_COLOR=1", "FORCE_COLOR=1"])
def test_uvu_suites(js_project: Path, color: str) -> None:
    """uvu names only failing tests (in its FAIL lines), so its ids are suites; its Total counts tests."""
    log, code = js_run(js_project, "uvu", UVU_FILES, f"{color} npx uvu uvu")
    results = parse_log("uvu", log)
    assert results == {"a.js": F, "a.js > Math2": P, "sub/b.js": S}
    assert code == 1 and ("\x1b[" in log) == color.startswith("FORCE")
    assert check_counts("uvu", log, results, code) == []
    check_summary("uvu", log, results)
    cut = log.replace("(1 / 1)", "")  # a suite line the parse could not read: its test goes unaccounted for
    with pytest.raises(SummaryMismatchError, match="summary counts 3 tests, parser 'uvu' read 2"):
        check_summary("uvu", cut, parse_log("uvu", cut))


def test_a_tap_stream_cut_short_is_caught_by_its_plan() -> None:
    """A TAP producer other than node is held to its plan (here one whose run died after one point)."""
    log = "TAP version 13\n1..3\nok 1 - first\n# tests 3\n"
    with pytest.raises(SummaryMismatchError, match="counts 3 tests, parser 'tap' read 1"):
        check_summary("tap", log, parse_log("tap", log))


def test_jest_titles_that_are_not_strings_read_as_javascript_prints_them() -> None:
    """Old jest reports a `describe` given an array or a number with that value: the id spells it
    as JavaScript's String() does, rather than the parse failing."""
    report = {"numTotalTests": 2, "numPassedTests": 2, "numFailedTests": 0, "numPendingTests": 0,
              "testResults": [{"name": "/repo/test/a.test.js", "status": "passed", "assertionResults": [
                  {"ancestorTitles": [["en", "fr"], 7], "title": "formats", "status": "passed"},
                  {"ancestorTitles": None, "title": "alone", "status": "passed"}]}]}
    log = "noise before\n" + json.dumps(report) + "\n"
    assert parse_log("jest", log) == {"a.test.js::en,fr > 7 > formats": P, "a.test.js::alone": P}
