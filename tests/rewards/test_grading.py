"""Grading as SWE-bench does, on a real repo in a real local sandbox."""

from pathlib import Path

import pytest
from taskrepo import make_task_repo

from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, TestStatus
from swedojo.testrun.patches import patch_files


def _env(mirror: Path, task):
    return default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")


def test_gold_resolves_and_empty_does_not(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED and gold.resolved, gold.log_tail
    assert gold.fail_to_pass == {"test_calc.py::test_clamp_high": TestStatus.PASSED}
    assert gold.test_exit_code == 0 and gold.unmatched_tests == []
    empty = grade(env, task, "")
    assert empty.status == EvalStatus.EMPTY_PATCH and not empty.resolved
    assert empty.fail_to_pass["test_calc.py::test_clamp_high"] == TestStatus.FAILED
    assert all(s == TestStatus.PASSED for s in empty.pass_to_pass.values())


def test_listed_ids_that_name_no_test_are_left_out_and_named(tmp_path):
    """Seen in SWE-bench Lite: PASS_TO_PASS holding "[100%]", "[" and "[100%]-----", pieces of
    pytest's progress column its parser read as tests. They cannot pass or fail: left out, named."""
    mirror, task = make_task_repo(tmp_path)
    fragments = ["[100%]", "[", "[100%]------------------------------"]
    noisy = task.model_copy(update={"PASS_TO_PASS": [*task.PASS_TO_PASS, *fragments]})
    gold = grade(_env(mirror, noisy), noisy, task.patch)
    assert gold.status == EvalStatus.RESOLVED, (gold.error, gold.pass_to_pass)
    assert set(gold.not_tests) == set(fragments) and "progress column" in gold.not_tests["[100%]"]
    assert grade(_env(mirror, noisy), noisy, "").status == EvalStatus.EMPTY_PATCH


def test_patch_that_does_not_apply_is_patch_failed(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    bad = task.patch.replace("     return value\n", "-    return value * 2\n+    return value\n")
    report = grade(_env(mirror, task), task, bad)
    assert report.status == EvalStatus.PATCH_FAILED
    assert "candidate patch does not apply" in report.error


def test_missing_test_counts_as_failed(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    task.PASS_TO_PASS.append("test_calc.py::test_that_does_not_exist")
    report = grade(_env(mirror, task), task, task.patch)
    assert not report.resolved
    assert report.pass_to_pass["test_calc.py::test_that_does_not_exist"] is None
    assert report.unmatched_tests == ["test_calc.py::test_that_does_not_exist"]


def test_fake_passed_lines_do_not_win(tmp_path):
    """A patch that prints PASSED lines for the listed tests while the suite fails is unresolved."""
    mirror, task = make_task_repo(tmp_path)
    forged = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1,6 @@\n"
        "+import atexit\n+def _forge():\n"
        "+    print('PASSED test_calc.py::test_clamp_high')\n"
        "+    print('PASSED test_calc.py::test_add')\n+    print('PASSED test_calc.py::test_clamp_low')\n"
        "+atexit.register(_forge)\n"
    )
    report = grade(_env(mirror, task), task, forged)
    assert not report.resolved
    assert report.test_exit_code != 0


def test_candidate_cannot_edit_the_graded_tests(tmp_path):
    """Edits to the test files are reverted to the base before the test patch is applied."""
    mirror, task = make_task_repo(tmp_path)
    cheat = (
        "diff --git a/test_calc.py b/test_calc.py\n--- a/test_calc.py\n+++ b/test_calc.py\n@@ -5,5 +5,5 @@ def test_add():\n"
        "     assert add(2, 3) == 5\n \n \n def test_clamp_low():\n-    assert clamp(-5, 0, 10) == 0\n+    assert True\n"
    )
    report = grade(_env(mirror, task), task, cheat)
    assert report.status == EvalStatus.UNRESOLVED
    assert report.fail_to_pass["test_calc.py::test_clamp_high"] == TestStatus.FAILED


def test_missing_repo_is_infra_error(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = _env(mirror, task)
    task.base_commit = "0" * 40
    report = grade(env, task, task.patch)
    assert report.status == EvalStatus.INFRA_ERROR
    assert "not found" in report.error


def test_patch_files_lists_both_names():
    assert patch_files("diff --git a/x.py b/y.py\n") == ["x.py", "y.py"]


# --- SWE-bench's id forms and tests that need the network, on a repo made here ------------------

def test_bare_function_names_are_read_from_the_test_patch_files(tmp_path):
    """sympy's lists name bare functions (`test_clamp_high`): the test patch's files are run whole
    and each name is read from the log."""
    mirror, task = make_task_repo(tmp_path)
    task.FAIL_TO_PASS, task.PASS_TO_PASS = ["test_clamp_high"], ["test_add", "test_clamp_low"]
    env = _env(mirror, task)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED, gold.log_tail
    assert gold.fail_to_pass == {"test_clamp_high": TestStatus.PASSED}
    empty = grade(env, task, "")
    assert empty.fail_to_pass == {"test_clamp_high": TestStatus.FAILED} and not empty.resolved


def test_a_benchmarks_own_names_are_matched_by_rule_and_those_that_match_nothing_are_named(tmp_path):
    """Multi-SWE-bench lists `FILE:TITLE`, a file for its whole result, and `all tests` (its name
    for a whole `make test` run): the first two are matched to pytest's ids by `testrun.names`; the
    last is a make harness's exit status (`test_make_harness.py`), and under pytest, which runs the
    test patch's files, it matches nothing, counts as failed and is named."""
    mirror, task = make_task_repo(tmp_path)
    task.FAIL_TO_PASS, task.PASS_TO_PASS = ["test_calc.py:test_clamp_high"], ["test_calc.py"]
    env = _env(mirror, task)
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED and gold.unmatched_tests == [], gold.log_tail
    assert gold.fail_to_pass == {"test_calc.py:test_clamp_high": TestStatus.PASSED}
    assert gold.pass_to_pass == {"test_calc.py": TestStatus.PASSED}
    empty = grade(env, task, "")
    assert empty.fail_to_pass == {"test_calc.py:test_clamp_high": TestStatus.FAILED}
    assert empty.pass_to_pass == {"test_calc.py": TestStatus.FAILED}  # the worst of the file's tests
    task.PASS_TO_PASS.append("all tests")
    unmatched = grade(env, task, task.patch)
    assert unmatched.status == EvalStatus.UNRESOLVED and unmatched.unmatched_tests == ["all tests"]
    assert unmatched.pass_to_pass["all tests"] is None


OFFLINE_TEST = '''

def test_lookup():
    import socket
    socket.getaddrinfo("swedojo-needs-a-network.invalid", 80)
'''


def _with_network_test(tmp_path, listed_as: str):
    mirror, task = make_task_repo(tmp_path)
    task.test_patch = task.test_patch.replace("@@ -8,3 +8,7 @@", "@@ -8,3 +8,12 @@") + "".join(
        f"+{line}\n" for line in OFFLINE_TEST.splitlines())
    getattr(task, listed_as).append("test_calc.py::test_lookup")
    return _env(mirror, task), task


def test_a_test_that_needs_the_network_is_left_out_and_named(tmp_path):
    env, task = _with_network_test(tmp_path, "PASS_TO_PASS")
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED, gold.log_tail
    assert list(gold.needs_network) == ["test_calc.py::test_lookup"]
    assert "Name or service not known" in gold.needs_network["test_calc.py::test_lookup"] \
        or "name resolution" in gold.needs_network["test_calc.py::test_lookup"]


def test_a_test_that_connects_to_an_address_is_left_out_too(tmp_path):
    """Seen on a real task (a connect-timeout test to an unroutable address): no lookup fails, the
    sandbox refuses the socket itself. That is the network's absence too, not the code's."""
    env, task = _with_network_test(tmp_path, "PASS_TO_PASS")
    task.test_patch = task.test_patch.replace('socket.getaddrinfo("swedojo-needs-a-network.invalid", 80)',
                                              'socket.create_connection(("10.255.255.1", 80), timeout=5)')
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED, gold.log_tail
    assert list(gold.needs_network) == ["test_calc.py::test_lookup"], gold.log_tail


def test_a_task_whose_fail_to_pass_all_need_the_network_is_not_scored(tmp_path):
    env, task = _with_network_test(tmp_path, "FAIL_TO_PASS")
    task.FAIL_TO_PASS = ["test_calc.py::test_lookup"]
    report = grade(env, task, task.patch)
    assert report.status == EvalStatus.NEEDS_NETWORK and not report.resolved and report.reward == 0.0


HTTPBIN_TEST = '''

def test_echo():
    import json, urllib.request
    with urllib.request.urlopen("http://httpbin.org/get?x=1", timeout=20) as reply:
        assert json.load(reply)["args"] == {"x": "1"}
    assert clamp(15, 0, 10) == 10


def test_as_only_the_real_service_answers():
    import urllib.request
    with urllib.request.urlopen("http://httpbin.org/get", timeout=20) as reply:
        assert reply.headers["Server"] == "the real one"
'''


@pytest.mark.docker
def test_a_test_of_a_public_service_is_served_by_its_local_stand_in(tmp_path):
    """A FAIL_TO_PASS test that calls httpbin.org: offline it fails for every patch; graded again
    with the stand-in in the sandbox (the host resolved to loopback), gold resolves on it, and the
    empty patch still fails it. A test the stand-in does not answer as the real service would
    (the reference fails it there too) stays out, named. Needs PyPI once, to install the stand-in."""
    mirror, task = make_task_repo(tmp_path)
    task.test_patch = task.test_patch.replace("@@ -8,3 +8,7 @@", "@@ -8,3 +8,20 @@") + "".join(
        f"+{line}\n" for line in HTTPBIN_TEST.splitlines())
    task.FAIL_TO_PASS = ["test_calc.py::test_echo"]
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, "test_calc.py::test_as_only_the_real_service_answers"]
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "docker")
    gold = grade(env, task, task.patch)
    assert gold.status == EvalStatus.RESOLVED, (gold.error, gold.standins, gold.log_tail)
    assert gold.standins.startswith("served httpbin.org")
    assert list(gold.needs_network) == ["test_calc.py::test_as_only_the_real_service_answers"]
    assert gold.needs_network["test_calc.py::test_as_only_the_real_service_answers"].startswith("not served by the stand-in")
    assert gold.fail_to_pass == {"test_calc.py::test_echo": TestStatus.PASSED}
    empty = grade(env, task, "")
    assert empty.status == EvalStatus.EMPTY_PATCH and empty.fail_to_pass == {"test_calc.py::test_echo": TestStatus.FAILED}


def test_a_candidate_cannot_opt_a_test_out_by_making_it_look_up_a_host(tmp_path):
    """A patch that makes a listed test fail with a lookup error does not get it left out: only tests
    that need the network with the reference patch too may leave scoring."""
    env, task = _with_network_test(tmp_path, "PASS_TO_PASS")
    from taskrepo import SOURCE, source_patch

    fixed = SOURCE.replace("    return value\n", "    if value > high:\n        return high\n    return value\n")
    cheat = source_patch("calc.py", SOURCE, fixed.replace(
        "    return a + b\n", "    import socket\n    socket.getaddrinfo('x.invalid', 80)\n    return a + b\n"))
    report = grade(env, task, cheat)
    assert report.status == EvalStatus.UNRESOLVED
    assert list(report.needs_network) == ["test_calc.py::test_lookup"]
    assert report.pass_to_pass["test_calc.py::test_add"] == TestStatus.FAILED


FLIP = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)
"""A pytest hook that reports every failed test as passed."""


def new_file(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}" for line in lines))


@pytest.mark.parametrize("cheat", [
    new_file("conftest.py", FLIP),
    new_file("pytest.ini", "[pytest]\naddopts = -p flipper\n") + new_file("flipper.py", FLIP),
    new_file("sub/conftest.py", FLIP) + new_file("conftest.py", "pytest_plugins = ['sub.conftest']\n"),
], ids=["conftest", "pytest.ini-plugin", "pytest_plugins"])
def test_test_infrastructure_the_candidate_adds_cannot_flip_failures(tmp_path, cheat):
    mirror, task = make_task_repo(tmp_path)
    report = grade(_env(mirror, task), task, cheat)
    assert report.status == EvalStatus.UNRESOLVED, report
    assert report.fail_to_pass["test_calc.py::test_clamp_high"] == TestStatus.FAILED
    assert report.restored and all("restored to the base commit" in why for why in report.restored.values())
    assert {"conftest.py", "pytest.ini"} & set(report.restored), report.restored
    gold = grade(_env(mirror, task), task, task.patch + cheat)
    assert gold.status == EvalStatus.RESOLVED and gold.restored, gold
