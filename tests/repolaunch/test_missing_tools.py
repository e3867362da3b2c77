"""What a failed step says is missing becomes a Debian package in the runtime layer: the launch
tries again with it (docker), or names it (local, where the host's tools are what there is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_helpers import DATE

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.repolaunch.launch import launch
from swedojo.repolaunch.missing import missing_packages
from swedojo.repolaunch.recipes import recipe_for
from swedojo.schema import TestStatus


@pytest.mark.parametrize(("log", "package"), [
    ("bash: line 1: ruby: command not found", "ruby"),
    ("/bin/sh: 1: python: not found", "python-is-python3"),
    ("make[2]: sphinx-build: No such file or directory", "python3-sphinx"),
    ("env: 'node': No such file or directory", "nodejs"),
    ("CMake Error: Could NOT find Python3 (missing: Python3_EXECUTABLE Interpreter)", "python3"),
    ("CMake Error at CMakeLists.txt:9 (message):\n  Python not found, but required for tests", "python3"),
    ("No package 'zlib' found", "zlib1g-dev"),
    ("Package 'libzstd', required by 'virtual:world', not found", "libzstd-dev"),
    ("sh: 1: asciidoctor: not found", "asciidoctor"),
    ("src/_speedups.c:1:10: fatal error: Python.h: No such file or directory", "python3-dev"),
])
def test_what_a_log_says_is_missing_maps_to_a_debian_package(log: str, package: str) -> None:
    assert [p for p, _ in missing_packages(f"some output\n{log}\nmore\n")] == [package]


def test_a_python_extension_build_without_a_compiler_gets_one_and_the_headers() -> None:
    """setuptools names the arch-prefixed compiler it could not run (an editable install of a
    project with C extensions on a runtime layer that has no compiler)."""
    log = "** BuildFailed: command 'x86_64-linux-gnu-gcc' failed: No such file or directory\n"
    assert [p for p, _ in missing_packages(log)] == ["gcc", "python3-dev"]
    assert [p for p, _ in missing_packages("error: command 'g++' failed: No such file or directory")] \
        == ["g++", "python3-dev"]
    assert [p for p, _ in missing_packages("FileNotFoundError: [Errno 2] No such file or directory: "
                                           "'x86_64-linux-gnu-gcc'")] == ["gcc", "python3-dev"]


def test_a_log_that_names_nothing_missing_asks_for_nothing() -> None:
    assert missing_packages("error: expected ';' before '}' token\nmake: *** [all] Error 1\n") == []


NEEDS_PYTHON = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.12)\nproject(calc C)\nenable_testing()\n"
                      "find_package(Python3 COMPONENTS Interpreter REQUIRED)\n"
                      "add_test(NAME adds COMMAND ${Python3_EXECUTABLE} -c \"assert 1 + 2 == 3\")\n",
    "calc.c": "int add(int a, int b) { return a + b; }\n",
    ".gitignore": "build/\n",
}


@pytest.mark.docker
def test_a_cmake_configure_that_needs_python_gets_it_in_the_image(make_repo, tmp_path: Path, env_cache: Path) -> None:
    spec = launch(str(make_repo("needs-python", NEEDS_PYTHON, DATE)), tmp_path / "out", backend="docker",
                  cache_dir=env_cache / "envs")
    assert spec.test_status == {"adds": TestStatus.PASSED}
    assert any("python3" in step for step in spec.toolchain_commands), spec.toolchain_commands
    assert len(spec.attempts) == 1 and "CMake Error" in spec.attempts[0], spec.attempts
    assert "trying again with install python3" in (tmp_path / "out" / "build.log").read_text()


BIG_BUILD = {
    # the tests write 1.2 GiB into the work tree: more than a sandbox's default room (1 GiB)
    "Makefile": "all: runner\nrunner: runner.c\n\t$(CC) -o runner runner.c\n"
                "test: runner\n\tdd if=/dev/zero of=scratch bs=1M count=1200 status=none\n\trm -f scratch\n\t./runner\n"
                ".PHONY: all test\n",
    "runner.c": '#include <stdio.h>\nint main(void) { printf("1..1\\nok 1 - fine\\n"); return 0; }\n',
    ".gitignore": "runner\nscratch\n",
}


@pytest.mark.docker
def test_a_step_that_runs_out_of_space_gets_a_larger_work_tree(make_repo, tmp_path: Path, env_cache: Path) -> None:
    spec = launch(str(make_repo("big-build", BIG_BUILD, DATE)), tmp_path / "out", backend="docker",
                  cache_dir=env_cache / "envs")
    assert spec.test_status == {"fine": TestStatus.PASSED}
    assert spec.work_tree_mb == 4096
    assert len(spec.attempts) == 1 and "No space left on device" in spec.attempts[0], spec.attempts
    assert "trying again with a work tree of 4096 MiB" in (tmp_path / "out" / "build.log").read_text()


def test_a_step_out_of_space_asks_for_more_room_each_time_until_the_largest() -> None:
    recipe = recipe_for("c")
    analysis = RepoAnalysis(language="c", build_system="make")
    said = "dd: error writing 'scratch': No space left on device\n"
    rooms = []
    for _ in range(3):
        found = [a for a in recipe.adaptations(analysis, said) if a.work_tree_mb]
        if not found:
            break
        analysis = recipe.adapt(analysis, found[0])
        rooms.append(analysis.work_tree_mb)
    assert rooms == [4096, 16384]


@pytest.mark.parametrize(("log", "name", "changed"), [
    ("npm error code ERESOLVE\nnpm error ERESOLVE unable to resolve dependency tree", "--legacy-peer-deps",
     {"install_commands": ["npm ci --legacy-peer-deps"]}),
    ("npm error code EBADPLATFORM\nnpm error notsup Unsupported platform for fsevents@1.2.4", "no optional dependencies",
     {"install_commands": ["npm ci --omit=optional"]}),
    ("Error: error:0308010C:digital envelope routines::unsupported", "OpenSSL's legacy provider",
     {"install_commands": ["NODE_OPTIONS=--openssl-legacy-provider npm ci"],
      "rebuild_commands": ["NODE_OPTIONS=--openssl-legacy-provider npm run build"],
      "test_command": "NODE_OPTIONS=--openssl-legacy-provider npx jest --ci --json"}),
])
def test_npm_failures_change_the_plan_as_the_log_asks(log: str, name: str, changed: dict[str, object]) -> None:
    """The npm failures met on real repositories, each read from the log and answered once."""
    recipe = recipe_for("javascript")
    analysis = RepoAnalysis(language="javascript", build_system="npm", install_commands=["npm ci"],
                            rebuild_commands=["npm run build"], test_command="npx jest --ci --json", log_parser="jest")
    (adaptation,) = recipe.adaptations(analysis, f"> build\n{log}\n")
    assert adaptation.name == name
    adapted = recipe.adapt(analysis, adaptation)
    assert {key: getattr(adapted, key) for key in changed} == changed
    assert adapted.evidence[-1].says.startswith(name)


DOCS_NEED_A_TOOL = {
    # configure stops on a tool only the manual needs, unless --disable-docs
    "configure.ac": "AC_INIT([calc], [0.1])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\n"
                    "AC_ARG_ENABLE([docs], [AS_HELP_STRING([--disable-docs], [no manual])])\n"
                    "AS_IF([test \"x$enable_docs\" != xno], [AC_PATH_PROG([RONN], [ronn-of-the-manual])\n"
                    "  AS_IF([test -z \"$RONN\"], [AC_MSG_ERROR([ronn-of-the-manual is required to build the documentation])])])\n"
                    "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
    "Makefile.am": "check_PROGRAMS = adds\nTESTS = $(check_PROGRAMS)\n",
    "adds.c": "int main(void) { return 1 + 2 == 3 ? 0 : 1; }\n",
}


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.tools("autoreconf", "automake", "gcc")),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_what_only_the_documentation_needs_is_configured_off(make_repo, tmp_path: Path, env_cache: Path,
                                                             backend: str) -> None:
    spec = launch(str(make_repo("docs", DOCS_NEED_A_TOOL, DATE)), tmp_path / "out", backend=backend,
                  cache_dir=env_cache / "envs")
    assert spec.test_status == {"adds": TestStatus.PASSED}
    assert spec.rebuild_commands[0] == "autoreconf -fi && ./configure --disable-docs && make -j2"
    assert len(spec.attempts) == 1 and "ronn-of-the-manual" in (tmp_path / "out" / "build.log").read_text()
    assert "trying again with documentation off" in (tmp_path / "out" / "build.log").read_text()


TESTS_OFF_BY_DEFAULT = {
    # ctest finds no test unless the project's own option turns them on
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc C)\n"
                      "option(CALC_BUILD_TESTS \"Build the tests\" OFF)\noption(CALC_TESTS_COVERAGE \"gcov\" OFF)\n"
                      "add_library(calc calc.c)\nif(CALC_BUILD_TESTS)\n  enable_testing()\n"
                      "  add_executable(adds adds.c)\n  target_link_libraries(adds calc)\n  add_test(NAME adds COMMAND adds)\n"
                      "endif()\nif(CALC_TESTS_COVERAGE)\n  message(FATAL_ERROR \"coverage needs gcovr\")\nendif()\n",
    "calc.c": "int add(int a, int b) { return a + b; }\n",
    "adds.c": "int add(int a, int b);\nint main(void) { return add(1, 2) == 3 ? 0 : 1; }\n",
}


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.tools("cmake", "gcc")),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_tests_behind_an_option_are_turned_on_when_the_runner_finds_none(make_repo, tmp_path: Path, env_cache: Path,
                                                                        backend: str) -> None:
    spec = launch(str(make_repo("optional-tests", TESTS_OFF_BY_DEFAULT, DATE)), tmp_path / "out", backend=backend,
                  cache_dir=env_cache / "envs")
    assert spec.test_status == {"adds": TestStatus.PASSED}
    assert spec.rebuild_commands[0].startswith("cmake -S . -B build -DCALC_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Debug")
    assert "COVERAGE" not in spec.rebuild_commands[0]  # only an option whose name ends in its tests
    log = (tmp_path / "out" / "build.log").read_text()
    assert len(spec.attempts) == 1 and "gave no test results" in spec.attempts[0], spec.attempts
    assert "No tests were found" in log and "trying again with tests on" in log


TESTS_OFF_IN_A_SUBPROJECT = {
    # the option is the subproject's, and its tests then need zlib: tests on, then zlib installed
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc C)\ninclude(cmake/options.cmake)\n"
                      "enable_testing()\nadd_subdirectory(calc)\n",
    "cmake/options.cmake": "option(CALC_DOCS \"Build the manual\" OFF)\n",
    "calc/CMakeLists.txt": "option(calc_build_tests \"Build the tests\" OFF)\nadd_library(calc calc.c)\n"
                           "if(calc_build_tests)\n  find_package(ZLIB REQUIRED)\n"
                           "  add_executable(adds adds.c)\n  target_link_libraries(adds calc ZLIB::ZLIB)\n"
                           "  add_test(NAME adds COMMAND adds)\nendif()\n",
    "calc/calc.c": "int add(int a, int b) { return a + b; }\n",
    "calc/adds.c": "#include <zlib.h>\nint add(int a, int b);\nint main(void) { return add(1, 2) == 3 && zlibVersion() ? 0 : 1; }\n",
}


@pytest.mark.docker
def test_a_subprojects_test_option_is_found_and_turned_on_once(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """Options declared in a subproject (`add_subdirectory`) or an included file are read too (a real
    repository declared its tests' option only in its subproject's CMakeLists.txt); and the option,
    applied again with each later plan (here: zlib installed for the tests), is in the configure step once."""
    spec = launch(str(make_repo("subproject-tests", TESTS_OFF_IN_A_SUBPROJECT, DATE)), tmp_path / "out",
                  backend="docker", cache_dir=env_cache / "envs")
    assert spec.test_status == {"adds": TestStatus.PASSED}
    assert spec.rebuild_commands[0].startswith("cmake -S . -B build -Dcalc_build_tests=ON -DCMAKE_BUILD_TYPE=Debug")
    assert spec.rebuild_commands[0].count("calc_build_tests") == 1 and "zlib1g-dev" in spec.toolchain_commands[-1]
    assert len(spec.attempts) == 2 and "[install]" in spec.attempts[1], spec.attempts
    assert "Could NOT find ZLIB" in (tmp_path / "out" / "build.log").read_text()


@pytest.mark.tools("cmake", "gcc")
def test_a_commit_launched_again_goes_to_the_plan_that_validated_it(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """The second launch of a commit whose first plan failed (a resumed evaluation, its empty-patch
    pass) tries the plan that validated first, and finds it cached: no failing plan runs again."""
    # a tree of its own: a commit of the same tree and date is the same commit, whose plan another test left
    repo = make_repo("optional-tests-again", {**TESTS_OFF_BY_DEFAULT, "NOTES": "launched twice\n"}, DATE)
    first = launch(str(repo), tmp_path / "first", backend="local", cache_dir=env_cache / "envs")
    again = launch(str(repo), tmp_path / "again", backend="local", cache_dir=env_cache / "envs")
    assert len(first.attempts) == 1 and again.test_status == first.test_status == {"adds": TestStatus.PASSED}
    assert again.rebuild_commands == first.rebuild_commands
    log = (tmp_path / "again" / "build.log").read_text()
    assert "the plan that validated this commit before, after 1 that failed: trying it first" in log
    assert "No tests were found" not in log and "validated spec cache hit" in log
