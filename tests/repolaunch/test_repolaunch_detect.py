"""Rule-based analysis on repositories of several shapes, CI workflows included."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from launch_helpers import write_tree

from swedojo.repolaunch.ci import read_workflows
from swedojo.repolaunch.detect import NoBuildSystemError, analyse, debian_release
from swedojo.repolaunch.recipes.python import EDITABLE_OR_INSTALLED, REINSTALL_IF_NOT_EDITABLE, editable_needs

WORKFLOW = """name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python-version: [3.9, 3.10, "3.11"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python-version }}
      - name: install
        run: |
          python -m pip install --upgrade pip
          pip install -e .[test] \\
            -r requirements-ci.txt
      - run: pytest -q tests
      - run: echo done
"""


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def said(analysis, file: str) -> list[str]:
    return [e.says for e in analysis.evidence if e.file == file]


def test_pyproject_with_ci_workflow(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "pyproject.toml": """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "pkg"
version = "1.0"
requires-python = ">=3.8"
dependencies = ["attrs>=22"]
classifiers = ["Programming Language :: Python :: 3.9", "Programming Language :: Python :: 3.10"]
[project.optional-dependencies]
test = ["pytest-mock", "pkg[speed]"]
speed = ["ujson"]
docs = ["sphinx"]
""",
        "requirements-ci.txt": "coverage\n",
        ".github/workflows/ci.yml": WORKFLOW,
        ".github/workflows/broken.yaml": "jobs: [unclosed\n",
    })
    analysis = analyse(tmp_path, day("2023-06-01"))
    assert (analysis.language, analysis.build_system) == ("python", "pyproject")
    # 3.11 is the newest version out by the date that CI and classifiers name and requires-python allows.
    assert analysis.runtime_version == "3.11" and analysis.debian_release == "bookworm"
    # Interpreters newer than the commit come last, nearest first: the ones to try when none of the others is there.
    assert analysis.runtime_allowed == ["3.11", "3.10", "3.9", "3.8", "3.12", "3.13", "3.14"]
    assert analysis.install_commands == [
        "pip install --uploaded-prior-to 2023-06-01T00:00:00Z hatchling",
        editable_needs("hatchling.build", [], "2023-06-01T00:00:00Z"),  # what its editable build asks for
        ("pip install --uploaded-prior-to 2023-06-01T00:00:00Z 'attrs>=22' pytest-mock ujson pytest "
         "-r requirements-ci.txt"),
    ]
    assert analysis.rebuild_commands == [EDITABLE_OR_INSTALLED]
    assert analysis.build_command == REINSTALL_IF_NOT_EDITABLE
    assert (analysis.test_command, analysis.log_parser) == ("python -m pytest -rA -v -p no:cacheprovider", "pytest")
    assert analysis.ci_commands == ["python -m pip install --upgrade pip", "pip install -e .[test] -r requirements-ci.txt",
                                    "pytest -q tests"]
    assert "CI runs python 3.9, 3.10, 3.11" in said(analysis, ".github/workflows")
    assert said(analysis, ".github/workflows/broken.yaml") == ["workflow did not parse; skipped"]
    assert set(analysis.dependency_files) == {"pyproject.toml", "requirements-ci.txt"}


def test_setup_py_with_requirements(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "setup.py": """from setuptools import setup
setup(
    name="legacy",
    python_requires=">=3.6",
    classifiers=["Programming Language :: Python :: 3.6", "Programming Language :: Python :: 3.7",
                 "Programming Language :: Python :: 3.8"],
    extras_require={"testing": ["pytest-cov"], "docs": ["sphinx"]},
)
""",
        "requirements.txt": "six\n",
        "requirements-test.txt": "pytest<6\n",
        "requirements-docs.txt": "sphinx\n",
    })
    analysis = analyse(tmp_path, day("2020-01-01"))
    assert (analysis.language, analysis.build_system) == ("python", "setup.py")
    assert analysis.runtime_version == "3.8" and analysis.debian_release == "bullseye"
    assert analysis.install_commands == [
        "pip install --uploaded-prior-to 2020-01-01T00:00:00Z setuptools wheel",
        ("pip install --uploaded-prior-to 2020-01-01T00:00:00Z pytest -r requirements.txt -r requirements-test.txt "
         "'.[testing]'"),
    ]
    assert "requirements-docs.txt" not in analysis.dependency_files


def test_tox_project(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "tox.ini": """[tox]
envlist = py3{7,8,9}, lint
[testenv]
deps =
    pytest-mock
    -r{toxinidir}/requirements-dev.txt
    lint: flake8
