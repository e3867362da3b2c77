"""The `local` backend: a clean checkout in a temp dir, commands run on the host in a subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from swedojo.repos import checkout
from swedojo.sandboxes.base import ExecResult, SandboxConfig, SandboxError, cut_output


class LocalSandbox:
    """A work tree in a temp dir; see the sandbox issue for the hardened terminal."""

    def __init__(self, source: Path, commit: str, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._root = Path(tempfile.mkdtemp(prefix="swedojo-local-"))
        self.workdir = str(self._root / "repo")
        self._closed = False
        try:
            checkout(source, commit, Path(self.workdir))
        except Exception:
            self.close()
            raise

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TERM")}
        env.update(self.config.env)
        return env

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox is closed")
        limit = timeout or self.config.command_timeout_s
        start = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        text, truncated = cut_output(out, self.config.max_output_bytes)
        return ExecResult(
            output=text,
            exit_code=None if timed_out else proc.returncode,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def _path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else Path(self.workdir) / p

    def read_file(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def diff(self) -> str:
        result = self.exec("git add -A >/dev/null 2>&1 && git diff --cached --binary HEAD")
        if result.exit_code != 0:
            raise SandboxError(f"git diff failed: {result.output.strip()}")
        return result.output

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> "LocalSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
