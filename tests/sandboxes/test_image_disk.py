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


def _build_blob(tag: str, parent: str, mb: int) -> str:
    """An image of `mb` MB of its own (random bytes: no layer elsewhere shares them)."""
    from swedojo.sandboxes.docker import api

    dockerfile = f"FROM {parent}\nRUN head -c {mb}M /dev/urandom > /blob-{tag.replace('/', '_').replace(':', '_')}\n"
    for chunk in api().build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False, decode=True):
        assert "error" not in chunk, chunk
    return api().inspect_image(tag)["Id"]


def test_the_budget_removes_the_least_recently_used_first_and_never_what_a_live_job_holds(
        tmp_path: Path, monkeypatch) -> None:
    import subprocess
    import sys

    from swedojo.sandboxes.docker import api
    from swedojo.sandboxes.image_disk import disk_use, prune_to_budget
    from swedojo.sandboxes.image_use import _process_key, held_tags, holds_dir

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path))
    repo = f"swedojo/test-budget-{os.getpid()}"
    oldest_held, older, newer = f"{repo}:held", f"{repo}:older", f"{repo}:newer"
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        for tag in (oldest_held, older, newer):
            _build_blob(tag, BASE, 30)
        now = datetime.now(UTC)
        index_path().write_text(json.dumps({oldest_held: (now - timedelta(days=3)).isoformat(),
                                            older: (now - timedelta(days=2)).isoformat(),
                                            newer: (now - timedelta(days=1)).isoformat()}))
        holds_dir().mkdir(parents=True)
        (holds_dir() / f"{_process_key(job.pid)}.json").write_text(json.dumps([oldest_held]))
        (holds_dir() / f"{gone.stdout.strip()}-1.json").write_text(json.dumps([older]))  # its process ended
        assert held_tags() == {oldest_held: job.pid}
        assert [f.name for f in holds_dir().iterdir()] == [f"{_process_key(job.pid)}.json"]

        budget = disk_use().engine_layers_mb - 40  # one 30 MB image is not enough, two are
        pruned = prune_to_budget(budget, repositories=(repo,))
        assert pruned.removed[0] == older and oldest_held not in pruned.removed, pruned
        assert pruned.kept == {oldest_held: f"held by process {job.pid}"}
        assert pruned.removed == [older, newer] or disk_use().engine_layers_mb <= budget  # others' images may change meanwhile
        assert api().inspect_image(oldest_held)
        assert set(json.loads(index_path().read_text())) == {oldest_held} | ({newer} - set(pruned.removed))
    finally:
        job.kill()
        for tag in (oldest_held, older, newer):
            with contextlib.suppress(docker.errors.ImageNotFound):
                api().remove_image(tag)


def test_images_per_repository_count_its_environments_and_the_dependency_layers_they_share(
        tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from swedojo.cli import app
    from swedojo.sandboxes.docker import api
    from swedojo.sandboxes.image_disk import by_repository, disk_use

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path))
    name = f"toyrepo{os.getpid()}"
    deps = f"swedojo/deps:test-{os.getpid()}"
    envs = [f"swedojo/env:{name}-{commit * 12}-{'b' * 12}" for commit in "01"]
    try:
        _build_blob(deps, BASE, 20)
        for env in envs:
            _build_blob(env, deps, 2)
        [mine] = [r for r in by_repository(disk_use()) if r.repository == name]
        assert mine.environments == 2 and mine.dependency_layers == [deps]
        assert 3.5 < mine.environments_mb < 5 and 19 < mine.dependency_mb < 22, mine  # the 20 MB layer once
        shown = CliRunner().invoke(app, ["sandbox", "images", "--by-repo"])
        assert shown.exit_code == 0 and f"{name} (1)" in shown.output, shown.output
        pruned = CliRunner().invoke(app, ["sandbox", "prune", "--budget-gb", "100000"])
        assert pruned.exit_code == 0 and "removed 0 image tag(s) to fit 100000 GB" in pruned.output, pruned.output
    finally:
        for tag in (*envs, deps):
            with contextlib.suppress(docker.errors.ImageNotFound):
                api().remove_image(tag)


def test_the_budget_variable_is_read_in_gb_and_a_wrong_one_is_named(monkeypatch) -> None:
    from swedojo.errors import BadInputError
    from swedojo.sandboxes.image_disk import BUDGET_VAR, budget_mb

    monkeypatch.delenv(BUDGET_VAR, raising=False)
    assert budget_mb() is None
    monkeypatch.setenv(BUDGET_VAR, "1.5")
    assert budget_mb() == 1536
    monkeypatch.setenv(BUDGET_VAR, "lots")
    with pytest.raises(BadInputError, match="SWEDOJO_DISK_BUDGET_GB='lots' is not a number of GB"):
        budget_mb()
