"""swedojo's guard of a graded pytest run: a pytest plugin that runs inside the sandbox, never here.

`testrun.guard` writes this file into the directory the run starts in, under a name with a fresh
nonce (`swedojo_guard_<nonce>`), and loads it with `-p`, so it is imported while pytest parses
its arguments, before any conftest or code of the work tree. Just before the first conftest loads it
takes a snapshot of pytest's and pluggy's own functions and classes, of the plugins registered
and of the hook callers. It notes every test whose report says it failed, as the first reader of
the report sees it. When pytest ends it prints its verdict as the last line of the run's output
(`swedojo-guard-verdict {...}`): what of that machinery was replaced or added to, plugins that
neither pytest nor a conftest registered, and the tests it saw fail, signed with a secret only the
harness and this module's memory hold. Everything it uses is bound at import, before the code under test can reach it.

It must load under every pytest and Python 3.6+ an environment may hold: nothing newer is used,
and a failure of its own is written into the verdict rather than raised.
"""

import hashlib
import hmac
import json
import os
import sys
import types

_SECRET = "SWEDOJO_GUARD_SECRET"
"""Replaced by the harness when it writes this file; the file, and its bytecode, are removed as
soon as it is imported, so the code under test finds the secret on no disk, and cannot sign a
verdict of its own."""
_write, _dumps = os.write, json.dumps
_OUT = os.dup(1)
"""The run's own output (the test log) as it is before pytest captures anything: the verdict goes there."""
_sign = lambda payload: hmac.new(_SECRET.encode("ascii"), payload, hashlib.sha256).hexdigest()  # noqa: E731
_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
for _written in [__file__] + [os.path.join(_CACHE, f) for f in (os.listdir(_CACHE) if os.path.isdir(_CACHE) else ())
                              if f.startswith(__name__ + ".")]:
    try:  # the source and the bytecode compiled from it before this ran (plain or rewritten by pytest)
        os.unlink(_written)
    except OSError:
        pass
_MISSING = object()
_state = {"snapshot": None, "plugins": None, "hooks": None, "pm": None, "failed": {}, "errors": []}


def _owned_modules():
    return sorted(name for name in list(sys.modules)
                  if name in ("pytest", "pluggy", "_pytest") or name.startswith(("_pytest.", "pluggy.", "pytest.")))


def _snapshot():
    """(module, name) -> the object: every callable of pytest's and pluggy's modules, and every
    member of the classes they define."""
    taken = {}
    for name in _owned_modules():
        module = sys.modules.get(name)
        if module is None:
            continue
        for key, value in list(vars(module).items()):
            if not callable(value):
                continue
            taken[(name, key)] = value
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                for attribute, member in list(vars(value).items()):
                    taken[(name, key + "." + attribute)] = member
    return taken


def _hookimpl(**options):
    """pytest.hookimpl where this pytest has it, else the markers older ones read."""
    import pytest

    marker = getattr(pytest, "hookimpl", None)
    if marker is not None:
        return marker(**options)

    def mark(function):
        for option, value in options.items():
            setattr(function, option, value)
        return function
    return mark


@_hookimpl(hookwrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config):
    try:
        pm = early_config.pluginmanager
        _state["pm"] = pm
        _state["snapshot"] = _snapshot()
        _state["plugins"] = set(id(plugin) for plugin in pm.get_plugins())
        _state["hooks"] = dict(vars(pm.hook))
    except Exception as exc:  # noqa: BLE001 (reported in the verdict, never raised into the run)
        _state["errors"].append("snapshot: %s: %s" % (type(exc).__name__, exc))
    yield


@_hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if report.failed:
        _state["failed"].setdefault(report.nodeid, report.when)


def _declared_plugins(pm):
    """Names that registered conftests ask for in `pytest_plugins`."""
    names = set()
    for plugin in pm.get_plugins():
        declared = getattr(plugin, "pytest_plugins", ()) if isinstance(plugin, types.ModuleType) else ()
        names.update([declared] if isinstance(declared, str) else list(declared or ()))
    return names


def _foreign_plugins(pm, snapshot):
    """Plugins registered after the snapshot that are neither pytest's own (an instance of one of
    its classes, one of its modules) nor a conftest nor what a conftest names."""
    ours = set(id(value) for value in snapshot.values() if isinstance(value, type))
    declared = _declared_plugins(pm)
    owned = set(_owned_modules())
    found = []
    for plugin in pm.get_plugins():
        if id(plugin) in _state["plugins"] or plugin is sys.modules.get(__name__):
            continue
        name = pm.get_name(plugin) or ""
        if isinstance(plugin, types.ModuleType):
            what = "module " + plugin.__name__
            if os.path.basename(getattr(plugin, "__file__", "") or "") == "conftest.py":
                continue
            if plugin.__name__ in declared or name in declared or plugin.__name__ in owned:
                continue
        elif id(type(plugin)) in ours:
            continue
        else:
            what = "%s.%s" % (type(plugin).__module__, type(plugin).__name__)
        found.append("a plugin registered by the code under test: " + what)
    return found


def _problems():
    snapshot, pm = _state["snapshot"], _state["pm"]
    if snapshot is None or pm is None:
        return ["the guard took no snapshot"] + _state["errors"]
    problems = list(_state["errors"])
    now = _snapshot()
    changed = sorted(".".join(key) for key, value in snapshot.items() if now.get(key, _MISSING) is not value)
    added = sorted(".".join(key) for key in now  # members added to a class that was there
                   if key not in snapshot and "." in key[1] and (key[0], key[1].split(".")[0]) in snapshot)
    problems += ["replaced: " + name for name in changed] + ["added: " + name for name in added]
    hooks = vars(pm.hook)
    problems += ["hook caller replaced: " + name for name, caller in _state["hooks"].items() if hooks.get(name) is not caller]
    problems += _foreign_plugins(pm, snapshot)
    registered = set(id(plugin) for plugin in pm.get_plugins())
    for name, caller in sorted(hooks.items()):
        for impl in getattr(caller, "get_hookimpls", lambda: [])():
            if id(impl.plugin) not in registered:
                problems.append("hook %s has an implementation of no registered plugin" % name)
    return problems


@_hookimpl(trylast=True)
def pytest_unconfigure(config):
    try:
        problems = _problems()
    except Exception as exc:  # noqa: BLE001
        problems = ["the guard failed: %s: %s" % (type(exc).__name__, exc)]
    payload = _dumps({"problems": problems, "failed": _state["failed"]}, sort_keys=True).encode("utf-8")
    verdict = _dumps({"payload": payload.decode("utf-8"), "mac": _sign(payload)})
    _write(_OUT, ("\nswedojo-guard-verdict " + verdict + "\n").encode("utf-8"))
