"""The runner as the project runs it (`swedojo.repolaunch.runner`): package.json script chains
modelled on real projects, fail-fast options struck from commands and undone from configuration,
and two real runs (mocha from the npm registry with `bail` in `.mocharc.json`, pytest with `-x` in
`addopts`) that show every failing test runs once the option is undone.

The mocha run needs npm (`toolchains.require_tools`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from toolchains import require_tools

from swedojo.repolaunch.runner import (
    follow_test_script,
    jest_config_bail,
    mocha_config_bail,
    pytest_config_fail_fast,
    strip_fail_fast,
)

EXPRESS = "mocha --require test/support/env --reporter spec --bail --check-leaks test/ test/acceptance/"

# (name, scripts, expected command, env, trail)
FOLLOWED = [
    ("express: the runner itself", {"test": EXPRESS}, EXPRESS, [], ["test"]),
    ("a few files under other settings, then the whole suite: the whole suite",
     {"test": "TZ=Pacific/Auckland npm run test-tz && npm run test-tz && jest", "test-tz": "jest test/timezone.test"},
     "jest", [], ["test"]),
    ("two parts each with files of their own: the first",
     {"test": "mocha test/unit && mocha test/integration"}, "mocha test/unit", [], ["test"]),
    ("lint first, then the unit script behind cross-env",
     {"test": "npm run lint && npm run test:unit", "lint": "eslint . && prettier --check .",
      "test:unit": "cross-env NODE_ENV=test jest --bail src"},
     "jest --bail src", ["NODE_ENV=test"], ["test", "test:unit"]),
    ("run-s with a glob, in declaration order",
     {"test": "run-s lint test:*", "lint": "xo", "test:types": "tsc --noEmit", "test:unit": "ava --verbose",
      "test:e2e:browser": "karma start"},
     "ava --verbose", [], ["test", "test:unit"]),
    ("npm-run-all with options", {"test": "npm-run-all --silent -s build test:node", "build": "tsc",
                                  "test:node": "tape 'test/**/*.js'"},
     "tape 'test/**/*.js'", [], ["test", "test:node"]),
    ("nyc dropped, its options and the glob's quotes kept",
     {"test": 'nyc --reporter=lcov --reporter text mocha "test/**/*.js"'}, 'mocha "test/**/*.js"', [], ["test"]),
    ("c8 around node's own runner", {"test": "c8 -r lcov node --test test/"}, "node --test test/", [], ["test"]),
    ("istanbul cover: mocha's arguments follow --",
     {"test": "istanbul cover node_modules/.bin/_mocha --report lcovonly -- -R spec test/"},
     "node_modules/.bin/_mocha -R spec test/", [], ["test"]),
    ("node with its own options starting mocha",
     {"test": "node --expose-gc ./node_modules/.bin/_mocha --timeout 5000 test/*.js"},
     "node --expose-gc ./node_modules/.bin/_mocha --timeout 5000 test/*.js", [], ["test"]),
    ("VAR= prefixes through npm run, arguments after -- appended",
     {"test": "BABEL_ENV=test npm run unit -- --grep api", "unit": "TZ=UTC mocha test/unit"},
     "mocha test/unit --grep api", ["BABEL_ENV=test", "TZ=UTC"], ["test", "unit"]),
    ("yarn: a script, then a binary through yarn",
     {"test": "yarn lint; yarn test:ci", "lint": "standard", "test:ci": "yarn jest --ci --coverage"},
     "jest --ci --coverage", [], ["test", "test:ci"]),
    ("pnpm run and pnpm exec", {"test": "pnpm run typecheck && pnpm run vitest", "typecheck": "tsc -p .",
                                "vitest": "pnpm exec vitest run --bail 1"},
     "vitest run --bail 1", [], ["test", "vitest"]),
    ("npm test from another script, npx with options",
     {"ci": "npm test", "test": "npx --no-install uvu -r tsm tests"}, "uvu -r tsm tests", [], ["ci", "test"]),
    ("export and a pipe to a formatter", {"test": "export NODE_ENV=test && tape test/*.js | tap-spec"},
     "tape test/*.js", ["NODE_ENV=test"], ["test"]),
    ("a runner under node_modules' package folder", {"test": "node node_modules/jest/bin/jest.js -i"},
     "node node_modules/jest/bin/jest.js -i", [], ["test"]),
]


@pytest.mark.parametrize(("scripts", "command", "env", "trail"), [f[1:] for f in FOLLOWED],
                         ids=[f[0] for f in FOLLOWED])
def test_a_script_chain_is_followed_to_the_runner(scripts: dict[str, str], command: str, env: list[str],
                                                  trail: list[str]) -> None:
    start = "ci" if "ci" in scripts else "test"
    trace = follow_test_script(scripts, start)
    assert trace.invocation is not None, trace.reason
    assert (trace.invocation.command, trace.invocation.env, trace.trail) == (command, env, trail)


def test_the_trail_says_what_was_dropped_and_passed_over() -> None:
    trace = follow_test_script({"test": "npm run lint && cd packages/core && cross-env CI=1 nyc mocha -b",
                                "lint": "eslint ."})
    assert trace.invocation is not None
    assert trace.invocation.model_dump() == {
        "runner": "mocha", "command": "mocha -b", "args": ["-b"], "env": ["CI=1"], "workdir": "packages/core",
        "dropped": ["cross-env", "nyc"]}
    assert trace.passed_over == ["eslint ."]


PREPARED = [
    ("npm's pretest hook, which only builds: run whole, as npm runs it",
     {"test": "c8 mocha ./test/*.mjs", "pretest": "npm run compile -- -p tsconfig.test.json",
      "compile": "rimraf build && tsc", "posttest": "npm run check", "check": "gts lint"},
     ["npm run pretest"]),
    ("a hook that lints, then builds through a script with arguments",
     {"test": "mocha", "pretest": "xo && npm run compile -- -p tsconfig.test.json", "compile": "rimraf build && tsc"},
     ["npm run compile -- -p tsconfig.test.json"]),
    ("a hook that lints and builds: only the build",
     {"test": "mocha", "pretest": "npm run lint && npx babel src -d lib", "lint": "eslint . && prettier -c ."},
     ["npx babel src -d lib"]),
    ("a compile step in the chain, its variables kept",
     {"test": "NODE_ENV=test tsc -p . && NODE_ENV=test mocha"}, ["NODE_ENV=test tsc -p ."]),
    ("a build script before the runner", {"test": "npm run build && jest", "build": "rollup -c"}, ["npm run build"]),
    ("type checks and lint only", {"test": "tsc --noEmit && npx eslint . && jest"}, []),
    ("steps after the runner", {"test": "jest && npm run build", "build": "rollup -c"}, []),
    ("the hook of a script on the trail", {"test": "npm run unit", "preunit": "node gen.js", "unit": "jest"},
     ["npm run preunit"]),
]


@pytest.mark.parametrize(("scripts", "prepare"), [f[1:] for f in PREPARED], ids=[f[0] for f in PREPARED])
def test_the_steps_the_scripts_run_before_the_runner_are_kept_without_the_checks(
        scripts: dict[str, str], prepare: list[str]) -> None:
    trace = follow_test_script(scripts)
    assert trace.invocation is not None, trace.reason
    assert trace.prepare == prepare


NOT_FOUND = [
    ("a cycle", {"test": "npm run a", "a": "npm run b", "b": "npm test"}, "cycle test -> a -> b -> test"),
    ("a plain node script", {"test": "node test/index.js"}, "node test/index.js"),
    ("a missing script", {"test": "npm run unit"}, "script unit is not in package.json"),
    ("workspaces", {"test": "lerna run test"}, "lerna run test"),
    ("an unbalanced quote", {"test": "mocha 'test"}, "unbalanced quote"),
    ("no test script", {"build": "tsc"}, "no script 'test'"),
]


@pytest.mark.parametrize(("scripts", "reason"), [f[1:] for f in NOT_FOUND], ids=[f[0] for f in NOT_FOUND])
def test_no_runner_comes_with_a_reason(scripts: dict[str, str], reason: str) -> None:
    trace = follow_test_script(scripts)
    assert trace.invocation is None
    assert reason in trace.reason


def test_a_deep_chain_stops() -> None:
    scripts = {f"s{i}": f"npm run s{i + 1}" for i in range(30)} | {"s30": "jest"}
    assert "deeper than" in follow_test_script(scripts, "s0").reason


STRIPPED = [
    (EXPRESS, EXPRESS.replace(" --bail", ""), ["--bail"]),
    ("mocha -b test/", "mocha test/", ["-b"]),
    ("CI=1 npx jest --bail=3 src && echo --bail", "CI=1 npx jest src && echo --bail", ["--bail=3"]),
    ("jest --bail 1", "jest 1", ["--bail"]),  # jest's --bail is boolean: `1` is a path pattern
    ("jest --bail=0 -b", "jest --bail=0", ["-b"]),
    ("vitest run --bail 1 'a b.test.ts'", "vitest run 'a b.test.ts'", ["--bail", "1"]),
    ("vitest run --bail=2", "vitest run", ["--bail=2"]),
    ("ava --fail-fast --verbose", "ava --verbose", ["--fail-fast"]),
    ("tap --bail test/*.js", "tap test/*.js", ["--bail"]),
    ("python -m pytest -xvs tests/", "python -m pytest -vs tests/", ["-x (of -xvs)"]),
    ("pytest --exitfirst --maxfail 3 -rxs -k 'x and not -x'", "pytest -rxs -k 'x and not -x'",
     ["--exitfirst", "--maxfail", "3"]),
    ("pytest -x --maxfail=2 \"tests/a b.py\"", "pytest \"tests/a b.py\"", ["-x", "--maxfail=2"]),
    ("go test -failfast -json ./...", "go test -json ./...", ["-failfast"]),
    ("cargo test --no-fail-fast", "cargo test --no-fail-fast", []),
    ("mocha 'unbalanced", "mocha 'unbalanced", []),
]


@pytest.mark.parametrize(("command", "stripped", "removed"), STRIPPED, ids=[s[0] for s in STRIPPED])
def test_fail_fast_options_are_stripped(command: str, stripped: str, removed: list[str]) -> None:
    assert strip_fail_fast(command) == (stripped, removed)


PYTEST_CONFIGS = [
    ("setup.cfg", "[metadata]\nname = x\n[tool:pytest]\naddopts = --strict-markers\n    -x\n", ["-x"]),
    ("pytest.ini", "[pytest]\naddopts = -ra --maxfail=2\n", ["--maxfail=2"]),
    ("tox.ini", "[tox]\nenvlist = py\n[pytest]\naddopts = -vx\n", ["-x (of -vx)"]),
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "--exitfirst -p no:warnings"\n', ["--exitfirst"]),
    ("pyproject.toml", '[tool.pytest]\naddopts = ["--maxfail", "1"]\n', ["--maxfail", "1"]),
]


@pytest.mark.parametrize(("name", "text", "found"), PYTEST_CONFIGS, ids=[f"{c[0]}: {c[1][-20:]}" for c in PYTEST_CONFIGS])
def test_pytest_addopts_fail_fast_is_found(tmp_path: Path, name: str, text: str, found: list[str]) -> None:
    (tmp_path / name).write_text(text)
    finding = pytest_config_fail_fast(tmp_path)
    assert finding is not None
    assert (finding.file, finding.found, finding.override) == (name, found, ["--maxfail=0"])


def test_only_the_config_file_pytest_reads_counts(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = -x\n")
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = -v\n")  # read first: setup.cfg is ignored
    assert pytest_config_fail_fast(tmp_path) is None
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py\n")  # no [pytest]: setup.cfg is read
    assert pytest_config_fail_fast(tmp_path) is not None


MOCHA_CONFIGS = [
    (".mocharc.json", '{"bail": true, "spec": "test/"}', "", ["--no-bail"]),
    (".mocharc.yml", "spec: test/\nbail: true\n", "", ["--no-bail"]),
    (".mocharc.js", "module.exports = { bail: true, timeout: 5000 };", "", ["--no-bail"]),
    ("package.json", '{"mocha": {"bail": true}}', "", ["--no-bail"]),
    ("test/mocha.opts", "--require test/setup\n--bail\n", "^7.0.0", ["--no-bail"]),
    ("test/mocha.opts", "--require test/setup\n--bail\n", "^5.2.0", []),  # mocha 5: unknown option --no-bail
]


@pytest.mark.parametrize(("name", "text", "version", "override"), MOCHA_CONFIGS, ids=[f"{c[0]} {c[2]}" for c in MOCHA_CONFIGS])
def test_mocha_bail_in_configuration_is_found(tmp_path: Path, name: str, text: str, version: str,
                                              override: list[str]) -> None:
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
    finding = mocha_config_bail(tmp_path, version)
    assert finding is not None
    assert (finding.file, finding.override) == (name, override)


def test_mocha_without_bail_or_with_bail_off(tmp_path: Path) -> None:
    (tmp_path / ".mocharc.yml").write_text("bail: false\n")
    assert mocha_config_bail(tmp_path) is None


@pytest.mark.parametrize(("name", "text"), [("package.json", '{"jest": {"bail": 1}}'),
                                            ("jest.config.js", "module.exports = {\n  bail: true,\n};\n"),
                                            ("jest.config.json", '{"bail": 2}')])
def test_jest_bail_in_configuration_is_found(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    finding = jest_config_bail(tmp_path)
    assert finding is not None
    assert (finding.file, finding.override) == (name, ["--no-bail"])


def test_jest_bail_zero_is_no_bail(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"jest": {"bail": 0}}')
    (tmp_path / "jest.config.ts").write_text("export default { bail: 0 };")
    assert jest_config_bail(tmp_path) is None


# --- real runs -----------------------------------------------------------------------------------

TWO_FAILURES = """const assert = require('assert');
describe('two failures', () => {
  it('first', () => assert.strictEqual(1, 2));
  it('second', () => assert.strictEqual(1, 3));
});
"""


def test_a_real_mocha_with_bail_in_its_rc_runs_both_failing_tests(tmp_path: Path, npm_env: dict) -> None:
    require_tools("npm")
    scripts = {"test": "npm run lint && npm run unit", "lint": "node -e 0",
               "unit": "cross-env NODE_ENV=test mocha --bail --reporter spec test/"}
    (tmp_path / "package.json").write_text(json.dumps({"name": "bail-demo", "version": "1.0.0", "scripts": scripts}))
    (tmp_path / ".mocharc.json").write_text('{"bail": true}\n')
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "two.spec.js").write_text(TWO_FAILURES)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "mocha@^11"], cwd=tmp_path, env=npm_env,
                   check=True, capture_output=True, timeout=300)

    def failing(command: str) -> str:
        run = subprocess.run(f"npx {command}", check=False, shell=True, cwd=tmp_path, env=npm_env, capture_output=True, text=True,
                             timeout=120)
        return next(line.strip() for line in run.stdout.splitlines() if "failing" in line)

    trace = follow_test_script(scripts)
    assert trace.invocation is not None and trace.invocation.command == "mocha --bail --reporter spec test/"
    assert failing(trace.invocation.command) == "1 failing"
    command, removed = strip_fail_fast(trace.invocation.command)
    assert removed == ["--bail"] and failing(command) == "1 failing"  # .mocharc.json still bails
    finding = mocha_config_bail(tmp_path, "^11")
    assert finding is not None
    assert failing(" ".join([command, *finding.override])) == "2 failing"


def test_a_real_pytest_with_x_in_addopts_runs_both_failing_tests(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = -x -p no:cacheprovider\n")
    (tmp_path / "test_two.py").write_text("def test_first():\n    assert 0\n\n\ndef test_second():\n    assert 0\n")

    def failed(command: str) -> str:
        run = subprocess.run(shlex.split(command), check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return run.stdout.strip().splitlines()[-1].split(" in ")[0]

    pytest_command = f"{shlex.quote(sys.executable)} -m pytest -xq"
    assert failed(pytest_command) == "1 failed"
    command, removed = strip_fail_fast(pytest_command)
    assert removed == ["-x (of -xq)"] and failed(command) == "1 failed"  # addopts still has -x
    finding = pytest_config_fail_fast(tmp_path)
    assert finding is not None
    assert failed(" ".join([command, *finding.override])) == "2 failed"
