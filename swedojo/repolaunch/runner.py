"""The test runner as the project runs it, and the options that would stop it at the first failure.

`follow_test_script` reads `package.json` scripts down from `test` (through `npm run`, `yarn`,
`pnpm`, `npm-run-all`, `&&` chains and wrappers such as `cross-env`, `npx`, `nyc`) to the command
that starts a known runner, with its own files and options: the suite is then run as the project
runs it, and read per test. `strip_fail_fast` removes the options that stop a graded run at the
first failure (a bail hides every failure after it); `pytest_config_fail_fast`,
`mocha_config_bail` and `jest_config_bail` find the same in configuration files and give the
option that undoes it on the command line (verified against pytest 9, mocha 5 and 12, jest 30).

Pure functions: nothing here runs a command; the config readers only read the files they name.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, Field

from swedojo.repolaunch.analysis import read_text
from swedojo.testrun.command import is_simple

JS_RUNNERS = frozenset({"mocha", "jest", "vitest", "ava", "tap", "tape", "uvu", "jasmine", "karma", "lab"})
"""Test runners known by their binary (`mocha`'s `_mocha` is mocha); `node --test` is `node:test`."""
_BINARIES = {"_mocha": "mocha"}
COVERAGE_WRAPPERS = frozenset({"nyc", "c8", "istanbul"})
"""Coverage tools that start the runner; dropped: coverage is not graded, instrumenting slows the
run, and their thresholds (`--check-coverage`) or report tables change the exit status and output."""
_WRAPPERS = COVERAGE_WRAPPERS | {"cross-env", "cross-env-shell", "env", "dotenv", "npx"}
"""Words that start another command; their own options stand between them and it."""
_PACKAGE_MANAGERS = frozenset({"npm", "yarn", "pnpm"})
_RUN_ALL = frozenset({"npm-run-all", "run-s", "run-p"})
_RUN_ALL_VALUED = frozenset({"--npm-path", "--max-parallel"})
"""npm-run-all options whose value is the next word (not a script name)."""
_NODE_VALUED = frozenset({"-r", "--require", "--loader", "--experimental-loader", "--import", "--env-file", "-C",
                          "--conditions", "--inspect-port", "--title"})
"""node options whose value is the next word (not the script to run)."""
_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
CHECKS = frozenset({"eslint", "standard", "semistandard", "xo", "prettier", "tslint", "jshint", "jscs", "biome",
                    "gts", "markdownlint", "markdownlint-cli2", "size-limit", "tsd", "dtslint", "attw", "publint",
                    "depcheck", "lockfile-lint", "commitlint", "check-dts", "license-checker", "audit-ci"})
"""Commands that only check the sources (lint, formatting, type declarations, bundle size): a step
the tests never need, left out of the steps run before them (`ScriptTrace.prepare`)."""
MAX_DEPTH = 10
"""Scripts followed below the start one; deeper chains are not followed."""
MAX_SCRIPTS = 50
"""Scripts read in all (`run-s test:*` fans out), so that no package.json makes this slow."""


class RunnerInvocation(BaseModel):
    """The command, inside the scripts, that starts the test runner."""

    runner: str
    """mocha, jest, vitest, ava, tap, tape, uvu, jasmine, karma, lab or node:test."""
    command: str
    """From the runner (or the `node` that starts it, with node's options) to the end, words quoted
    as the script wrote them, arguments of `npm run X -- ...` appended; runs with
    `node_modules/.bin` on the PATH (as npm runs scripts) or behind `npx`."""
    args: list[str]
    """The runner's own arguments (files, globs, options), quoted as written."""
    env: list[str] = Field(default_factory=list)
    """`VAR=value` words that applied along the way (script prefixes, `cross-env`, `export`), outermost first."""
    workdir: str = ""
    """Directory a `cd` earlier in the chain moved to, relative to the package; empty: the package's."""
    dropped: list[str] = Field(default_factory=list)
    """Wrapper commands left out before the runner (coverage, `cross-env`, `npx`), for evidence."""


class ScriptTrace(BaseModel):
    """Where following `package.json` scripts from one of them led."""

    invocation: RunnerInvocation | None = None
    """The runner's command; None: no followed part starts a known runner (see `reason`)."""
    invocations: list[RunnerInvocation] = Field(default_factory=list)
    """Every runner command reached, `invocation` among them, in the order the shell runs them."""
    trail: list[str] = Field(default_factory=list)
    """Scripts followed to the runner, the start one first; when none was found, every script read."""
    passed_over: list[str] = Field(default_factory=list)
    """Commands read before the runner that start none (lint, build, type checks), for evidence."""
    prepare: list[str] = Field(default_factory=list)
    """Commands the scripts run before the runner that make what the tests use (a compile step in
    the chain, a `pre<script>` hook npm runs before the script), each with the `VAR=value` words that
    applied to it; a script that only builds is run whole (`npm run compile -- -p tsconfig.test.json`),
    checks (`CHECKS`, `tsc --noEmit`) are left out."""
    reason: str = ""
    """Why no runner was found; empty when one was."""


class _Word(NamedTuple):
    raw: str
    """As written, quotes included."""
    text: str
    """As the shell passes it (quotes removed)."""
    start: int
    end: int


_TOKEN = re.compile(r"""\s*(?:(?P<op>&&|\|\||[;|])|(?P<word>(?:\\.|'[^']*'|"(?:\\.|[^"\\])*"|&(?!&)|[^\s'"\\;|&])+))""")


def _segments(command: str) -> list[list[_Word]]:
    """The simple commands of a command line (split at `&&`, `||`, `;` and `|`), words with their
    spans; ValueError for an unbalanced quote."""
    segments: list[list[_Word]] = [[]]
    position = 0
    while (match := _TOKEN.match(command, position)) and match.end() > position:
        position = match.end()
        if match["op"]:
            segments.append([])
        else:
            raw = match["word"]
            segments[-1].append(_Word(raw, "".join(shlex.split(raw)), match.start("word"), match.end()))
    if command[position:].strip():
        raise ValueError(f"unbalanced quote in {command!r}")
    return [s for s in segments if s]


def _runner_name(word: str) -> str:
    """The known runner a command word starts (`mocha`, `./node_modules/.bin/_mocha`,
    `node_modules/jest/bin/jest.js`), else ""."""
    path = word.removeprefix("./")
    if "/" in path:
        parts = path.split("/")
        if "node_modules" not in parts[:-1]:
            return ""
        package = parts[parts.index("node_modules") + 1]
        path = parts[-1] if package == ".bin" else package
    name = re.sub(r"\.[cm]?js$", "", path)
    name = _BINARIES.get(name, name)
    return name if name in JS_RUNNERS else ""


def _node_runner(words: list[_Word]) -> tuple[str, int] | None:
    """`node [options] script ...`: (runner, index of its first argument) when node runs a known
    runner's script or its own `--test`, else None (a plain node script)."""
    index = 1
    while index < len(words) and words[index].text.startswith("-"):
        if words[index].text == "--test":
            return "node:test", index + 1
        index += 2 if words[index].text in _NODE_VALUED else 1
    runner = _runner_name(words[index].text) if index < len(words) else ""
    return (runner, index + 1) if runner else None


def _starts(words: list[_Word]) -> tuple[str, int] | None:
    """(runner, index of its first argument) when a command starts a runner, itself or by node."""
    if words[0].text == "node":
        return _node_runner(words)
    runner = _runner_name(words[0].text)
    return (runner, 1) if runner else None


class _Command(NamedTuple):
    """A simple command past its `VAR=value` prefixes and wrappers."""

    index: int
    """Index of the word that starts what the wrappers run."""
    env: list[str]
    dropped: list[str]


def _peel(words: list[_Word], scripts: dict[str, str]) -> _Command | None:
    """Past `VAR=value` words and wrappers (`cross-env`, `nyc`, `npx`, `yarn exec`, `yarn jest` for
    a binary that is no script) to the command they run; a wrapper's options and their values are
    the words before the next command this module knows. None: a wrapper that runs nothing known."""
    env: list[str] = []
    dropped: list[str] = []
    index = 0
    while index < len(words):
        word = words[index].text
        after = [w.text for w in words[index + 1:index + 3]]
        if _ENV_WORD.match(word):
            env.append(words[index].raw)
        elif word in _WRAPPERS:
            dropped.append(word)
        elif word in _PACKAGE_MANAGERS and after[:1] and after[0] in ("exec", "dlx"):
            dropped.append(f"{word} {after[0]}")
            index += 1
        elif word in ("yarn", "pnpm") and _binary(after, scripts):
            dropped.append(f"{word} run" if after[0] == "run" else word)
            index += 1 + (after[0] == "run")
            continue
        elif not dropped or _knows(word):
            return _Command(index, env, dropped)
        index += 1
    return None


def _binary(after: list[str], scripts: dict[str, str]) -> bool:
    """Whether `yarn [run] X` / `pnpm [run] X` runs the runner binary X (no script has its name)."""
    name = after[1:2] if after[:1] == ["run"] else after[:1]
    return bool(name) and name[0] not in scripts and bool(_runner_name(name[0]))


def _knows(word: str) -> bool:
    """Whether a command word is one this module reads: a runner, node, a package manager, npm-run-all."""
    return bool(_runner_name(word)) or word in _PACKAGE_MANAGERS | _RUN_ALL | {"node"}


def _runner_args(words: list[_Word], dropped: list[str]) -> list[_Word]:
    """`istanbul cover _mocha [istanbul options] -- [mocha arguments]`: the runner's are after `--`."""
    if "istanbul" in dropped and any(w.text == "--" for w in words):
        return words[[w.text for w in words].index("--") + 1:]
    return words


def _script_call(words: list[_Word], scripts: dict[str, str]) -> tuple[list[str], list[str]] | None:
    """(scripts a command runs, arguments passed on to them) for `npm run X -- args`, `npm test`,
    `yarn X`, `pnpm run X`, `npm-run-all a b:*`, `run-s ...`; None when it runs no script."""
    texts = [w.text for w in words]
    if texts[0] in _RUN_ALL:
        names: list[str] = []
        skip = False
        for text in texts[1:]:
            if not skip and text.split()[:1] and not text.startswith("-"):
                name = text.split()[0]  # `run-s "test:unit -- --watch"`: the script (its arguments are not passed on)
                names += [s for s in scripts if _run_all_matches(name, s)] if "*" in name else [name]
            skip = text in _RUN_ALL_VALUED
        return names, []
    if texts[0] not in _PACKAGE_MANAGERS:
        return None
    rest = list(words[1:])
    while rest and rest[0].text.startswith("-"):
        rest.pop(0)  # `npm --silent run X`
    named = bool(rest) and rest[0].text in ("run", "run-script")
    if named:
        rest.pop(0)
        while rest and rest[0].text.startswith("-"):
            rest.pop(0)
    elif rest and rest[0].text in ("test", "t"):
        named, rest[0] = True, rest[0]._replace(text="test")
    if not rest or not (named or (texts[0] != "npm" and rest[0].text in scripts)):
        return None  # `npm ci`, `yarn install`: no script; `yarn X` runs a script only if there is one
    extra = [w.raw for w in rest[1:] if w.text not in ("--if-present", "--silent", "-s")]
    if texts[0] == "npm":  # npm passes on only what follows `--`; before it are npm's own options
        extra = extra[extra.index("--") + 1:] if "--" in extra else []
    return [rest[0].text], extra


def _run_all_matches(pattern: str, name: str) -> bool:
    """npm-run-all's glob: `*` stays within one `:`-separated part, `**` spans them."""
    regex = re.escape(pattern).replace(r"\*\*", ".+").replace(r"\*", "[^:]+")
    return re.fullmatch(regex, name) is not None


class _Search:
    """Depth-first walk of the scripts, in the order the shell runs them: every runner invocation
    reached (`found`), each with the scripts it went through."""

    def __init__(self, scripts: dict[str, str]) -> None:
        self.scripts = scripts
        self.read: list[str] = []
        self.passed_over: list[str] = []
        self.problems: list[str] = []
        self.found: list[tuple[RunnerInvocation, list[str]]] = []
        self.prepare: list[str] = []

    def script(self, name: str, extra: list[str], env: list[str], path: list[str], workdir: str,
               dropped: list[str]) -> None:
        """The runners script `name` (with `extra` appended, as npm and yarn append it) reaches."""
        if name in path:
            self.problems.append(f"cycle {' -> '.join([*path, name])} not followed")
            return
        if len(path) > MAX_DEPTH or len(self.read) >= MAX_SCRIPTS:
            self.problems.append(f"{name} not followed: deeper than {MAX_DEPTH} or past {MAX_SCRIPTS} scripts")
            return
        self.read.append(name)
        try:
            segments = _segments(" ".join([self.scripts[name], *extra]))
        except ValueError as error:
            self.problems.append(f"{name}: {error}")
            return
        if f"pre{name}" in self.scripts and not name.startswith("pre"):
            self.prepare += _Steps(self.scripts).of_script(f"pre{name}", [], env)
        before = len(self.found)
        self.commands(segments, env, [*path, name])
        for invocation, _ in self.found[before:]:
            invocation.workdir = invocation.workdir or workdir
            invocation.dropped[:0] = dropped

    def commands(self, segments: list[list[_Word]], env: list[str], path: list[str]) -> None:
        env = list(env)
        workdir = ""
        for words in segments:
            texts = [w.text for w in words]
            if texts[0] == "export" and all(_ENV_WORD.match(t) for t in texts[1:]):
                env += [w.raw for w in words[1:]]
                continue
            if texts[0] == "cd" and len(words) == 2:
                workdir = words[1].text
                continue
            command = _peel(words, self.scripts)
            call = _script_call(words[command.index:], self.scripts) if command else None
            for name in call[0] if call else []:
                if name not in self.scripts:
                    self.problems.append(f"script {name} is not in package.json")
                    continue
                found, prepared = len(self.found), len(self.prepare)
                self.script(name, call[1], [*env, *command.env], path, workdir, command.dropped)
                if found == len(self.found) == 0 and not workdir:  # a script before any runner: a step it may need
                    del self.prepare[prepared:]
                    self.prepare += _Steps(self.scripts).of_script(name, call[1], [*env, *command.env])
            if call:
                continue
            start = _starts(words[command.index:]) if command else None
            if command is None or start is None:
                self.passed_over.append(" ".join(w.raw for w in words))
                if not self.found and not workdir:
                    self.prepare += _Steps(self.scripts).of_command(words, env)
                continue
            runner, args_at = start
            args = _runner_args(words[command.index + args_at:], command.dropped)
            started = words[command.index:command.index + args_at] + args
            self.found.append((RunnerInvocation(runner=runner, command=" ".join(w.raw for w in started),
                                                args=[w.raw for w in args], env=[*env, *command.env],
                                                workdir=workdir, dropped=list(command.dropped)), path))


def _command_word(texts: list[str]) -> str:
    """The program a command runs, past `VAR=value` words, wrappers and their options (`npx eslint`)."""
    for text in texts:
        if not (_ENV_WORD.match(text) or text in _WRAPPERS or text.startswith("-") or text in ("exec", "dlx")):
            return text.rsplit("/", 1)[-1]
    return ""


class _Steps:
    """The build steps of scripts that run before the tests: what is neither a check nor a runner."""

    def __init__(self, scripts: dict[str, str]) -> None:
        self.scripts = scripts
        self.seen: set[str] = set()

    def _kinds(self, name: str) -> set[str]:
        """What a script does, followed through the scripts it runs: "build", "check", "runner"."""
        if name in self.seen or name not in self.scripts:
            return {"check"}  # a cycle or a missing script: never run whole
        try:
            segments = _segments(self.scripts[name])
        except ValueError:
            return {"check"}  # unreadable: never run
        self.seen.add(name)
        kinds: set[str] = set()
        for words in segments:
            kind, call, _ = self._classify(words)
            if call is None:
                kinds.add(kind)
            for called in call[0] if call else []:
                kinds |= self._kinds(called)
        self.seen.discard(name)
        return kinds

    def _classify(self, words: list[_Word]) -> tuple[str, tuple[list[str], list[str]] | None, list[str]]:
        """(kind, the scripts it runs if it runs scripts, its `VAR=value` words) of one command."""
        texts = [w.text for w in words]
        if texts[0] in ("export", "cd", "echo", "true", ":") or all(_ENV_WORD.match(t) for t in texts):
            return "none", None, []
        command = _peel(words, self.scripts)
        rest = words[command.index:] if command else []
        call = _script_call(rest, self.scripts) if rest else None
        if call is not None:
            return "script", call, command.env if command else []
        if rest and _starts(rest):
            return "runner", None, command.env if command else []
        first = _command_word(texts)
        if first in CHECKS or (first == "tsc" and "--noEmit" in texts) or first in _PACKAGE_MANAGERS:
            return "check", None, []  # `npm audit`, `yarn install`: not a step the tests need
        return "build", None, []

    def of_script(self, name: str, extra: list[str], env: list[str]) -> list[str]:
        """Steps of script `name` run with `extra` appended: the script whole when it only builds."""
        if name in self.seen or name not in self.scripts:
            return []  # a cycle, or no such script
        kinds = self._kinds(name)
        if kinds <= {"build", "none"}:
            if "build" not in kinds:
                return []
            return [" ".join([*env, "npm run", name, *(["--", *extra] if extra else [])])]
        try:
            segments = _segments(" ".join([self.scripts[name], *extra]))
        except ValueError:
            return []
        steps: list[str] = []
        self.seen.add(name)
        for words in segments:
            steps += self.of_command(words, env)
        self.seen.discard(name)
        return steps

    def of_command(self, words: list[_Word], env: list[str]) -> list[str]:
        """Steps of one simple command of a script: itself when it builds, its scripts' when it runs some."""
        kind, call, own = self._classify(words)
        if kind == "build":
            return [" ".join([*env, *(w.raw for w in words)])]
        if call is None:
            return []
        return [step for name in call[0] if name in self.scripts for step in self.of_script(name, call[1], [*env, *own])]


def _selects_files(invocation: RunnerInvocation) -> bool:
    """Whether the runner is given files or directories of its own (`test/unit/`, `*.spec.js`)."""
    return any(not arg.startswith("-") and ("/" in arg or "*" in arg or re.search(r"\.[cm]?[jt]sx?$", arg))
               for arg in invocation.args)


def follow_test_script(scripts: dict[str, str], start: str = "test") -> ScriptTrace:
    """The runner invocation `npm run <start>` reaches, following other scripts only where they
    lead to a runner; parts that start none (lint, build, type checks) are passed over. Of the
    invocations reached, in the order the shell runs them, the first that selects no files of its
    own (the whole suite, as a script that runs a few files under other settings and then the rest
    has it), else the first."""
    if start not in scripts:
        return ScriptTrace(reason=f"package.json has no script {start!r}")
    search = _Search(scripts)
    search.script(start, [], [], [], "", [])
    if search.found:
        found, trail = next((item for item in search.found if not _selects_files(item[0])), search.found[0])
        return ScriptTrace(invocation=found, invocations=[item[0] for item in search.found], trail=trail,
                           passed_over=search.passed_over, prepare=list(dict.fromkeys(search.prepare)))
    commands = "; ".join(search.passed_over) or "none"
    said = f"no known test runner in scripts {', '.join(search.read)} (their commands: {commands})"
    return ScriptTrace(trail=search.read, passed_over=search.passed_over, reason="; ".join([said, *search.problems]))


# --- fail-fast options ---------------------------------------------------------------------------

FAIL_FAST_FLAGS: dict[str, frozenset[str]] = {
    "mocha": frozenset({"--bail", "-b"}), "jest": frozenset({"--bail", "-b"}), "tap": frozenset({"--bail", "-b"}),
    "uvu": frozenset({"--bail", "-b"}), "ava": frozenset({"--fail-fast"}),
    "pytest": frozenset({"-x", "--exitfirst"}), "go": frozenset({"-failfast", "--failfast"}),
}
"""Per runner, options that stop the run at the first failure (`--bail=N` forms too). cargo's
default stops at the first failing test binary; `--no-fail-fast` is its opposite and stays."""
FAIL_FAST_VALUED: dict[str, frozenset[str]] = {"vitest": frozenset({"--bail"}), "pytest": frozenset({"--maxfail"})}
"""Per runner, fail-fast options whose value is the next word (`--maxfail 2`, vitest's `--bail 1`).
jest's `--bail` is boolean on its command line: `jest --bail 1` reads `1` as a path pattern."""
_OFF = frozenset({"0", "false"})
"""Values of `--bail=`/`--maxfail=`/`-failfast=` that mean no fail-fast: left alone."""
PYTEST_VALUED_SHORT = "kmpcoWrn"
"""pytest short options that take a value: in `-rxs` the x is -r's, not -x."""


def _segment_runner(texts: list[str]) -> tuple[str, int] | None:
    """(runner, index of its first argument) of the first runner a simple command names: a JS
    runner, `pytest`/`py.test`/`python -m pytest`, `go test`."""
    for index, text in enumerate(texts):
        after = texts[index + 1] if index + 1 < len(texts) else ""
        if text in ("pytest", "py.test") or (text == "-m" and after == "pytest"):
            return "pytest", index + 1 + (text == "-m")
        if text == "go" and after == "test":
            return "go", index + 2
        if runner := _runner_name(text):
            return runner, index + 1
    return None


def _fail_fast_edits(runner: str, words: list[_Word]) -> list[tuple[int, str | None]]:
    """(index in `words`, its replacement; None: removed) for the runner's fail-fast options."""
    flags, valued = FAIL_FAST_FLAGS.get(runner, frozenset()), FAIL_FAST_VALUED.get(runner, frozenset())
    edits: list[tuple[int, str | None]] = []
    index = 0
    while index < len(words):
        text = words[index].text
        name, equals, value = text.partition("=")
        if (name in flags or name in valued) and equals:
            if value.lower() not in _OFF:
                edits.append((index, None))
        elif text in flags:
            edits.append((index, None))
        elif text in valued:
            edits += [(index, None), (index + 1, None)] if index + 1 < len(words) else [(index, None)]
            index += 1
        elif runner == "pytest" and re.fullmatch(r"-[a-zA-Z]{2,}", text):
            shorts = re.match(rf"[^{PYTEST_VALUED_SHORT}]*", text[1:]).group()  # type: ignore[union-attr]
            if "x" in shorts:
                kept = shorts.replace("x", "") + text[1 + len(shorts):]
                edits.append((index, f"-{kept}" if kept else None))
        index += 1
    return edits


def strip_fail_fast(command: str) -> tuple[str, list[str]]:
    """The command without the options that stop its runner at the first failure, and the options
    removed (a combined pytest `-xvs` loses its x: `-vs`). Everything else keeps its text and
    quoting; a command the shell could not split comes back unchanged."""
    try:
        segments = _segments(command)
    except ValueError:
        return command, []
    cuts: list[tuple[int, int, str]] = []
    removed: list[str] = []
    for words in segments:
        found = _segment_runner([w.text for w in words])
        if found is None:
            continue
        runner, first = found
        for index, replacement in _fail_fast_edits(runner, words[first:]):
            word = words[first + index]
            if replacement is None:
                cuts.append((words[first + index - 1].end, word.end, ""))
                removed.append(word.raw)
            else:
                cuts.append((word.start, word.end, replacement))
                removed.append(f"-x (of {word.raw})")
    for start, end, text in sorted(cuts, reverse=True):
        command = command[:start] + text + command[end:]
    return command, removed


class ConfigFailFast(BaseModel):
    """A configuration file that makes the runner stop at the first failure, and what undoes it."""

    file: str
    """Path relative to the project root (`package.json` for its "mocha"/"jest" key)."""
    found: list[str]
    """The setting as the file has it (`-x`, `--maxfail=1`, `bail: true`)."""
    override: list[str]
    """Options to add to the command line that undo it; empty: no option does (mocha before 6
    reading `--bail` from test/mocha.opts rejects `--no-bail`)."""


PYTEST_CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
                       "setup.cfg")
