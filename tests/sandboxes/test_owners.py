"""Owner tokens survive pid reuse, and `reap_local` removes what a gone owner left, never a live one's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from swedojo.sandboxes.cgroup import ROOT
from swedojo.sandboxes.owners import gone, reap_local, this_process


def _dead_token() -> str:
    """The token of a real process, taken while it ran; it has ended since."""
    proc = subprocess.Popen(["sleep", "60"])
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    token = f"{this_process().split('-')[0]}-{proc.pid}-{stat[stat.rfind(')') + 2:].split()[19]}"
    proc.kill()
    proc.wait()
    return token


def test_a_live_owner_is_not_gone_and_an_ended_or_reused_pid_is() -> None:
    mine = this_process()
    assert not gone(mine)
    assert gone(_dead_token())
    boot, pid, start = mine.split("-")
    assert gone(f"{boot}-{pid}-{int(start) + 1}")  # the same pid, another process
    assert gone(f"{'0' * 8 if boot != '0' * 8 else '1' * 8}-{pid}-{start}")  # another boot
    assert not gone("1234") and not gone("")  # what it cannot read, it never judges gone


@pytest.mark.skipif(os.getuid() != 0 or not (ROOT / "pids" / "cgroup.procs").is_file(),
                    reason="mounting a tmpfs and making a v1 pids cgroup need root and that hierarchy")
def test_reap_local_removes_a_gone_owners_work_tree_and_cgroup_and_keeps_a_live_ones(tmp_path: Path) -> None:
    dead, live = _dead_token(), this_process()
    trees = {who: tmp_path / f"swedojo-local-{who}-abc" for who in (dead, live)}
    groups = {who: ROOT / "pids" / f"swedojo-{who}-test{os.getpid()}" for who in (dead, live)}
    sleeper = None
    try:
        for who in (dead, live):
            (trees[who] / "repo").mkdir(parents=True)
            subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(trees[who] / "repo")], check=True)
            groups[who].mkdir()
        # a process the killed run left in its cgroup
        sleeper = subprocess.Popen(["sh", "-c", f'echo $$ > {groups[dead] / "cgroup.procs"} && exec sleep 600'])
        while str(sleeper.pid) not in (groups[dead] / "cgroup.procs").read_text().split():
            assert sleeper.poll() is None
        reaped = reap_local(tmp_path, [ROOT / "pids"])
        assert sorted(reaped) == sorted([str(groups[dead]), str(trees[dead])])
        assert sleeper.wait(timeout=30) == -9
        assert not groups[dead].exists() and not trees[dead].exists()
        assert groups[live].is_dir() and os.path.ismount(trees[live] / "repo")
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
        for who in (dead, live):
            if os.path.ismount(trees[who] / "repo"):
                subprocess.run(["umount", str(trees[who] / "repo")], check=False)
            if groups[who].exists():
                groups[who].rmdir()
