"""Docker launches end to end: layered images built from a real git repository, real pip installs
from PyPI inside the build, validation in hardened `DockerSandbox`es.

One cold launch per module; the runtime layer (Debian's python3 + pip) is shared with every other
Python launch on this engine, so only the first run on a machine builds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from launch_helpers import (
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
from typer.testing import CliRunner

from swedojo.repolaunch.cli import launch_command
from swedojo.repolaunch.errors import EngineBuildError, InstallError
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
    assert "building the layer again" not in caught.value.log_path.read_text()  # a step's failure is not retried


def _copying_nothing(tmp_path: Path) -> EnvSpec:
    """A deps layer whose build stage leaves nothing at the path its image copies from it."""
    from swedojo.repolaunch import images
    from swedojo.repolaunch.buildlog import BuildLog

    base = images.ensure_base("bookworm", BuildLog(tmp_path / "base.log"))
    tag = f"engine-failure-{time.time_ns()}"
    return EnvSpec(repo="engine", commit="0" * 40, language="c", backend="docker", base_image=base,
                   install_commands=[f"rm -rf {images.ENV_ROOT}"],
                   layers={"base": base, "runtime": base, "deps": f"swedojo/deps:{tag}", "repo": f"swedojo/env:{tag}"})


def test_a_failure_of_the_engines_own_is_built_again_then_raised(tmp_path: Path) -> None:
    """No step failed: the engine did. Here the deps layer's build stage leaves nothing at the path
    its image copies (`COPY --from=build` finds no source), as a race of concurrent builds does to
    the legacy builder now and then ("lstat .../merged/...: no such file", "unknown parent image
    ID"). The layer is built again (`ENGINE_RETRIES` times), then `EngineBuildError`, an install failure for which a
    launch tries no other plan."""
    from swedojo.repolaunch import images
    from swedojo.repolaunch.buildlog import BuildLog

    log = BuildLog(tmp_path / "build.log")
    with pytest.raises(EngineBuildError) as caught:
        images.build_images(_copying_nothing(tmp_path), tmp_path, log)
    assert caught.value.stage == "install" and caught.value.message.startswith("deps layer: ")
    assert "exited with" not in caught.value.message
    assert log.path.read_text().count("the engine failed, no step did: building the layer again") == images.ENGINE_RETRIES


def test_a_deps_layer_copied_short_is_caught_and_built_again_without_the_cache(tmp_path: Path, monkeypatch) -> None:
    """The legacy builder can commit a `COPY --from` short when it loses the source mid-copy, and its
    cache then serves the short copy to every later build (seen: 12 of 562 packages of a
    node_modules). The image counts the layer's files in both stages; here the two counts are made
    to differ (a count that is new each time it runs), so the check fails as a short copy would: the
    layer is built again without the cache, then `EngineBuildError` says what was lost."""
    from swedojo.repolaunch import images
    from swedojo.repolaunch.buildlog import BuildLog

    monkeypatch.setattr(images, "_COUNT", "cat /proc/sys/kernel/random/uuid")
    spec = _copying_nothing(tmp_path).model_copy(update={"install_commands": [f"mkdir -p {images.ENV_ROOT}/lib"]})
    log = BuildLog(tmp_path / "build.log")
    with pytest.raises(EngineBuildError) as caught:
        images.build_images(spec, tmp_path, log)
    assert "its copy lost files" in caught.value.message
    text = log.path.read_text()
    assert "the engine copied" in text and "building the layer again without the build cache" in text
    assert "deps layer: building swedojo/deps:engine-failure-" in text and "(no cache)" in text


def test_a_builds_leftover_images_wait_until_no_build_runs_on_the_engine(tmp_path: Path) -> None:
    """Removing an image removes its untagged parents, which a build running beside may have just
    taken from its cache: a build's leftovers (its build stage, a failed step's image) are removed
    only when no build on the engine holds its builds lock, by whichever build ends last. The other
    build here is another process, as a launch with a cache directory of its own is: the lock is the
    engine's (before, each cache directory had its own, and a test's builds removed images a
    benchmark's build beside it was copying from)."""
    from swedojo.repolaunch import images
    from swedojo.repolaunch.buildlog import BuildLog

    spec, lock = _copying_nothing(tmp_path), images.engine_locks() / images.BUILDS_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    hold = "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"  # another build, running
        with pytest.raises(EngineBuildError):
            images.build_images(spec, tmp_path, BuildLog(tmp_path / "first.log"))
        waiting = (images.engine_locks() / images.LEFTOVERS).read_text().split()
        assert waiting and all(images.image_id(image) for image in waiting)
    finally:
        holder.communicate("")
    with pytest.raises(EngineBuildError):  # the next build to end, with none beside it
        images.build_images(spec, tmp_path, BuildLog(tmp_path / "second.log"))
    assert not (images.engine_locks() / images.LEFTOVERS).exists()
    assert not [image for image in waiting if images.image_id(image)]
