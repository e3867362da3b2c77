"""Verdicts a candidate cannot forge from inside the tested process, as far as that can be had.

Code under test runs in the same process as pytest, so whatever pytest reports that code can
change. Grading therefore does three things:

- `shadowing_modules`: a patch may not add a module or package, where the tested interpreter
  looks first (the work tree's directories on `sys.path`: `python -m` puts the work tree itself
  first), that takes the name of one it would otherwise import from outside the tree: a new
  `pytest/` (its `__main__` would be run in place of pytest's), `_pytest/`, `pluggy/`, `json.py`.
  Such a patch is refused.
- `Guard`: the graded `python -m pytest` run loads `pytest_guard_plugin.py` (see there) before
  any code of the work tree, from the work tree's root under a name with a fresh nonce; its verdict names what of pytest's machinery was
  replaced or added to, plugins registered by the code under test, and the tests whose reports
  said failed when they were made. A listed test it saw fail that the log says passed, or a
  verdict that is missing or not its own, is tampering too.
- What pytest and the environment's installed plugins do to pytest's machinery by themselves
  (`calibration`: a run of a few tests of every kind outside the work tree, once per environment),
  and what the project's own conftest does (the reference patch's run shows it as well,
  `rewards.grading`), is left out.

What this cannot catch: code that finds the guard itself in memory (its module, its nonce) and
disables or forges it, or that changes data pytest keeps (a report's fields after the guard read
them, the terminal reporter's tallies) without registering anything and before the summary, in
ways that leave every listed test's failure unseen by the guard as well. Runners other than
pytest are not guarded (their exit status and per-test lines are still checked against each other).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import shlex
import threading
from importlib import resources
from typing import Any

from pydantic import BaseModel, Field

from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.schema import EnvSpec, TestStatus
from swedojo.testrun.command import is_simple
from swedojo.testrun.run import SuiteRun, passed

_PLUGIN = resources.files("swedojo.testrun").joinpath("pytest_guard_plugin.py").read_text(encoding="utf-8")
VERDICT_PREFIX = "swedojo-guard-verdict "
"""How the plugin's verdict line starts in the run's output."""
_PYTHON_M_PYTEST = re.compile(r"^(?:\S*/)?python[\d.]* -m pytest(?:\s|$)")
"""The only command form whose first `sys.path` entry is the working directory, where the guard lies."""
GUARDED_PARSERS = frozenset({"pytest", "pytest-junit"})


def guardable(spec: EnvSpec) -> bool:
    """Whether the spec's command is `python -m pytest ...`, one simple command, with the working
    directory on the import path (no PYTHONSAFEPATH)."""
    return (spec.log_parser in GUARDED_PARSERS and is_simple(spec.test_command)
            and bool(_PYTHON_M_PYTEST.match(spec.test_command)) and "PYTHONSAFEPATH" not in spec.env_vars)


class Guard(BaseModel):
    """The guard installed in one sandbox for one run."""

    directory: str
    """Absolute directory in the sandbox the run starts in (the work tree), which holds the
    plugin (`python -m` puts it first on the import path, so the command stays the one the warm
    runner serves)."""
    module: str
    """The plugin's module name (`swedojo_guard_<nonce>`): no patch can know it beforehand."""
    secret: str = Field(repr=False)
    """Signs the verdict; written into the plugin, which removes its file once imported."""

    @classmethod
    def install(cls, sandbox: Sandbox, directory: str = "") -> Guard:
        guard = cls(directory=directory or sandbox.workdir, module=f"swedojo_guard_{secrets.token_hex(8)}",
                    secret=secrets.token_hex(16))
        guard.arm(sandbox)
        return guard

    def arm(self, sandbox: Sandbox) -> None:
        """Write the plugin for the next run (each run's plugin removes its file when it loads), in
        one command of the terminal: the cheapest write on every backend."""
        signed = _PLUGIN.replace('_SECRET = "SWEDOJO_GUARD_SECRET"', f'_SECRET = "{self.secret}"', 1)
        encoded = base64.b64encode(signed.encode("utf-8")).decode("ascii")
        path = shlex.quote(f"{self.directory}/{self.module}.py")
        result = sandbox.exec(f"printf '%s' {encoded} | base64 -d > {path} && echo armed")
        if result.output.strip().splitlines()[-1:] != ["armed"]:
            raise SandboxError(f"the test-run guard could not be written: {result.output.strip()[-200:]}")

    def spec(self, spec: EnvSpec) -> EnvSpec:
        """`spec` whose command loads the guard first."""
        return spec.model_copy(update={"test_command": f"{spec.test_command} -p {self.module}"})

    def verdict(self, output: str) -> dict[str, Any] | None:
        """The plugin's verdict, from the run's output: {} when there is none, None when the last
        one there is not signed by it (a line the code under test printed)."""
        lines = [line for line in output.splitlines() if line.startswith(VERDICT_PREFIX)]
        if not lines:
            return {}
        try:
            written = json.loads(lines[-1].removeprefix(VERDICT_PREFIX))
            payload, mac = str(written["payload"]).encode("utf-8"), str(written["mac"])
        except (ValueError, KeyError, TypeError):
            return None
        if not hmac.compare_digest(mac, hmac.new(self.secret.encode("ascii"), payload, hashlib.sha256).hexdigest()):
            return None
        verdict = json.loads(payload)
        return verdict if isinstance(verdict, dict) else None

    def problems(self, run: SuiteRun) -> list[str]:
        """What the verdict says was tampered with, and listed tests the log says passed that the
        guard saw fail; empty when none. A run that timed out or did not build has no verdict to read."""
        if run.timed_out or run.build_failure:
            return []
        verdict = self.verdict(run.log)
        if verdict is None:
            return ["the guard's verdict is not its own"]
        if not verdict:
            return ["the guard's verdict is missing: pytest did not end normally (a crash, os._exit, or tampering)"]
        problems = [str(p) for p in verdict.get("problems", [])]
        failed = verdict.get("failed", {})
        for test, status in run.statuses.items():
            if test in failed and passed(status) and status != TestStatus.XFAIL:
                problems.append(f"{test} failed ({failed[test]}) but the log says {status.value}")
        return problems


