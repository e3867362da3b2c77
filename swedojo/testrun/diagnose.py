"""Whether a test run failed for the environment rather than for the code under test, from evidence.

A grader that scores "the tests could not start" as the agent's failure teaches a trainer the
wrong thing and hides a broken environment. Each rule reads the run's log and exit code:

- the test command could not start: exit 126/127 with the shell saying why;
- the test runner itself is not installed (`No module named pytest` for `python -m pytest`);
- a module is missing at collection that neither the repository nor any patch provides (a dependency),
  and a test the caller scores errored or is absent (a passing suite may print such a message as
  a test's expected output, e.g. a test runner's own tests);
- the run reported no test at all, and the log names no file the candidate changed (`RAN_NO_TEST`:
  the grader asks the reference patch's run, and where that ran tests with the same command, the
  candidate's code is what stopped the runner).

A failure that names a file the candidate changed stays the candidate's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from swedojo.sandboxes.base import Sandbox
from swedojo.schema import EnvSpec, TestStatus
from swedojo.testrun.ids import status_of
from swedojo.testrun.run import SuiteRun

_SHELL_CANNOT_START = re.compile(r"^.*(command not found|No such file or directory|Permission denied|cannot execute).*$", re.MULTILINE)
_RUNNER_MODULE = re.compile(r"(?:^|\s)-m\s+([\w.]+)")
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
RAN_NO_TEST = "the test command ran no test"
"""How `environment_failure` begins when the run reported no test at all."""


def _module_tops(paths: Iterable[str]) -> set[str]:
    """Top-level importable names the paths provide: `pkg/x.py` -> pkg, `mod.py` -> mod, `src/pkg/..` -> pkg."""
    tops: set[str] = set()
    for path in paths:
        parts = path.split("/")
        if parts[0] in ("src", "lib") and len(parts) > 1:
            parts = parts[1:]
        tops.add(parts[0].removesuffix(".py"))
    return tops


def _mentions(log: str, path: str) -> bool:
    """Whether `log` names `path` as a path (`calc.py` in `src/calc.py:3`, not in `test_calc.py`)."""
    return re.search(rf"(?<![\w.-]){re.escape(path)}(?![\w-])", log) is not None


def repo_paths(sandbox: Sandbox) -> list[str]:
    """The work tree's tracked paths cut to two levels (enough to know its top-level modules)."""
    listed = sandbox.exec("git ls-files | cut -d/ -f1-2 | sort -u")
    return listed.output.splitlines() if listed.ok else []


def provided_modules(sandbox: Sandbox, paths: Iterable[str] = ()) -> set[str]:
    """Top-level importable names the work tree's tracked files and `paths` (files patches add) provide."""
    return _module_tops([*repo_paths(sandbox), *paths])


def missing_modules(run: SuiteRun, sandbox: Sandbox, changed: Iterable[str], provided: Iterable[str] = ()) -> list[str]:
    """Modules the log says could not be imported that neither the repository nor any patch
    provides: dependencies the environment lacks (or a test's own output naming one)."""
    named = list(dict.fromkeys(_NO_MODULE.findall(run.log)))
    known = _module_tops([*repo_paths(sandbox), *changed, *provided]) if named else set()
    return [name for name in named if name.split(".")[0] not in known]


def environment_failure(run: SuiteRun, spec: EnvSpec, sandbox: Sandbox, changed: Iterable[str],
                        provided: Iterable[str] = (), scored: Iterable[str] = (),
                        missing: list[str] | None = None) -> str | None:
    """Why `run` says nothing about the code under test, with the evidence; None when it does.

    `sandbox`: where the run was, asked for its tracked paths only when a missing module needs
    them; `changed`: files the candidate changed; `provided`: files other patches (gold, tests) add;
    `scored`: the test ids the caller scores (none: any test counts); `missing`: `missing_modules`
    of the run when the caller has it already.
    """
    changed = list(changed)
    tail = run.log.strip().splitlines()[-1:] or [f"exit {run.exit_code}, no output"]
    if run.exit_code in (126, 127) and not run.statuses and (said := _SHELL_CANNOT_START.search(run.log)):
        return f"the test command could not start (exit {run.exit_code}): {said.group(0).strip()[:300]}"
    runner = _RUNNER_MODULE.search(spec.test_command)
    if runner and not run.statuses and f"No module named {runner.group(1)}" in run.log:
        return f"the test runner is not installed: No module named {runner.group(1)}"
    scored = list(scored)
    if scored:  # a scored test that errored or never ran: the missing module may be why
        errored = any(status_of(run.statuses, test) in (None, TestStatus.ERROR) for test in scored)
    else:  # collection errors, not a test's own output
        errored = not run.statuses or TestStatus.ERROR in run.statuses.values()
    if errored and missing is None:
        missing = missing_modules(run, sandbox, changed, provided)
    if errored and missing:
        return f"a dependency is missing: No module named {missing[0]!r} (not in the repository or any patch)"
    if not run.statuses and not run.timed_out and not any(_mentions(run.log, path) for path in changed):
        return f"{RAN_NO_TEST} (exit {run.exit_code}): {tail[0].strip()[:300]}"
    return None
