"""Compiled code is built before its tests, everywhere tests run: a C library's tests (ctest) never
run the binaries built at launch. A patch that breaks the library is unresolved (its compiler's
lines or its failing tests as evidence), a real fix resolves, the empty patch does not, and the
agent's `run_tests` after a breaking edit reports the failure. On both backends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from launch_helpers import DATE, commit_all, write_tree
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.repolaunch.launch import environment, launch
from swedojo.tools.base import ToolContext
from swedojo.tools.builtin.run_tests import RunTestsParams, RunTestsTool

LIBRARY = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc C)\nenable_testing()\n"
                      "add_library(calc calc.c)\nadd_executable(check check.c)\ntarget_link_libraries(check calc)\n"
                      "add_test(NAME add_works COMMAND check add 1 2 3)\n",
    "calc.h": "int add(int a, int b);\nint sub(int a, int b);\n",
    "calc.c": '#include "calc.h"\nint add(int a, int b) { return a + b; }\nint sub(int a, int b) { return a + b; }\n',
    "check.c": '#include <stdlib.h>\n#include <string.h>\n#include "calc.h"\n'
               "int main(int argc, char **argv) {\n  int a = atoi(argv[2]), b = atoi(argv[3]), want = atoi(argv[4]);\n"
               '  if (!strcmp(argv[1], "add")) return add(a, b) == want ? 0 : 1;\n  return 2;\n}\n',
    ".gitignore": "build/\n",
}
# The test patch teaches the checker `sub` and registers a test of it: both need a rebuild to exist.
TESTS = {
    "CMakeLists.txt": LIBRARY["CMakeLists.txt"] + "add_test(NAME sub_works COMMAND check sub 3 1 2)\n",
    "check.c": LIBRARY["check.c"].replace("  return 2;", '  if (!strcmp(argv[1], "sub")) return sub(a, b) == want ? 0 : 1;\n'
                                                     "  return 2;"),
}
FIXED = LIBRARY["calc.c"].replace("int sub(int a, int b) { return a + b; }", "int sub(int a, int b) { return a - b; }")
BREAKS_THE_BUILD = FIXED.replace("return a - b;", "return a - b")
BREAKS_THE_LIBRARY = FIXED.replace("int add(int a, int b) { return a + b; }", "int add(int a, int b) { return a * b; }")


def _diff(repo: Path, files: dict[str, str]) -> str:
    """The patch that writes `files` in `repo` (left unchanged)."""
    write_tree(repo, files)
    patch = subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True, text=True).stdout
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    return patch


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.tools("cmake", "gcc")),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_a_c_library_is_rebuilt_before_its_tests(tmp_path: Path, env_cache: Path, backend: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    repo = write_tree(tmp_path / "calc", LIBRARY)
    base = commit_all(repo, "calc with a wrong sub", DATE)
    test_patch = _diff(repo, TESTS)
    assert "sub_works" in test_patch and FIXED != LIBRARY["calc.c"]

    def instance(name: str, calc: str) -> dict[str, str]:
        return {"instance_id": name, "repo": str(repo), "base_commit": base, "patch": _diff(repo, {"calc.c": calc}),
                "test_patch": test_patch, "problem_statement": "sub adds", "FAIL_TO_PASS": json.dumps(["sub_works"]),
                "PASS_TO_PASS": json.dumps(["add_works"])}

    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(instance(name, calc)) + "\n" for name, calc in [
        ("fix", FIXED), ("breaks-build", BREAKS_THE_BUILD), ("breaks-library", BREAKS_THE_LIBRARY)]))
    runner = CliRunner()
    common = ["eval", "--suite", str(suite), "--backend", backend, "--rewards", "resolved", "--workers", "1"]
    gold = runner.invoke(app, [*common, "--policy", "gold", "--out", str(tmp_path / "gold")])
    results = {r["instance_id"]: r for r in map(json.loads, (tmp_path / "gold" / "results.jsonl").read_text().splitlines())}
    assert results["fix"]["status"] == "resolved", results["fix"]
    assert results["fix"]["report"]["fail_to_pass"] == {"sub_works": "PASSED"}
    broken = results["breaks-build"]
    assert broken["status"] == "unresolved", broken
    assert "the build (`cmake --build build -j2`) exited" in broken["report"]["error"]
    assert "calc.c" in broken["report"]["error"] and "error" in broken["report"]["log_tail"]
    wrong = results["breaks-library"]
    assert wrong["status"] == "unresolved", wrong
    assert wrong["report"]["pass_to_pass"] == {"add_works": "FAILED"}
    assert wrong["report"]["fail_to_pass"] == {"sub_works": "PASSED"}
    assert gold.exit_code == 0, gold.output  # unresolved is a verdict, not a failure of the command

    empty = runner.invoke(app, [*common, "--policy", "empty", "--out", str(tmp_path / "empty")])
    assert empty.exit_code == 0, empty.output
    nothing = json.loads((tmp_path / "empty" / "results.jsonl").read_text().splitlines()[0])
    assert nothing["status"] == "empty_patch" and not nothing["resolved"]
    assert nothing["report"]["fail_to_pass"] == {"sub_works": "FAILED"}

    spec = launch(str(repo), tmp_path / "launch", backend=backend, cache_dir=env_cache / "envs")
    assert spec.build_command == "cmake --build build -j2"
    sandbox = environment(spec, repo).open(base)
    try:
        ctx = ToolContext(env=spec, test_timeout_s=600)
        tool = RunTestsTool()
        assert "1 PASSED" in tool.run(sandbox, RunTestsParams(tests=["add_works"]), ctx).output
        sandbox.write_file(f"{sandbox.workdir}/calc.c", BREAKS_THE_LIBRARY.encode())
        after = tool.run(sandbox, RunTestsParams(tests=["add_works"]), ctx)
        assert "FAILED add_works" in after.output, after.output
        sandbox.write_file(f"{sandbox.workdir}/calc.c", BREAKS_THE_BUILD.encode())
        unbuilt = tool.run(sandbox, RunTestsParams(tests=["add_works"]), ctx)
        assert unbuilt.is_error and "No test ran" in unbuilt.output and "calc.c" in unbuilt.output, unbuilt.output
    finally:
        sandbox.close()


@pytest.mark.docker
def test_a_fresh_sandbox_starts_from_the_image_build_and_rebuilds_only_what_changed(
        tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    repo = write_tree(tmp_path / "calc", LIBRARY)
    base = commit_all(repo, "calc with a wrong sub", DATE)
    spec = launch(str(repo), tmp_path / "launch", backend="docker", cache_dir=env_cache / "envs")
    objects = {name: f"build/CMakeFiles/{target}.dir/{name}.c.o" for name, target in [("calc", "calc"), ("check", "check")]}

    def times(sandbox, root: str = ".") -> dict[str, str]:
        out = sandbox.exec(" && ".join(f"stat -c %Y {root}/{path}" for path in objects.values()))
        assert out.ok, out.output
        return dict(zip(objects, out.output.split(), strict=True))

    sandbox = environment(spec, repo).open(base)
    try:
        image = times(sandbox, "/opt/swedojo/prebuilt/tree")
        assert times(sandbox) == image  # the repo layer found the image's objects up to date: nothing compiled
        assert sandbox.exec("./build/check add 1 2 3").ok
        sandbox.write_file(f"{sandbox.workdir}/calc.c", BREAKS_THE_LIBRARY.encode())
        built = sandbox.exec(spec.build_command)
        assert built.ok and "calc.c.o" in built.output and "check.c.o" not in built.output, built.output
        after = times(sandbox)
        assert after["check"] == image["check"] and after["calc"] != image["calc"]
        assert sandbox.exec("./build/check add 1 2 3").exit_code == 1  # the edit is what runs
    finally:
        sandbox.close()

    write_tree(repo, {"calc.h": LIBRARY["calc.h"] + "/* another commit */\n"})
    later = commit_all(repo, "a comment", DATE)
    other = environment(spec, repo).open(later)  # not the image's commit: its outputs do not fit, a full build
    try:
        assert all(mine != image[name] for name, mine in times(other).items())
    finally:
        other.close()
