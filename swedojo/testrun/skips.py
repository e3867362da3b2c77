"""Tests a pytest or unittest run skipped, or could not collect, because a module is missing.

A project's optional test dependencies (declared in a conda file, a CI step, or nowhere) decide
whether whole files run: `pytest.importorskip("dask")`, `skipif(not has_dask, reason="requires
dask")`, an import error at collection. Such a skip says the environment lacks something, never
that the code is wrong: the launch installs what it names, and grading does not score a listed
test the environment cannot run.

pytest names the reason in two places: the `-v` line of a skipped test (`path::test SKIPPED
(reason)`, cut to the terminal's width) and `-rA`'s summary (`SKIPPED [n] path:line: reason`,
whole, naming the file only; the one place a file skipped as a whole is named at all).
unittest names it on the test's `-v` line (`... skipped 'requires dask'`) and, for a test module
it could not import, in that module's traceback (`Failed to import test module: tests.test_x`).
Whether the module named is really missing is the sandbox's to say (`absent_modules`): a reason
may name one the environment has ("requires numpy" for a version) or the repository's own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator

from pydantic import BaseModel

from swedojo.sandboxes.base import Sandbox
from swedojo.testrun.diagnose import provided_modules
from swedojo.testrun.parsers import UNITTEST_TEST

_VERBOSE_SKIP = re.compile(r"^(\S+::\S.*?) SKIPPED \((.*?)\)(?:\s+\[\s*\d+%\])?\s*$", re.MULTILINE)
_VERBOSE_BARE_SKIP = re.compile(r"^(\S+::\S.*?) SKIPPED(?:\s+\[\s*\d+%\])?\s*$", re.MULTILINE)
"""A `-v` line without its reason: pytest leaves it out where not even `(...)` fits the terminal."""
_SECTION = re.compile(r"^(?:_{3,} .+ _{3,}|={3,} .+ ={3,})$", re.MULTILINE)
"""Any header of pytest's report: where one collection error's section ends."""
_CUT = "..."
"""How pytest ends a `-v` reason cut to the terminal's width."""
_SUMMARY_SKIP = re.compile(r"^SKIPPED \[\d+\] ([^:\s]+):\d+: (.+)$", re.MULTILINE)
_COLLECTION_ERROR = re.compile(r"^_+ ERROR collecting (\S+) _+$", re.MULTILINE)
_NAMED = [
    re.compile(r"No module named '([\w.]+)'"),
    re.compile(r"could not import '([\w.]+)'"),
    re.compile(r"\b(?:requires?|needs?)\s+(?:the\s+)?(?:optional\s+)?(?:module|package|library)?\s*[`'\"]?"
               r"([A-Za-z_][\w.]*)[`'\"]?\s*(?:to be installed|installed)?\s*$", re.IGNORECASE),
    re.compile(r"^[`'\"]?([A-Za-z_][\w.]*)[`'\"]? (?:is |are )?not (?:installed|available|importable|found)\b",
               re.IGNORECASE),
]
"""How a reason names a module: Python's own message, `importorskip`'s, and the phrasings projects
give their `skipif` marks ("requires dask", "needs scipy", "h5py not installed")."""
NOT_MODULES = frozenset({
    "network", "internet", "python", "python3", "pypy", "cpython", "root", "admin", "sudo", "linux", "windows",
    "macos", "darwin", "posix", "unix", "gpu", "cuda", "display", "x11", "docker", "git", "it", "this", "that",
    "the", "a", "an", "ipv6", "tty", "terminal", "locale", "utf8", "fork", "threads", "threading", "mpi", "slow",
    "online", "connection", "credentials", "authentication", "token", "login", "fix", "investigation", "update",
})
"""Words a "requires X" reason names that are conditions, not modules."""


class ModuleSkip(BaseModel):
    """A listed test the run could not run for want of a module."""

    module: str
    """The importable name the reason gives (`dask`, `netCDF4`)."""
    reason: str
    """The runner's words."""


_SECTIONS = re.compile(r"^={3,} (ERRORS|FAILURES|warnings summary|PASSES|short test summary info) ={3,}$", re.MULTILINE)


def _outer(log: str) -> str:
    """The parts of a pytest log that speak of the session itself: its progress lines, its ERRORS
    section and its closing summary. A suite that runs pytest inside its tests (pytester) prints the
    inner sessions' skips and import errors within its failure and pass reports, which sit between."""
    sections = list(_SECTIONS.finditer(log))
    if not sections:
        return log
    parts = [log[:sections[0].start()]]
    errors = next((i for i, m in enumerate(sections) if m.group(1) == "ERRORS"), None)
    if errors is not None:
        parts.append(log[sections[errors].start():sections[errors + 1].start() if errors + 1 < len(sections) else len(log)])
    summary = [m for m in sections if m.group(1) == "short test summary info"]
    if summary:
        parts.append(log[summary[-1].start():])
    return "\n".join(parts)


