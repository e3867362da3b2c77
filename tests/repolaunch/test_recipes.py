"""The language recipes: the six registered in detection priority order, and a language added by
one recipe and one registration, launched end to end from a repo made here (local backend; docker
too where an engine answers: its runtime layer is Debian's base with git)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from launch_helpers import DATE, write_tree

from swedojo.repolaunch.analysis import CiFindings, PythonPlanning, RepoAnalysis
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.detect import analyse
from swedojo.repolaunch.host import Runtime
from swedojo.repolaunch.launch import launch
from swedojo.repolaunch.recipes import (
    UnsupportedLanguageError,
    recipe_for,
    recipes,
    register,
    unregister,
)
from swedojo.repolaunch.recipes.base import ADD_SANDBOX_USER, LanguageRecipe, apt
from swedojo.schema import TestStatus


def test_the_six_recipes_in_detection_priority_order() -> None:
    assert [recipe.family for recipe in recipes()] == ["python", "node", "go", "rust", "java", "native"]
    assert [language for recipe in recipes() for language in recipe.languages] == \
        ["python", "javascript", "typescript", "go", "rust", "java", "c", "cpp"]
    priorities = [recipe.priority for recipe in recipes()]
    assert priorities == sorted(priorities)
    assert recipe_for("typescript") is recipe_for("javascript")


def test_a_language_without_a_recipe_names_the_ones_there_are() -> None:
    with pytest.raises(UnsupportedLanguageError, match="there are recipes for python, javascript, typescript, go, "
                                                       "rust, java with maven, c and cpp"):
        recipe_for("cobol")


@pytest.mark.parametrize(("files", "language"), [
    ({"setup.py": "", "package.json": "{}"}, "python"),  # a Python build file wins over every other
    ({"package.json": "{}", "go.mod": "module x\n"}, "javascript"),
    ({"go.mod": "module x\n", "Cargo.toml": ""}, "go"),
    ({"Cargo.toml": "", "pom.xml": "<project/>"}, "rust"),
    ({"pom.xml": "<project/>", "Makefile": "test:\n"}, "java"),
    ({"Makefile": "test:\n", "requirements.txt": "six\n"}, "c"),  # requirements alone say less than a Makefile
    ({"requirements.txt": "six\n"}, "python"),
])
def test_the_first_recipe_by_priority_that_recognises_the_tree_reads_it(tmp_path: Path, files: dict[str, str],
                                                                        language: str) -> None:
    write_tree(tmp_path, files)
    assert analyse(tmp_path).language == language


TOY_TESTS = 'echo "1..3"; echo "ok 1 - adds"; echo "ok 2 - subtracts"; echo "ok 3 - later # SKIP not yet"\n'


class ToyRecipe(LanguageRecipe):
    """A language "toy": a tree with `toy.build`, tests in a shell script printing TAP, no dependencies."""

    languages = ("toy",)
    family = "toy"
    priority = 80

    def detect(self, root: Path) -> int | None:
        return self.priority if (root / "toy.build").is_file() else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        out = RepoAnalysis(language="toy", build_system="toy", runtime_version="1", runtime_allowed=["1"],
                           dependency_files=["toy.build"], test_command="sh run_tests.sh", log_parser="tap")
        out.note("toy.build", "a toy project: run_tests.sh prints TAP")
        return out

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        return "bookworm", "1"

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        return [apt("git", "patch", "procps"), ADD_SANDBOX_USER]

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        return Runtime(name="sh", version="1", path=Path(os.path.realpath("/bin/sh")))


@pytest.fixture
def toy() -> Iterator[ToyRecipe]:
    recipe = ToyRecipe()
    register(recipe)
    yield recipe
    unregister("toy")


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_language_is_one_recipe_and_one_registration(toy: ToyRecipe, backend: str, make_repo, tmp_path: Path,
                                                       env_cache: Path) -> None:
    assert recipes()[-1] is toy and recipe_for("toy") is toy
    repo = make_repo("toyrepo", {"toy.build": "", "run_tests.sh": TOY_TESTS}, DATE)
    spec = launch(str(repo), tmp_path / "out", backend=backend, cache_dir=env_cache / "envs")
    assert (spec.backend, spec.language, spec.build_system, spec.log_parser, spec.runtime_version) == \
        (backend, "toy", "toy", "tap", "1")
    assert spec.test_status == {"adds": TestStatus.PASSED, "subtracts": TestStatus.PASSED,
                                "later": TestStatus.SKIPPED}
    assert spec.install_commands == [] and spec.rebuild_commands == []
    assert "toy.build: a toy project" in (tmp_path / "out" / "build.log").read_text()


def test_unregistering_takes_the_language_away(toy: ToyRecipe) -> None:
    unregister("toy")
    with pytest.raises(UnsupportedLanguageError, match="no environment recipe for toy"):
        recipe_for("toy")
