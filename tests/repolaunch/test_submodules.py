"""A project whose library is a git submodule launches from a mirror that holds the submodule's
repository beside it (MIRROR/owner/name): the submodule is checked out at the recorded commit in
the launch's tree and in every sandbox's, on both backends, with the network off."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from launch_helpers import DATE, commit_all, write_tree

from swedojo.repolaunch.launch import environment, launch
from swedojo.repos import resolve_repo

APP = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(app C)\nenable_testing()\n"
                      "add_subdirectory(third_party/mini)\nadd_executable(check check.c)\n"
                      "target_link_libraries(check mini)\nadd_test(NAME mini_answers COMMAND check)\n",
    "check.c": "int mini(void);\nint main(void) { return mini() == 42 ? 0 : 1; }\n",
}
MINI = {"CMakeLists.txt": "add_library(mini mini.c)\n", "mini.c": "int mini(void) { return 42; }\n"}


@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.tools("cmake", "gcc")),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_a_library_in_a_submodule_comes_from_the_mirror(tmp_path: Path, env_cache: Path, backend: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEDOJO_CACHE", str(env_cache))
    mirror = tmp_path / "mirror"
    mini = write_tree(mirror / "acme" / "mini", MINI)
    mini_sha = commit_all(mini, "mini", DATE)
    app = write_tree(mirror / "acme" / "app", {**APP, ".gitmodules": '[submodule "mini"]\n\tpath = third_party/mini\n'
                                                                     "\turl = https://github.com/acme/mini.git\n"})
    subprocess.run(["git", "clone", "-q", str(mini), str(app / "third_party" / "mini")], check=True)
    base = commit_all(app, "app with its library as a submodule", DATE)  # the clone is recorded as a gitlink
    subprocess.run(["rm", "-rf", str(app / "third_party" / "mini")], check=True)  # the mirror holds no copy of it

    spec = launch("acme/app", tmp_path / "launch", backend=backend, mirror=mirror, cache_dir=env_cache / "envs")
    log = (tmp_path / "launch" / "build.log").read_text()
    assert f"submodule third_party/mini: {mini_sha[:12]} from {mirror / 'acme' / 'mini'}" in log
    assert spec.log_parser == "ctest"
    sandbox = environment(spec, resolve_repo("acme/app", mirror)).open(base)
    try:
        ran = sandbox.exec(f"{spec.build_command} && {spec.test_command}")
        assert ran.ok and "mini_answers" in ran.output and "100% tests passed" in ran.output, ran.output
    finally:
        sandbox.close()
