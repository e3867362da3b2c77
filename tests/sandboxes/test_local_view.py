"""What of the host a local sandbox sees: the system, its toolchains and its work tree, nothing else.

Each probe reads, from inside, a file any user of the host may read: a bundled suite's gold patches,
a run directory, a suite file, a user's home, /root. Until the sandbox showed the host whole
(read-only), every one of them was there to read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import swedojo
from swedojo.repolaunch.recipes.base import ENV_VAR
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.local import LAYER_VAR, LocalSandbox, bubblewrap_problem

pytestmark = pytest.mark.skipif(bubblewrap_problem() is not None, reason=f"no bubblewrap here: {bubblewrap_problem()}")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants files under /root and /home")

PACKAGE = Path(swedojo.__file__).resolve().parent
GOLD = PACKAGE / "datasets" / "bundled" / "demo" / "tasks.jsonl"
"""A bundled suite: each line holds an instance's gold patch."""
HARNESS_PATH = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
CONFIG = SandboxConfig(command_timeout_s=30, max_output_bytes=8000, env={"PATH": HARNESS_PATH})


@pytest.fixture
def box(git_repo: Path) -> Iterator[LocalSandbox]:
    with LocalSandbox(git_repo, "HEAD", CONFIG) as sandbox:
        yield sandbox


@pytest.fixture
def world_readable() -> Iterator[Path]:
    """A directory every user may read, outside /tmp (which the sandbox has its own of)."""
    place = Path(tempfile.mkdtemp(prefix="swedojo-view-", dir="/var/tmp"))
    place.chmod(0o755)
    yield place
    shutil.rmtree(place)


def unreadable(box: LocalSandbox, path: Path, secret: str) -> None:
    """Neither a command nor the host-side file API reads `path` from inside the sandbox."""
    result = box.exec(f"cat {path}; ls -la {path.parent}")
    assert secret not in result.output and result.exit_code != 0, result.output
    with pytest.raises(OSError):
        box.read_file(str(path))


def test_a_bundled_suites_gold_patches_cannot_be_read(box: LocalSandbox) -> None:
    assert "patch" in GOLD.read_text()  # on the host: any user may read it
    unreadable(box, GOLD, "diff --git")
    assert box.exec(f"ls {PACKAGE}/datasets/bundled 2>/dev/null | wc -l").output == "0\n"


def test_run_directories_and_suite_files_elsewhere_cannot_be_read(box: LocalSandbox, world_readable: Path) -> None:
    run = world_readable / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "trajectory.jsonl").write_text('{"gold_patch": "run-secret"}\n')
    (world_readable / "suite.jsonl").write_text('{"patch": "suite-secret"}\n')
    for directory in (world_readable, world_readable / "runs", run):
        directory.chmod(0o755)
    unreadable(box, run / "trajectory.jsonl", "run-secret")
    unreadable(box, world_readable / "suite.jsonl", "suite-secret")
    unreadable(box, Path(__file__).resolve(), "run-secret")  # this checkout's own test suite


@needs_root
def test_root_and_home_directories_cannot_be_read(box: LocalSandbox) -> None:
    """/root holds only the directories above a toolchain bound from it (pyenv), made afresh."""
    planted = Path(tempfile.mkdtemp(prefix=".swedojo-view-", dir="/root"))
    home = Path(tempfile.mkdtemp(prefix="swedojo-view-", dir="/home"))
    try:
        for directory in (planted, home):
            directory.chmod(0o755)
            (directory / "secret.txt").write_text("home-secret")
            (directory / "secret.txt").chmod(0o644)
        unreadable(box, planted / "secret.txt", "home-secret")
        unreadable(box, home / "secret.txt", "home-secret")
        listed = box.exec("ls -A /root 2>/dev/null").output.split()
        toolchains = [path for path in box.isolation.visible if path.startswith("/root/")]
        assert all(any(path.startswith(f"/root/{name}/") for path in toolchains) for name in listed), listed
    finally:
        shutil.rmtree(planted)
        shutil.rmtree(home)


