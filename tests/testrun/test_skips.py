"""Which listed tests a pytest log shows skipped, or left out, for want of a module (`testrun.skips`),
read from logs pytest 9 printed (`-rA`, with `-v` and without, at a terminal 80 columns wide)."""

from swedojo.schema import TestStatus
from swedojo.testrun.parsers import parse_pytest
from swedojo.testrun.skips import ModuleSkip, command_python, module_skips, named_module, skipped_modules

VERBOSE = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0 -- /work/main/.venv/bin/python
rootdir: /tmp/skl
collecting ... collected 6 items / 1 error / 1 skipped

pkg/tests/test_backends.py::test_chunked SKIPPED (requires dask)         [ 16%]
pkg/tests/test_backends.py::test_remote SKIPPED (requires network)       [ 33%]
pkg/tests/test_backends.py::test_h5netcdf_engine_with_a_long_name_that_eats_the_terminal_width SKIPPED [ 50%]
pkg/tests/test_backends.py::test_long SKIPPED (requires swedojo_abse...) [ 66%]
pkg/tests/test_backends.py::test_plain PASSED                            [ 83%]
pkg/tests/test_fails.py::test_breaks FAILED                              [100%]

==================================== ERRORS ====================================
__________________ ERROR collecting pkg/tests/test_netcdf.py ___________________
ImportError while importing test module '/tmp/skl/pkg/tests/test_netcdf.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
pkg/tests/test_netcdf.py:1: in <module>
    import netCDF4
E   ModuleNotFoundError: No module named 'netCDF4'
=================================== FAILURES ===================================
_________________________________ test_breaks __________________________________

    def test_breaks():
>       import zarr
E       ModuleNotFoundError: No module named 'zarr'

pkg/tests/test_fails.py:2: ModuleNotFoundError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED pkg/tests/test_backends.py::test_plain
SKIPPED [1] pkg/tests/test_io.py:3: could not import 'h5py': No module named 'h5py'
SKIPPED [1] pkg/tests/test_backends.py:11: requires dask
SKIPPED [1] pkg/tests/test_backends.py:16: requires network
SKIPPED [1] pkg/tests/test_backends.py:21: h5netcdf not installed
SKIPPED [1] pkg/tests/test_backends.py:26: requires swedojo_absent_dependency_with_a_rather_long_name
ERROR pkg/tests/test_netcdf.py
FAILED pkg/tests/test_fails.py::test_breaks - ModuleNotFoundError: No module ...
=============== 1 failed, 1 passed, 5 skipped, 1 error in 0.04s ================
"""
"""Four test files: one skipped whole by `importorskip("h5py")`, one that cannot be collected for
want of netCDF4, one whose tests are skipped for dask, for the network, and (reasons pytest cut
or left out of the `-v` line) for two more modules, and one whose test fails importing zarr."""

PLAIN = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0
rootdir: /tmp/skl
collected 4 items / 1 error

pkg/tests/test_backends.py ss.                                           [ 75%]
pkg/tests/test_fails.py F                                                [100%]

==================================== ERRORS ====================================
__________________ ERROR collecting pkg/tests/test_syntax.py ___________________
/root/.pyenv/versions/3.11.7/lib/python3.11/ast.py:50: in parse
    return compile(source, filename, mode, flags,
E     File "/tmp/skl/pkg/tests/test_syntax.py", line 1
E       def test_x(:
E                  ^
E   SyntaxError: invalid syntax
=================================== FAILURES ===================================
_________________________________ test_breaks __________________________________

    def test_breaks():
>       import zarr
E       ModuleNotFoundError: No module named 'zarr'

pkg/tests/test_fails.py:2: ModuleNotFoundError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED pkg/tests/test_backends.py::test_plain
SKIPPED [1] pkg/tests/test_backends.py:11: requires dask
SKIPPED [1] pkg/tests/test_backends.py:16: requires network
SKIPPED [1] pkg/tests/test_opt.py:3: could not import 'swedojo_absent': No module named 'swedojo_absent'
ERROR pkg/tests/test_syntax.py
FAILED pkg/tests/test_fails.py::test_breaks - ModuleNotFoundError: No module ...
=============== 1 failed, 1 passed, 3 skipped, 1 error in 0.16s ================
"""
"""Without `-v`: skipped tests are in no line of their own; one file skipped for dask and for the
network, one skipped whole by `importorskip`, one that does not parse, one test failing on zarr."""

BACKENDS = "pkg/tests/test_backends.py"


def _skips(log: str, *tests: str) -> dict[str, ModuleSkip]:
    return module_skips(log, tests, parse_pytest(log))


