"""Python requirement sources read, not pasted: each line validated before pip sees it.

One invalid line aborts a whole `pip install`, so every requirement the rules take from a file
goes through `requirement()`: a VCS or URL requirement becomes the same distribution from the
index (VCS hosts are out of reach, the index is not), a line pip cannot parse is dropped, and each
change is said (`Change`: into the build log and `EnvSpec.requirement_changes`). tox settings are
evaluated for one environment (factor conditions, `{[section]key}` references); a noxfile's
`session.install` calls are read from its syntax tree (constants and dependency-group helpers
followed); conda environment files are read for the optional test dependencies projects declare
only there, their names mapped to distributions, installed by a step that never fails the layer
(`tolerant_install`).
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import NamedTuple

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from swedojo.repolaunch.analysis import read_text


class Change(NamedTuple):
    """A requirement line the install does not take as written."""

    source: str
    """The file (and line) it came from."""
    line: str
    """As written."""
    became: str
    """What the install takes instead; empty: dropped."""
    why: str

    def describe(self) -> str:
        return f"{self.source}: `{self.line}` " + (f"-> `{self.became}`" if self.became else "dropped") + f" ({self.why})"


PROJECT = "."
"""What `requirement()` returns for a line that installs the project itself (`.`, `-e .`)."""
_VCS = re.compile(r"^(?:-e\s+|--editable[=\s]+)?(?:(?P<name>[\w.\-]+)(?P<extras>\[[^\]]*\])?\s*@\s*)?"
                  r"(?P<url>(?:git|hg|svn|bzr)\+\S+|https?://\S+|file:\S+)")
_ARCHIVE = re.compile(r"([A-Za-z0-9][\w.]*?)-\d[\w.\-]*\.(?:tar\.gz|tgz|zip|whl|tar\.bz2)$")


def _from_url(url: str) -> str:
    """The distribution a VCS or archive URL names: `#egg=name`, an archive's file name, else the
    repository's last path segment."""
    if match := re.search(r"[#&]egg=([\w.\-]+)", url):
        return match.group(1)
    path = url.split("#")[0].split("?")[0].rstrip("/")
    if match := _ARCHIVE.search(path):
        return match.group(1)
    last = path.rsplit("/", 1)[-1].split("@")[0].removesuffix(".git")
    return last if re.fullmatch(r"[A-Za-z0-9][\w.\-]*", last) else ""


def requirement(line: str, source: str, changes: list[Change]) -> str:
    """`line` (a comment-free requirement line) as pip should get it: the requirement, `PROJECT`,
    or empty (dropped; why is appended to `changes`)."""
    text = re.sub(r"\s--hash[=\s]\S+", "", line).strip()
    if re.fullmatch(r"(?:-e\s+|--editable[=\s]+)?\.(?:\[[\w,\-\s]*\])?/?", text):
        return PROJECT
    if match := _VCS.match(text):
        name = match.group("name") or _from_url(match.group("url"))
        marker = text.split(";", 1)[1].strip() if ";" in text else ""
        name = f"{name}{match.group('extras') or ''}" if name else ""
        became = f"{name}; {marker}" if name and marker else name
        if name and _valid(became):
            changes.append(Change(source, line, became, "a URL the sandbox cannot reach: the same distribution from the index"))
            return became
        changes.append(Change(source, line, "", "a URL naming no distribution"))
        return ""
    if text.startswith(("-e", "--editable", "./", "../", "/")) or re.match(r"^[\w\-./]+/$", text):
        changes.append(Change(source, line, "", "a local path, not a distribution"))
        return ""
    text = text.removeprefix("-e ").strip()
    if not _valid(text):
        changes.append(Change(source, line, "", "not a valid requirement"))
        return ""
    return text


