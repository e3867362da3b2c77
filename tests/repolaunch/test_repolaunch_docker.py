"""Docker launches end to end: layered images built from a real git repository, real pip installs
from PyPI inside the build, validation in hardened `DockerSandbox`es.

One cold launch per module; the runtime layer (Debian's python3 + pip) is shared with every other
Python launch on this engine, so only the first run on a machine builds it.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import typer
from launch_helpers import (
    sandbox_at_a_later_commit,
    CALC_FLAKY,
    CALC_NETWORK,
    CALC_STATUSES,
    DATE,
    PROJECT,
    TESTS,
    commit_all,
    write_tree,
)
from typer.testing import CliRunner

from swedojo.repolaunch.cli import launch_command
from swedojo.repolaunch.errors import InstallError
from swedojo.repolaunch.launch import launch
from swedojo.schema import EnvSpec

pytestmark = pytest.mark.docker


def _layers(out: Path) -> dict[str, dict]:
    return {layer["name"]: layer for layer in json.loads((out / "layers.json").read_text())}


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory, env_cache: Path) -> dict:
    root = tmp_path_factory.mktemp("docker-launch")
    repo = write_tree(root / "calc", {**PROJECT, **TESTS})
    commit_all(repo, "initial", DATE)
    start = time.monotonic()
    spec = launch(str(repo), root / "out", backend="docker", cache_dir=env_cache / "envs")
    return {"repo": repo, "spec": spec, "out": root / "out", "root": root, "cold_s": time.monotonic() - start}


def test_docker_launch_of_a_pure_python_repo(launched: dict) -> None:
    spec, out = launched["spec"], launched["out"]
    assert spec.test_status == CALC_STATUSES  # the same as the local launch
    assert (spec.flaky_tests, spec.network_tests) == (CALC_FLAKY, CALC_NETWORK)
    assert spec.base_image == "swedojo/base:bookworm" and spec.runtime_version.startswith("3.11.")
    assert list(spec.layers) == ["base", "runtime", "deps", "repo"] and spec.image == spec.layers["repo"]
    assert spec.layers["runtime"].startswith("swedojo/runtime:python-bookworm-")
    assert spec.layers["deps"].startswith("swedojo/deps:") and spec.layers["repo"].startswith("swedojo/env:calc-")
    assert spec.resolved_dependencies["pytest"] == "8.2.1" and "calc" not in spec.resolved_dependencies
    assert spec.toolchain_commands and spec.install_commands[-1] == f"pip install --uploaded-prior-to {DATE} pip"
    assert (spec.workdir, spec.env_vars["SWEDOJO_ENV"]) == ("/testbed", "/opt/swedojo/env")
    assert EnvSpec.model_validate_json((out / "envspec.json").read_text()) == spec
    # The final image stands alone: the commit at /testbed with nothing after it, the project installed.
    script = "git log --format=%H | wc -l; python -m pytest -q -p no:cacheprovider tests/test_calc.py -k 'add or version'"
    shown = subprocess.run(["docker", "run", "--rm", "--network", "none", spec.image, "bash", "-c", script],
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.stdout.splitlines()[0] == "1" and "2 passed" in shown.stdout, shown.stdout + shown.stderr
    print(f"\ncold docker launch: {launched['cold_s']:.1f}s")


def test_second_launch_reuses_every_layer(launched: dict, env_cache: Path) -> None:
    spec, root = launched["spec"], launched["root"]
    start = time.monotonic()
    again = launch(str(launched["repo"]), root / "again", commit=spec.commit[:12], backend="docker",
                   cache_dir=env_cache / "envs")
    warm = time.monotonic() - start
    first, second = _layers(launched["out"]), _layers(root / "again")
    assert all(layer["cached"] for layer in second.values())
    assert {n: (l["tag"], l["image_id"]) for n, l in second.items()} == \
        {n: (l["tag"], l["image_id"]) for n, l in first.items()}
    assert again == spec
    assert "test run" not in (root / "again" / "build.log").read_text()
    print(f"\nwarm docker launch: {warm:.2f}s")


def test_a_sandbox_on_a_later_commit_rebuilds_the_repo_layer(launched: dict) -> None:
    """How eval uses a launched image: a fresh hardened container at an instance's commit."""
    with sandbox_at_a_later_commit(launched) as sandbox:
        assert sandbox.diff() == "" and sandbox.exec("id -u").output.strip() == "1000"


def test_rebuild_from_the_envspec_gives_the_same_statuses(launched: dict) -> None:
    out, spec = launched["out"], launched["spec"]
    before = _layers(out)
    app = typer.Typer()
    app.command()(launch_command())
    result = CliRunner().invoke(app, [str(launched["repo"]), "--out", str(out), "--backend", "docker", "--rebuild"])
    assert result.exit_code == 0, result.output
    assert "rebuilt from the EnvSpec" in result.output
    report = json.loads((out / "rebuild.json").read_text())
    assert report["same"] and report["differences"] == {}
    rebuilt = {layer["name"]: layer for layer in report["layers"]}
    for name in ("runtime", "deps", "repo"):  # same tags, new images: built again with no cache
        assert rebuilt[name]["tag"] == before[name]["tag"] and not rebuilt[name]["cached"]
        assert rebuilt[name]["image_id"] != before[name]["image_id"]
    after = EnvSpec.model_validate_json((out / "envspec.rebuilt.json").read_text())
    assert after.test_status == spec.test_status and after.network_tests == spec.network_tests
    assert "no cache" in (out / "rebuild.log").read_text()


def test_install_failure_in_docker_names_the_stage(make_repo, tmp_path: Path, env_cache: Path) -> None:
    repo = make_repo("broken", {"setup.py": "raise SystemExit('this setup.py is broken')\n", "test_x.py": ""})
    with pytest.raises(InstallError) as caught:
        launch(str(repo), tmp_path / "out", backend="docker", cache_dir=env_cache / "envs")
    assert caught.value.stage == "install" and "deps layer: `pip install" in caught.value.message
    assert "exited with 1" in caught.value.message
    assert "this setup.py is broken" in caught.value.log_path.read_text()
