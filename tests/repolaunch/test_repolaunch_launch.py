"""Local launches end to end on real git repositories, real pip installs and real sandboxes.

The main repository's commit is dated 2024-06-01, so its dependencies resolve as of that day
(pytest 8.2.1; 8.2.2 came out on 2024-06-04). The repositories for bad input share its dependency
files, hence its cached dependency layer, so only one cold build runs in this module.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
import typer
from launch_helpers import (
    NEEDS_NETWORK,
    CALC_FLAKY,
    CALC_NETWORK,
    CALC_STATUSES,
    DATE,
    PROJECT,
    TESTS,
    commit_all,
    sandbox_at_a_later_commit,
    write_tree,
)
from rich.console import Console
from typer.testing import CliRunner

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.cli import Progress, launch_command
from swedojo.repolaunch.errors import (
    AnalyseError,
    DiscoveryError,
    InstallError,
    LaunchError,
    ResolveError,
)
from swedojo.repolaunch.fallback import SetupRequest
from swedojo.repolaunch.launch import UnsupportedBackendError, launch, rebuild
from swedojo.repolaunch.recipes.python import EDITABLE_OR_INSTALLED
from swedojo.sandboxes.hostnet import nat_problem
from swedojo.schema import TestStatus


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory, env_cache: Path) -> dict:
    root = tmp_path_factory.mktemp("launch")
    repo = write_tree(root / "calc", {**PROJECT, **TESTS})
    commit_all(repo, "initial", DATE)
    start = time.monotonic()
    spec = launch(str(repo), root / "out", cache_dir=env_cache / "envs")
    return {"repo": repo, "spec": spec, "out": root / "out", "cold_s": time.monotonic() - start, "root": root}


def test_local_launch_end_to_end(launched: dict) -> None:
    spec, out = launched["spec"], launched["out"]
    assert spec.backend == "local"
    assert spec.test_status == CALC_STATUSES
    assert spec.flaky_tests == CALC_FLAKY
    assert spec.network_tests == CALC_NETWORK
    assert (spec.language, spec.build_system, spec.log_parser) == ("python", "pyproject", "pytest")
    assert spec.resolution_date == DATE
    assert spec.resolved_dependencies["pytest"] == "8.2.1"  # as of the commit date
    assert "calc" not in spec.resolved_dependencies  # the project lives in the repo layer
    assert spec.install_commands[-1] == f"pip install --uploaded-prior-to {DATE} pip"  # the layer's own pip
    assert spec.rebuild_commands[:2] == ["swedojo-overlay", EDITABLE_OR_INSTALLED]
    assert (spec.env_vars["TZ"], spec.env_vars["PYTHONHASHSEED"], spec.env_vars["LC_ALL"]) == ("UTC", "0", "C.UTF-8")
    assert json.loads((out / "envspec.json").read_text())["flaky_tests"] == spec.flaky_tests
    log = (out / "build.log").read_text()
    assert "==> test run 2/2" in log and "baseline: 6 tests, 1 flaky" in log and "network tests: 1" in log
    print(f"\ncold local launch: {launched['cold_s']:.1f}s")


def test_second_launch_is_a_cache_hit(launched: dict, env_cache: Path) -> None:
    spec = launched["spec"]
    start = time.monotonic()
    again = launch(str(launched["repo"]), launched["root"] / "again", commit=spec.commit[:10],
                   cache_dir=env_cache / "envs")
    warm = time.monotonic() - start
    log = (launched["root"] / "again" / "build.log").read_text()
    assert "cache hit" in log and "validated spec cache hit" in log and "test run" not in log
    assert (again.test_status, again.flaky_tests, again.network_tests, again.commit) == \
        (spec.test_status, spec.flaky_tests, spec.network_tests, spec.commit)
    print(f"\nwarm local launch: {warm:.1f}s (cold {launched['cold_s']:.1f}s)")
    assert warm < launched["cold_s"]


def test_instance_sandbox_on_a_later_commit(launched: dict) -> None:
    """How eval uses a launched environment: a fresh prepared sandbox at an instance's commit. It
    shows the dependency layer with its pip and its Python, and of the harness's package nothing:
    its bundled suites hold gold patches."""
    import swedojo

    gold = Path(swedojo.__file__).resolve().parent / "datasets" / "bundled" / "demo" / "tasks.jsonl"
    with sandbox_at_a_later_commit(launched) as sandbox:
        assert sandbox.diff() == ""  # the repo layer's egg-info stays out of patches
        result = sandbox.exec('pip --version && pip list 2>/dev/null | grep -c "^pytest " && ls "$SWEDOJO_ENV"/venv/bin/python')
        assert result.ok and result.output.startswith("pip ") and "\n1\n" in result.output, result.output
        assert gold.is_file() and sandbox.exec(f"cat {gold}").exit_code != 0


def test_not_a_repo(tmp_path: Path) -> None:
    plain = write_tree(tmp_path / "plain", {"setup.py": ""})
    with pytest.raises(ResolveError) as caught:
        launch(str(plain), tmp_path / "out")
    assert caught.value.stage == "resolve" and "not a git repository" in str(caught.value)
    assert caught.value.log_path == tmp_path / "out" / "build.log" and caught.value.log_path.read_text()


def test_unknown_commit(launched: dict, tmp_path: Path) -> None:
    with pytest.raises(ResolveError, match=r"\[resolve\] .*no commit 'deadbeef'"):
        launch(str(launched["repo"]), tmp_path / "out", commit="deadbeef")
    assert "deadbeef" in (tmp_path / "out" / "build.log").read_text()


def test_install_fails(make_repo, tmp_path: Path, env_cache: Path) -> None:
    repo = make_repo("broken", {"setup.py": "raise SystemExit('this setup.py is broken')\n", "test_x.py": ""})
    with pytest.raises(InstallError) as caught:
        launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert caught.value.stage == "install" and "exited with 1" in caught.value.message
    assert "this setup.py is broken" in caught.value.log_path.read_text()
    assert not [p for p in (env_cache / "envs").iterdir() if p.is_dir() and not (p / "env.json").exists()]


def test_a_requirement_file_that_does_not_install_is_left_out_on_a_retry(make_repo, tmp_path: Path,
                                                                         env_cache: Path) -> None:
    """Seen on real repositories: a requirements file whose pins cannot be installed (here: together).
    The launch records the failed plan and builds again with the pins loosened. (A file it names
    that does not exist is dropped before pip sees it: `test_python_requirements`.)"""
    repo = make_repo("stale", {"requirements-test.txt": "iniconfig==1.1.1\niniconfig==2.0.0\n",
                               "test_x.py": "def test_ok():\n    pass\n"})
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert len(spec.attempts) == 1 and "[install]" in spec.attempts[0] and "exited with 1" in spec.attempts[0]
    assert spec.test_status == {"test_x.py::test_ok": TestStatus.PASSED}
    log = (tmp_path / "out" / "build.log").read_text()
    assert "ResolutionImpossible" in log and "pins loosened" in log
    assert json.loads((tmp_path / "out" / "envspec.json").read_text())["attempts"] == spec.attempts


def test_only_the_failing_tests_run_again_with_the_network_on(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """Seen on a real repository of 26,000 tests, 316 failing at the commit: the run with the network
    on was of the whole suite again (12 minutes). It is of the failing tests alone now; those that
    pass alone run alone once more with the network off, so a test that failed only for the suite
    around it (here: a variable an earlier test leaves set) is not taken for a network test."""
    repo = make_repo("netonly", {
        "requirements-test.txt": "pytest\n",
        "tests/test_a.py": "import os\n\n\ndef test_pollutes():\n    os.environ['LEFT_BEHIND'] = '1'\n",
        "tests/test_b.py": "import os\n\n\ndef test_clean():\n    assert 'LEFT_BEHIND' not in os.environ\n\n\n"
                           "def test_bug():\n    assert 1 + 1 == 3\n",
        "tests/test_net.py": NEEDS_NETWORK,
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_a.py::test_pollutes": TestStatus.PASSED,
                                "tests/test_b.py::test_bug": TestStatus.FAILED,
                                "tests/test_b.py::test_clean": TestStatus.FAILED,
                                "tests/test_net.py::test_needs_network": TestStatus.FAILED}
    assert spec.network_tests == ["tests/test_net.py::test_needs_network"]
    log = (tmp_path / "out" / "build.log").read_text()
    online = log.split("==> test run with the network on", 1)[1].split("==>", 1)[0]
    command = next(line for line in online.splitlines() if line.startswith("$ "))
    assert "tests/test_b.py::test_bug" in command and "tests/test_net.py::test_needs_network" in command, command
    assert "test_pollutes" not in command, command
    again = log.split("==> test run with the network off, of those alone", 1)[1].split("==>", 1)[0]
    assert "passed: 1 of 2" in again  # test_clean passes alone offline too: not a network test


def test_the_local_backend_says_upfront_which_python_it_lacks(make_repo, tmp_path: Path, env_cache: Path) -> None:
    repo = make_repo("future", {"pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\n"
                                                  "name = 'f'\nversion = '1'\nrequires-python = '>=3.14'\n",
                                "test_x.py": "def test_ok():\n    pass\n"}, "2026-01-01T00:00:00Z")
    with pytest.raises(InstallError) as caught:
        launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert caught.value.message == ("the local backend needs Python 3.14 (the project admits 3.14) and this host has "
                                    "none of them")
    assert "deps layer" not in caught.value.log_path.read_text() and "pip install" not in caught.value.log_path.read_text()


def test_no_tests(make_repo, tmp_path: Path, launched: dict, env_cache: Path) -> None:
    repo = make_repo("untested", PROJECT, DATE)  # same dependency files: the cached layer is reused
    with pytest.raises(DiscoveryError) as caught:
        launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert caught.value.stage == "test-discovery" and "exit 5" in caught.value.message
    log = caught.value.log_path.read_text()
    assert "cache hit" in log and "no tests ran" in log


class RecordingAgent:
    """Stands in for the setup agent: records what it was asked and proposes a plan that fails."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[SetupRequest] = []

    def propose(self, request: SetupRequest) -> RepoAnalysis:
        self.requests.append(request)
        return RepoAnalysis(language="python", build_system="agent", runtime_allowed=["3.13", "3.12", "3.11", "3.10"],
                            install_commands=["echo agent plan; exit 3"], test_command="python -m pytest",
                            log_parser="pytest")


