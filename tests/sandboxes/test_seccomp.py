"""The seccomp policy: its Docker rendering, and the compiled filter on real processes.

The filter tests run the probe as root on the host without namespaces, once with the filter
(`seccomp_exec`) and once without: root may do everything the probe tries, so the denials come
from the filter alone. Anything that could touch the host (mount) runs in a throwaway mount
namespace.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from toolchains import require_tools

from swedojo.sandboxes import seccomp
from swedojo.sandboxes.seccomp import (
    CLONE_NEW_FLAGS,
    DENIED,
    SETID_BITS,
    bpf_fd,
    compile_bpf,
    known_syscalls,
    native_arch,
    render_docker_profile,
)

Parse = Callable[[str], dict[str, tuple[int, ...]]]
root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="the control runs need root: without the filter, root may do it all"
)


def run(
    argv: list[str], network: bool = False, filtered: bool = True
) -> subprocess.CompletedProcess[str]:
    """`argv` on the host, under the filter when `filtered`."""
    if not filtered:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    fd = bpf_fd(network)
    try:
        wrapper = [sys.executable, "-m", "swedojo.sandboxes.seccomp_exec", str(fd), "--"]
        return subprocess.run(
            wrapper + argv, capture_output=True, text=True, pass_fds=(fd,), timeout=60, check=False
        )
    finally:
        os.close(fd)


# -- the Docker rendering ------------------------------------------------------------------------


@pytest.mark.parametrize("network", [False, True])
def test_docker_profile_is_an_allowlist_of_the_same_policy(network: bool) -> None:
    profile = json.loads(render_docker_profile(network))
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["defaultErrnoRet"] == errno.ENOSYS
    assert profile["architectures"] == [native_arch().docker]
    allowed = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and "args" not in rule
        for name in rule["names"]
    }
    ruled = {name for rule in seccomp.policy(network) for name in rule.syscalls}
    assert allowed == set(known_syscalls()) - ruled
    assert not allowed & set(DENIED)
    assert {"clone3", "fchmodat2", "chmod", "fchmod", "fchmodat", "clone", "ptrace"} <= ruled
    assert ("socket" in allowed) is network


def test_docker_profile_conditions() -> None:
    profile = json.loads(render_docker_profile(False))
    by_name: dict[str, list[dict[str, object]]] = {}
    for rule in profile["syscalls"]:
        for name in rule["names"]:
            by_name.setdefault(name, []).append(rule)
    clone_allow = [r for r in by_name["clone"] if r["action"] == "SCMP_ACT_ALLOW"]
    assert clone_allow[0]["args"] == [
        {
            "index": 0,
            "value": sum(CLONE_NEW_FLAGS.values()),
            "valueTwo": 0,
            "op": "SCMP_CMP_MASKED_EQ",
        }
    ]
    for name, index in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2)):
        denies = [r for r in by_name[name] if r["action"] == "SCMP_ACT_ERRNO"]
        assert {(a["index"], a["value"], a["valueTwo"]) for r in denies for a in r["args"]} == {
            (index, bit, bit) for bit in (0o4000, 0o2000)
        }, name
        allow = [r for r in by_name[name] if r["action"] == "SCMP_ACT_ALLOW"]
        assert allow[0]["args"][0]["value"] == SETID_BITS
    socket_rules = {(r["action"], r["args"][0]["op"]) for r in by_name["socket"]}
    assert socket_rules == {("SCMP_ACT_ALLOW", "SCMP_CMP_EQ"), ("SCMP_ACT_ERRNO", "SCMP_CMP_NE")}


def test_syscall_numbers_of_the_native_architecture() -> None:
    known = known_syscalls()
    expected = {
        "x86_64": {
            "fchmodat2": 452,
            "clone3": 435,
            "io_uring_setup": 425,
            "ptrace": 101,
            "socket": 41,
        },
        "aarch64": {
            "fchmodat2": 452,
            "clone3": 435,
            "io_uring_setup": 425,
            "ptrace": 117,
            "socket": 198,
        },
    }[native_arch().machine]
    for name, number in expected.items():
        if name == "fchmodat2" and name not in known:
            continue  # an older libseccomp: fchmodat2 then falls to the default, ENOSYS
        assert known[name] == number


def test_compiled_program_is_classic_bpf() -> None:
    program = compile_bpf(False)
    assert len(program) % 8 == 0 and 0 < len(program) // 8 <= 4096
    assert compile_bpf(True) != program


# -- the filter on real processes ----------------------------------------------------------------


@root_only
def test_setuid_chmod_denied_through_all_four_syscalls(
    probe_binary: Path, parse_probe: Parse, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    shutil.copy(probe_binary, target)
    control = parse_probe(run([str(probe_binary), "chmod", str(target)], filtered=False).stdout)
    assert control["chmod-4755"] == (0, 0, 0o4755)
    filtered = parse_probe(run([str(probe_binary), "chmod", str(target)]).stdout)
    for call in ("chmod", "fchmod", "fchmodat", "fchmodat2"):
        for mode in ("4755", "2755"):
            rc, err, after = filtered[f"{call}-{mode}"]
            assert rc == -1 and err in (errno.EPERM, errno.ENOSYS), (call, mode, filtered)
            assert after & 0o6000 == 0
    plain = run(["chmod", "0700", str(target)])
    assert plain.returncode == 0 and target.stat().st_mode & 0o7777 == 0o700


@root_only
def test_namespaces_denied(probe_binary: Path, parse_probe: Parse) -> None:
    control = parse_probe(run([str(probe_binary), "unshare"], filtered=False).stdout)
    assert control["unshare-user"][0] == 0
    rows = parse_probe(run([str(probe_binary), "unshare"]).stdout)
    for name in ("unshare-user", "unshare-ns", "unshare-net", "setns", "clone-newuser"):
        assert rows[name] == (-1, errno.EPERM), (name, rows)
    assert rows["clone3"] == (-1, errno.ENOSYS)
    assert run(["bash", "-c", "true | true; (echo sub)"]).stdout == "sub\n"  # plain clone works


@root_only
def test_mount_denied(probe_binary: Path, parse_probe: Parse, tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("util-linux unshare is missing: no throwaway mount namespace for the control")
    private = ["unshare", "--mount", "--propagation", "private", "--"]
    control = run([*private, str(probe_binary), "mount", str(tmp_path)], filtered=False)
    assert parse_probe(control.stdout)["mount"][0] == 0, control.stderr
    fd = bpf_fd(False)
    try:
        filtered = subprocess.run(
            [*private, sys.executable, "-m", "swedojo.sandboxes.seccomp_exec", str(fd), "--"]
            + [str(probe_binary), "mount", str(tmp_path)],
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            timeout=60,
            check=False,
        )
    finally:
        os.close(fd)
    assert parse_probe(filtered.stdout)["mount"] == (-1, errno.EPERM)


@root_only
def test_ptrace_and_kernel_interfaces_denied(probe_binary: Path, parse_probe: Parse) -> None:
    control = parse_probe(run([str(probe_binary), "ptrace"], filtered=False).stdout)
    assert control["ptrace-attach"][0] == 0
    rows = parse_probe(run([str(probe_binary), "ptrace"]).stdout)
    assert rows["ptrace-attach"] == (-1, errno.EPERM)
    assert rows["process_vm_readv"] == (-1, errno.EPERM)
    rows = parse_probe(run([str(probe_binary), "kernel"]).stdout)
    for name in (
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "io_uring_setup",
        "init_module",
        "kexec_load",
    ):
        assert rows[name] == (-1, errno.EPERM), (name, rows[name])


def test_sockets_follow_the_network_switch(probe_binary: Path, parse_probe: Parse) -> None:
    off = parse_probe(run([str(probe_binary), "socket"], network=False).stdout)
    assert off["socket-inet"] == (-1, errno.EPERM) and off["socket-inet6"] == (-1, errno.EPERM)
    assert off["socket-unix"][0] >= 0
    on = parse_probe(run([str(probe_binary), "socket"], network=True).stdout)
    assert on["socket-inet"][0] >= 0 and on["socket-inet6"][0] >= 0


OTHER_ABI_SOURCE = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long rc;
    if (argv[1][0] == 'i') {  /* 32-bit entry: getpid is 20 in the i386 table */
        __asm__ volatile ("int $0x80" : "=a"(rc) : "a"(20L) : "memory");
    } else {                  /* x32 ABI: getpid | __X32_SYSCALL_BIT */
        __asm__ volatile ("syscall" : "=a"(rc) : "a"(39L | 0x40000000L) : "rcx", "r11", "memory");
    }
    printf("rc %ld\n", rc);
    return 0;
}
"""


@pytest.mark.skipif(
    platform.machine() != "x86_64", reason="32-bit and x32 entries exist on x86_64 only"
)
@pytest.mark.parametrize("abi", ["int80", "x32"])
def test_other_abis_are_killed(abi: str, tmp_path: Path) -> None:
    require_tools("gcc")
    (tmp_path / "abi.c").write_text(OTHER_ABI_SOURCE)
    subprocess.run(["gcc", "-static", "-o", "abi", "abi.c"], cwd=tmp_path, check=True)
    filtered = run([str(tmp_path / "abi"), abi])
    assert filtered.returncode == -signal.SIGSYS, (filtered.returncode, filtered.stdout)


def test_filtered_shell_still_works() -> None:
    result = run(
        [
            "bash",
            "-c",
            "cd /tmp && ls / >/dev/null && echo $((6 * 7)) | cat && python3 -c 'print(1)'",
        ]
    )
    assert result.stdout == "42\n1\n", result.stderr
