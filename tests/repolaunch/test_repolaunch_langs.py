"""Docker launches of Go, Rust, C and Java repositories made in the test: toolchains from the Debian
release the repo's metadata asks for, per-test results from each runner's own output checked
against its summary, and the one-line reason when the dependency registry is out of reach.

The registries Go, cargo and Maven fetch from may not answer where these tests run; the tests of
that behaviour skip, saying so, where the registry does answer. Runtime layers (Debian's golang,
rustc, gcc with cmake, meson or autotools, JDK + Maven) are shared with every other launch on the engine.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from launch_helpers import DATE
from toolchains import require_tools

from swedojo.repolaunch.detect import analyse
from swedojo.repolaunch.errors import InstallError
from swedojo.repolaunch.images import SRC
from swedojo.repolaunch.launch import launch
from swedojo.schema import TestStatus

pytestmark = pytest.mark.docker
P, F, S = TestStatus.PASSED, TestStatus.FAILED, TestStatus.SKIPPED

GO_MODULE = {
    "go.mod": "module example.com/calc\n\ngo 1.18\n\nrequire example.com/greet v1.0.0\n",
    # a vendored dependency: nothing to download, go test -mod=vendor
    "vendor/modules.txt": "# example.com/greet v1.0.0\n## explicit\nexample.com/greet\n",
    "vendor/example.com/greet/greet.go": 'package greet\n\nfunc Hello() string { return "hello" }\n',
    "calc.go": "package calc\n\nimport \"example.com/greet\"\n\nfunc Add(a, b int) int { return a + b }\n\n"
               "func Greeting() string { return greet.Hello() }\n",
    "calc_test.go": """package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("1+2")
	}
}

func TestKnownBug(t *testing.T) {
	if Add(1, 1) != 3 {
		t.Fatal("1+1 is not 3")
	}
}

func TestGreeting(t *testing.T) {
	for _, name := range []string{"plain", "again"} {
		t.Run(name, func(t *testing.T) {
			if Greeting() != "hello" {
				t.Fatal(Greeting())
			}
		})
	}
}

func TestLater(t *testing.T) { t.Skip("later") }
""",
}
CRATE = {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    ".gitignore": "target/\n",
    "src/lib.rs": """/// Adds.
///
/// ```
/// assert_eq!(calc::add(2, 2), 4);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(1, 2), 3);
    }

    #[test]
    fn known_bug() {
        assert_eq!(super::add(1, 1), 3);
    }

    #[test]
    #[ignore]
    fn later() {}
}
""",
    "tests/outside.rs": "#[test]\nfn from_outside() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
}
CMAKE = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc C)\nenable_testing()\n"
                      "add_executable(check_add check_add.c)\nadd_test(NAME add_works COMMAND check_add 1 2 3)\n"
                      "add_test(NAME known_bug COMMAND check_add 1 1 3)\nadd_test(NAME zero COMMAND check_add 0 0 0)\n",
    "check_add.c": "#include <stdio.h>\n#include <stdlib.h>\nint main(int argc, char **argv) {\n"
                   "  if (atoi(argv[1]) == 1 && atoi(argv[2]) == 1) puts(FORGED);\n"
                   "  return argc == 4 && atoi(argv[1]) + atoi(argv[2]) == atoi(argv[3]) ? 0 : 1;\n}\n",
    ".gitignore": "build/\n",
}
MAVEN = {
    "pom.xml": """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>calc</artifactId>
  <version>0.1.0</version>
  <properties><maven.compiler.release>11</maven.compiler.release></properties>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13.2</version><scope>test</scope></dependency>
  </dependencies>