CALIBRATION_TESTS = """import pytest


class TestCalibration:
    def test_method(self):
        pass


@pytest.fixture
def value():
    return 1


def test_fixture(value):
    assert value == 1


@pytest.mark.parametrize("n", [1, 2])
def test_parametrized(n):
    pass


@pytest.mark.skip(reason="calibration")
def test_skipped():
    pass


@pytest.mark.xfail(reason="calibration")
def test_expected_failure():
    assert False
"""
"""A few tests of every common kind, in a directory of their own: what pytest (and the plugins the
environment installs) do to pytest's machinery on their own when tests run."""

_CALIBRATED: dict[str, frozenset[str]] = {}
_CALIBRATED_LOCK = threading.Lock()


def calibration(sandbox: Sandbox, spec: EnvSpec) -> frozenset[str]:
    """What the guard reports of a pytest run with no code of the work tree in it (pytest's own
    plugins add members to its classes as they configure; installed plugins register themselves),
    once per environment: never a candidate's doing. Empty when the run gives no verdict."""
    key = spec.model_dump_json()
    with _CALIBRATED_LOCK:
        if key in _CALIBRATED:
            return _CALIBRATED[key]
    where = f"{sandbox.workdir}/.git/swedojo-calibration-{secrets.token_hex(6)}"
    sandbox.write_file(f"{where}/pytest.ini", b"[pytest]\n")  # rootdir and conftest cut: nothing above is read
    sandbox.write_file(f"{where}/test_swedojo_calibration.py", CALIBRATION_TESTS.encode())
    guard = Guard.install(sandbox, where)
    ran = sandbox.exec(f"cd {shlex.quote(where)} && {guard.spec(spec).test_command} test_swedojo_calibration.py "
                       f"2>&1 | grep '^{VERDICT_PREFIX}'; cd {shlex.quote(sandbox.workdir)}")
    found = frozenset((guard.verdict(ran.output) or {}).get("problems", []))
    with _CALIBRATED_LOCK:
        _CALIBRATED[key] = found
    return found


_SHADOW_CHECK = r'''
import importlib.util, os, subprocess, sys
tree = os.path.realpath(os.getcwd())
added = sys.argv[1:]
def inside(p):
    p = os.path.realpath(p or ".")
    return p == tree or p.startswith(tree + os.sep)
roots = [""] + sorted(set(os.path.relpath(os.path.realpath(p), tree) for p in sys.path if p and inside(p)) - {"."})
outside = [p for p in sys.path if p and not inside(p)]
seen = set()
for path in added:
    for root in roots:
        if root and not path.startswith(root + "/"):
            continue
        rest = path[len(root) + 1:] if root else path
        top = rest.split("/")[0]
        if "/" not in rest and not top.endswith(".py"):
            continue
        where = root + "/" + top if root else top
        name = top[:-3] if "/" not in rest else top
        if where in seen or not name.isidentifier():
            continue
        seen.add(where)
        if subprocess.call(["git", "cat-file", "-e", "HEAD:" + where], stderr=subprocess.DEVNULL) == 0:
            continue
        sys.path[:] = outside
        try:
            found = name in sys.builtin_module_names or importlib.util.find_spec(name) is not None
        except Exception:
            found = False
        if found:
            print("shadow %s %s" % (where, name))
'''


def added_files(patch: str) -> list[str]:
    """Paths a unified git diff creates (new files and rename targets)."""
    created = re.findall(r"^diff --git a/\S+ b/(\S+)\n(?:(?!diff --git).*\n)*?new file mode", patch, re.MULTILINE)
    renamed = re.findall(r"^rename to (\S+)$", patch, re.MULTILINE)
    return list(dict.fromkeys(created + renamed))


def shadowing_modules(sandbox: Sandbox, patch: str) -> list[str]:
    """`where (module)` for each module or package the patch adds that the tested interpreter would
    import in place of one from outside the work tree; empty when none (and when no file is added)."""
    added = [path for path in added_files(patch) if path.endswith(".py") or "/" in path]
    if not added:
        return []
    script = f"{sandbox.workdir}/.git/swedojo-shadow-{secrets.token_hex(6)}.py"
    sandbox.write_file(script, _SHADOW_CHECK.encode())
    result = sandbox.exec(f"python {shlex.quote(script)} {' '.join(shlex.quote(p) for p in added)}; rm -f {shlex.quote(script)}")
    return [f"{parts[1]} (shadows the module {parts[2]})" for line in result.output.splitlines()
            if len(parts := line.split()) == 3 and parts[0] == "shadow"]
