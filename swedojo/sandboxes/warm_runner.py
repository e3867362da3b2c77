"""Warm test runners: a pooled sandbox keeps its test framework imported, so test commands skip it.

Importing pytest and its built-in plugins is about a quarter of a second of every
`python -m pytest` run in our images, and a score runs the tests two or three times in each
fresh sandbox. A `WarmRunner` starts `forkserver.py` in the sandbox when the pool starts it (in
the background, off the scorer's path); the sandbox then rewrites a command that begins with
`PYTHON -m pytest` into the fork server's client, which falls back to running the command itself
whenever the server cannot serve it exactly (see forkserver.py). Output, exit codes and signals
are those of the plain command; tests (tests/sandboxes/test_warm_runner.py) compare the two.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict

RUNNER_DIR = "/tmp/.swedojo-runner"
"""Where the fork server's script, pid file and log live inside the sandbox."""
SOCKET_NAME = f"{RUNNER_DIR}/socket"
"""The fork server's abstract socket (no file: nothing in the sandbox can replace it)."""
_SCRIPT = Path(__file__).with_name("forkserver.py").read_bytes()
"""The fork server, read once: every pooled container start sends it."""
_PYTHON_MODULE = re.compile(r"^(?P<python>(?:\S*/)?python[\d.]*) -m (?P<module>pytest)(?=\s|$)")


class WarmRunner(BaseModel):
    """Which interpreter keeps which test module imported."""

    model_config = ConfigDict(frozen=True)

    python: str
    """The interpreter of the test command (`python3`, `/usr/bin/python3.11`)."""
    module: str = "pytest"
    """The module the test command runs with `-m`."""
    env: tuple[tuple[str, str], ...] = ()
    """The interpreter-level variables (`PYTHON*`, read at startup) the server starts with; the
    commands it serves must run with the same (the client checks, else runs plainly)."""

    @classmethod
    def for_command(cls, command: str, env: dict[str, str] | None = None) -> WarmRunner | None:
        """The runner that can serve `command` run with `env`, or None when it is not `PYTHON -m pytest ...`."""
        match = _PYTHON_MODULE.match(command)
        if not match:
            return None
        python_env = tuple(sorted((k, v) for k, v in (env or {}).items() if k.startswith("PYTHON")))
        return cls(python=match["python"], module=match["module"], env=python_env)

    @property
    def script(self) -> bytes:
        return _SCRIPT

    def start_argv(self, wait_s: float = 0.0) -> list[str]:
        """A one-off process that writes the script (given on stdin) and leaves the server running.

        With `wait_s`, it returns once the server listens (its imports done) or after that long,
        and prints the server's `/proc/PID/stat` line (its pid and start time identify it later);
        either way commands are right: before the server listens they run plainly.
        """
        directory = shlex.quote(RUNNER_DIR)
        variables = [f"{k}={v}" for k, v in self.env]
        serve = shlex.join(["env", *variables, self.python, f"{RUNNER_DIR}/forkserver.py", "serve", SOCKET_NAME, self.module])
        pid_file = shlex.quote(f"{SOCKET_NAME}.pid")
        rounds = int(wait_s / 0.02)
        script = (
            f"{self.script_command()} && "
            f"(setsid {serve} </dev/null >{directory}/log 2>&1 &) && "
            f"for _ in $(seq {rounds}); do [ -s {pid_file} ] && break; sleep 0.02; done; "
            f"if [ -s {pid_file} ]; then read -r pid < {pid_file} && cat /proc/$pid/stat; fi"
        )
        return ["sh", "-c", script]

    @staticmethod
    def script_command() -> str:
        """Shell that writes the script, given on stdin, where clients run it (again after a reset emptied /tmp)."""
        directory = shlex.quote(RUNNER_DIR)
        return f"mkdir -p {directory} && cat > {directory}/forkserver.py"

    def rewrite(self, command: str) -> str:
        """`command` sent to the warm server when it runs this runner's module; else unchanged."""
        prefix = f"{self.python} -m {self.module}"
        if not command.startswith(prefix) or not (command == prefix or command[len(prefix)].isspace()):
            return command
        # -I -S: the client only passes the command on; a plain run (its fallback) is exec'd as given.
        client = shlex.join([self.python, "-I", "-S", f"{RUNNER_DIR}/forkserver.py", "run", SOCKET_NAME, self.module])
        return client + command[len(prefix):]
