"""Fixtures for the sandbox tests: tiny real git repos, sandboxes per backend, a C escape probe.

The escape and conformance tests run on every backend of `swedojo.sandboxes.registry`; a backend
that needs something of the machine gets its marker in `MARKS`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, ESCAPE_CONFIG, make_repo, make_sandbox
from toolchains import require_tools

from swedojo.sandboxes.base import Sandbox, SandboxConfig


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest, git_repo: Path) -> Iterator[Sandbox]:
    box = make_sandbox(request.param, git_repo, ESCAPE_CONFIG)
    try:
        yield box
    finally:
        box.close()


PROBE_SOURCE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

/* Each check prints "name rc errno" (rc -1: denied); chmod checks add the mode after. */
static void report(const char *name, long rc) {
    printf("%s %ld %d\n", name, rc < 0 ? -1L : rc, rc < 0 ? errno : 0);
}

static void mode_after(const char *name, long rc, const char *path) {
    struct stat st;
    int err = errno;
    stat(path, &st);
    printf("%s %ld %d %o\n", name, rc < 0 ? -1L : rc, rc < 0 ? err : 0, st.st_mode & 07777);
    chmod(path, 0755);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *what = argv[1];
    if (!strcmp(what, "chmod")) {
        const char *path = argv[2];
        mode_t modes[2] = {04755, 02755};
        for (int i = 0; i < 2; i++) {
            mode_t m = modes[i];
            char name[32];
            snprintf(name, sizeof name, "chmod-%o", m);
            mode_after(name, chmod(path, m), path);
            int fd = open(path, O_RDONLY);
            snprintf(name, sizeof name, "fchmod-%o", m);
            mode_after(name, fchmod(fd, m), path);
            close(fd);
            snprintf(name, sizeof name, "fchmodat-%o", m);
            mode_after(name, fchmodat(AT_FDCWD, path, m, 0), path);
            snprintf(name, sizeof name, "fchmodat2-%o", m);
            mode_after(name, syscall(452, AT_FDCWD, path, m, 0), path);
        }
        return 0;
    }
    if (!strcmp(what, "create")) {
        const char *path = argv[2];
        mode_t m = 04755;
        umask(0);
        unlink(path); mode_after("open", open(path, O_CREAT | O_WRONLY, m), path);
        unlink(path); mode_after("openat", openat(AT_FDCWD, path, O_CREAT | O_WRONLY, m), path);
        unlink(path); mode_after("creat", creat(path, m), path);
        unlink(path); mode_after("mknod", mknod(path, S_IFREG | m, 0), path);
        unlink(path); mode_after("mknodat", mknodat(AT_FDCWD, path, S_IFREG | 02755, 0), path);
        return 0;
    }
    if (!strcmp(what, "mount")) {
        report("mount", mount("none", argv[2], "tmpfs", 0, NULL));
        report("umount2", umount2(argv[2], MNT_DETACH));
        return 0;
    }
    if (!strcmp(what, "unshare")) {
        report("unshare-user", unshare(CLONE_NEWUSER));
        report("unshare-ns", unshare(CLONE_NEWNS));
        report("unshare-net", unshare(CLONE_NEWNET));
        report("setns", syscall(SYS_setns, 0, 0));
        long pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0) _exit(0);
        if (pid > 0) waitpid(pid, NULL, 0);
        report("clone-newuser", pid);
        report("clone3", syscall(435, NULL, 0));
        return 0;
    }
    if (!strcmp(what, "ptrace")) {
        pid_t child = fork();
        if (child == 0) { pause(); _exit(0); }
        pid_t target = argc > 2 ? atoi(argv[2]) : child;
        report("ptrace-attach", ptrace(PTRACE_ATTACH, target, NULL, NULL));
        char buf[8], local[8] = {0};
        struct iovec l = {local, sizeof local}, r = {buf, sizeof buf};
        report("process_vm_readv", process_vm_readv(target, &l, 1, &r, 1, 0));
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return 0;
    }
    if (!strcmp(what, "kernel")) {
        report("bpf", syscall(SYS_bpf, 0, NULL, 0));
        report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
        report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
        report("add_key", syscall(SYS_add_key, "user", "k", "v", 1, -2));
        report("io_uring_setup", syscall(425, 1, NULL));
        report("init_module", syscall(SYS_init_module, NULL, 0, ""));
        report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
        return 0;
    }
    if (!strcmp(what, "socket")) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        report("socket-inet", fd);
        if (fd >= 0 && argc > 2) {
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
            inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
            report("connect", connect(fd, (struct sockaddr *)&a, sizeof a));
        }
        report("socket-inet6", socket(AF_INET6, SOCK_DGRAM, 0));
        report("socket-unix", socket(AF_UNIX, SOCK_STREAM, 0));
        return 0;
    }
    return 2;
}
"""


def _parse_probe(output: str) -> dict[str, tuple[int, ...]]:
    """`name rc errno [mode]` lines -> {name: (rc, errno[, mode])}."""
    rows: dict[str, tuple[int, ...]] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) in (3, 4) and parts[1].lstrip("-").isdigit():
            values = [int(parts[1]), int(parts[2])] + (
                [int(parts[3], 8)] if len(parts) == 4 else []
            )
            rows[parts[0]] = tuple(values)
    return rows


@pytest.fixture(params=BACKENDS)
def sandbox_factory(request: pytest.FixtureRequest, git_repo: Path) -> Iterator[Callable[[SandboxConfig], Sandbox]]:
    """Makes sandboxes of one backend on `git_repo` with a config of the test's; closes them after."""
    made: list[Sandbox] = []

    def make(config: SandboxConfig) -> Sandbox:
        made.append(make_sandbox(request.param, git_repo, config))
        return made[-1]

    try:
        yield make
    finally:
        for box in made:
            box.close()


@pytest.fixture(scope="session")
def parse_probe() -> Callable[[str], dict[str, tuple[int, ...]]]:
    """Reads the probe's output: {check name: (rc, errno[, mode])}, rc -1 when denied."""
    return _parse_probe


@pytest.fixture
def escape_config() -> SandboxConfig:
    return ESCAPE_CONFIG


@pytest.fixture(scope="session")
def probe_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The escape probe, compiled statically so that it runs in any Linux sandbox."""
    require_tools("gcc")
    work = tmp_path_factory.mktemp("probe")
    (work / "probe.c").write_text(PROBE_SOURCE)
    proc = subprocess.run(
        ["gcc", "-static", "-O1", "-o", "probe", "probe.c"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot build a static probe here: {proc.stderr.strip()[-300:]}")
    return work / "probe"


@pytest.fixture
def probe(sandbox: Sandbox, probe_binary: Path) -> str:
    """The probe copied into the sandbox's work tree; its path inside."""
    sandbox.write_file(".probe", probe_binary.read_bytes())
    result = sandbox.exec("chmod 755 .probe && echo ok")
    assert result.output.strip() == "ok", result.output
    return f"{sandbox.workdir}/.probe"