commands = pytest {posargs}
""",
        "requirements-dev.txt": "pytest\n",
        "setup.cfg": "[options]\npython_requires = >=3.7\n",
        "mymod.py": "",
    })
    analysis = analyse(tmp_path)
    assert (analysis.language, analysis.build_system) == ("python", "tox")
    assert analysis.runtime_version == "3.9"  # newest in the envlist
    assert analysis.install_commands == ["pip install pytest-mock pytest -r requirements-dev.txt"]
    assert analysis.rebuild_commands == []  # nothing to install: tests import from the work tree
    assert "testenv commands: pytest {posargs}" in said(analysis, "tox.ini")
    assert "envlist names python 3.7, 3.8, 3.9" in said(analysis, "tox.ini")


@pytest.mark.parametrize(("files", "expected"), [
    ({"package.json": '{"devDependencies": {"jest": "^29"}, "engines": {"node": ">=18"}, '
                      '"scripts": {"test": "jest", "build": "tsc"}}', "package-lock.json": "{}"},
     ("javascript", "npm", "20", ["npm ci"], ["npm run build"], "npx jest --ci --json", "jest")),
    ({"package.json": '{"devDependencies": {"vitest": "^1", "typescript": "^5"}}', "pnpm-lock.yaml": "",
      ".nvmrc": "v18.19.0\n"},
     ("typescript", "pnpm", "18", ["npx --yes pnpm@9 install --frozen-lockfile"], [], "npx vitest run --reporter=json",
      "vitest")),
    ({"package.json": '{"devDependencies": {"vitest": "^1"}, "packageManager": "pnpm@8.15.4+sha512.abc"}',
      "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"},
     ("javascript", "pnpm", "20", ["npx --yes pnpm@8.15.4 install --frozen-lockfile"], [], "npx vitest run --reporter=json",
      "vitest")),
    ({"package.json": '{"scripts": {"test": "node --test"}}', "yarn.lock": ""},
     ("javascript", "yarn", "20", ["npx --yes yarn@1 install --frozen-lockfile"], [], "node --test --test-reporter=tap",
      "tap")),
    ({"package.json": '{"scripts": {"test": "node --test", "build": "tsc"}}', "yarn.lock": "",
      ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-3.6.0.cjs\n", ".yarn/releases/yarn-3.6.0.cjs": ""},
     ("javascript", "yarn", "20", ["YARN_NODE_LINKER=node-modules node .yarn/releases/yarn-3.6.0.cjs install --immutable"],
      ["npm run build"], "node --test --test-reporter=tap", "tap")),
    ({"package.json": '{"scripts": {"test": "node --test"}, "packageManager": "yarn@4.1.0"}', "yarn.lock": ""},
     ("javascript", "yarn", "20", ["YARN_NODE_LINKER=node-modules npx --yes @yarnpkg/cli-dist@4.1.0 install --immutable"],
      [], "node --test --test-reporter=tap", "tap")),
])
def test_node_projects(tmp_path: Path, files: dict[str, str], expected: tuple) -> None:
    write_tree(tmp_path, files)
    a = analyse(tmp_path, day("2024-01-01"))
    assert (a.language, a.build_system, a.runtime_version, a.install_commands, a.rebuild_commands,
            a.test_command, a.log_parser) == expected


@pytest.mark.parametrize(("package", "command", "parser"), [
    ({"scripts": {"test": "mocha --reporter spec 'test/**/*.spec.js'"}},
     "npx mocha 'test/**/*.spec.js' --reporter json", "mocha"),
    ({"scripts": {"test": "nyc --silent ava --verbose"}, "devDependencies": {"ava": "^5"}}, "npx ava --verbose --tap", "ava"),
    ({"scripts": {"test": "npm run lint && npm run unit", "lint": "eslint .", "unit": "uvu -r esm tests"}},
     "npx uvu -r esm tests", "uvu"),
    ({"scripts": {"test": "tap test/*.js"}, "devDependencies": {"tap": "^16.3.0"}},
     "npx tap test/*.js --reporter=tap --no-coverage", "node-tap"),
    ({"devDependencies": {"tap": "^21"}}, "npx tap --reporter=tap --disable-coverage", "node-tap"),
    ({"scripts": {"test": "vitest --run --reporter verbose"}}, "npx vitest run --reporter=json", "vitest"),
    ({"scripts": {"test": "cross-env NODE_ENV=test jest --coverage"}}, "NODE_ENV=test npx jest --coverage --ci --json",
     "jest"),
    ({"scripts": {"test": "TZ=UTC node --test test/"}}, "TZ=UTC node --test --test-reporter=tap test/", "tap"),
    ({"scripts": {"test": "./run-tests.sh"}, "devDependencies": {"uvu": "0.5.6", "mocha": "^10"}}, "npx mocha --reporter json",
     "mocha"),
    ({"scripts": {"test": "tape 'test/**/*.js' | tap-spec"}}, "npx tape 'test/**/*.js'", "tape"),
    ({"scripts": {"test": "yarn unit", "unit": "mocha"}}, "npx mocha --reporter json", "mocha"),
    ({"scripts": {"test": "npm run test"}, "devDependencies": {"ava": "^6"}}, "npx ava --tap", "ava"),
    ({"scripts": {"test": "./run-tests.sh"}}, "npm test", ""),
])
def test_node_runners(tmp_path: Path, package: dict, command: str, parser: str) -> None:
    """The runner `scripts.test` runs, with its own arguments and the reporter its parser reads."""
    write_tree(tmp_path, {"package.json": json.dumps(package)})
    a = analyse(tmp_path)
    assert (a.test_command, a.log_parser) == (command, parser)


def test_c_projects(tmp_path: Path) -> None:
    make = write_tree(tmp_path / "make", {
        "Makefile": "all: calc\ncalc: calc.c\n\tcc -o calc calc.c\ncheck: calc\n\t./run-tests.sh\n",
        "calc.c": "int main(void) { return 0; }\n",
    })
    a = analyse(make)
    assert (a.language, a.build_system, a.rebuild_commands, a.test_command, a.log_parser) == \
        ("c", "make", ["make -j2"], "make check", "make")
    cmake = write_tree(tmp_path / "cmake", {
        "CMakeLists.txt": "project(x CXX)\nenable_testing()\nadd_test(NAME t COMMAND t)\n",
        "src/main.cpp": "int main() {}\n",
    })
    a = analyse(cmake)
    assert (a.language, a.build_system, a.test_command, a.log_parser) == \
        ("cpp", "cmake", "cd build && ctest -V", "ctest")
    meson = write_tree(tmp_path / "meson", {"meson.build": "project('x', 'c')\n", "x.c": "int main(void) {}\n"})
    a = analyse(meson)
    assert (a.language, a.build_system, a.log_parser) == ("c", "meson", "surefire")
    assert "build/meson-logs/testlog.junit.xml" in a.test_command


def test_go_rust_java(tmp_path: Path) -> None:
    go = write_tree(tmp_path / "go", {"go.mod": "module example.com/x\n\ngo 1.21\n\ntoolchain go1.22.3\n",
                                      "go.sum": ""})
    a = analyse(go)  # go 1.21 is the minimum (toolchain only a preference): bookworm's 1.19 is too old
    assert (a.language, a.runtime_version, a.debian_release, a.install_commands, a.test_command, a.log_parser) == \
        ("go", "1.24", "trixie", ["go mod download"], "go test -json ./...", "gotest")
    assert a.dependency_files == ["go.mod", "go.sum"]
    vendored = write_tree(tmp_path / "vendored", {"go.mod": "module example.com/v\n\ngo 1.18\n",
                                                  "vendor/modules.txt": "# example.com/dep v1.0.0\n"})
    a = analyse(vendored)
    assert (a.runtime_version, a.runtime_allowed, a.debian_release) == ("1.19", ["1.19", "1.24"], "bookworm")
    assert (a.install_commands, a.test_command) == ([], "go test -mod=vendor -json ./...")

    rust = write_tree(tmp_path / "rust", {"Cargo.toml": '[package]\nname = "x"\nrust-version = "1.70"\n',
                                          "rust-toolchain.toml": '[toolchain]\nchannel = "1.75.0"\n'})
    a = analyse(rust)
    assert (a.language, a.runtime_version, a.debian_release, a.test_command, a.log_parser) == \
        ("rust", "1.85", "trixie", "cargo test --no-fail-fast", "cargo")
    edition = write_tree(tmp_path / "edition", {"Cargo.toml": '[package]\nname = "x"\nedition = "2021"\n',
                                                "Cargo.lock": "version = 3\n"})
    assert (analyse(edition).runtime_version, analyse(edition).debian_release) == ("1.63", "bookworm")
    write_tree(edition, {"Cargo.lock": "version = 4\n"})  # a lock file cargo 1.63 cannot read
    assert analyse(edition).runtime_version == "1.85"
    write_tree(edition, {".cargo/config.toml": '[source.crates-io]\nreplace-with = "vendored"\n'
                                               '[source.vendored]\ndirectory = "vendor"\n'})
    assert analyse(edition).install_commands == []

    maven = write_tree(tmp_path / "maven", {
        "pom.xml": "<project><properties><maven.compiler.source>1.8</maven.compiler.source>"
                   "<maven.compiler.release>11</maven.compiler.release></properties></project>"})
    a = analyse(maven)
    assert (a.language, a.build_system, a.runtime_version, a.debian_release, a.log_parser) == \
        ("java", "maven", "11", "bullseye", "surefire")
    assert "surefire-reports" in a.test_command

    gradle = write_tree(tmp_path / "gradle", {
        "build.gradle.kts": "java { toolchain { languageVersion.set(JavaLanguageVersion.of(21)) } }\n",
        "gradlew": "#!/bin/sh\n"})
    a = analyse(gradle)
    assert (a.build_system, a.runtime_version, a.debian_release) == ("gradle", "21", "trixie")
    assert a.test_command.startswith("./gradlew --no-daemon test --continue")


def test_ci_reading_is_robust(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        ".github/workflows/a.yml": "on:\n  push:\njobs:\n  t:\n    steps:\n      - run: [not, a, string]\n"
                                   "      - with: {node-version: 20.x, go-version: '1.21.5'}\n"
                                   "      - run: npm ci && npm test\n",
        ".github/workflows/b.yml": "\x00\x01 not yaml: [",
        ".github/workflows/c.yml": "",
    })
    found = read_workflows(tmp_path)
    assert found.versions == {"node": ["20"], "go": ["1.21"]}
    assert [(c.kind, c.command) for c in found.commands] == [("test", "npm ci && npm test")]
    assert found.unreadable == [".github/workflows/b.yml"]


def test_a_shell_script_a_workflow_runs_is_read_for_its_tests(tmp_path: Path) -> None:
    """`./ci.sh` is the project's own test procedure: its test lines are read as the step's (the
    script named as their file), its other lines are not; a script outside the tree is not read."""
    write_tree(tmp_path, {
        ".github/workflows/a.yml": "jobs:\n  t:\n    steps:\n      - run: ./ci.sh\n      - run: sh ../../etc/x.sh\n"
                                   "      - run: ./ci.sh --again\n",
        "ci.sh": "#!/bin/bash\ncurl -s https://example.org/upload\necho 'pytest is next'\nPATH=\"$PWD/.tox/py/bin:$PATH\"\n"
                 "python -m pytest -p pkg.plugin \\\n  --run-slow tests\n",
    })
    found = read_workflows(tmp_path)
    assert [(c.file, c.script, c.kind, c.command, c.job) for c in found.commands] == [
        (".github/workflows/a.yml", "ci.sh", "test", "python -m pytest -p pkg.plugin --run-slow tests", "t")]


def test_no_build_system(tmp_path: Path) -> None:
    write_tree(tmp_path, {"README.md": "nothing to build\n"})
    with pytest.raises(NoBuildSystemError, match="no build or dependency file"):
        analyse(tmp_path)


def test_debian_release_by_runtime() -> None:
    assert [debian_release("python", v) for v in ("3.7", "3.9", "3.10", "3.11", "3.12", "3.13")] == \
        ["bullseye", "bullseye", "bookworm", "bookworm", "trixie", "trixie"]
    assert [debian_release("go", v) for v in ("1.13", "1.16", "1.19", "1.22", "1.24")] == \
        ["bullseye", "bookworm", "bookworm", "trixie", "trixie"]
    assert [debian_release("rust", v) for v in ("1.48", "1.56", "1.70")] == ["bullseye", "bookworm", "trixie"]


# --- failure classes seen on real repositories (SWE-bench Lite), each on a repo made here ---------

def test_an_old_project_gets_the_nearest_newer_interpreter(tmp_path: Path) -> None:
    """Classifiers naming only 3.3/3.4 and a 2014 commit: no Python of ours is that old, so the
    nearest newer ones are tried, and dependencies resolve as of the chosen interpreter's release."""
    from swedojo.repolaunch.analysis import PythonPlanning
    from swedojo.repolaunch.recipes.python import python_runtimes

    write_tree(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='old', classifiers=[\n"
                                      "    'Programming Language :: Python :: 3.3',\n"
                                      "    'Programming Language :: Python :: 3.4'])\n"})
    analysis = analyse(tmp_path, day("2014-06-01"))
    assert analysis.runtime_allowed[:3] == ["3.6", "3.7", "3.8"]
    assert python_runtimes(analysis) == ["3.9", "3.11", "3.13"]
    planned = analyse(tmp_path, day("2014-06-01"), PythonPlanning(runtime="3.9"))
    assert planned.runtime_version == "3.9" and planned.debian_release == "bullseye"
    assert planned.resolution_date == "2020-10-05T00:00:00Z"
    assert all("--uploaded-prior-to 2020-10-05T00:00:00Z" in c for c in planned.install_commands)