</project>
""",
    "src/main/java/calc/Calc.java": "package calc;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n",
    "src/test/java/calc/CalcTest.java": "package calc;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n"
                                        "public class CalcTest {\n  @Test public void adds() { assertEquals(3, Calc.add(1, 2)); }\n}\n",
}


def _answers(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


def _launch(repo: Path, out: Path, env_cache: Path):
    return launch(str(repo), out, backend="docker", cache_dir=env_cache / "envs")


def test_go_module_with_vendored_dependency(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """go 1.18 in go.mod: bookworm's Go 1.19 is the oldest that builds it; vendor/ needs no proxy."""
    spec = _launch(make_repo("calc-go", GO_MODULE, DATE), tmp_path / "out", env_cache)
    mod = "example.com/calc::"
    assert spec.test_status == {f"{mod}TestAdd": P, f"{mod}TestKnownBug": F, f"{mod}TestGreeting": P,
                                f"{mod}TestGreeting/plain": P, f"{mod}TestGreeting/again": P, f"{mod}TestLater": S}
    assert (spec.base_image, spec.runtime_version) == ("swedojo/base:bookworm", "1.19")
    assert spec.install_commands == [] and spec.test_command == "go test -mod=vendor -json ./..."
    assert spec.env_vars["GOPROXY"] == "off" and spec.flaky_tests == [] and spec.network_tests == []


def test_a_go_package_from_before_modules_is_launched_as_the_module_its_import_comment_names(
        make_repo, tmp_path: Path, env_cache: Path) -> None:
    """No go.mod, a Makefile that runs `go test`: the repository was taken for a C project, `make`
    found no `go`, and the Debian package asked for was "go" (there is none). Go files at the root
    make it Go; go.mod is written in the work tree, naming the module by the package's import
    comment, which its external tests import it by."""
    files = {"calc.go": 'package calc // import "github.com/acme/calc"\n\nfunc Add(a, b int) int { return a + b }\n',
             "example_test.go": 'package calc_test\n\nimport (\n\t"testing"\n\n\t"github.com/acme/calc"\n)\n\n'
                                "func TestAdd(t *testing.T) {\n\tif calc.Add(1, 2) != 3 {\n\t\tt.Fatal(\"sum\")\n\t}\n}\n",
             "Makefile": "test:\n\tgo test ./...\n"}
    spec = _launch(make_repo("calc-gopath", files, DATE), tmp_path / "out", env_cache)
    assert spec.language == "go" and spec.test_status == {"github.com/acme/calc::TestAdd": P}
    assert "[ -f go.mod ] || go mod init github.com/acme/calc" in spec.rebuild_commands
    from swedojo.repolaunch.missing import missing_packages
    assert missing_packages("make: go: No such file or directory\n")[0][0] == "golang-go"
    uncommented = make_repo("calc-uncommented", {**files, "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"},
                            DATE)  # no import comment: the path the external tests import it by
    assert "go mod init github.com/acme/calc" in analyse(uncommented).rebuild_commands[0]


def test_a_dependency_that_needs_a_newer_go_moves_the_launch_to_the_next_release(make_repo, tmp_path: Path,
                                                                                  env_cache: Path) -> None:
    """The module says go 1.18 (bookworm's 1.19), a vendored dependency says go 1.21 and uses its
    `min`: Go 1.19 says the module requires Go 1.21, and the launch goes on with trixie's 1.24
    (the trixie base image is made on first use)."""
    files = {"go.mod": "module example.com/calc\n\ngo 1.18\n\nrequire example.com/greet v1.0.0\n",
             "vendor/modules.txt": "# example.com/greet v1.0.0\n## explicit; go 1.21\nexample.com/greet\n",
             "vendor/example.com/greet/greet.go": "package greet\n\nfunc Smaller(a, b int) int { return min(a, b) }\n",
             "calc.go": 'package calc\n\nimport "example.com/greet"\n\nfunc Low(a, b int) int { return greet.Smaller(a, b) }\n',
             "calc_test.go": 'package calc\n\nimport "testing"\n\nfunc TestLow(t *testing.T) {\n\tif Low(1, 2) != 1 {\n'
                             '\t\tt.Fatal("low")\n\t}\n}\n'}
    spec = _launch(make_repo("newer-go", files, DATE), tmp_path / "out", env_cache)
    assert spec.test_status == {"example.com/calc::TestLow": P}
    assert (spec.base_image, spec.runtime_version) == ("swedojo/base:trixie", "1.24")
    assert len(spec.attempts) == 1 and spec.attempts[0].startswith("go 1.19: [validate]"), spec.attempts
    assert "note: module requires Go 1.21" in (tmp_path / "out" / "build.log").read_text()


