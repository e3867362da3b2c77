"""Reused pool containers: what one sandbox leaves behind never reaches the next one.

A released container goes back to the pool only after `Container.reset` killed every process of
the sandbox user, emptied every place it can write and checked that nothing is left. Each test
plants something a candidate's code could leave (a background process, files in every writable
place, IPC objects, an attack on the supervisor or the test runner) and looks for it from the
next sandbox of the same container.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Iterator

import pytest
from sandbox_helpers import MEMO_GROWTH_MIB, make_repo, memo_flood, peak_rss_mib

from swedojo.rewards.grading import grade_in_sandbox
from swedojo.sandboxes.docker import DockerSandbox
from swedojo.sandboxes.environment import default_python_env
from swedojo.sandboxes.pool import SandboxPool
from swedojo.sandboxes.warm_runner import RUNNER_DIR, SOCKET_NAME, WarmRunner
from swedojo.schema import EvalStatus, TaskInstance

pytestmark = pytest.mark.docker

PYTHON_IMAGE = "swedojo/python:bookworm"
RUNNER = WarmRunner(python="python3")

LEAVE_BEHIND = r"""
nohup sleep 1000 >/dev/null 2>&1 &
setsid sh -c 'trap "" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 &
python3 -c 'import ctypes, os, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(4, 0)  # non-dumpable: its /proc entries belong to root
    time.sleep(1000)' &
mkdir -p /tmp/locked/deep && echo x > /tmp/locked/deep/f && chmod 000 /tmp/locked/deep /tmp/locked
echo hidden > /tmp/.hidden; echo rc > /tmp/.bashrc; echo shm > /dev/shm/segment
echo planted > /testbed/planted.py
ipcmk -M 4096 >/dev/null && ipcmk -S 2 >/dev/null && ipcmk -Q >/dev/null
python3 -c 'import ctypes; ctypes.CDLL(None).mq_open(b"/leftover", 0o100 | 0o2, 0o600, None)'
echo planted
"""

LOOK = r"""
for d in /proc/[0-9]*; do
  read -r _ comm _ < "$d/stat" 2>/dev/null && echo "process $(grep -m1 Uid: $d/status | cut -f2) $comm"
done
ls -A /tmp /dev/shm /dev/mqueue /testbed
ipcs | grep -E '^0x' || echo no-ipc
"""


@pytest.fixture
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(size=1) as pool:
        assert pool.wait_ready(PYTHON_IMAGE, 60, RUNNER)
        yield pool


def released_and_back(pool: SandboxPool, sandbox: DockerSandbox, *source: object) -> DockerSandbox:
    """Close `sandbox` and acquire (with `source`: repo and commit) until its container comes back from its reset."""
    container_id = sandbox.container_id
    sandbox.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        again = pool.acquire(PYTHON_IMAGE, *source, runner=RUNNER)
        if again.container_id == container_id:
            return again
        again.close()
    raise AssertionError("the released container never came back from its reset")


def test_nothing_a_sandbox_leaves_reaches_the_next_one(pool: SandboxPool) -> None:
    first = pool.acquire(PYTHON_IMAGE, runner=RUNNER)
    assert first.exec(LEAVE_BEHIND).output.strip().endswith("planted")
    planted = first.exec(LOOK).output
    for trace in ("sleep", "locked", ".hidden", "segment", "planted.py", "leftover"):
        assert trace in planted, planted
    assert "no-ipc" not in planted
    second = released_and_back(pool, first)
    seen = second.exec(LOOK).output
    processes = [tuple(line.split()[1:]) for line in seen.splitlines() if line.startswith("process ")]
    assert sorted(p for p in processes if p[0] == "0") == [("0", "(bash)"), ("0", "(docker-init)")], seen
    mine = [comm for uid, comm in processes if uid != "0"]
    assert mine.count("(python3)") == 1 and set(mine) <= {"(python3)", "(bash)", "(grep)", "(cut)"}, seen
    for trace in ("sleep", "locked", ".hidden", ".bashrc", "segment", "planted.py", "leftover", "0x"):
        assert trace not in seen, seen
    assert "no-ipc" in seen
    second.close()


def test_the_sandbox_user_cannot_touch_the_supervisor(pool: SandboxPool) -> None:
    sandbox = pool.acquire(PYTHON_IMAGE, runner=RUNNER)
    result = sandbox.exec("for p in 1 $(pgrep -u 0 -x bash); do kill -STOP $p; echo $?; done; cat /proc/1/environ; echo $?")
    assert result.output.splitlines().count("1") == 3, result.output
    assert "Permission denied" in result.output
    assert sandbox.exec("timeout 5 sleep 30").exit_code == 124, "the supervisor still answers"
    sandbox.close()


def test_a_killed_or_replaced_runner_is_started_again(pool: SandboxPool, tmp_path) -> None:
    repo = make_repo(tmp_path / "repo", {"tests/test_one.py": "def test_one():\n    assert True\n"})
    first = pool.acquire(PYTHON_IMAGE, repo, "HEAD", runner=RUNNER)
    served = first.exec("python3 -m pytest -q -p no:cacheprovider tests")
    assert served.ok and "1 passed" in served.output
    first.exec("pkill -KILL -f 'forkserver.py serve'; printf 'raise SystemExit(7)\\n' > /tmp/.swedojo-runner/forkserver.py")
    assert first.exec("python3 -m pytest -q -p no:cacheprovider tests").exit_code == 7, "the tampered client ran"
    second = released_and_back(pool, first, repo, "HEAD")
    again = second.exec("python3 -m pytest -q -p no:cacheprovider tests; pgrep -u 1000 -f 'forkserver.py serve' | wc -l")
    assert "1 passed" in again.output and again.output.split()[-1] == "1", again.output
    second.close()


def test_the_sandbox_user_cannot_change_the_kept_runner(pool: SandboxPool) -> None:
    sandbox = pool.acquire(PYTHON_IMAGE, runner=RUNNER)
    server = sandbox.exec("pgrep -f 'forkserver.py serve'").output.split()
    assert len(server) == 1
    attacks = (f"prlimit --pid {server[0]} --nofile=8:8", f"cat /proc/{server[0]}/environ",
               f"python3 -c 'open(\"/proc/{server[0]}/mem\", \"r+b\")'", "ulimit -n 512")
    results = [sandbox.exec(attack) for attack in attacks]
    assert [r.ok for r in results] == [False, False, False, True], [r.output for r in results]
    assert "Operation not permitted" in results[0].output and "Permission denied" in results[2].output
    sandbox.close()


def test_reuse_off_or_worn_out_removes_the_container() -> None:
    with SandboxPool(size=1, reuse=False) as pool:
        assert pool.wait_ready(PYTHON_IMAGE, 60)
        first = pool.acquire(PYTHON_IMAGE)
        first.close()
        seen = []
        for _ in range(3):
            with pool.acquire(PYTHON_IMAGE) as sandbox:
                seen.append(sandbox.container_id)
        assert first.container_id not in seen
    with SandboxPool(size=1, max_uses=2) as pool:
        assert pool.wait_ready(PYTHON_IMAGE, 60)
        ids = []
        for _ in range(6):
            sandbox = pool.acquire(PYTHON_IMAGE)
            ids.append(sandbox.container_id)
            sandbox.close()
        assert max(ids.count(i) for i in ids) <= 2, ids


SURVIVOR = r"""python3 -c 'import ctypes, threading, time
def plant():
    while True:
        try:
            with open("/testbed/pkg/mod.py", "w") as f: f.write("X = 2\n")
        except OSError: pass
        time.sleep(0.005)