"""pytest's configuration files in the order it looks (the first that has a pytest section is read)."""
PYTEST_UNDO = ["--maxfail=0"]
"""The command line's options come after `addopts` and the last `maxfail` wins (`-x` is maxfail 1);
0 is pytest's default, no limit. `-o addopts=` would also drop the file's other options (plugins,
import mode, markers)."""


def _pytest_addopts(name: str, text: str) -> list[str] | None:
    """The `addopts` words of one of pytest's configuration files; None: pytest does not read it
    (no pytest section) or cannot."""
    try:
        if name.endswith(".toml"):
            document = tomllib.loads(text)
            tool = document.get("tool", {}).get("pytest", {})
            table = document.get("pytest") if name != "pyproject.toml" else tool.get("ini_options", tool or None)
            if table is None:
                return [] if name != "pyproject.toml" else None
            addopts = table.get("addopts", [])
            return shlex.split(addopts) if isinstance(addopts, str) else [str(a) for a in addopts]
        parser = configparser.RawConfigParser(strict=False)
        parser.read_string(text)
    except (tomllib.TOMLDecodeError, configparser.Error, ValueError):
        return None
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    if not parser.has_section(section):
        return [] if name.endswith("pytest.ini") else None
    return shlex.split(parser.get(section, "addopts", fallback=""))


