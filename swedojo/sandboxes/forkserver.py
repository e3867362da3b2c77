"""A warm test runner that lives inside a sandbox: `python -m MODULE ARGS` without the imports.

Copied into a sandbox and run by its own interpreter, so stdlib only (Python >= 3.9, Linux).

`serve NAME MODULE` imports MODULE (pytest and its built-in plugins: a quarter of a second per
run that nothing about the repo changes), listens on the abstract unix socket NAME, writes its
pid to the file NAME + ".pid" and forks one child per request. `run NAME MODULE ARGS...` is the
client a test command becomes: it hands the server its argv, working directory, environment and
its stdin/stdout/stderr, forwards SIGINT, SIGTERM and SIGHUP to the child, and exits with the
child's status (128 + N when killed by signal N, as a shell reports it). The child behaves as
`python -m MODULE ARGS` started in that directory with that environment: it writes straight to
the client's descriptors, `sys.path[0]` is the working directory, and nothing of the repository
was imported before the fork.

The command runs plainly instead (the client execs it) whenever the server cannot serve it
exactly: no server; another interpreter (a virtualenv made after the server started); one of its
import path's directories installed into since; a different interpreter-level environment
(`PYTHON*` variables, which the interpreter reads at startup); or a module the server imported
that this command would find elsewhere or changed. The child checks the last two before it runs
anything: it looks up every top-level module the server imported, as a plain run would (its
import system, the working directory first on the path), against the file, size and mtime the
server loaded it from, so a repo that shadows or is one of them (pytest's own repository, an
editable install) runs plainly.
A client killed mid-run takes the child's process group down with it.

The server outlives the sandboxes of a reused container, so nothing the sandbox user runs may
change it: it is not dumpable (same-uid processes cannot trace it or write its memory), keeps
its module table in memory, listens on an abstract socket (no file to replace), and imports
nothing after it starts. For pytest it also memoises assertion rewriting: a child sends a test
module's path and bytes, the server rewrites them with pytest's own rewriter (parsing and
compiling only, no code of the module runs) and keeps the code object under (path, sha256 of
the bytes, the ini flag the rewriter reads), in a memo bounded by `_MEMO_BYTES`. Anything the
memo cannot reproduce exactly (a warning while compiling, a rewriter that reads more of the
config, another pytest) makes the child rewrite the module itself.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import struct
import sys

_STATUS = struct.Struct("!i")
_LENGTH = struct.Struct("!I")
_PLAIN = -1
"""Status sent instead of an exit status: the server cannot serve this command, run it plainly."""
_MAX_HEADER = 1 << 22
_MAX_SOURCE = 1 << 24
_MEMO_BYTES = 1 << 27
"""Bound on the rewrite memo, counted in everything an entry holds (its path, digest and code,
failed rewrites too): the server outlives the sandboxes of a reused container, so what one sandbox
puts in the memo must not take the memory of the next."""
_ENTRY_BYTES = 256
"""What an entry holds beyond its path and code objects: the key tuple, the digest, a dict slot."""
_PR_SET_DUMPABLE = 4
_IO_TIMEOUT_S = 10.0


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _located(origin: str | None) -> list | None:
    """[origin, mtime_ns, size] for a module's file; [origin] for built-in and frozen ones."""
    if origin is None:
        return None
    try:
        stat = os.stat(origin)
    except OSError:
        return [origin]
    return [origin, stat.st_mtime_ns, stat.st_size]


def _module_table() -> dict[str, list | None]:
    """Where each top-level module this process imported came from."""
    table = {}
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if "." not in name and name != "__main__" and spec is not None:
            table[name] = _located(spec.origin)
    return table


def _interpreter() -> str:
    """The interpreter as started, links not followed: the client's must be the server's (a `python`
    that PATH now finds in a virtualenv made after the server started is another one, even when it
    links to the same binary)."""
    return os.path.abspath(sys.executable)


def _path_dirs() -> list:
    """[entry, mtime_ns] of the import path's directories past the first, and of the user's site
    directory (on the path of a new interpreter only once it exists): an install into one of them
    after the server started (a package, a `.pth`) changes its mtime."""
    import site

    found = []
    user_site = [site.USER_SITE] if site.ENABLE_USER_SITE and site.USER_SITE else []
    for entry in [*sys.path[1:], *user_site]:
        try:
            found.append([entry, os.stat(entry).st_mtime_ns])
        except OSError:
            found.append([entry, None])
    return found


def _found_alike(table: dict[str, list | None], paths: list) -> bool:
    """Whether a plain run started here would find every module of `table` at the same, unchanged file.

    Searches as the import system does, minus the sys.modules short cut: every meta path finder
    in order, with the working directory first on sys.path (as `python -m` puts it). First, the
    import path's directories must be unchanged since the server started (`_path_dirs`).
    """
    if _path_dirs() != paths:
        return False
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.getcwd()
    sys.path_importer_cache.clear()
    for name, expected in table.items():
        origin = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, None) if find is not None else None
            if spec is not None:
                origin = spec.origin
                break
        if _located(origin) != expected:
            return False
    return True


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _address(name: str) -> str:
    return "\0" + name