def test_requirement_files_of_other_jobs_stay_out(tmp_path: Path) -> None:
    """A minimum-versions file and the test pins conflict (click==8.0.0 vs click==8.1.3): only the
    tests' file is installed, never every requirement file found."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n",
        "requirements/tests.txt": "click==8.1.3\npytest==7.3.1\n",
        "requirements/tests-pallets-min.txt": "click==8.0.0\n",
        "requirements/dev.txt": "-r tests.txt\ntox\n",
        "requirements/docs.txt": "sphinx\n",
        "requirements/build.txt": "build\n",
    })
    analysis = analyse(tmp_path, day("2023-04-01"))
    assert analysis.requirement_files == ["requirements/tests.txt"]
    assert "tests-pallets-min" not in " ".join(analysis.install_commands)


def test_tox_substitutions_do_not_reach_pip(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='p')\n",
        "requirements-test.txt": "mock\n",
        "tox.ini": "[tox]\nenvlist = py39\n[testenv]\ndeps =\n    {env:_PYTEST_TOX_EXTRA_DEP:}\n"
                   "    hypothesis{env:HYPOTHESIS_PIN:>=3.56}\n    -r{toxinidir}/requirements-test.txt\n"
                   "    {[base]deps}\ncommands = pytest {posargs}\n",
    })
    analysis = analyse(tmp_path, day("2021-01-01"))
    assert not any("{" in command for command in analysis.install_commands), analysis.install_commands
    assert "'hypothesis>=3.56'" in analysis.install_commands[-1]
    assert analysis.requirement_files == ["requirements-test.txt"]


def test_a_retry_plan_installs_undated_requirements_first_and_can_drop_requirement_files(tmp_path: Path) -> None:
    """What a launch asks for after `No matching distribution found for atomicwrites>=1.0` (a
    package deleted and uploaded again after the date), after a requirement file whose pins do
    not run on the interpreter (loosened: a real repo's test plugin is kept), and after one that
    no longer installs at all."""
    from swedojo.repolaunch.analysis import PythonPlanning

    write_tree(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='p')\n",
                          "requirements.txt": "rudolf2\n"})
    undated = analyse(tmp_path, day("2019-01-01"), PythonPlanning(runtime="3.9", undated=("atomicwrites>=1.0",)))
    assert undated.install_commands[0] == "pip install 'atomicwrites>=1.0'"
    assert "-r requirements.txt" in undated.install_commands[-1]
    write_tree(tmp_path, {"requirements.txt": "pytest==2.8.7  # too old for the interpreter\n-r other.txt\n"
                                              "pytest-httpbin[extra]==0.0.7; python_version >= '3'\n"})
    loose = analyse(tmp_path, day("2019-01-01"), PythonPlanning(runtime="3.9", loose_pins=True))
    assert loose.install_commands[-1].startswith("pip install --uploaded-prior-to 2020-10-05T00:00:00Z pytest ")
    assert "'pytest-httpbin[extra]; python_version >= \"3\"'" in loose.install_commands[-1]
    assert "-r" not in loose.install_commands[-1] and "==" not in loose.install_commands[-1]
    bare = analyse(tmp_path, day("2019-01-01"), PythonPlanning(runtime="3.9", requirement_files=False))
    assert bare.requirement_files == [] and "-r" not in " ".join(bare.install_commands)
