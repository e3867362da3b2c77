"""A warm test runner that lives inside a sandbox: `python -m MODULE ARGS` without the imports.

Copied into a sandbox and run by its own interpreter, so stdlib only (Python >= 3.9).

`serve SOCKET MODULE` binds a unix socket, imports MODULE (pytest and its built-in plugins:
a quarter of a second per run that nothing about the repo changes), then forks one child per
request. `run SOCKET MODULE ARGS...` is the client a test command becomes: it hands the server
its argv, working directory, environment and its stdin/stdout/stderr, forwards SIGINT, SIGTERM
and SIGHUP to the child, and exits with the child's status (128 + N when killed by signal N,
as a shell reports it). The child behaves as `python -m MODULE ARGS` started in that directory
with that environment: it writes straight to the client's descriptors, `sys.path[0]` is the
working directory, and nothing of the repository was imported before the fork.

The client runs the command itself (exec, same process) whenever the server cannot serve it
exactly: no server; a different interpreter-level environment (`PYTHON*` variables, which the
interpreter reads at startup); or a module the server imported that this command would find
elsewhere or changed (the server lists each top-level module's file, size and mtime in
`modules.json`; the client looks every one up as a plain run would, with its own import
system and the working directory first on the path, so a repo that shadows or is one of them
(pytest's own repository, an editable install) is run plainly). A client killed mid-run takes
the child's process group down with it (the server sees the connection close).
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
_MAX_REQUEST = 1 << 22


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


def _found_alike(table: dict[str, list | None]) -> bool:
    """Whether a plain run started here would find every module of `table` at the same, unchanged file.

    Searches as the import system does, minus the sys.modules short cut: every meta path finder
    in order, with the working directory first on sys.path (as `python -m` puts it).
    """
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


def _child(request: dict, fds: list[int], module: str) -> None:
    """In the forked child: become `python -m module argv...` on the client's descriptors. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        # As Python starts a process: SIGPIPE and SIGXFSZ stay ignored (the server is a Python process
        # too); the rest at their defaults, even when the server was started as a background job.
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if not getattr(sys.flags, "safe_path", False):
            sys.path[0] = request["cwd"]
        sys.path_importer_cache.clear()
        sys.argv = [module, *request["argv"]]
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


def serve(path: str, module: str) -> None:
    import importlib
    import select

    importlib.import_module(module)
    if module == "pytest":
        from _pytest.config import default_plugins

        for name in default_plugins:
            try:
                importlib.import_module(f"_pytest.{name}")
            except ImportError:
                pass
    import runpy  # noqa: F401  (the child's, imported here once)

    table = os.path.join(os.path.dirname(path), "modules.json")
    with open(table + ".partial", "w") as handle:
        json.dump(_module_table(), handle)
    os.replace(table + ".partial", table)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)  # until here, clients find no server and run plainly
    listener.listen(16)
    startup_env = _interpreter_env(dict(os.environ))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: dict[int, socket.socket] = {}
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    while True:
        try:
            readable, _, _ = select.select([listener, wake_r, *children.values()], [], [])
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
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(_STATUS.pack(_exit_code(status)))
                except OSError:
                    pass
                conn.close()
        for pid, conn in list(children.items()):
            if conn in readable:  # the client went away (killed): so does the run
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        try:
            message, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            conn.close()
            continue
        if len(fds) != 3 or _interpreter_env(request["env"]) != startup_env:
            for fd in fds:
                os.close(fd)
            conn.sendall(_STATUS.pack(-1))  # not servable here: the client runs it itself
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            os.close(wake_r)
            os.close(wake_w)
            _child(request, fds, module)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first, or already exited
        conn.sendall(_STATUS.pack(pid))
        children[pid] = conn


def _receive_int(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < _STATUS.size:
        chunk = conn.recv(_STATUS.size - len(data))
        if not chunk:
            return None
        data += chunk
    return _STATUS.unpack(data)[0]


def run(path: str, module: str, argv: list[str]) -> None:
    def itself() -> None:
        os.execv(sys.executable, [sys.executable, "-m", module, *argv])

    try:
        with open(os.path.join(os.path.dirname(path), "modules.json")) as handle:
            table = json.load(handle)
    except (OSError, ValueError):
        itself()
        return
    if not _found_alike(table):
        itself()
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
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
    sys.exit(code)


if __name__ == "__main__":
    command, path, module, *rest = sys.argv[1:]
    if command == "serve":
        serve(path, module)
    elif command == "run":
        run(path, module, rest)
    else:
        sys.exit(f"forkserver: unknown command {command!r}")