def pytest_config_addopts(root: Path) -> tuple[str, list[str]]:
    """The configuration file pytest reads in `root` and its `addopts` words; ("", []) where none."""
    for name in PYTEST_CONFIG_FILES:
        path = root / name
        addopts = _pytest_addopts(name, read_text(path)) if path.is_file() else None
        if addopts is not None:
            return name, addopts
    return "", []


def pytest_config_fail_fast(root: Path) -> ConfigFailFast | None:
    """`-x`/`--exitfirst`/`--maxfail` in the `addopts` of the configuration file pytest reads in
    `root`, with `--maxfail=0` to undo it; None when that file has none (or there is no file)."""
    name, addopts = pytest_config_addopts(root)
    _, found = strip_fail_fast(shlex.join(["pytest", *addopts]))
    return ConfigFailFast(file=name, found=found, override=PYTEST_UNDO) if found else None


MOCHA_CONFIG_FILES = (".mocharc.cjs", ".mocharc.js", ".mocharc.yaml", ".mocharc.yml", ".mocharc.jsonc", ".mocharc.json")
"""mocha 6+ reads the first of these that exists (then package.json's "mocha")."""
JEST_CONFIG_FILES = ("jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs", "jest.config.json")
_BAIL_ON = re.compile(r"""(?<![\w-])["']?bail["']?\s*:\s*(?:true|yes|on|[1-9]\d*)\b""")
"""`bail: true` in JSON, YAML or a JavaScript object (jest: a count); computed values are not read."""


