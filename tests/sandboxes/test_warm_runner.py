"""The warm test runner: pooled sandboxes send `python3 -m pytest` to a fork server that has pytest imported.

The docker tests compare the served command with the plain one in the same sandbox: output,
exit code, environment, working directory, timeouts, and the fallbacks to a plain run.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from swedojo.sandboxes.docker import DockerSandbox
from swedojo.sandboxes.pool import SandboxPool
from swedojo.sandboxes.warm_runner import RUNNER_DIR, WarmRunner

PYTHON_IMAGE = "swedojo/python:bookworm"
PLAIN = "python3 -m pytest -rA -p no:cacheprovider"

TESTS = {
    "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
    "tests/test_basic.py": """\
import os


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert [1, 2] == [1, 3]


def test_sees_the_command_environment():
    assert os.environ.get("SWEDOJO_MARK") == "set-in-terminal"


def test_served_by():
    # who started this pytest: the fork server when served, the shell when run plainly
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
        print("PARENT=" + handle.read().replace(b"\\0", b" ").decode())
""",
    "tests/test_slow.py": "import time\n\n\ndef test_sleeps():\n    time.sleep(600)\n",
    "sub/tests/test_sub.py": "def test_in_sub():\n    assert True\n",
    "shadow/iniconfig.py": "raise ImportError('SHADOWED: the repo has its own iniconfig')\n",
    # same bytes, two paths: a memo keyed by content alone would report the wrong file
    "twins/test_a.py": "def test_twin():\n    value = [1, 2]\n    assert value == [1, 3]\n",
    "twins/test_b.py": "def test_twin():\n    value = [1, 2]\n    assert value == [1, 3]\n",
    # compiling warns (invalid escape): the warning must show as in a plain run
    "twins/test_warns.py": "PATTERN = '\\d+'\n\n\ndef test_pattern():\n    assert PATTERN\n",
}


def test_runner_serves_only_module_runs_of_its_interpreter() -> None:
    runner = WarmRunner.for_command(PLAIN)
    assert runner == WarmRunner(python="python3", module="pytest")
    assert WarmRunner.for_command("/usr/bin/python3.11 -m pytest tests") == WarmRunner(python="/usr/bin/python3.11")
    for other in ("pytest -rA", "python3 -m pytestx", "tox -e py", "cd x && python3 -m pytest", "python3 -m unittest"):
        assert WarmRunner.for_command(other) is None, other
    served = runner.rewrite(PLAIN + " 'tests/test_a.py::test b'")
    assert served == f"python3 -I -S {RUNNER_DIR}/forkserver.py run {RUNNER_DIR}/socket pytest -rA -p no:cacheprovider 'tests/test_a.py::test b'"
    for untouched in ("python3 -m pytestx", "python -m pytest", "echo python3 -m pytest", "python3 -c 1"):
        assert runner.rewrite(untouched) == untouched


def _same(text: str) -> str:
    """Pytest output without what differs between the two ways of running it (durations, who started it)."""
    return re.sub(r"in \d+\.\d+s", "in Ns", re.sub(r"(?m)^PARENT=.*$", "PARENT=", text))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("runner") / "repo"
    path.mkdir()
    for name, text in TESTS.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "tests"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True, text=True)
    return path, head.stdout.strip()


@pytest.fixture
def warm(repo: tuple[Path, str]) -> Iterator[DockerSandbox]:
    with SandboxPool(size=1) as pool:
        runner = WarmRunner.for_command(PLAIN)
        assert pool.wait_ready(PYTHON_IMAGE, timeout=60, runner=runner)
        sandbox = pool.acquire(PYTHON_IMAGE, *repo, runner=runner)
        try:
            sandbox.exec("export SWEDOJO_MARK=set-in-terminal")
            yield sandbox
        finally:
            sandbox.close()


def _plain(command: str) -> str:
    """`command` as the sandbox would not rewrite it (same program, same arguments)."""
    return "command " + command


@pytest.mark.docker
def test_served_runs_match_plain_runs(warm: DockerSandbox) -> None:
    assert warm.exec(f"test -s {RUNNER_DIR}/socket.pid").ok, "a pooled container counts as ready once its runner listens"
    for args in ("tests/test_basic.py", "tests/test_basic.py -k 'passes or environment'", "tests/test_nothing.py", "-k nomatch"):
        served = warm.exec(f"{PLAIN} {args}")
        plain = warm.exec(_plain(f"{PLAIN} {args}"))
        assert (served.exit_code, _same(served.output)) == (plain.exit_code, _same(plain.output)), args
    basic = warm.exec(f"{PLAIN} tests/test_basic.py")
    assert basic.exit_code == 1 and "1 failed, 3 passed" in basic.output
    assert "PARENT=python3 /tmp/.swedojo-runner/forkserver.py serve" in basic.output, "the fork server ran it"
    assert "PARENT=python3 /tmp/.swedojo-runner/forkserver.py serve" not in warm.exec(_plain(f"{PLAIN} tests/test_basic.py")).output
    assert warm.exec(f"{PLAIN} tests/test_nothing.py").exit_code == 4  # usage error: no such file
    assert warm.exec(f"{PLAIN} -k nomatch").exit_code == 5  # nothing collected


@pytest.mark.docker
def test_memoised_assertion_rewriting_reports_as_a_plain_run(warm: DockerSandbox) -> None:
    fresh = "rm -rf twins/__pycache__"  # no bytecode left by the run before (pytest writes it here)
    warm.exec(fresh)
    plain = warm.exec(_plain(f"{PLAIN} twins"))
    assert "twins/test_a.py:3: AssertionError" in plain.output and "twins/test_b.py:3: AssertionError" in plain.output
    assert "invalid escape sequence" in plain.output
    for _ in range(2):  # the first run fills the server's memo, the second reads it
        warm.exec(fresh)
        served = warm.exec(f"{PLAIN} twins")
        assert (served.exit_code, _same(served.output)) == (plain.exit_code, _same(plain.output))
    assert "forkserver.py serve" in warm.exec(f"{PLAIN} tests/test_basic.py -k served").output, "served"


@pytest.mark.docker
def test_working_directory_and_sys_path_follow_the_command(warm: DockerSandbox) -> None:
    warm.exec("cd sub")
    served = warm.exec(f"{PLAIN} -q")
    warm.exec("cd /testbed")
    assert served.exit_code == 0 and "1 passed" in served.output, "collected from sub/, where the command ran"
    served = warm.exec(f"{PLAIN} --rootdir=sub sub/tests -q")
    assert served.exit_code == 0 and "1 passed" in served.output


@pytest.mark.docker
def test_a_timeout_kills_the_served_run_and_later_runs_still_work(warm: DockerSandbox) -> None:
    slow = warm.exec(f"{PLAIN} tests/test_slow.py", timeout=3)
    assert slow.timed_out
    leftovers = warm.exec("ps -eo args | grep -c '[t]ests/test_slow.py' || true").output.strip()
    assert leftovers == "0", "the timed-out test process is gone"
    # the docker terminal's forced interrupt ends every process but its shell and the runner's server
    again = warm.exec(f"{PLAIN} tests/test_basic.py")
    assert again.exit_code == 1 and "1 failed, 3 passed" in again.output
    assert "PARENT=python3 /tmp/.swedojo-runner/forkserver.py serve" in again.output, "still served"


@pytest.mark.docker
def test_it_falls_back_to_a_plain_run_when_it_cannot_serve(warm: DockerSandbox) -> None:
    # the interpreter reads PYTHON* variables at startup: a different set is not servable
    changed = warm.exec(f"PYTHONDONTWRITEBYTECODE=1 {PLAIN} tests/test_basic.py -k served")
    assert changed.exit_code == 0 and "PARENT=" in changed.output
    assert "forkserver.py serve" not in changed.output.split("PARENT=")[1].splitlines()[0]
    warm.exec("pkill -f 'forkserver.py serve'; sleep 0.2")
    gone = warm.exec(f"{PLAIN} tests/test_basic.py")
    assert gone.exit_code == 1 and "1 failed, 3 passed" in gone.output
    assert "forkserver.py serve" not in gone.output


@pytest.mark.docker
def test_a_repo_that_shadows_a_module_the_server_imported_runs_plainly(warm: DockerSandbox) -> None:
    # pytest imports iniconfig; run from shadow/, a plain run finds the repo's iniconfig.py first
    warm.exec("cd shadow")
    try:
        served = warm.exec(f"{PLAIN} ../tests/test_basic.py -k passes")
        plain = warm.exec(_plain(f"{PLAIN} ../tests/test_basic.py -k passes"))
    finally:
        warm.exec("cd /testbed")
    assert "SHADOWED" in plain.output and plain.exit_code != 0
    assert (served.exit_code, _same(served.output)) == (plain.exit_code, _same(plain.output))


@pytest.mark.docker
def test_a_virtualenv_made_after_the_server_started_runs_plainly(warm: DockerSandbox) -> None:
    # A launched environment's repo layer makes a virtualenv over the image's Python and installs the
    # project into it once the container (and its server) is up; `python3` then finds that one first.
    # Served by the server's interpreter, the test could not import what only the virtualenv has.
    venv = "$HOME/venv"
    made = warm.exec(f"python3 -m venv --without-pip --system-site-packages {venv} && "
                     f"site=$({venv}/bin/python3 -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))') && "
                     "echo 'WHERE = \"venv\"' > \"$site/only_in_venv.py\" && mkdir -p venvtests && "
                     "printf 'import only_in_venv\\n\\n\\ndef test_it():\\n    assert only_in_venv.WHERE == \"venv\"\\n' "
                     "> venvtests/test_venv.py")
    assert made.ok, made.output
    warm.exec(f"OLD_PATH=$PATH; export PATH={venv}/bin:$PATH")
    try:
        served = warm.exec(f"{PLAIN} venvtests")
        plain = warm.exec(_plain(f"{PLAIN} venvtests"))
    finally:
        warm.exec(f"export PATH=$OLD_PATH; rm -rf {venv} venvtests")
    assert plain.exit_code == 0 and "1 passed" in plain.output, plain.output
    assert (served.exit_code, _same(served.output)) == (plain.exit_code, _same(plain.output))


@pytest.mark.docker
def test_a_package_installed_after_the_server_started_runs_plainly(warm: DockerSandbox) -> None:
    # The same interpreter, but a directory on its import path was installed into since the server
    # started: the server's path cache cannot know the new module.
    site = "$(python3 -c 'import site; print(site.getusersitepackages())')"
    made = warm.exec(f"mkdir -p {site} && echo 'WHERE = \"user\"' > {site}/only_in_user_site.py && mkdir -p usertests && "
                     "printf 'import only_in_user_site\\n\\n\\ndef test_it():\\n    assert only_in_user_site.WHERE\\n' "
                     "> usertests/test_user.py")
    assert made.ok, made.output
    try:
        served = warm.exec(f"{PLAIN} usertests")
        plain = warm.exec(_plain(f"{PLAIN} usertests"))
    finally:
        warm.exec(f"rm -rf {site}/only_in_user_site.py usertests")
    assert (served.exit_code, _same(served.output)) == (plain.exit_code, _same(plain.output)), served.output
