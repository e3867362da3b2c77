"""The layer store on a shared directory: an image saved by one engine loads back by tag, each layer
is stored once however many images share it; a launch loads what the store holds instead of
building it (tests/repolaunch/test_shared_environments.py). On a real engine."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import docker.errors
import pytest

pytestmark = pytest.mark.docker

BASE = "swedojo/python:bookworm"


def _build(tag: str, parent: str, mb: int) -> str:
    from swedojo.sandboxes.docker import api

    dockerfile = f"FROM {parent}\nRUN head -c {mb}M /dev/urandom > /blob-{tag.rpartition(':')[2]}\n"
    for chunk in api().build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False, decode=True):
        assert "error" not in chunk, chunk
    return api().inspect_image(tag)["Id"]


def test_each_layer_is_stored_once_and_an_image_loads_back_as_it_was(tmp_path: Path) -> None:
    from swedojo.sandboxes.docker import api
    from swedojo.sandboxes.image_store import has, load, save

    store = tmp_path / "store"
    repo = f"swedojo/test-store-{os.getpid()}"
    deps, env_a, env_b = f"{repo}:deps", f"{repo}:a", f"{repo}:b"
    try:
        ids = {deps: _build(deps, BASE, 8)}
        ids |= {env: _build(env, deps, 1) for env in (env_a, env_b)}
        first = save(env_a, store)
        assert first.layers >= 3 and first.new_layers == first.layers and first.new_bytes > 9 * 2**20
        second = save(env_b, store)  # shares every layer but its own
        assert (second.layers, second.new_layers) == (first.layers, 1) and 2**20 <= second.new_bytes < 2**20 + 65536
        assert save(deps, store).new_layers == 0  # a layer below both: stored already
        assert len(list((store / "blobs").iterdir())) == first.layers + 1

        for tag in (env_a, env_b, deps):
            api().remove_image(tag)
        assert not load(f"{repo}:never-saved", store) and has(env_b, store)
        assert load(env_b, store)
        assert api().inspect_image(env_b)["Id"] == ids[env_b]  # the same config, the same layers
        ran = api().create_container(env_b, ["sh", "-c", "wc -c < /blob-b"])
        try:
            api().start(ran)
            api().wait(ran)
            assert api().logs(ran).strip() == str(2**20).encode()
        finally:
            api().remove_container(ran, force=True)
    finally:
        for tag in (env_a, env_b, deps):
            with contextlib.suppress(docker.errors.ImageNotFound):
                api().remove_image(tag)