def _frame(header: dict) -> bytes:
    data = json.dumps(header).encode()
    return _LENGTH.pack(len(data)) + data


def _read_exact(conn: socket.socket, size: int, start: bytes = b"") -> bytes:
    data = bytearray(start)
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError("the peer went away")
        data += chunk
    return bytes(data)


def _prctl_dumpable(value: int) -> None:
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _ask_rewrite(name: str, path: str, source: bytes, hook: bool):
    """The rewritten code of a test module from the server's memo, or None (then the child rewrites it)."""
    import marshal

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(_IO_TIMEOUT_S)
            conn.connect(_address(name))
            conn.sendall(_frame({"op": "rewrite", "path": path, "hook": hook, "size": len(source)}) + source)
            size = _LENGTH.unpack(_read_exact(conn, _LENGTH.size))[0]
            return marshal.loads(_read_exact(conn, size)) if size else None
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _memoise_rewrites(name: str) -> None:
    """In a pytest child: take rewritten test modules from the server's memo (see the module docstring)."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    original = getattr(rewrite, "_rewrite_test", None)
    if original is None:
        return

    def _rewrite_test(fn, config):
        stat = os.stat(fn)
        source = fn.read_bytes()
        try:
            hook = bool(config.getini("enable_assertion_pass_hook")) if config is not None else False
        except Exception:
            return original(fn, config)
        code = _ask_rewrite(name, str(fn), source, hook) if len(source) <= _MAX_SOURCE else None
        return (stat, code) if code is not None else original(fn, config)

    rewrite._rewrite_test = _rewrite_test


class _IniOnly:
    """The one config value pytest's assertion rewriter reads; anything else it asks for fails the memo."""

    def __init__(self, hook: bool) -> None:
        self._hook = hook

    def getini(self, name: str):
        if name != "enable_assertion_pass_hook":
            raise LookupError(name)
        return self._hook


class _Rewrites:
    """The server's memo of rewritten test modules: marshaled code, or b"" where the child must rewrite."""

    def __init__(self) -> None:
        # Imported once here, at startup; the imports in the methods below only look them up.
        import ast  # noqa: F401
        import hashlib  # noqa: F401
        import marshal  # noqa: F401
        import warnings  # noqa: F401

        from _pytest.assertion.rewrite import rewrite_asserts

        self._rewrite_asserts = rewrite_asserts
        self._codes: dict[tuple[str, bytes, bool], bytes] = {}
        self._bytes = 0

    def code(self, path: str, source: bytes, hook: bool) -> bytes:
        import hashlib

        key = (path, hashlib.sha256(source).digest(), hook)
        if key in self._codes:
            return self._codes[key]
        code = self._rewrite(path, source, hook)
        cost = sys.getsizeof(path) + sys.getsizeof(code) + _ENTRY_BYTES
        if self._bytes + cost > _MEMO_BYTES:
            self._codes.clear()
            self._bytes = 0
        if cost <= _MEMO_BYTES:
            self._codes[key] = code
            self._bytes += cost
        return code

    def _rewrite(self, path: str, source: bytes, hook: bool) -> bytes:
        import ast
        import marshal
        import warnings

        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tree = ast.parse(source, filename=path)
                self._rewrite_asserts(tree, source, path, _IniOnly(hook))
                code = compile(tree, path, "exec", dont_inherit=True)
        except Exception:
            return b""  # the child's own rewrite raises what a plain run would
        return b"" if caught else marshal.dumps(code)


