"""Java with Maven: the dependencies and Maven's plugins fetched into the layer's local repository
(`m2/`); sandboxes run Maven offline (`-o`). Gradle projects are read but not built yet: the
Gradle wrapper fetches Gradle itself."""

from __future__ import annotations

import re
import shutil
from datetime import date, datetime
from pathlib import Path

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    newest,
    read_text,
    version_key,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import NoRuntimeError
from swedojo.repolaunch.host import Runtime, host_tool, no_host_runtime
from swedojo.repolaunch.recipes.base import ADD_SANDBOX_USER, LanguageRecipe, apt
from swedojo.repolaunch.registries import Registry

JAVA_LTS = {"8": date(2014, 3, 18), "11": date(2018, 9, 25), "17": date(2021, 9, 14),
            "21": date(2023, 9, 19), "25": date(2025, 9, 16)}
DEBIAN_JAVA = {"bullseye": "11", "bookworm": "17", "trixie": "21"}
"""The JDK each release's default-jdk-headless is (javac --release compiles for older Javas)."""


def _maven_dependencies(root: Path) -> int:
    pom = root / "pom.xml"
    return len(re.findall(r"<dependency>", pom.read_text(errors="replace"))) if pom.is_file() else 0


class JavaRecipe(LanguageRecipe):
    """pom.xml (Maven), build.gradle or build.gradle.kts (Gradle)."""

    languages = ("java",)
    family = "java"
    priority = 50
    build_systems = ("maven",)
    ci_version_keys = ("java-version", "java", "jdk")
    registry = Registry("Maven Central", ("repo.maven.apache.org",), "the project's", count=_maven_dependencies,
                        also="Maven's own plugins")

    def detect(self, root: Path) -> int | None:
        found = any((root / name).is_file() for name in ("pom.xml", "build.gradle", "build.gradle.kts"))
        return self.priority if found else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        version = ""
        if (root / "pom.xml").is_file():
            # go-offline misses what only the test phase resolves (surefire's provider): a run of no
            # test fetches it; sandboxes then run offline (-o)
            out = RepoAnalysis(language="java", build_system="maven", dependency_files=["pom.xml"],
                               install_commands=["mvn -B -ntp dependency:go-offline",
                                                 ("mvn -B -ntp -Dtest=NoSuchTest -DfailIfNoTests=false "
                                                  "-Dsurefire.failIfNoSpecifiedTests=false test")],
                               rebuild_commands=["mvn -B -o -q -DskipTests test-compile"],
                               test_command="mvn -B -o -fae test; status=$?; "
                                            "find . -path '*/surefire-reports/TEST-*.xml' -exec cat {} +; exit $status",
                               log_parser="surefire")
            pom = read_text(root / "pom.xml")
            for key in ("maven.compiler.release", "release", "java.version", "maven.compiler.source"):
                if match := re.search(rf"<{re.escape(key)}>\s*(?:1\.)?(\d+)\s*<", pom):
                    version = match.group(1)
                    out.note("pom.xml", f"{key} {version}")
                    break
        else:
            build = next(p for p in ("build.gradle.kts", "build.gradle") if (root / p).is_file())
            gradle = "./gradlew" if (root / "gradlew").is_file() else "gradle"
            out = RepoAnalysis(language="java", build_system="gradle", dependency_files=[build],
                               install_commands=[f"{gradle} --no-daemon dependencies"],
                               rebuild_commands=[f"{gradle} --no-daemon testClasses"],
                               test_command=f"{gradle} --no-daemon test --continue; status=$?; "
                                            "find . -path '*/test-results/*/TEST-*.xml' -exec cat {} +; exit $status",
                               log_parser="surefire")
            text = read_text(root / build)
            match = (re.search(r"JavaLanguageVersion\.of\((\d+)\)", text)
                     or re.search(r"sourceCompatibility\s*=\s*['\"]?(?:JavaVersion\.VERSION_)?(?:1[._])?(\d+)", text))
            if match:
                version = match.group(1)
                out.note(build, f"java {version}")
        if not version and (versions := ci.versions.get("java")):
            version = max(versions, key=int)
            out.note(".github/workflows", f"CI runs java {', '.join(versions)}")
        lts = newest(JAVA_LTS, when)
        out.runtime_version = version or (lts[0] if lts else "17")
        out.runtime_allowed = [out.runtime_version]
        out.debian_release = self.debian_release(out.runtime_version)
        return out

    def debian_release(self, version: str) -> str:
        try:
            parts = tuple(int(p) for p in version.split(".")[:2])
        except ValueError:
            return "bookworm"
        return "bullseye" if parts[0] <= 11 else "bookworm" if parts[0] <= 17 else "trixie"

    def toolchain_env(self, root: str, sandbox: bool) -> dict[str, str]:
        return {"MAVEN_OPTS": f"-Dmaven.repo.local={root}/m2"}

    def docker_runtime(self, analysis: RepoAnalysis) -> tuple[str, str]:
        """The analysis's release and its JDK."""
        release = analysis.debian_release
        if version_key(analysis.runtime_version) > version_key(DEBIAN_JAVA[release]):
            raise NoRuntimeError(f"no Debian release ships Java {analysis.runtime_version} "
                                 f"(bullseye 11, bookworm 17, trixie 21)")
        return release, DEBIAN_JAVA[release]

    def toolchain_commands(self, analysis: RepoAnalysis) -> list[str]:
        return [apt("default-jdk-headless", "maven", "ca-certificates", "git", "patch", "procps"), ADD_SANDBOX_USER]

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = host_tool("javac", ["--version"], "javac ") if shutil.which("mvn") else None
        if found is None:
            raise no_host_runtime("javac and mvn", log)
        return found