threading.Thread(target=plant).start()
ctypes.CDLL(None).syscall(60, 0)' &
sleep 0.5; echo planted
"""
"""A process whose main thread left (SYS_exit) while another thread runs: its leader shows `Z`,
the thread keeps writing the fix of the task below into the work tree."""

SURVIVORS = r"""for d in /proc/[0-9]*; do
  read -r _ _ state _ < $d/stat 2>/dev/null; [ "$state" = Z ] || continue
  for t in $d/task/*; do read -r _ _ state _ < $t/stat 2>/dev/null; [ "$state" = Z ] || echo "survivor ${d#/proc/}"; done
done; echo checked"""
"""Lists processes whose leader is a zombie but some thread still runs."""


def test_a_thread_outliving_its_leader_cannot_change_a_later_grade(pool: SandboxPool, tmp_path) -> None:
    repo = make_repo(tmp_path / "repo", {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n", "README.md": "hi\n"})
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    test_patch = ("diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n--- /dev/null\n"
                  "+++ b/tests/test_x.py\n@@ -0,0 +1,4 @@\n+from pkg.mod import X\n+\n+def test_x():\n+    assert X == 2\n")
    unrelated = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hi\n+hello\n"
    task = TaskInstance(instance_id="survivor__1", repo="local/repo", base_commit=base, patch="", test_patch=test_patch,
                        problem_statement="X should be 2", FAIL_TO_PASS=["tests/test_x.py::test_x"], PASS_TO_PASS=[])
    env = default_python_env("local/repo", base, repo, "docker")
    first = pool.acquire(PYTHON_IMAGE, repo, base, runner=RUNNER)
    assert first.exec(SURVIVOR).output.strip().endswith("planted")
    assert first.exec("cat pkg/mod.py").output == "X = 2\n", "the survivor does not write"
    second = released_and_back(pool, first, repo, base)
    threads = second.exec(SURVIVORS)
    assert threads.output.strip() == "checked", threads.output
    report = grade_in_sandbox(second, env, task, unrelated)
    assert report.status == EvalStatus.UNRESOLVED, report
    assert second.exec("cat pkg/mod.py").output == "X = 1\n"
    second.close()


def test_what_a_sandbox_puts_in_the_runners_memo_stays_bounded_in_the_next(pool: SandboxPool) -> None:
    """The kept server's rewrite memo, filled with failed rewrites under long paths, never holds
    more than its bound: the next sandbox of the container gets its memory."""
    status = "cat /proc/$(pgrep -f 'forkserver.py serve')/status"
    first = pool.acquire(PYTHON_IMAGE, runner=RUNNER)
    before = peak_rss_mib(first.exec(status).output)
    flood = first.exec(f"python3 -c {shlex.quote(memo_flood(RUNNER_DIR, SOCKET_NAME))}", timeout=600)
    assert flood.output.strip() == "flooded", flood.output
    second = released_and_back(pool, first)
    grown = peak_rss_mib(second.exec(status).output) - before
    assert grown < MEMO_GROWTH_MIB, f"the kept server grew by {grown} MiB"
    second.close()