def test_a_verbose_skip_names_its_module_and_a_condition_is_no_module():
    found = _skips(VERBOSE, f"{BACKENDS}::test_chunked", f"{BACKENDS}::test_remote", f"{BACKENDS}::test_plain")
    assert found == {f"{BACKENDS}::test_chunked": ModuleSkip(module="dask", reason="requires dask")}
    assert named_module("requires network") == "" and named_module("Requires network access") == ""
    assert named_module("requires Python 3.10") == "" and named_module("requires root") == ""
    assert named_module("needs investigation") == ""


def test_the_phrasings_projects_give_their_reasons():
    assert named_module("could not import 'h5py': No module named 'h5py'") == "h5py"
    assert named_module("could not import 'scipy.sparse': No module named 'scipy'") == "scipy"
    assert named_module("h5netcdf not installed") == "h5netcdf"
    assert named_module("test requires the optional package `netCDF4`") == "netCDF4"
    assert named_module("needs matplotlib") == "matplotlib"


def test_a_file_skipped_or_uncollected_whole_leaves_its_tests_out_for_its_module():
    found = _skips(VERBOSE, "pkg/tests/test_io.py::test_roundtrip", "pkg/tests/test_netcdf.py::test_open",
                   "pkg/tests/test_io.py::TestClass::test_other")
    assert {test: skip.module for test, skip in found.items()} == {
        "pkg/tests/test_io.py::test_roundtrip": "h5py", "pkg/tests/test_netcdf.py::test_open": "netCDF4",
        "pkg/tests/test_io.py::TestClass::test_other": "h5py"}
    assert found["pkg/tests/test_io.py::test_roundtrip"].reason == "could not import 'h5py': No module named 'h5py'"


def test_a_test_that_failed_importing_a_module_is_no_skip():
    """A test that ran and failed is the code's result, whatever its error says."""
    assert _skips(VERBOSE, "pkg/tests/test_fails.py::test_breaks") == {}
    assert _skips(PLAIN, "pkg/tests/test_fails.py::test_breaks") == {}


def test_a_reason_cut_to_the_terminals_width_is_read_whole_from_the_summary():
    """`(requires swedojo_abse...)`: the name is cut; the summary line has it whole."""
    found = _skips(VERBOSE, f"{BACKENDS}::test_long")
    assert found == {f"{BACKENDS}::test_long": ModuleSkip(
        module="swedojo_absent_dependency_with_a_rather_long_name",
        reason="requires swedojo_absent_dependency_with_a_rather_long_name")}
    assert "swedojo_abse" not in skipped_modules(VERBOSE)
    assert "swedojo_absent_dependency_with_a_rather_long_name" in skipped_modules(VERBOSE)


def test_a_cut_reason_that_begins_like_a_condition_is_not_put_down_to_a_module():
    log = VERBOSE.replace("(requires swedojo_abse...)", "(requires ne...)          ").replace(
        "requires swedojo_absent_dependency_with_a_rather_long_name", "requires netCDF4")
    assert _skips(log, f"{BACKENDS}::test_long") == {}  # "requires network" begins so too


def test_a_skip_line_without_its_reason_in_a_file_of_several_reasons_is_not_guessed():
    assert _skips(VERBOSE, f"{BACKENDS}::test_h5netcdf_engine_with_a_long_name_that_eats_the_terminal_width") == {}
    one_reason = "\n".join(line for line in VERBOSE.splitlines()
                           if not line.startswith(f"SKIPPED [1] {BACKENDS}") or "h5netcdf" in line)
    test = f"{BACKENDS}::test_h5netcdf_engine_with_a_long_name_that_eats_the_terminal_width"
    assert _skips(one_reason, test) == {test: ModuleSkip(module="h5netcdf", reason="h5netcdf not installed")}


def test_without_verbose_lines_a_file_skipped_for_a_module_and_a_condition_says_nothing_of_its_tests():
    """`requires dask` and `requires network` in one file: which absent test was skipped for which
    is unknown, so neither is put down to dask."""
    assert _skips(PLAIN, f"{BACKENDS}::test_chunked", f"{BACKENDS}::test_remote") == {}
    only_dask = PLAIN.replace(f"SKIPPED [1] {BACKENDS}:16: requires network\n", "")
    assert {t: s.module for t, s in _skips(only_dask, f"{BACKENDS}::test_chunked").items()} == {
        f"{BACKENDS}::test_chunked": "dask"}
    assert {t: s.module for t, s in _skips(PLAIN, "pkg/tests/test_opt.py::test_a").items()} == {
        "pkg/tests/test_opt.py::test_a": "swedojo_absent"}


def test_a_collection_error_is_read_in_its_own_section_only():
    """test_syntax.py does not parse; the `No module named 'zarr'` after it is another test's failure."""
    assert _skips(PLAIN, "pkg/tests/test_syntax.py::test_x") == {}
    assert set(skipped_modules(PLAIN)) == {"dask", "swedojo_absent"}


