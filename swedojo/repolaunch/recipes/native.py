"""C and C++: CMake, Meson, autotools or make build in the work tree in every sandbox; the
dependency layer is empty (the system's libraries are all there is)."""

from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    read_text,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.host import Runtime, host_tool, no_host_runtime
from swedojo.repolaunch.recipes.base import (
    ADD_SANDBOX_USER,
    Adaptation,
    LanguageRecipe,
    apt,
)

CTEST = "ctest -V"
"""Verbose: every test's output is in the log, so the tests a ctest test runs inside it (googletest's,
TAP's, a harness's "[pass] name" lines) are read one by one (`testrun.parsers.parse_ctest`), not
only the test's own result (a real project registers its whole suite as one ctest test per executable)."""
DEBIAN_GCC = {"bullseye": "10", "bookworm": "12", "trixie": "14"}
BUILD_FILES = ("CMakeLists.txt", "meson.build", "configure.ac", "Makefile.am", "Makefile")
BUILD_PACKAGES = {"cmake": ["cmake"], "meson": ["meson", "ninja-build"], "autotools": ["autoconf", "automake", "libtool"]}
"""Debian packages of each build system besides make."""


_DOC_NAME = r"(?:[\w-]*[-_])?(?:docs?|documentation|man|manpages?|html|gtk-doc|doxygen|sphinx)(?:[-_][\w-]*)?"
_AUTOCONF_DOCS = re.compile(rf"AC_ARG_(ENABLE|WITH)\(\s*\[?({_DOC_NAME})\]?\s*,", re.IGNORECASE)
_CMAKE_DOCS = re.compile(rf"option\(\s*({_DOC_NAME})\s", re.IGNORECASE)
_MESON_DOCS = re.compile(rf"option\(\s*'({_DOC_NAME})'\s*,\s*type\s*:\s*'(boolean|feature)'", re.IGNORECASE)
_DOC_FAILURE = re.compile(r"^.*(?:error|not found|no such file|missing).*\b(?:docs?|documentation|man ?pages?|asciidoc"
                          r"|asciidoctor|ronn|sphinx(?:-build)?|doxygen|xsltproc|docbook|pandoc|makeinfo|texinfo|help2man"
                          r"|gtk-doc)\b.*$", re.IGNORECASE | re.MULTILINE)
"""A failed step's line that blames something only documentation needs."""
_TEST_NAME = r"(?:[\w-]*[-_])?(?:tests?|testing|unit[-_]?tests?)"
"""An option that builds the tests: `BUILD_TESTING`, `FOO_BUILD_TESTS`, `ENABLE_TESTS`, `tests`, not
`FOO_TESTS_COVERAGE` (its name must end there)."""
_AUTOCONF_TESTS = re.compile(rf"AC_ARG_(ENABLE|WITH)\(\s*\[?({_TEST_NAME})\]?\s*,", re.IGNORECASE)
_CMAKE_TESTS = re.compile(rf"option\(\s*({_TEST_NAME})\s", re.IGNORECASE)
_MESON_TESTS = re.compile(rf"option\(\s*'({_TEST_NAME})'\s*,\s*type\s*:\s*'(boolean|feature)'", re.IGNORECASE)
_NO_TESTS = re.compile(r"^.*(?:No tests were found|No tests defined).*$", re.MULTILINE)
"""ctest's and meson's words for a build that registered no test."""
DOCUMENTATION_OFF = "documentation off"
TESTS_ON = "tests on"
CONFIGURE_STEPS = {"autotools": "./configure", "cmake": "cmake -S . -B build", "meson": "meson setup build"}
"""The configure command of each build system's repo layer, where options go."""


