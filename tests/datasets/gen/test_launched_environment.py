"""`gen` on a project that needs a package the harness's own Python lacks: RepoLaunch builds the
environment once per run (a real pip install from the index), every candidate is judged in it,
and on docker every sandbox comes from the warm pool. The plain environment cannot mine it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from genproject import git

from swedojo.datasets.gen import GenSettings, generate
from swedojo.datasets.gen.synthesis import NoMutableSourcesError, NoPassingTestsError
from swedojo.schema import EnvSpec

PROJECT = {
    "pyproject.toml": """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "casewords"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = ["inflection>=0.5"]

[tool.setuptools]
packages = ["casewords"]
""",
    "casewords/__init__.py": "",
    "casewords/words.py": '''import inflection


def shout(text):
    """Title-cased text with a bang."""
    return inflection.titleize(text) + "!"


def count_words(text):
    words = inflection.underscore(text).split("_")
    return len([w for w in words if w])


def initials(name):
    parts = [p for p in inflection.underscore(name).split("_") if p]
    return "".join(p[0].upper() for p in parts)
''',
    "tests/test_words.py": '''from casewords.words import count_words, initials, shout


def test_shout():
    assert shout("hello world") == "Hello World!"


def test_shout_camel():
    assert shout("helloWorld") == "Hello World!"


def test_count_words():
    assert count_words("OneTwoThree") == 3


def test_count_nothing():
    assert count_words("") == 0


def test_initials():
    assert initials("AdaLovelace") == "AL"
''',
}


def _project(root: Path) -> Path:
    repo = root / "acme" / "casewords"
    for name, text in PROJECT.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo.parent, "init", "-q", "-b", "main", repo.name)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "casewords")
    return repo


def _mine(repo: Path, out: Path, **settings: object) -> list[str]:
    result = generate(str(repo), "mutations", GenSettings(out=out, max_tasks=3, combine=False, **settings))
    assert len(result.instances) == 3, result.report
    (envspec,) = (out / "envspecs").glob("*.json")
    spec = EnvSpec.model_validate_json(envspec.read_text())
    assert spec.build_system != "pytest" and any("inflection" in line for line in spec.resolved_dependencies), spec
    lines = [json.loads(line) for line in (out / "journal" / "acme__casewords.mutations.jsonl").read_text().splitlines()]
    assert lines[0]["header"]["launch"] is True
    return [instance.instance_id for instance in result.instances]


def test_the_plain_environment_lacks_the_dependency(tmp_path: Path) -> None:
    repo = _project(tmp_path / "src")
    with pytest.raises(NoPassingTestsError, match="no test passes"):
        generate(str(repo), "mutations", GenSettings(out=tmp_path / "plain", max_tasks=1, launch=False))


def test_a_repository_with_no_python_source_says_why_nothing_can_be_mutated(tmp_path: Path) -> None:
    repo = tmp_path / "c"
    repo.mkdir()
    (repo / "add.c").write_text("int add(int a, int b) { return a + b; }\n")
    (repo / "Makefile").write_text("test:\n\ttrue\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c")
    with pytest.raises(NoMutableSourcesError, match=r"no Python module to mutate .*files are \.c.*--from history"):
        generate(str(repo), "mutations", GenSettings(out=tmp_path / "gen", max_tasks=1))
    assert not (tmp_path / "gen" / "envspecs").exists()  # said before any environment is built


def test_a_launched_environment_mines_a_project_with_dependencies(tmp_path: Path) -> None:
    repo = _project(tmp_path / "src")
    kept = _mine(repo, tmp_path / "gen")
    again = _mine(repo, tmp_path / "again")  # a second run: its layers come from the cache
    assert again == kept


@pytest.mark.docker
def test_on_docker_every_sandbox_is_pooled_and_the_tasks_are_the_same(tmp_path: Path) -> None:
    repo = _project(tmp_path / "src")
    local = _mine(repo, tmp_path / "local")
    docker = _mine(repo, tmp_path / "docker", backend="docker", pool=2)
    assert docker == local