def test_the_usual_things_still_work(box: LocalSandbox) -> None:
    """The harness's python (and its pip), git in the work tree, a writable /tmp; / itself read-only."""
    result = box.exec("python -c 'import pytest, pydantic; print(\"ok\")' && python -m pip --version")
    assert result.output.startswith("ok\npip "), result.output
    result = box.exec("echo more >> README.md && git commit -qam more && git log --oneline | wc -l")
    assert result.output == "2\n", result.output
    assert box.exec("echo x > /tmp/x && cat /tmp/x").output == "x\n"
    assert box.exec("touch /new-top-level-file").exit_code != 0
    assert box.exec("ls /usr/bin/git /etc/passwd >/dev/null && echo ok").output == "ok\n"


def test_the_isolation_lists_what_is_visible(box: LocalSandbox) -> None:
    visible = box.isolation.visible
    assert visible[box.workdir] == "writable" and visible["/usr"] == "read-only" and visible["/etc"] == "read-only"
    assert visible["/tmp"].startswith("private") and os.path.realpath(sys.prefix) in visible
    assert not any(path in visible for path in ("/", "/root", "/home", "/var", str(PACKAGE)))
    assert ENV_VAR == LAYER_VAR  # the dependency layer a local launch names is shown
    report = subprocess.run([str(Path(sys.executable).with_name("dojo")), "sandbox", "info"],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                            capture_output=True, text=True, timeout=300, check=True).stdout
    assert "  visible file system (nothing else of the host's):\n    /usr: read-only\n" in report, report
    assert "    (the work tree): writable\n" in report, report


INSTALLED = """
import json, os, subprocess, sys
from pathlib import Path
from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.local import LocalConfinement, _PACKAGE

prefix, work = Path(sys.argv[1]), Path(sys.argv[2])
helper = _PACKAGE / "repolaunch" / "drop_project.py"
config = SandboxConfig(env={"PATH": f"{prefix}/bin:/usr/bin:/bin"})
confinement = LocalConfinement(config, work / "root", work / "tree", readable=(helper,))
probe = (f"cat {_PACKAGE}/datasets/bundled/demo/tasks.jsonl; ls -A {_PACKAGE}; echo ---; "
         f"head -1 {helper}; echo ---; ls {prefix}")
try:
    with confinement.confined(["sh", "-c", probe]) as (argv, fds):
        done = subprocess.run(argv, cwd=work / "tree", env=confinement.env(), pass_fds=fds,
                              capture_output=True, text=True, check=False)
    print(json.dumps({"package": str(_PACKAGE), "out": done.stdout, "visible": confinement.isolation.visible}))
finally:
    confinement.close()
"""


def test_an_installed_harness_under_a_visible_toolchain_is_covered(world_readable: Path) -> None:
    """The harness installed into a prefix the sandbox is given (a venv's site-packages, the
    system's): the package is covered, its bundled suites with it; a helper it names is bound back."""
    prefix = world_readable / "prefix"
    site = prefix / "lib" / "python3" / "site-packages"
    shutil.copytree(PACKAGE, site / "swedojo", ignore=shutil.ignore_patterns("__pycache__"))
    (prefix / "bin").mkdir()
    (world_readable / "root").mkdir()
    (world_readable / "tree").mkdir()
    subprocess.run(["chmod", "-R", "a+rX", str(prefix)], check=True)
    done = subprocess.run([sys.executable, "-c", INSTALLED, str(prefix), str(world_readable)],
                          cwd=world_readable, env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    package, (cover, helper, listed) = report["package"], report["out"].split("---\n")
    assert package == str(site / "swedojo") and report["visible"][str(prefix)] == "read-only"
    assert report["visible"][package].startswith("empty")
    assert cover.split() == ["repolaunch"], cover  # nothing but the way to the helper
    assert helper.startswith('"""Run by a dependency venv'), helper
    assert listed.split() == ["bin", "lib"], listed