def _package_key(root: Path, key: str) -> dict[str, object]:
    try:
        value = json.loads(read_text(root / "package.json") or "{}").get(key)
    except (json.JSONDecodeError, AttributeError):
        return {}
    return value if isinstance(value, dict) else {}


def _major(version: str) -> int | None:
    match = re.search(r"\d+", version)
    return int(match.group()) if match else None


def mocha_config_bail(root: Path, mocha_version: str = "", config: str = "") -> ConfigFailFast | None:
    """`bail` set by the mocha configuration in `root` (`config`: the file `--config` names; else
    `.mocharc.*`, package.json's "mocha", test/mocha.opts), with `--no-bail` to undo it (mocha
    reads the command line last). `mocha_version` (the dependency's range) decides for mocha.opts:
    mocha before 6 rejects `--no-bail`, and an unknown version is taken as one of those."""
    rc = [config] if config else [name for name in MOCHA_CONFIG_FILES if (root / name).is_file()][:1]
    for name in rc:
        if found := _BAIL_ON.search(read_text(root / name)):
            return ConfigFailFast(file=name, found=[found.group()], override=["--no-bail"])
    if _package_key(root, "mocha").get("bail") is True:
        return ConfigFailFast(file="package.json", found=['"mocha": {"bail": true}'], override=["--no-bail"])
    opts = read_text(root / "test" / "mocha.opts").split()
    if found_opts := [word for word in opts if word in ("--bail", "-b")]:
        major = _major(mocha_version)
        override = ["--no-bail"] if major is not None and major >= 6 else []
        return ConfigFailFast(file="test/mocha.opts", found=found_opts, override=override)
    return None