def _child(request: dict, fds: list[int], module: str, table: dict, paths: list, plain_w: int, name: str) -> None:
    """In the forked child: become `python -m module argv...` on the client's descriptors. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        _prctl_dumpable(1)  # as any process the client would have started
        # As Python starts a process: SIGPIPE and SIGXFSZ stay ignored (the server is a Python process
        # too); the rest at their defaults, even when the server was started as a background job.
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        servable = _found_alike(table, paths)
    except BaseException:
        servable = False
    if not servable:  # nothing ran yet: the client runs the command itself
        os.write(plain_w, b"p")
        os._exit(0)
    try:
        os.close(plain_w)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        if not getattr(sys.flags, "safe_path", False):
            sys.path[0] = request["cwd"]
        sys.path_importer_cache.clear()
        sys.argv = [module, *request["argv"]]
        if module == "pytest":
            _memoise_rewrites(name)
        import runpy

        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code & 0xFF
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except KeyboardInterrupt:  # as `python -m` ends on one: traceback, then die of SIGINT
        import traceback

        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # as an uncaught exception ends `python -m`: traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        _flush()
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _send_status(conn: socket.socket, status: int) -> None:
    try:
        conn.sendall(_STATUS.pack(status))
    except OSError:
        pass
    conn.close()


def _request(conn: socket.socket) -> tuple[dict, list[int], bytes]:
    """(header, passed fds, bytes after the header) of a new connection."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    try:
        size = _LENGTH.unpack(_read_exact(conn, _LENGTH.size, data[: _LENGTH.size]))[0]
        if size > _MAX_HEADER:
            raise ValueError("header too long")
        rest = data[_LENGTH.size :]
        header_and_more = _read_exact(conn, size, rest[:size])
        header = json.loads(header_and_more)
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        return header, fds, rest[size:]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def serve(name: str, module: str) -> None:
    import importlib
    import runpy  # noqa: F401  (the child's, imported here once)
    import select

    importlib.import_module(module)
    rewrites = None
    if module == "pytest":
        from _pytest.config import default_plugins

        for plugin in default_plugins:
            try:
                importlib.import_module(f"_pytest.{plugin}")
            except ImportError:
                pass
        try:
            rewrites = _Rewrites()
        except ImportError:
            pass
    import ctypes  # noqa: F401  (the child's prctl; imported before the table, so it is checked too)

    table, paths, interpreter = _module_table(), _path_dirs(), _interpreter()
    _prctl_dumpable(0)
    sys.path[0] = "/nonexistent/swedojo-forkserver"  # no import after this point reads a writable place
    os.chdir("/")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(name))  # until here, clients find no server and run plainly
    listener.listen(16)
    with open(name + ".pid.partial", "w") as handle:
        handle.write(f"{os.getpid()}\n")
    os.replace(name + ".pid.partial", name + ".pid")
    startup_env = _interpreter_env(dict(os.environ))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: dict[int, tuple[socket.socket, int]] = {}
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    while True:
        try:
            readable, _, _ = select.select([listener, wake_r, *(c for c, _ in children.values())], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 512)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in children:
                conn, plain_r = children.pop(pid)
                said = os.read(plain_r, 1)
                os.close(plain_r)
                _send_status(conn, _PLAIN if said == b"p" else _exit_code(status))
        for pid, (conn, _) in list(children.items()):
            if conn in readable:  # the client went away (killed): so does the run
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        conn.settimeout(_IO_TIMEOUT_S)
        try:
            header, fds, rest = _request(conn)
        except (OSError, ValueError, EOFError):
            conn.close()
            continue
        if header.get("op") == "rewrite":
            for fd in fds:
                os.close(fd)
            try:
                size = int(header["size"])
                source = _read_exact(conn, size, rest[:size]) if 0 <= size <= _MAX_SOURCE else None
                code = rewrites.code(str(header["path"]), source, bool(header["hook"])) if rewrites and source is not None else b""
                conn.sendall(_LENGTH.pack(len(code)) + code)
            except (OSError, ValueError, EOFError, KeyError, TypeError):
                pass
            conn.close()
            continue
        if (len(fds) != 3 or not isinstance(header.get("env"), dict) or _interpreter_env(header["env"]) != startup_env
                or header.get("interpreter") != interpreter):
            for fd in fds:
                os.close(fd)
            _send_status(conn, _PLAIN)
            continue
        plain_r, plain_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            for other, other_r in children.values():
                other.close()
                os.close(other_r)
            os.close(plain_r)
            os.close(wake_r)
            os.close(wake_w)
            _child(header, fds, module, table, paths, plain_w, name)
        os.close(plain_w)
        os.set_blocking(plain_r, False)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first, or already exited
        conn.settimeout(None)
        try:
            conn.sendall(_STATUS.pack(pid))
        except OSError:
            pass
        children[pid] = (conn, plain_r)


def _receive_int(conn: socket.socket) -> int | None:
    try:
        return _STATUS.unpack(_read_exact(conn, _STATUS.size))[0]
    except EOFError:
        return None


def run(name: str, module: str, argv: list[str]) -> None:
    def itself() -> None:
        os.execv(sys.executable, [sys.executable, "-m", module, *argv])

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_address(name))
        request = {"op": "run", "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "interpreter": _interpreter()}
        socket.send_fds(conn, [_frame(request)], [0, 1, 2])
        pid = _receive_int(conn)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EPIPE, errno.ECONNRESET):
            print(f"forkserver: {exc}; running the command directly", file=sys.stderr)
        itself()
        return
    if pid is None or pid < 0:
        conn.close()
        itself()
        return

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(pid, signum)
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    code = _receive_int(conn)
    if code is None:
        print("forkserver: the server went away mid-run", file=sys.stderr)
        sys.exit(1)
    if code == _PLAIN:  # the child found this command not servable before it ran anything
        conn.close()
        itself()
        return
    sys.exit(code)


if __name__ == "__main__":
    command, name, module, *rest = sys.argv[1:]
    if command == "serve":
        serve(name, module)
    elif command == "run":
        run(name, module, rest)
    else:
        sys.exit(f"forkserver: unknown command {command!r}")