def named_module(reason: str) -> str:
    """The top-level module a skip or error reason says is missing; empty when it names none."""
    for pattern in _NAMED:
        if match := pattern.search(reason.strip()):
            top = match.group(1).split(".")[0]
            if top.lower() not in NOT_MODULES and top[0].isalpha() and len(top) > 1:
                return top
    return ""


def _summaries(log: str) -> list[tuple[str, str, str]]:
    """(test file, module, reason) of each skip summary line naming a module."""
    return [(m.group(1), module, m.group(2).strip()) for m in _SUMMARY_SKIP.finditer(log)
            if (module := named_module(m.group(2)))]


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _sections(log: str, header: re.Pattern[str], end: re.Pattern[str]) -> Iterator[tuple[str, str]]:
    """(what each `header` names, the text after it up to the next `end`): one failure's own lines,
    not the next failure's traceback."""
    for found in header.finditer(log):
        following = end.search(log, found.end())
        yield found.group(1), log[found.end():following.start() if following else len(log)]


def _file_reasons(log: str) -> list[tuple[str, str, str]]:
    """(test file, module, reason) of each skip summary line and collection error naming a module."""
    found = _summaries(log)
    for file, text in _sections(log, _COLLECTION_ERROR, _SECTION):
        if (said := _NO_MODULE.search(text)) and (module := named_module(said.group(0))):
            found.append((file, module, said.group(0)))
    return found


def _files(log: str) -> dict[str, ModuleSkip]:
    """Test file -> the module its skip summaries or collection error name (one module per file: a
    file whose lines name two is left out, it may run in part; so is one whose tests were also
    skipped for a reason naming no module, "requires network": which skip was whose is unknown)."""
    found: dict[str, dict[str, str]] = {}
    for file, module, reason in _file_reasons(log):
        found.setdefault(file, {}).setdefault(module, reason)
    conditions = {m.group(1) for m in _SUMMARY_SKIP.finditer(log) if not named_module(m.group(2))}
    return {file: ModuleSkip(module=module, reason=reason)
            for file, named in found.items() if len(named) == 1 and file not in conditions
            for module, reason in named.items()}


def _whole(log: str, file: str, cut: str) -> ModuleSkip | None:
    """The skip its file's summary lines give in full for a `-v` reason cut to `cut` + "...": the
    module they name when all lines that begin so name one and the same (none naming no module)."""
    begun = {named_module(m.group(2)): m.group(2).strip() for m in _SUMMARY_SKIP.finditer(log)
             if m.group(1) == file and m.group(2).strip().startswith(cut)}
    if len(begun) != 1 or "" in begun:
        return None
    module, reason = next(iter(begun.items()))
    return ModuleSkip(module=module, reason=reason)


def module_skips(log: str, tests: Iterable[str], ran: Iterable[str], parser: str = "pytest") -> dict[str, ModuleSkip]:
    """Of `tests` (ids as `parser` reads them), those the log shows skipped, or absent from a file
    (pytest) or test module (unittest) skipped or unimportable as a whole, for want of a module ->
    which and why. `ran`: the ids the log has. Other runners' logs say nothing here: {}."""
    if parser == "unittest":
        return _unittest_skips(log, tests, ran)
    return _pytest_skips(log, tests, ran) if parser == "pytest" else {}


def _pytest_skips(log: str, tests: Iterable[str], ran: Iterable[str]) -> dict[str, ModuleSkip]:
    """`module_skips` of a pytest log (node ids).

    A `-v` reason cut to the terminal's width is read whole from its file's summary lines (a cut
    one may end inside the module's name); a skipped test whose `-v` line has no reason, like one
    absent from a log without `-v`, takes its file's one module, when its file's lines name one."""
    log = _outer(log)
    verbose = {m.group(1).strip(): m.group(2) for m in _VERBOSE_SKIP.finditer(log)}
    bare = {m.group(1).strip() for m in _VERBOSE_BARE_SKIP.finditer(log)}
    files = _files(log)
    present = set(ran)
    found: dict[str, ModuleSkip] = {}
    for test in tests:
        file = test.split("::")[0]
        if test in verbose:
            reason = verbose[test]
            if reason.endswith(_CUT):
                if whole := _whole(log, file, reason.removesuffix(_CUT)):
                    found[test] = whole
            elif module := named_module(reason):
                found[test] = ModuleSkip(module=module, reason=reason)
        elif (test not in present or test in bare) and file in files:
            found[test] = files[file]
    return found


def skipped_modules(log: str, parser: str = "pytest") -> dict[str, str]:
    """Every module the log's skips and collection errors (pytest) or skips and failed test-module
    imports (unittest) say is missing -> one reason naming it; {} for other runners' logs."""
    if parser == "unittest":
        found = {skip.module: skip.reason for skip in _unittest_reasons(log).values()}
        for module, skip in _unittest_failed_imports(log).items():
            found.setdefault(skip.module, skip.reason)
        return found
    if parser != "pytest":
        return {}
    log = _outer(log)
    found: dict[str, str] = {}
    for match in _VERBOSE_SKIP.finditer(log):
        if match.group(2).endswith(_CUT):
            continue  # cut to the terminal's width, maybe inside the name: the summary has it whole
        if (module := named_module(match.group(2))) and module not in found:
            found[module] = match.group(2)
    for _, module, reason in _file_reasons(log):
        found.setdefault(module, reason)
    return found