def jest_config_bail(root: Path, config: str = "") -> ConfigFailFast | None:
    """`bail` set by the jest configuration in `root` (`config`: the file `--config` names; else
    package.json's "jest", jest.config.*), with `--no-bail` to undo it (the command line wins)."""
    bail = _package_key(root, "jest").get("bail")
    if not config and bail not in (None, False, 0):
        return ConfigFailFast(file="package.json", found=[f'"jest": {{"bail": {json.dumps(bail)}}}'],
                              override=["--no-bail"])
    names = [config] if config else [name for name in JEST_CONFIG_FILES if (root / name).is_file()][:1]
    for name in names:
        if found := _BAIL_ON.search(read_text(root / name)):
            return ConfigFailFast(file=name, found=[found.group()], override=["--no-bail"])
    return None


class GradedCommand(BaseModel):
    """A test command made to run every test: fail-fast options out, configured ones undone."""

    command: str
    """The command graded runs use."""
    notes: list[str] = Field(default_factory=list)
    """What was changed and why, for the build log and the analysis's evidence."""


def graded_command(root: Path, command: str, parser: str) -> GradedCommand:
    """`command` (read by `parser`) without the options that stop it at the first failure, and
    with the option that undoes such a setting in the runner's configuration in `root` appended
    (only to a simple command: there is no telling which part of a compound one it would reach)."""
    mocha_version = str({**_package_key(root, "dependencies"), **_package_key(root, "devDependencies")}.get("mocha", ""))
    stripped, removed = strip_fail_fast(command)
    notes = [f"fail-fast options dropped from graded runs: {' '.join(removed)}"] if removed else []
    found = {"pytest": lambda: pytest_config_fail_fast(root), "pytest-junit": lambda: pytest_config_fail_fast(root),
             "mocha": lambda: mocha_config_bail(root, mocha_version), "jest": lambda: jest_config_bail(root)}
    config = found.get(parser, lambda: None)()
    if config and config.override and is_simple(stripped):
        stripped = " ".join([stripped, *config.override])
        notes.append(f"{config.file} sets {' '.join(config.found)}: undone by {' '.join(config.override)}")
    return GradedCommand(command=stripped, notes=notes)