def test_rules_fail_then_the_setup_agent_hook(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """The agent is asked once, after the rules' last plan failed, with what they found; its plan
    is tried once, and its failure names the stage, the plan's failure and the rules'."""
    repo = make_repo("bare", {"README.md": "no build files\n"})
    with pytest.raises(AnalyseError, match=r"\[analyse\] .*no setup agent is configured"):
        launch(str(repo), tmp_path / "out1")
    agent = RecordingAgent()
    with pytest.raises(InstallError, match=r"\[install\] the setup agent's plan failed: `echo agent plan; exit 3` "
                                           r"exited with 3 \(the rules had failed at analyse: .*no build or dependency"):
        launch(str(repo), tmp_path / "out2", cache_dir=env_cache / "envs", agent=agent)
    assert [(r.stage, r.analysis) for r in agent.requests] == [("analyse", None)]
    assert "agent plan" in (tmp_path / "out2" / "build.log").read_text()
    broken = make_repo("broken", {"setup.py": "raise SystemExit('this setup.py is broken')\n", "test_x.py": ""})
    with pytest.raises(InstallError, match=r"the rules had failed at install: .*exited with 1"):
        launch(str(broken), tmp_path / "out3", cache_dir=env_cache / "envs", agent=agent)
    asked = agent.requests[1]
    assert asked.stage == "install" and asked.analysis is not None and asked.analysis.build_system == "setup.py"
    assert asked.spec is None and "this setup.py is broken" in asked.log_path.read_text()


def test_cli(launched: dict, tmp_path: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    app = typer.Typer()
    app.command()(launch_command())
    runner = CliRunner()
    args = [str(launched["repo"]), "--commit", launched["spec"].commit, "--out", str(tmp_path / "a"), "--backend", "local"]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "a" / "envspec.json").is_file() and "environment ready" in ok.output
    from swedojo.cli import app as dojo

    bad = runner.invoke(dojo, ["launch", str(tmp_path / "nowhere"), "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and bad.output == f"error: {tmp_path / 'nowhere'}: no such repository\n"
    assert issubclass(ResolveError, LaunchError)


def test_cli_rebuild_of_the_local_layer(launched: dict, tmp_path: Path, env_cache: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The venv is made again from the EnvSpec's commands alone; the statuses are the same."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    app = typer.Typer()
    app.command()(launch_command())
    out = tmp_path / "r"
    out.mkdir()
    (out / "envspec.json").write_text(launched["spec"].model_dump_json())
    built_before = json.loads((Path(launched["spec"].env_vars["SWEDOJO_ENV"]) / "env.json").read_text())
    result = CliRunner().invoke(app, [str(launched["repo"]), "--out", str(out), "--rebuild"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "rebuild.json").read_text())
    assert report["same"] and report["ignored"] == sorted(CALC_FLAKY + CALC_NETWORK)
    built_after = json.loads((Path(launched["spec"].env_vars["SWEDOJO_ENV"]) / "env.json").read_text())
    assert built_after["resolved"] == built_before["resolved"] and built_after["build_seconds"] != built_before["build_seconds"]
    # A changed baseline is reported and fails the command.
    changed = launched["spec"].model_copy(update={"test_status": {**CALC_STATUSES, "tests/test_calc.py::test_add": TestStatus.FAILED}})
    (out / "envspec.json").write_text(changed.model_dump_json())
    result = CliRunner().invoke(app, [str(launched["repo"]), "--out", str(out), "--rebuild"])
    assert result.exit_code == 1 and "tests/test_calc.py::test_add: FAILED -> PASSED" in result.output
    assert "stage rebuild" in result.output


def test_progress_display_shows_steps_times_and_the_log_tail(tmp_path: Path) -> None:
    log = BuildLog(tmp_path / "build.log")
    log.begin("resolve")
    log.begin("deps layer: pip install pytest")
    log.write("Collecting pytest\nInstalling collected packages: pytest\n")
    screen = io.StringIO()
    Console(file=screen, width=100).print(Progress(log, "launch calc (docker)"))
    text = screen.getvalue()
    assert "launch calc (docker)" in text and re.search(r"✓\s+resolve\s+\d+\.\ds", text)
    assert re.search(r"deps layer: pip install pytest\s+\d+\.\ds", text) and "starting" not in text
    assert "Installing collected packages: pytest" in text and re.search(r"\d+\.\ds", text)
    log.close()


def test_unknown_backends_are_refused_before_anything_is_built(launched: dict, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedBackendError, match="available: local, docker"):
        launch(str(launched["repo"]), tmp_path / "out", backend="podman")
    with pytest.raises(UnsupportedBackendError):
        rebuild(launched["spec"].model_copy(update={"backend": "podman"}), tmp_path / "again")
    assert not (tmp_path / "out").exists()


SETUP_PROBE = """import os, pathlib, socket, sys
target = pathlib.Path({target!r}) / "from-setup.py"
try:
    target.write_text("the repository's setup.py wrote here")
    wrote = "wrote"
except OSError as exc:
    wrote = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    reached = "connected"
except OSError as exc:
    reached = type(exc).__name__
sys.exit(f"PROBE uid={{os.getuid()}} write={{wrote}} connect={{reached}}")
"""


def test_install_steps_run_inside_the_local_sandbox(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """Seen in an adversarial review: a local launch ran the repository's setup.py on the host as
    root (it wrote to /root and connected to a host port). Install steps now run as a sandbox uid
    under a read-only host, with the network on through the sandbox's own namespace."""
    target = Path(tempfile.mkdtemp(prefix="swedojo-host-", dir="/var/tmp"))  # outside every private mount
    target.chmod(0o755)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        port = listener.getsockname()[1]
        repo = make_repo("hostile", {"setup.py": SETUP_PROBE.format(target=str(target), port=port), "test_x.py": ""})
        with pytest.raises(InstallError) as caught:
            launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
        probes = re.findall(r"PROBE uid=(\d+) write=(\w+) connect=(\w+)", caught.value.log_path.read_text())
        assert probes, "the setup.py never ran"
        assert all(int(uid) != 0 and wrote != "wrote" for uid, wrote, _ in probes), probes
        assert not (target / "from-setup.py").exists()
        if nat_problem() is None:  # else the report says the network on is the host's
            assert all(reached != "connected" for _, _, reached in probes), probes
    finally:
        listener.close()
        shutil.rmtree(target)
