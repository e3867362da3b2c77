"""Image disk use and last uses, and pruning the layers unused for N days, on a real engine."""

from __future__ import annotations

import contextlib
import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker.errors
import pytest

from swedojo.sandboxes.image_use import index_path

pytestmark = pytest.mark.docker

BASE = "swedojo/python:bookworm"


def _build(tag: str, parent: str) -> str:
    from swedojo.sandboxes.docker import api

    dockerfile = f"FROM {parent}\nLABEL swedojo.test={tag}\n".encode()
    for chunk in api().build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, pull=False, decode=True):
        assert "error" not in chunk, chunk
    return api().inspect_image(tag)["Id"]


def test_a_container_stamps_its_image_and_idle_layers_go_but_not_under_one_in_use(tmp_path: Path, monkeypatch) -> None:
    from swedojo.sandboxes.docker import DockerSandbox, api
    from swedojo.sandboxes.image_disk import disk_use, prune_unused

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path))
    repo = f"swedojo/test-prune-{os.getpid()}"  # only this test's images are ever pruned here
    lower, upper = f"{repo}:lower", f"{repo}:upper"
    try:
        _build(lower, BASE)
        _build(upper, lower)
        with DockerSandbox(upper):
            pass
        index = index_path()
        assert index == tmp_path / "image-use.json" and set(json.loads(index.read_text())) == {upper}
        report = {tag: image for image in disk_use().images for tag in image.tags}
        assert report[upper].last_used is not None and report[lower].last_used is None
        assert report[upper].size_mb >= report[BASE].size_mb > 100 and report[upper].unique_mb < 1  # only a label
        long_ago = (datetime.now(UTC) - timedelta(days=10)).isoformat()
        index.write_text(json.dumps({lower: long_ago, upper: datetime.now(UTC).isoformat()}))

        kept = prune_unused(3, repositories=(repo,))
        assert kept.removed == [] and kept.kept == {lower: f"{upper}, in use, is built on it"}

        index.write_text(json.dumps({lower: long_ago, upper: long_ago}))
        pruned = prune_unused(3, repositories=(repo,))
        assert pruned.removed == [upper, lower] and pruned.kept == {}
        assert not [t for i in api().images() for t in i.get("RepoTags") or [] if t.startswith(repo)]
        assert json.loads(index.read_text()) == {}
        assert api().inspect_image(BASE)  # never among the layers pruned
    finally:
        for tag in (upper, lower):
            with contextlib.suppress(docker.errors.ImageNotFound):  # pruned by the test
                api().remove_image(tag)


def test_the_commands_report_and_prune(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from swedojo.cli import app

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path))
    shown = CliRunner().invoke(app, ["sandbox", "images", "--json"])
    assert shown.exit_code == 0, shown.output
    assert BASE in {t for image in json.loads(shown.output)["images"] for t in image["tags"]}
    listed = CliRunner().invoke(app, ["sandbox", "images"])
    assert listed.exit_code == 0 and BASE in listed.output and "all image layers of the engine" in listed.output
    # 100000 days: nothing here is that old, so nothing of anyone's goes
    pruned = CliRunner().invoke(app, ["sandbox", "prune", "--unused-days", "100000"])
    assert pruned.exit_code == 0 and "removed 0 image tag(s) unused for 100000 days" in pruned.output, pruned.output