def _valid(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


# --- requirement files ---------------------------------------------------------------------------

class RequirementFile(NamedTuple):
    """What one requirement file (with the files it includes) asks pip for."""

    requirements: list[str]
    constraints: list[str]
    """Constraint files (`-c`), relative to the root, kept as pip reads them."""
    project: bool
    """It installs the project itself (`-e .`)."""
    changes: list[Change]
    """Lines not taken as written; empty: pip can read the file as it is."""


_KEPT_OPTIONS = re.compile(r"^--(?:pre|prefer-binary)\b")
_SKIPPED_OPTIONS = re.compile(r"^(?:-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host|--no-binary|"
                              r"--only-binary|--use-feature|--no-index|--require-hashes)\b")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Comment-free lines with their numbers, continuations joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = " ".join((pending + line).split())
        pending = ""
        if line:
            out.append((start, line))
    return out


def read_requirement_file(root: Path, rel: str, seen: frozenset[str] = frozenset()) -> RequirementFile:
    """`rel` read as pip would, the files it includes (`-r`) followed; `-c` files kept."""
    path = root / rel
    requirements: list[str] = []
    constraints: list[str] = []
    changes: list[Change] = []
    project = False
    hashed = 0
    for number, line in _logical_lines(read_text(path)):
        source = f"{rel}:{number}"
        hashed += bool(re.search(r"\s--hash[=\s]", line))
        if match := re.match(r"^(?:-r|--requirement)[=\s]*(\S+)$", line):
            nested = str(Path(rel).parent / match.group(1)) if not match.group(1).startswith("/") else match.group(1)
            nested = str(Path(nested))
            if nested in seen or not (root / nested).is_file():
                changes.append(Change(source, line, "", "a file that does not exist here" if nested not in seen
                                      else "includes itself"))
                continue
            inner = read_requirement_file(root, nested, seen | {rel})
            requirements += inner.requirements
            constraints += inner.constraints
            changes += inner.changes
            project = project or inner.project
        elif match := re.match(r"^(?:-c|--constraint)[=\s]*(\S+)$", line):
            nested = str(Path(Path(rel).parent / match.group(1)))
            if (root / nested).is_file():
                constraints.append(nested)
            else:
                changes.append(Change(source, line, "", "a constraints file that does not exist here"))
        elif _KEPT_OPTIONS.match(line):
            requirements.append(line.split()[0])
        elif _SKIPPED_OPTIONS.match(line):
            changes.append(Change(source, line, "", "an index option: the launch's index and date decide"))
        elif line.startswith("-") and not re.match(r"^(?:-e|--editable)\b", line):
            changes.append(Change(source, line, "", "an option pip would apply to the whole install"))
        elif (taken := requirement(line, source, changes)) == PROJECT:
            project = True
        elif taken:
            requirements.append(taken)
    if hashed:  # one hash puts pip in hash mode for the whole install: the project's own directory has none
        changes.append(Change(rel, f"--hash on {hashed} line(s)", "the same pins without their hashes",
                              "pip checks hashes for every requirement of an install or none, and cannot for the "
                              "project itself or the other files installed with it"))
    return RequirementFile(requirements, constraints, project, changes)


# --- tox ---------------------------------------------------------------------------------------

def expand_braces(text: str) -> list[str]:
    """tox's generative names: `py{39,310}-{a,b}` -> py39-a, py39-b, py310-a, py310-b."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    return [out for choice in match.group(1).split(",")
            for out in expand_braces(text[:match.start()] + choice.strip() + text[match.end():])]


def tox_envs(envlist: str) -> list[str]:
    """The environments an envlist names, generative names expanded."""
    envs: list[str] = []
    for part in re.split(r"[\s,]+(?![^{]*\})", envlist):
        for env in expand_braces(part.strip()):
            if env and env not in envs:
                envs.append(env)
    return envs


def tox_env_for(envlist: str, version: str) -> tuple[str, set[str]]:
    """The envlist's environment a run on Python `version` ("3.11") would be, and its factors: the
    first whose Python factor is that version, else the first with no Python factor, else the
    version's own (`py311`). An environment for another job (docs, lint) is never it."""
    mine = f"py{version.replace('.', '')}"
    envs = [e for e in tox_envs(envlist) if not re.search(r"doc|lint|style|type|mypy|flake|format|release|pkg|build", e)]

    def python(env: str) -> list[str]:
        return [f for f in env.split("-") if re.fullmatch(r"py\d*|pypy\d*", f)]

    chosen = next((e for e in envs if mine in python(e)), None) or next((e for e in envs if not python(e)), mine)
    factors = set(chosen.split("-")) | {mine, "py3", "py"}
    return chosen, factors


def _condition_holds(condition: str, factors: set[str]) -> bool:
    """A tox factor condition: `a,b` either, `a-b` both, `!a` not a; braces expanded."""
    return any(all((f[1:] not in factors) if f.startswith("!") else (f in factors) for f in option.split("-"))
               for part in condition.split(",") for option in expand_braces(part.strip()) if option)


_CONDITIONAL = re.compile(r"^([!\w.\-{},]+):(?!//)\s*(.*)$")


def tox_lines(cfg_get: dict[str, dict[str, str]], section: str, key: str, factors: set[str],
              depth: int = 0) -> list[str]:
    """The lines of tox setting `section.key` that apply to an environment of `factors`: factor
    conditions evaluated, `{[other]key}` references replaced by that setting's lines."""
    value = cfg_get.get(section, {}).get(key, "")
    out: list[str] = []
    for raw in value.splitlines():
        line = raw.split(" #", 1)[0].strip().replace("{toxinidir}/", "").replace("{toxinidir}", ".")
        line = re.sub(r"\{(?:env:[^:{}]+|posargs)(?::([^{}]*))?\}", lambda m: m.group(1) or "", line).strip()
        if not line or line.startswith("#"):
            continue
        if (match := _CONDITIONAL.match(line)) and not re.match(r"^[\w.\-]+\s*[<>=!~]", line):
            if not _condition_holds(match.group(1), factors):
                continue
            line = match.group(2).strip()
        if (ref := re.fullmatch(r"\{\[([^\]]+)\]([\w\-]+)\}", line)) and depth < 4:
            out += tox_lines(cfg_get, ref.group(1), ref.group(2), factors, depth + 1)
        elif line:
            out.append(line)
    return out


# --- conda ---------------------------------------------------------------------------------------

CONDA_DISTRIBUTIONS = {
    "pytorch": "torch", "matplotlib-base": "matplotlib", "pytables": "tables", "python-graphviz": "graphviz",
    "msgpack-python": "msgpack", "numpy-base": "numpy", "py-xgboost": "xgboost", "iris": "scitools-iris",
    "pyqt": "PyQt5", "libarchive-c": "libarchive-c", "python-dateutil": "python-dateutil",
    "dask-core": "dask", "tensorflow-base": "tensorflow", "pillow-simd": "pillow", "typing_extensions": "typing-extensions",
}
"""conda package names whose PyPI distribution is named otherwise (the rest are named alike)."""
NOT_FROM_PYPI = re.compile(r"^(?:python|pip|conda|mamba|compilers|[cC]-compiler|cxx-compiler|fortran-compiler|make|cmake|"
                           r"ninja|git|nodejs|pkg-config|r-.*|lib.*|hdf5|netcdf-fortran|proj|geos|gdal-bin|openssl|"
                           r"zlib|blas|mkl|openblas|cudatoolkit|cudnn|_.*|.*-feedstock|tk|sqlite|xz|curl|ucx)$")
"""conda packages that are a toolchain, a C library or conda itself: nothing to install from PyPI."""
_CONDA_OTHER = re.compile(r"doc|lint|bench|min|bare|oldest|lowest|windows|win\b|macos|osx|darwin|upstream|nightly|"
                          r"release|build|mypy|typing")


class NoxInstall(NamedTuple):
    """One `session.install(...)` of a noxfile, its arguments as pip takes them."""

    session: str
    """The function it is in (a nox session's name, or a helper's)."""
    args: list[str]
    """Its words; `nox.project.dependency_groups(PYPROJECT, "g")` reads `--group g`, `--opt=value`
    two words. What cannot be read statically (an attribute, a call's result) is left out."""


def nox_installs(source: str) -> list[NoxInstall]:
    """The `install` calls on each function's first parameter (the session) in a noxfile, read
    statically: string constants, module-level constants of strings (`*BINARY_ONLY`) and
    `dependency_groups(...)` calls resolved; [] when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    constants: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            words = _nox_words(node.value, {})
            if words is not None:
                constants[node.targets[0].id] = words
    found = []
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        if not function.args.args:
            continue
        session = function.args.args[0].arg
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            target = call.func
            if (isinstance(target, ast.Attribute) and target.attr == "install" and isinstance(target.value, ast.Name)
                    and target.value.id == session):
                args = [word for arg in call.args for word in (_nox_words(arg, constants) or [])]
                found.append(NoxInstall(function.name, [part for word in args for part in _split_option(word)]))
    return found


def _nox_words(node: ast.expr, constants: dict[str, list[str]]) -> list[str] | None:
    """The words an argument of `session.install` stands for; None when it cannot be read."""
    if isinstance(node, ast.Starred):
        node = node.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        words = [_nox_words(item, constants) for item in node.elts]
        return None if any(w is None for w in words) else [x for w in words for x in w or []]
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "dependency_groups":  # nox.project.dependency_groups(pyproject, "g", ...)
            groups = [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            return [word for group in groups for word in ("--group", group)]
    return None


def _split_option(word: str) -> list[str]:
    """`--group=test` as `--group`, `test`; any other word as it is."""
    if word.startswith("--") and "=" in word:
        return word.split("=", 1)
    return [word]


def conda_files(root: Path) -> list[str]:
    """Conda environment files of the repository (relative paths), the one for the tests first:
    its name says test, else environment; files for other jobs and platforms left out."""
    found = {p for pattern in ("environment*.y*ml", "ci/**/*.y*ml", "requirements/*.y*ml", "conda/*.y*ml",
                               ".ci/*.y*ml", "ci*/*.y*ml", "binder/environment*.y*ml")
             for p in root.glob(pattern) if p.is_file()}
    rels = sorted(str(p.relative_to(root)) for p in found)
    usable = []
    for rel in rels:
        if _CONDA_OTHER.search(Path(rel).stem.lower()):
            continue
        try:
            data = yaml.safe_load(read_text(root / rel))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and isinstance(data.get("dependencies"), list):
            usable.append(rel)
    return sorted(usable, key=lambda r: (0 if "test" in Path(r).stem.lower() else 1 if "environment" in r.lower() else 2, r))


def conda_requirements(root: Path, rel: str, changes: list[Change]) -> list[str]:
    """The distributions conda environment file `rel` names, by PyPI name without conda's pins
    (the resolution date decides versions); its `pip:` list taken as requirement lines."""
    data = yaml.safe_load(read_text(root / rel)) or {}
    out: list[str] = []
    for item in data.get("dependencies", []):
        if isinstance(item, dict):
            for line in item.get("pip", []) or []:
                if (taken := requirement(str(line), f"{rel} (pip)", changes)) and taken != PROJECT:
                    out.append(taken)
            continue
        spec = str(item).split("::")[-1].strip()
        name = re.split(r"[\s=<>!~]", spec, maxsplit=1)[0]
        if not name or NOT_FROM_PYPI.match(name):
            continue
        pypi = CONDA_DISTRIBUTIONS.get(name, name)
        if pypi.lower() in TOO_LARGE:
            changes.append(Change(rel, spec, "", "gigabytes from PyPI (a CUDA build): not installed as optional"))
            continue
        if pypi != name:
            changes.append(Change(rel, spec, pypi, "the conda package's PyPI name"))
        if _valid(pypi) and pypi not in out:
            out.append(pypi)
    return out


IMPORT_DISTRIBUTIONS = {
    "yaml": "PyYAML", "PIL": "pillow", "sklearn": "scikit-learn", "skimage": "scikit-image", "cv2": "opencv-python-headless",
    "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "attr": "attrs", "Crypto": "pycryptodome",
    "OpenSSL": "pyOpenSSL", "jwt": "PyJWT", "serial": "pyserial", "git": "GitPython", "magic": "python-magic",
    "dotenv": "python-dotenv", "zmq": "pyzmq", "docx": "python-docx", "google": "protobuf", "Levenshtein": "python-Levenshtein",
    "netCDF4": "netCDF4", "cftime": "cftime", "nc_time_axis": "nc-time-axis", "tables": "tables", "fitz": "PyMuPDF",
    "pkg_resources": "setuptools", "mpl_toolkits": "matplotlib", "IPython": "ipython", "win32api": "",
    "_pytest": "pytest", "typing_extensions": "typing-extensions", "ruamel": "ruamel.yaml", "graphviz": "graphviz",
    "xdist": "pytest-xdist", "hamcrest": "PyHamcrest",
}
"""Import names whose distribution is named otherwise (empty: none installs on Linux)."""


TOO_LARGE = frozenset({"torch", "tensorflow", "tensorflow-gpu", "jax", "jaxlib", "cupy", "mxnet", "paddlepaddle",
                       "torchvision", "torchaudio", "tensorrt"})
"""Distributions of gigabytes (CUDA builds): never installed only because a test skipped for them."""


def distribution_of(module: str) -> str:
    """The PyPI distribution that provides top-level module `module` (most are named alike); empty
    for one too large to install on a skip's word (`TOO_LARGE`)."""
    name = IMPORT_DISTRIBUTIONS.get(module, module.replace("_", "-"))
    valid = re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", name)
    return "" if not valid or name.lower() in TOO_LARGE else name


def tolerant_install(requirements: list[str], when: str) -> str:
    """One command installing optional `requirements` without failing the layer: all together with
    what is installed held as it is, else one by one, each one that cannot be had said and skipped."""
    dated = f" --uploaded-prior-to {when}" if when else ""
    held = "/tmp/swedojo-installed.txt"
    names = " ".join(shlex.quote(r) for r in requirements)
    return (f"pip freeze --exclude-editable | grep -v ' @ ' > {held}; "
            f"pip install{dated} -c {held} {names} || for r in {names}; do pip install{dated} -c {held} \"$r\" "
            f"|| echo \"swedojo: optional requirement $r not installed\"; done")
