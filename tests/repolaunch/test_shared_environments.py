"""Environments shared between nodes: a launch saves each layer it builds into the layer store on a
shared directory, and a launch on an engine that lacks the layer loads it from there instead of
building it. One engine here stands for two nodes: a layer removed is a layer the other never had."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import docker.errors
import pytest
from launch_helpers import C_OK, DATE, commit_all, write_tree

from swedojo.repolaunch.launch import launch

pytestmark = pytest.mark.docker


@pytest.mark.tools("make")
def test_a_launch_loads_the_environment_another_node_saved_instead_of_building_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from swedojo.sandboxes.docker import api

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SWEDOJO_IMAGE_STORE", str(tmp_path / "store"))
    repo = write_tree(tmp_path / "crepo", {**C_OK, "README": f"{os.getpid()}\n"})  # an environment of this test's own
    commit_all(repo, "c", DATE)
    first = launch(str(repo), tmp_path / "first", backend="docker", cache_dir=tmp_path / "envs1")
    try:
        built = (tmp_path / "first" / "build.log").read_text()
        for name in ("runtime", "deps", "repo"):  # built here or found here: every layer goes to the store
            assert f"{name} layer: saved to the image store {tmp_path / 'store'}: " in built, built
        image = api().inspect_image(first.image)["Id"]
        api().remove_image(first.image)  # the other node never had it
        second = launch(str(repo), tmp_path / "second", backend="docker", cache_dir=tmp_path / "envs2")
        loaded = (tmp_path / "second" / "build.log").read_text()
        assert f"repo layer: loaded {first.image} from the image store" in loaded and "repo layer: built" not in loaded
        assert second.image == first.image and api().inspect_image(second.image)["Id"] == image
        assert second.test_status == first.test_status  # validated on the loaded image
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            api().remove_image(first.image)
        shutil.rmtree(tmp_path / "store")  # half a GB of runtime layers: not left for pytest's last three runs