def test_go_module_whose_dependency_is_not_vendored_names_the_unreachable_proxy(make_repo, tmp_path: Path,
                                                                                env_cache: Path) -> None:
    if _answers("proxy.golang.org"):
        pytest.skip("proxy.golang.org answers here: this is a test of the launch where it does not")
    files = {"go.mod": "module example.com/web\n\ngo 1.19\n\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n"
                       "\tgolang.org/x/text v0.14.0 // indirect\n)\n",
             "web.go": "package web\n\nimport \"github.com/pkg/errors\"\n\nvar E = errors.New(\"x\")\n"}
    with pytest.raises(InstallError) as caught:
        _launch(make_repo("web", files, DATE), tmp_path / "out", env_cache)
    assert caught.value.stage == "install"
    assert caught.value.message == ("the Go module proxy (proxy.golang.org) is not reachable from here: "
                                    "the module's 2 dependencies cannot be fetched")
    log = caught.value.log_path.read_text()
    assert "go mod download" in log and "proxy.golang.org" in log  # go's own error is kept


@pytest.mark.parametrize(("edition", "release", "rustc", "bin_id"), [
    ("2021", "bookworm", "1.63", "calc (src/main.rs)"),  # edition 2021 needs rustc 1.56
    ("2018", "bullseye", "1.48", "calc (2)"),  # cargo 1.48 names no source file
])
def test_cargo_crate_per_test_results(make_repo, tmp_path: Path, env_cache: Path, edition: str, release: str,
                                      rustc: str, bin_id: str) -> None:
    """The oldest rustc the edition allows; unit, integration and doc tests by binary, the bin
    target (named as the lib) apart."""
    files = {**CRATE, "Cargo.toml": CRATE["Cargo.toml"].replace("2021", edition),
             "src/main.rs": "fn main() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n}\n"}
    spec = _launch(make_repo(f"calc-rs-{edition}", files, DATE), tmp_path / "out", env_cache)
    assert spec.test_status == {"calc::tests::adds": P, "calc::tests::known_bug": F, "calc::tests::later": S,
                                "outside::from_outside": P, "calc (doc)::src/lib.rs - add (line 3)": P,
                                f"{bin_id}::tests::adds": P}
    assert (spec.base_image, spec.runtime_version) == (f"swedojo/base:{release}", rustc)
    assert spec.env_vars["CARGO_NET_OFFLINE"] == "true" and spec.flaky_tests == []


def test_a_fetched_dependency_builds_offline_in_the_sandbox(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """A git dependency is the one cargo fetches with no registry: a bare repository committed into
    the crate, named by where the dependency layer's build has the checkout (images.SRC). The layer
    vendors it; sandboxes (another uid, offline) build it from there with the lock file vendoring
    made, as the crate has none."""
    dep = make_repo("dep", {"Cargo.toml": '[package]\nname = "dep"\nversion = "0.1.0"\n',
                            "src/lib.rs": "pub fn two() -> i32 { 2 }\n"}, DATE)
    files = {**CRATE, "Cargo.toml": CRATE["Cargo.toml"] + f'\n[dependencies]\ndep = {{ git = "file://{SRC}/dep.git" }}\n',
             "src/lib.rs": CRATE["src/lib.rs"] + "\n#[test]\nfn uses_dep() {\n    assert_eq!(dep::two(), 2);\n}\n"}
    crate = tmp_path / "uses-dep"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(crate / "dep.git")], check=True)
    subprocess.run(["git", "-C", str(dep), "push", "-q", str(crate / "dep.git"), "main"], check=True)
    spec = _launch(make_repo("uses-dep", files, DATE), tmp_path / "out", env_cache)
    assert spec.test_status["calc::uses_dep"] == P and spec.test_status["calc::tests::known_bug"] == F
    assert "cargo vendor" in spec.install_commands[0]