def test_a_test_that_passed_or_is_listed_elsewhere_is_not_named():
    assert _skips(VERBOSE, f"{BACKENDS}::test_plain", "pkg/tests/test_other.py::test_x") == {}
    assert parse_pytest(VERBOSE)[f"{BACKENDS}::test_chunked"] == TestStatus.SKIPPED


def test_the_interpreter_of_a_test_command():
    assert command_python("python -m pytest -rA") == "python"
    assert command_python("/opt/venv/bin/python3.11 -m pytest") == "/opt/venv/bin/python3.11"
    assert command_python("pytest -rA") == "python3" and command_python("tox -e 'py") == "python3"


def test_the_skips_of_a_session_run_inside_a_test_are_not_the_sessions_own() -> None:
    """A plugin's own suite runs pytest inside its tests (pytester) and prints the inner sessions
    in its failure and pass reports: their skips and import errors say nothing of the environment."""
    inner = """----------------------------- Captured stdout call -----------------------------
============================= test session starts ==============================
collected 1 item / 1 error
_____________________ ERROR collecting test_inner.py _____________________
E   ModuleNotFoundError: No module named '__import_of_missing_module'
=========================== short test summary info ============================
SKIPPED [1] test_inner.py:2: could not import 'inner_only_zq': No module named 'inner_only_zq'
============================== 1 skipped in 0.01s ==============================
"""
    log = ("testing/test_a.py::test_one PASSED                                [ 50%]\n"
           "testing/test_a.py::test_two FAILED                                [100%]\n\n"
           "=================================== FAILURES ===================================\n"
           "___________________________________ test_two ___________________________________\n"
           + inner +
           "=================================== PASSES ====================================\n" + inner +
           "=========================== short test summary info ============================\n"
           "PASSED testing/test_a.py::test_one\nFAILED testing/test_a.py::test_two\n"
           "SKIPPED [1] testing/test_b.py:3: could not import 'outer_zq': No module named 'outer_zq'\n"
           "========================= 1 failed, 1 passed, 1 skipped in 0.10s =========================\n")
    assert list(skipped_modules(log)) == ["outer_zq"]
    assert module_skips(log, ["test_inner.py::test_x", "testing/test_b.py::test_c"], ["testing/test_a.py::test_one"]) \
        == {"testing/test_b.py::test_c": ModuleSkip(module="outer_zq", reason="could not import 'outer_zq': No module named 'outer_zq'")}


def test_a_unittest_log_names_the_modules_its_skips_and_failed_imports_want(tmp_path) -> None:
    """unittest says it two ways: `... skipped 'requires numpy'`, and a test module it could not
    import (`Failed to import test module: tests.test_netcdf` ... `No module named 'netCDF4'`),
    whose tests are then absent from the log. The log is the interpreter's own."""
    import subprocess
    import sys

    from swedojo.testrun.parsers import parse_unittest

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_arrays.py").write_text(
        "import unittest\n\ntry:\n    import swedojo_absent_np\nexcept ImportError:\n    swedojo_absent_np = None\n\n\n"
        "class Arrays(unittest.TestCase):\n"
        "    @unittest.skipIf(swedojo_absent_np is None, 'requires swedojo_absent_np')\n"
        "    def test_sum(self):\n        pass\n\n"
        "    @unittest.skip('requires network')\n    def test_remote(self):\n        pass\n\n"
        "    def test_plain(self):\n        pass\n")
    (tmp_path / "tests" / "test_netcdf.py").write_text(
        "import unittest\n\nimport swedojo_absent_cdf.io\n\n\nclass Files(unittest.TestCase):\n"
        "    def test_open(self):\n        pass\n")
    run = subprocess.run([sys.executable, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    log = run.stdout + run.stderr
    statuses = parse_unittest(log)
    assert statuses["test_plain (tests.test_arrays.Arrays)"] == TestStatus.PASSED, log
    assert statuses["tests.test_netcdf (unittest.loader._FailedTest)"] == TestStatus.ERROR  # counted as the summary does
    assert skipped_modules(log, "unittest") == {"swedojo_absent_np": "requires swedojo_absent_np",
                                                "swedojo_absent_cdf": "No module named 'swedojo_absent_cdf'"}
    listed = ["test_sum (tests.test_arrays.Arrays)", "test_remote (tests.test_arrays.Arrays)",
              "test_open (tests.test_netcdf.Files)", "test_gone (tests.test_other.Other)"]
    assert module_skips(log, listed, statuses, "unittest") == {
        "test_sum (tests.test_arrays.Arrays)": ModuleSkip(module="swedojo_absent_np", reason="requires swedojo_absent_np"),
        "test_open (tests.test_netcdf.Files)": ModuleSkip(module="swedojo_absent_cdf",
                                                          reason="No module named 'swedojo_absent_cdf'"),
    }
    assert module_skips(log, listed, statuses, "tap") == {}
