"""The backend registry, the spec's backend field and how backend names reach sandboxes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import make_repo
from typer.testing import CliRunner

from swedojo.sandboxes import SandboxConfig, UnknownBackendError, open_sandbox, registry
from swedojo.sandboxes.environment import (
    DEFAULT_PYTHON_IMAGE,
    Environment,
    default_python_env,
)
from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import EnvSpec


def test_local_and_docker_are_registered_and_docker_is_imported_on_use() -> None:
    assert registry.names()[:2] == ("local", "docker")
    assert registry.backend("local") is LocalSandbox and not LocalSandbox.pooled
    check = "import sys, swedojo.sandboxes, swedojo.sandboxes.environment; assert 'docker' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", check], cwd=Path(__file__).parents[2], check=False).returncode == 0
    assert registry.backend("docker").pooled


def test_an_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(UnknownBackendError, match="'podman'; choose one of local, docker"):
        registry.backend("podman")
    with pytest.raises(UnknownBackendError):
        open_sandbox("podman", image="x")
    with pytest.raises(UnknownBackendError):
        Environment(spec=EnvSpec(repo="r", commit="c", backend="podman"), source=Path(".")).open()


def test_a_registered_backend_is_looked_up_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[str, object] = {}

    class Fake:
        pooled = False

        @classmethod
        def create(cls, **kwargs: object) -> Fake:
            made.update(kwargs)
            return cls()

    monkeypatch.setattr(registry, "_factories", dict(registry._factories))
    registry.register("fake", lambda: Fake)
    assert registry.names()[-1] == "fake"
    assert isinstance(open_sandbox("fake", image="img", workdir="/w"), Fake)
    assert made["image"] == "img" and made["workdir"] == "/w"


def test_the_local_backend_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match="repository and a commit"):
        open_sandbox("local")


def test_envspec_names_its_backend_and_old_files_with_an_image_load_as_docker() -> None:
    assert EnvSpec(repo="r", commit="c").backend == "local"
    old_docker = '{"repo": "r", "commit": "c", "image": "swedojo/env:x"}'
    assert EnvSpec.model_validate_json(old_docker).backend == "docker"
    assert EnvSpec.model_validate_json('{"repo": "r", "commit": "c", "image": ""}').backend == "local"
    explicit = EnvSpec(repo="r", commit="c", image="swedojo/env:x", backend="local")
    assert explicit.backend == "local"
    assert EnvSpec.model_validate_json(explicit.model_dump_json()).backend == "local"


def test_environment_takes_its_backend_from_the_spec(tmp_path: Path) -> None:
    env = default_python_env("r", "c", tmp_path, "local", SandboxConfig())
    assert env.backend == env.spec.backend == "local" and env.spec.workdir == ""
    python = Path(env.config.env["PATH"].split(":")[0]) / "python"  # found as python, whatever the host calls it
    assert python.resolve() == Path(sys.executable).resolve() and (python.parent / "python3").resolve() == python.resolve()
    assert env.with_pool(object())._pool is None  # type: ignore[arg-type]  # local sandboxes are not pooled
    assert Environment.model_validate(env.model_dump()).backend == "local"
    docker = default_python_env("r", "c", tmp_path, "docker")
    assert docker.backend == "docker" and docker.spec.image == DEFAULT_PYTHON_IMAGE


def test_sandbox_cli_takes_the_backend_from_the_envspec(tmp_path: Path) -> None:
    from swedojo.cli import app

    repo = make_repo(tmp_path / "repo")
    spec = EnvSpec(repo=str(repo), commit="HEAD", backend="local", workdir="")
    (tmp_path / "local.json").write_text(spec.model_dump_json())
    (tmp_path / "odd.json").write_text(spec.model_copy(update={"backend": "podman"}).model_dump_json())
    ran = CliRunner().invoke(app, ["sandbox", "exec", "--env", str(tmp_path / "local.json"), "--", "cat README.md"])
    assert ran.exit_code == 0 and ran.output == "hello\n", ran.output
    odd = CliRunner().invoke(app, ["sandbox", "exec", "--env", str(tmp_path / "odd.json"), "--", "true"])
    assert odd.exit_code == 2 and "choose one of local, docker" in odd.output
