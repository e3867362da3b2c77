"""One seccomp policy, rendered as a Docker profile and compiled with libseccomp for `local`.

The policy is an allowlist: every syscall that libseccomp can name on the native architecture is
allowed except the denied ones; anything else (a syscall newer than the libseccomp in use) fails
with ENOSYS, so libc falls back to older calls. Other ABIs of the same machine (32-bit `int 0x80`,
x32) are not allowed at all: the local filter kills the process. An allow-by-default profile
would let through exactly what the daemon's libseccomp cannot name: upstream libseccomp before
2.5.5 does not know `fchmodat2` (452), so a deny rule on it would be dropped.

Denials return EPERM; `clone3` returns ENOSYS so that libc uses `clone`, whose namespace flags
are checked. The profile states that rule although ENOSYS is the default: Docker 20.10 ignores
`defaultErrnoRet` (its default then is EPERM; runc answers ENOSYS for syscalls it cannot name).
Conditional rules are written twice: an ALLOW when the condition is clear, an ERRNO per
offending bit (or on inequality) otherwise.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import platform
import stat
from dataclasses import dataclass

from swedojo.sandboxes.base import SandboxError

CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
"""Namespace flags of clone(2) (CLONE_NEWTIME is 0x80, an exit-signal bit for clone: unshare only)."""

SETID_BITS = stat.S_ISUID | stat.S_ISGID
AF_UNIX = 1

DENIED = (
    # mounts and namespaces
    "mount", "umount", "umount2", "pivot_root", "unshare", "setns",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # other processes' memory, kernel programs, kernel modules and images
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    # kernel keyrings, io_uring (opens sockets without socket()), userfaultfd
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "userfaultfd",
    # host-wide state
    "open_by_handle_at", "swapon", "swapoff", "reboot", "quotactl", "acct", "syslog",
    "iopl", "ioperm", "lookup_dcookie",
)  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """Deny `syscalls` with `errno`: always, or only when a condition on one argument holds."""

    syscalls: tuple[str, ...]
    errno: int = errno.EPERM
    arg: int | None = None
    """Index of the argument the condition looks at; None: always deny."""
    any_bits: int = 0
    """Deny when `arg & any_bits != 0`."""
    not_equal: int | None = None
    """Deny when `arg != not_equal`."""


def policy(sockets: bool) -> tuple[Rule, ...]:
    """The rules; sockets other than AF_UNIX are denied unless `sockets` (the network is on, or
    the sandbox has a network namespace of its own whose only interface is its loopback)."""
    rules = [
        Rule(DENIED),
        Rule(("clone3",), errno=errno.ENOSYS),
        Rule(("clone",), arg=0, any_bits=sum(CLONE_NEW_FLAGS.values())),
        Rule(("chmod", "fchmod"), arg=1, any_bits=SETID_BITS),
        Rule(("fchmodat", "fchmodat2"), arg=2, any_bits=SETID_BITS),
        # a file created set-id: the mode of open(O_CREAT), creat and mknod
        Rule(("creat", "mknod"), arg=1, any_bits=SETID_BITS),
        Rule(("open", "mknodat"), arg=2, any_bits=SETID_BITS),
        Rule(("openat",), arg=3, any_bits=SETID_BITS),
        Rule(("openat2",), errno=errno.ENOSYS),  # its mode is behind a pointer; libc falls back to openat
        # other processes' limits (a reused container's warm runner outlives its sandboxes)
        Rule(("prlimit64",), arg=0, not_equal=0),
    ]
    if not sockets:
        rules.append(Rule(("socket", "socketpair"), arg=0, not_equal=AF_UNIX))
    return tuple(rules)


@dataclass(frozen=True)
class Arch:
    """A supported architecture under its three names."""

    machine: str
    docker: str
    audit: int
    """AUDIT_ARCH_* token, as libseccomp takes it."""


ARCHES = {
    "x86_64": Arch("x86_64", "SCMP_ARCH_X86_64", 0xC000003E),
    "aarch64": Arch("aarch64", "SCMP_ARCH_AARCH64", 0xC00000B7),
}


class SeccompUnavailableError(SandboxError):
    """libseccomp is missing or the architecture is not supported."""


def native_arch() -> Arch:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())
    if machine not in ARCHES:
        raise SeccompUnavailableError(f"no seccomp policy for architecture {machine}")
    return ARCHES[machine]


# libseccomp constants (seccomp.h)
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_FLTATR_ACT_BADARCH = 2
_FLTATR_CTL_OPTIMIZE = 8
_CMP_NE, _CMP_EQ, _CMP_MASKED_EQ = 1, 4, 7
_CMP_NAMES = {
    _CMP_NE: "SCMP_CMP_NE",
    _CMP_EQ: "SCMP_CMP_EQ",
    _CMP_MASKED_EQ: "SCMP_CMP_MASKED_EQ",
}


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


_DEFAULT = _act_errno(errno.ENOSYS)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


Cmp = tuple[int, int, int, int]
"""(argument index, comparison, datum a, datum b), as libseccomp and Docker take them."""


@dataclass(frozen=True)
class _Entry:
    names: tuple[str, ...]
    action: int
    cmp: Cmp | None = None


@functools.cache
def _lib() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SeccompUnavailableError(f"libseccomp is not installed: {exc}") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_num_arch.argtypes = [ctypes.c_uint32, ctypes.c_int]
    return lib


@functools.cache
def known_syscalls() -> dict[str, int]:
    """Every syscall libseccomp can name on the native architecture, with its number."""
    lib, arch = _lib(), native_arch()
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    names: dict[str, int] = {}
    for number in range(1024):
        ptr = lib.seccomp_syscall_resolve_num_arch(arch.audit, number)
        if ptr:
            names[ctypes.string_at(ptr).decode()] = number
            libc.free(ptr)
    return names


def _entries(sockets: bool) -> list[_Entry]:
    """The policy as allow/errno entries over the known syscalls (default: ENOSYS)."""
    known = known_syscalls()
    rules = policy(sockets)
    ruled = {name for rule in rules for name in rule.syscalls}
    entries = [_Entry(tuple(sorted(set(known) - ruled)), _ACT_ALLOW)]
    for rule in rules:
        deny, names, arg = _act_errno(rule.errno), rule.syscalls, rule.arg
        if arg is None:
            entries.append(_Entry(names, deny))
        elif rule.not_equal is not None:
            entries.append(_Entry(names, _ACT_ALLOW, (arg, _CMP_EQ, rule.not_equal, 0)))
            entries.append(_Entry(names, deny, (arg, _CMP_NE, rule.not_equal, 0)))
        else:
            entries.append(_Entry(names, _ACT_ALLOW, (arg, _CMP_MASKED_EQ, rule.any_bits, 0)))
            for bit in (1 << i for i in range(64) if rule.any_bits >> i & 1):
                entries.append(_Entry(names, deny, (arg, _CMP_MASKED_EQ, bit, bit)))
    return entries


def render_docker_profile(sockets: bool) -> str:
    """The policy as Docker seccomp profile JSON, for `security_opt=["seccomp=" + text]`."""
    syscalls = []
    for entry in _entries(sockets):
        item: dict[str, object] = {"names": list(entry.names)}
        if entry.action == _ACT_ALLOW:
            item["action"] = "SCMP_ACT_ALLOW"
        else:
            item["action"] = "SCMP_ACT_ERRNO"
            item["errnoRet"] = entry.action & 0xFFFF
        if entry.cmp is not None:
            index, op, a, b = entry.cmp
            item["args"] = [{"index": index, "value": a, "valueTwo": b, "op": _CMP_NAMES[op]}]
        syscalls.append(item)
    profile = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.ENOSYS,
        "architectures": [native_arch().docker],
        "syscalls": syscalls,
    }
    return json.dumps(profile, indent=1)


@functools.cache
def compile_bpf(sockets: bool) -> bytes:
    """The policy as a classic BPF program for this architecture (`struct sock_filter[]`).

    Calls of other architectures kill the process. Load it with bwrap's `--seccomp FD` or with
    `swedojo.sandboxes.seccomp_exec`; both set no_new_privs first.
    """
    lib = _lib()
    known = known_syscalls()
    ctx = lib.seccomp_init(_DEFAULT)
    if not ctx:
        raise SeccompUnavailableError("seccomp_init failed")
    try:
        for attr, value in (
            (_FLTATR_ACT_BADARCH, _ACT_KILL_PROCESS),
            (_FLTATR_CTL_OPTIMIZE, 2),
        ):
            if lib.seccomp_attr_set(ctx, attr, value) != 0:
                raise SeccompUnavailableError(f"seccomp_attr_set({attr}) failed")
        # libseccomp refuses rules that repeat the default action (they would change nothing)
        for entry in (e for e in _entries(sockets) if e.action != _DEFAULT):
            cmps = (_ArgCmp * 1)(_ArgCmp(*entry.cmp)) if entry.cmp else None
            for name in entry.names:
                if name not in known:
                    continue  # not on this architecture, or unknown to libseccomp: ENOSYS
                rc = lib.seccomp_rule_add_array(
                    ctx, entry.action, known[name], 1 if cmps else 0, cmps
                )
                if rc != 0:
                    raise SeccompUnavailableError(
                        f"seccomp rule on {name} failed: {os.strerror(-rc)}"
                    )
        fd = os.memfd_create("swedojo-seccomp-export")
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
            if rc != 0:
                raise SeccompUnavailableError(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


def bpf_fd(sockets: bool) -> int:
    """A memfd (close-on-exec) holding the compiled program at offset 0: for `pass_fds`."""
    fd = os.memfd_create("swedojo-seccomp")
    os.write(fd, compile_bpf(sockets))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
