"""Exec a command under a seccomp filter: `python -m swedojo.sandboxes.seccomp_exec FD -- CMD...`.

FD holds a compiled filter (`seccomp.compile_bpf`). The wrapper sets no_new_privs, installs the
filter and execs CMD: a fresh process, so nothing like `preexec_fn` runs in a threaded parent.
The local backend uses it where bubblewrap (which does the same with `--seccomp FD`) is missing.
Standard library only, so that it starts fast.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _Prog(ctypes.Structure):
    """struct sock_fprog."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print(
            "usage: python -m swedojo.sandboxes.seccomp_exec FD -- CMD...",
            file=sys.stderr,
        )
        return 2
    fd = int(argv[0])
    program = os.pread(fd, os.fstat(fd).st_size, 0)
    os.close(fd)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _Prog(len(program) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or libc.prctl(
        PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0
    ):
        print(
            f"seccomp_exec: cannot load the filter: {os.strerror(ctypes.get_errno())}",
            file=sys.stderr,
        )
        return 126
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"seccomp_exec: {argv[2]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