def _options(root: Path, build_system: str, on: bool, autoconf: re.Pattern[str], cmake: re.Pattern[str],
             meson: re.Pattern[str]) -> list[str]:
    """The configure options that turn on (or off) what the patterns name, as the project's build
    files declare them."""
    if build_system == "autotools":
        flags = {"ENABLE": ("--enable-", "--disable-"), "WITH": ("--with-", "--without-")}
        return [f"{flags[kind.upper()][0 if on else 1]}{name}" for kind, name in autoconf.findall(read_text(root / "configure.ac"))]
    if build_system == "cmake":
        names = [name for path in _cmake_files(root) for name in cmake.findall(read_text(path))]
        return [f"-D{name}={'ON' if on else 'OFF'}" for name in dict.fromkeys(names)]
    if build_system == "meson":
        text = read_text(root / "meson_options.txt") + read_text(root / "meson.options")
        values = {"boolean": ("true", "false"), "feature": ("enabled", "disabled")}
        return [f"-D{name}={values[kind.lower()][0 if on else 1]}" for name, kind in meson.findall(text)]
    return []


_CMAKE_INCLUDES = re.compile(r"^\s*(?:add_subdirectory|include)\s*\(\s*\"?([^\s\")$]+)", re.MULTILINE | re.IGNORECASE)
MAX_CMAKE_FILES = 50


def _cmake_files(root: Path) -> list[Path]:
    """The root CMakeLists.txt and the project's CMake files it reaches by `add_subdirectory` and
    `include` of a file in the tree, root first: options are often declared in a subproject's or
    an included file's (`googletest/CMakeLists.txt`, `cmake/options.cmake`)."""
    found: list[Path] = []
    queue = [root / "CMakeLists.txt"]
    while queue and len(found) < MAX_CMAKE_FILES:
        path = queue.pop(0)
        if path in found or not path.is_file():
            continue
        found.append(path)
        for name in _CMAKE_INCLUDES.findall(read_text(path)):
            if "$" in name:
                continue  # a variable's value: not read statically
            target = (path.parent / name).resolve()
            if target.is_relative_to(root.resolve()):
                queue.append(target / "CMakeLists.txt" if target.is_dir() else target)
    return found


def _documentation_off(root: Path, build_system: str) -> list[str]:
    """The options that turn documentation off, as the project's build files declare them."""
    return _options(root, build_system, False, _AUTOCONF_DOCS, _CMAKE_DOCS, _MESON_DOCS)


def _tests_on(root: Path, build_system: str) -> list[str]:
    """The options that turn the tests on, as the project's build files declare them."""
    return _options(root, build_system, True, _AUTOCONF_TESTS, _CMAKE_TESTS, _MESON_TESTS)


def _c_language(root: Path) -> str:
    cpp = any(next(root.rglob(pattern), None) for pattern in ("*.cpp", "*.cc", "*.cxx"))
    return "cpp" if cpp else "c"


def _make_target(text: str) -> str:
    """`test`, else `check`: where a plain Makefile has both, `check` is most often the quick subset
    (automake's `check` is read apart, from configure.ac)."""
    for target in ("test", "check"):
        if re.search(rf"^{target}\s*:", text, re.MULTILINE):
            return target
    return ""