def collection_errors(log: str) -> dict[str, str]:
    """pytest: each test file the session could not collect -> the error's last line (`ImportError:
    cannot import name 'raises' from ...`): none of its tests ran, whatever the code under test does."""
    found: dict[str, str] = {}
    for file, text in _sections(_outer(log), _COLLECTION_ERROR, _SECTION):
        lines = [line.strip() for line in text.splitlines()]
        said = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")] or [line for line in lines if line]
        found[file] = said[-1] if said else "no error text"
    return found


_UNITTEST_SKIPPED = re.compile(r" \.\.\. skipped (?:'(.*)'|\"(.*)\")$")
_UNITTEST_FAILED_IMPORT = re.compile(r"^ImportError: Failed to import test module: ([\w.]+)$", re.MULTILINE)
_UNITTEST_SECTION = re.compile(r"^(?:={20,}|-{20,})$", re.MULTILINE)


def _unittest_reasons(log: str) -> dict[str, ModuleSkip]:
    """unittest ids (`test_a (module.Class)`, as `parse_unittest` writes them) of tests skipped with
    a reason naming a module -> the skip (`test_a (m.C) ... skipped 'requires numpy'`)."""
    found: dict[str, ModuleSkip] = {}
    for line in log.splitlines():
        test, skipped = UNITTEST_TEST.match(line), _UNITTEST_SKIPPED.search(line.rstrip())
        if test and skipped and (module := named_module(reason := skipped[1] or skipped[2])):
            found[f"{test[1]} ({test[2]})"] = ModuleSkip(module=module, reason=reason)
    return found


def _unittest_failed_imports(log: str) -> dict[str, ModuleSkip]:
    """Test modules unittest could not import for want of a module (`ImportError: Failed to import
    test module: tests.test_x` followed by its traceback's `No module named 'numpy'`) -> the skip
    that says so: none of their tests ran."""
    found: dict[str, ModuleSkip] = {}
    for test_module, text in _sections(log, _UNITTEST_FAILED_IMPORT, _UNITTEST_SECTION):
        if (said := _NO_MODULE.search(text)) and (module := named_module(said.group(0))):
            found[test_module] = ModuleSkip(module=module, reason=said.group(0))
    return found


def _unittest_skips(log: str, tests: Iterable[str], ran: Iterable[str]) -> dict[str, ModuleSkip]:
    """`module_skips` of a unittest log: a test skipped naming a module, or absent from the log
    while its test module could not be imported (the loader names it relative to where discovery
    started, `test_x` for `tests.test_x.Class`: it is matched as a dotted suffix)."""
    skipped, failed = _unittest_reasons(log), _unittest_failed_imports(log)
    present = set(ran)
    found: dict[str, ModuleSkip] = {}
    for test in tests:
        if test in skipped:
            found[test] = skipped[test]
        elif test not in present and (dotted := re.search(r"\(([\w.]+)\)$", test)):
            module = f".{dotted.group(1)}."
            owner = next((name for name in failed if f".{name}." in module), None)
            if owner is not None:
                found[test] = failed[owner]
    return found


_FIND_SPEC = """
import importlib.util, sys
for name in sys.argv[1:]:
    try:
        found = importlib.util.find_spec(name) is not None
    except Exception:
        found = False
    print("swedojo-find-spec", name, int(found))
"""
"""Whether each top-level name can be imported, found as the import system would, nothing run."""
_FOUND = re.compile(r"^swedojo-find-spec (\S+) ([01])\s*$", re.MULTILINE)


def command_python(test_command: str) -> str:
    """The interpreter of a test command (its first word where that is a python), else `python3`."""
    try:
        words = shlex.split(test_command)
    except ValueError:  # unbalanced quotes: no first word to trust
        words = []
    return words[0] if words and re.fullmatch(r"(\S*/)?python[\d.]*", words[0]) else "python3"


def absent_modules(sandbox: Sandbox, python: str, modules: Iterable[str], provided: Iterable[str] = ()) -> set[str]:
    """Of `modules` (top-level names), those the environment lacks: neither the work tree nor the
    paths `provided` (files patches add) provide them, and `python`, asked in the work tree,
    cannot find them (`importlib.util.find_spec`). Empty when it cannot be asked: a skip is then
    not put down to the environment."""
    names = sorted(set(modules))
    if not names:
        return set()
    names = sorted(set(names) - provided_modules(sandbox, provided))
    if not names:
        return set()
    asked = sandbox.exec(f"(cd {shlex.quote(sandbox.workdir)} && {shlex.join([python, '-c', _FIND_SPEC, *names])})")
    said = dict(_FOUND.findall(asked.output))
    return {name for name in names if said.get(name) == "0"}
