"""Tools and libraries a failed build step names as missing, mapped to the Debian packages that
bring them: a step that exits 127 ("command not found"), a CMake `find_package` or a pkg-config
check that finds nothing, a Python extension build with no compiler or a header it includes. The launch adds the packages to the runtime layer and tries again
(`LanguageRecipe.adaptations`), so a project's test tooling is installed, not fatal.
"""

from __future__ import annotations

import re

COMMAND_PACKAGES = {
    "python": "python-is-python3", "python3": "python3", "perl": "perl", "ruby": "ruby", "node": "nodejs",
    "pkg-config": "pkg-config", "bison": "bison", "flex": "flex", "gperf": "gperf", "xxd": "xxd", "bc": "bc",
    "zip": "zip", "unzip": "unzip", "diff": "diffutils", "cmp": "diffutils", "file": "file", "xz": "xz-utils",
    "bzip2": "bzip2", "lz4": "lz4", "zstd": "zstd", "gzip": "gzip", "sphinx-build": "python3-sphinx",
    "autoreconf": "autoconf", "aclocal": "automake", "automake": "automake", "libtoolize": "libtool", "m4": "m4",
    "ninja": "ninja-build", "g++": "g++", "c++": "g++", "tput": "ncurses-bin", "tclsh": "tcl", "time": "time",
    "shasum": "libdigest-sha-perl", "md5sum": "coreutils", "wget": "wget", "curl": "curl", "git": "git",
    "go": "golang-go", "gofmt": "golang-go", "javac": "default-jdk-headless", "java": "default-jre-headless",
    "mvn": "maven",
}
"""Commands whose Debian package has another name; any other command is taken as its package's name."""
CMAKE_PACKAGES = {
    "Python": "python3", "Python3": "python3", "PythonInterp": "python3", "Doxygen": "doxygen",
    "ZLIB": "zlib1g-dev", "PkgConfig": "pkg-config", "Git": "git", "BZip2": "libbz2-dev", "LibLZMA": "liblzma-dev",
    "OpenSSL": "libssl-dev", "CURL": "libcurl4-openssl-dev", "GTest": "libgtest-dev", "Boost": "libboost-dev",
    "Threads": "libc6-dev", "Perl": "perl", "Ruby": "ruby",
}
"""CMake `find_package` names and the package that satisfies each; others are not guessed."""
PKG_CONFIG_PACKAGES = {"zlib": "zlib1g-dev", "openssl": "libssl-dev", "libcurl": "libcurl4-openssl-dev"}
"""pkg-config modules whose -dev package is not `lib<name>-dev`."""

_COMMAND = re.compile(r"(?:^|\s|/)(?:ba)?sh(?:: line \d+| \d+)?: (?:\d+: )?([\w.+-]+): (?:command )?not found"
                      r"|^make(?:\[\d+\])?: ([\w.+-]+): No such file or directory"
                      r"|env: '?([\w.+-]+)'?: No such file or directory", re.MULTILINE)
_COMPILER = re.compile(r"command '(?:[\w.-]+-)?(gcc|cc|g\+\+|c\+\+)' failed: No such file or directory"
                       r"|(?:unable to execute|error: command) '(?:[\w.-]+-)?(gcc|cc|g\+\+|c\+\+)'"
                       r"|No such file or directory: '(?:[\w.-]+-)?(gcc|cc|g\+\+|c\+\+)'")
"""A Python build (setuptools) that found no C or C++ compiler for an extension module."""
_HEADER = re.compile(r"fatal error: (Python\.h|ffi\.h|zlib\.h|yaml\.h): No such file or directory")
HEADER_PACKAGES = {"Python.h": "python3-dev", "ffi.h": "libffi-dev", "zlib.h": "zlib1g-dev", "yaml.h": "libyaml-dev"}
"""Headers an extension build includes, and the -dev package that brings each."""
_CMAKE = re.compile(r"Could NOT find (\w+)|\b(Python\d?) (?:interpreter )?not found", re.IGNORECASE)
_PKG_CONFIG = re.compile(r"No package '([\w.+-]+)' found|Package '([\w.+-]+)', required by '[^']*', not found")


def missing_packages(log: str) -> list[tuple[str, str]]:
    """(Debian package, the log's line that names what is missing), in the log's order, each once."""
    found: dict[str, str] = {}
    for match in _COMMAND.finditer(log):
        command = next(group for group in match.groups() if group)
        found.setdefault(COMMAND_PACKAGES.get(command, command), match.group(0).strip())
    for match in _COMPILER.finditer(log):
        compiler = next(group for group in match.groups() if group)
        found.setdefault("g++" if "+" in compiler else "gcc", match.group(0).strip())
        found.setdefault("python3-dev", match.group(0).strip())  # an extension module includes Python.h
    for match in _HEADER.finditer(log):
        found.setdefault(HEADER_PACKAGES[match.group(1)], match.group(0).strip())
    for match in _CMAKE.finditer(log):
        name = next(group for group in match.groups() if group)
        package = CMAKE_PACKAGES.get(name) or CMAKE_PACKAGES.get(name.capitalize())
        if package:
            found.setdefault(package, match.group(0).strip())
    for match in _PKG_CONFIG.finditer(log):
        module = next(group for group in match.groups() if group)
        package = PKG_CONFIG_PACKAGES.get(module) or (f"{module}-dev" if module.startswith("lib") else f"lib{module}-dev")
        found.setdefault(package, match.group(0).strip())
    return list(found.items())