class NativeRecipe(LanguageRecipe):
    """CMakeLists.txt, meson.build, configure.ac or Makefile.am (autotools), a Makefile; cpp when
    any C++ source is in the tree."""

    languages = ("c", "cpp")
    family = "native"
    priority = 60

    def detect(self, root: Path) -> int | None:
        return self.priority if any((root / name).is_file() for name in BUILD_FILES) else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        out = self._analyse(root)
        out.documentation_off = _documentation_off(root, out.build_system)
        if out.documentation_off:
            out.note(out.dependency_files[0], f"documentation can be turned off: {' '.join(out.documentation_off)}")
        out.tests_on = _tests_on(root, out.build_system)
        if out.tests_on:
            out.note(out.dependency_files[0], f"tests can be turned on: {' '.join(out.tests_on)}")
        return out

    def _analyse(self, root: Path) -> RepoAnalysis:
        language = _c_language(root)
        if (root / "CMakeLists.txt").is_file():
            out = RepoAnalysis(language=language, build_system="cmake", dependency_files=["CMakeLists.txt"],
                               rebuild_commands=["cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug && cmake --build build -j2"],
                               build_command="cmake --build build -j2",
                               test_command=f"cd build && {CTEST}", log_parser="ctest")
            if not re.search(r"enable_testing|add_test|include\(CTest\)", read_text(root / "CMakeLists.txt")):
                out.note("CMakeLists.txt", "no enable_testing/add_test: ctest may find no tests")
            else:
                out.note("CMakeLists.txt", "ctest tests")
            return out
        if (root / "meson.build").is_file():
            # meson's own JUnit report (meson-logs/testlog.junit.xml) is read per test and for its counts
            out = RepoAnalysis(language=language, build_system="meson", dependency_files=["meson.build"],
                               rebuild_commands=["meson setup build && meson compile -C build"],
                               build_command="meson compile -C build",
                               test_command="meson test -C build --print-errorlogs; status=$?; "
                                            "cat build/meson-logs/testlog.junit.xml; exit $status",
                               log_parser="surefire")
            out.note("meson.build", "meson test, its JUnit report read as surefire's")
            return out
        if (root / "configure.ac").is_file() or (root / "Makefile.am").is_file():
            configure = "./configure" if (root / "configure").is_file() else "autoreconf -fi && ./configure"
            out = RepoAnalysis(language=language, build_system="autotools", dependency_files=["configure.ac"],
                               rebuild_commands=[f"{configure} && make -j2"], build_command="make -j2",
                               test_command="make check",
                               log_parser="automake")
            out.note("configure.ac", "automake harness: make check")
            return out
        text = read_text(root / "Makefile")
        target = _make_target(text)
        out = RepoAnalysis(language=language, build_system="make", dependency_files=["Makefile"],
                           rebuild_commands=["make -j2"], build_command="make -j2",
                           test_command=f"make {target or 'test'}", log_parser="make")
        out.note("Makefile", f"target {target}: TAP or \"PASS: name\" lines, else its exit status"
                 if target else "no test target found")
        return out

    def adaptations(self, analysis: RepoAnalysis, said: str) -> list[Adaptation]:
        """What only documentation needs is configured off before any tool is installed for it; a
        runner that found no test gets the project's test options turned on."""
        found = _DOC_FAILURE.search(said) if analysis.documentation_off else None
        first = [Adaptation(name=DOCUMENTATION_OFF, cause=found.group(0).strip())] if found else []
        if analysis.tests_on and (none := _NO_TESTS.search(said)):
            first.append(Adaptation(name=TESTS_ON, cause=none.group(0).strip()))
        return first + super().adaptations(analysis, said)

    def adapt(self, analysis: RepoAnalysis, adaptation: Adaptation) -> RepoAnalysis:
        """The options go into the configure step once (the launch applies its adaptations again to
        each plan it tries)."""
        options = {DOCUMENTATION_OFF: analysis.documentation_off, TESTS_ON: analysis.tests_on}.get(adaptation.name)
        if options and (step := CONFIGURE_STEPS.get(analysis.build_system)):
            added = f"{step} {' '.join(options)}"
            analysis = analysis.model_copy(update={"rebuild_commands": [
                command if added in command else command.replace(step, added, 1)
                for command in analysis.rebuild_commands]})
        return super().adapt(analysis, adaptation)

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """The release whose gcc the analysis names (the plan being tried), else the analysis's release."""
        release = next((r for r, gcc in DEBIAN_GCC.items() if gcc == analysis.runtime_version), analysis.debian_release)
        return release, DEBIAN_GCC[release]

    def docker_runtimes(self, analysis: RepoAnalysis) -> list[str]:
        """The analysis's release's gcc, then the older releases' (a toolchain search): code of an
        older era, or a header it bundles, may not compile with a newer compiler and C library (a
        real repository's bundled test framework sized an array by `SIGSTKSZ`, no constant from
        glibc 2.34 on). The launch tries the next one only after a compile error."""
        releases = list(DEBIAN_GCC)
        return [DEBIAN_GCC[r] for r in reversed(releases[:releases.index(analysis.debian_release) + 1])]

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        compiler = ["g++"] if analysis.language == "cpp" else ["gcc", "libc6-dev"]
        extra = BUILD_PACKAGES.get(analysis.build_system, [])
        return [apt(*compiler, "make", *extra, "git", "patch", "procps"), ADD_SANDBOX_USER]

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = host_tool("cc", ["-dumpfullversion"]) if shutil.which("make") else None
        if found is None:
            raise no_host_runtime("cc and make", log)
        return found