def test_crate_with_a_dependency_names_the_unreachable_crates_io(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """cargo 1.63 clones crates.io's index from github.com (sparse index.crates.io came in 1.70)."""
    if _answers("github.com") or _answers("index.crates.io"):
        pytest.skip("crates.io's index answers here: this is a test of the launch where it does not")
    files = {**CRATE, "Cargo.toml": CRATE["Cargo.toml"] + '\n[dependencies]\nitoa = "1"\n\n'
                                                         '[dev-dependencies]\nlocal = { path = "local" }\n',
             "local/Cargo.toml": '[package]\nname = "local"\nversion = "0.1.0"\n', "local/src/lib.rs": ""}
    with pytest.raises(InstallError) as caught:
        _launch(make_repo("uses-itoa", files, DATE), tmp_path / "out", env_cache)
    assert caught.value.message == ("crates.io (github.com) is not reachable from here: "
                                    "the crate's 1 dependency cannot be fetched")
    assert "cargo vendor" in caught.value.log_path.read_text()


MESON = {"meson.build": "project('calc', 'c')\nexe = executable('check_add', 'check_add.c')\n"
                        "test('add_works', exe, args: ['1', '2', '3'])\ntest('known_bug', exe, args: ['1', '1', '3'])\n"
                        "test('zero', exe, args: ['0', '0', '0'])\n",
         "check_add.c": CMAKE["check_add.c"], ".gitignore": "build/\n"}
AUTOTOOLS = {"configure.ac": "AC_INIT([calc], [0.1])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_CONFIG_FILES([Makefile])\n"
                             "AC_OUTPUT\n",
             "Makefile.am": "check_PROGRAMS = add_works known_bug\nTESTS = $(check_PROGRAMS)\n",
             "add_works.c": "int main(void) { return 1 + 2 == 3 ? 0 : 1; }\n",
             "known_bug.c": "int main(void) { return 1 + 1 == 3 ? 0 : 1; }\n"}


@pytest.mark.parametrize(("files", "build_system", "parser", "statuses"), [
    (CMAKE, "cmake", "ctest", {"add_works": P, "known_bug": F, "zero": P}),
    (MESON, "meson", "surefire", {"calc#add_works": P, "calc#known_bug": F, "calc#zero": P}),
    (AUTOTOOLS, "autotools", "automake", {"add_works": P, "known_bug": F}),
], ids=["cmake", "meson", "autotools"])
def test_c_build_systems(make_repo, tmp_path: Path, env_cache: Path, files: dict[str, str], build_system: str,
                         parser: str, statuses: dict[str, TestStatus]) -> None:
    """ctest, meson's JUnit report and automake's harness, each per test and checked against its counts."""
    files = {**files, "check_add.c": files["check_add.c"].replace("FORGED", '"failing as it should"')} \
        if "check_add.c" in files else files
    spec = _launch(make_repo(f"calc-{build_system}", files, DATE), tmp_path / "out", env_cache)
    assert spec.test_status == statuses
    assert (spec.language, spec.build_system, spec.log_parser) == ("c", build_system, parser)


def test_a_build_that_downloads_from_an_unreachable_host_says_so(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """CMake's FetchContent clones the test framework while configuring: where its host cannot be
    reached the launch says which URL, once (no other plan is tried: none would reach it)."""
    if _answers("github.com"):
        pytest.skip("github.com answers here: this is a test of the launch where it does not")
    files = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(calc C)\nenable_testing()\n"
                               "include(FetchContent)\nFetchContent_Declare(framework GIT_REPOSITORY "
                               "https://github.com/example/framework.git GIT_TAG v1.0)\nFetchContent_MakeAvailable(framework)\n"
                               "add_executable(adds adds.c)\nadd_test(NAME adds COMMAND adds)\n",
             "adds.c": "int main(void) { return 0; }\n"}
    with pytest.raises(InstallError) as caught:
        _launch(make_repo("fetches-at-configure", files, DATE), tmp_path / "out", env_cache)
    assert caught.value.stage == "install"
    assert caught.value.message == ("the build downloads https://github.com/example/framework.git/ itself, "
                                    "and github.com is not reachable from here")
    assert (tmp_path / "out" / "build.log").read_text().count("runtime on the docker backend") == 1


OLD_ERA_CPP = {
    # a bundled test header of its era sizes an array by SIGSTKSZ: a constant up to glibc 2.33 only
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(calc CXX)\nenable_testing()\n"
                      "add_executable(check_add check_add.cpp)\nadd_test(NAME add_works COMMAND check_add)\n",
    "check_add.cpp": "#include <csignal>\nstatic char alternate_stack[SIGSTKSZ];\n"
                     "int main() { return alternate_stack[0] == 0 && 1 + 2 == 3 ? 0 : 1; }\n",
    ".gitignore": "build/\n",
}


def test_code_that_does_not_compile_with_this_toolchain_tries_an_older_release(make_repo, tmp_path: Path,
                                                                              env_cache: Path) -> None:
    """A compile error in the repo layer is a toolchain search's cue, as an interpreter's error is
    Python's: the next older Debian release's gcc and C library (a real repository's bundled Catch
    did not compile with bookworm's glibc 2.36 and did with bullseye's 2.31)."""
    spec = _launch(make_repo("old-era-cpp", OLD_ERA_CPP, DATE), tmp_path / "out", env_cache)
    assert spec.test_status == {"add_works": P}
    assert (spec.base_image, spec.runtime_version) == ("swedojo/base:bullseye", "10")
    assert len(spec.attempts) == 1 and spec.attempts[0].startswith("cpp 12: [install]"), spec.attempts
    assert "alternate_stack[SIGSTKSZ]" in (tmp_path / "out" / "build.log").read_text()


def test_a_tests_output_that_reads_like_a_ctest_result_stays_its_output(make_repo, tmp_path: Path,
                                                                        env_cache: Path) -> None:
    """A failing test prints a line that reads like one more ctest result: `ctest -V` prints every
    line a test writes after the test's number, so the line is the test's output, never a result
    (without -V it was read as a fourth test, and only ctest's summary caught it)."""
    forged = '"4/4 Test #4: made_up ......................   Passed    0.00 sec"'
    files = {**CMAKE, "check_add.c": CMAKE["check_add.c"].replace("FORGED", forged)}
    spec = _launch(make_repo("forged-c", files, DATE), tmp_path / "out", env_cache)
    assert spec.test_status == {"add_works": P, "known_bug": F, "zero": P}
    assert "made_up" in (tmp_path / "out" / "build.log").read_text()


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_maven_project_names_the_unreachable_central(make_repo, tmp_path: Path, env_cache: Path, backend: str) -> None:
    """Maven resolves its own plugins from Maven Central too (Debian's packaged ones are other
    versions than a plain pom asks for), so offline a Maven project stops at the dependency layer,
    in an image and with the host's Maven alike."""
    if _answers("repo.maven.apache.org"):
        pytest.skip("repo.maven.apache.org answers here: this is a test of the launch where it does not")
    if backend == "local":
        require_tools("mvn", "javac")
    with pytest.raises(InstallError) as caught:
        launch(str(make_repo("calc-java", MAVEN, DATE)), tmp_path / "out", backend=backend,
               cache_dir=env_cache / "envs")
    assert caught.value.stage == "install"
    assert caught.value.message == ("Maven Central (repo.maven.apache.org) is not reachable from here: "
                                    "the project's 1 dependency and Maven's own plugins cannot be fetched")
    log = caught.value.log_path.read_text()
    assert "mvn -B -ntp dependency:go-offline" in log and "BUILD FAILURE" in log
