"""The fork server's assertion-rewrite memo stays within its bound whatever a sandbox sends it.

The server runs here on the host with this interpreter's pytest; the docker test of the same
bound across a pool reset is in test_reuse.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import MEMO_GROWTH_MIB, memo_flood, peak_rss_mib

from swedojo.sandboxes import forkserver


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A fork server of pytest on the host: (socket name, pid)."""
    name = str(tmp_path / "socket")
    proc = subprocess.Popen([sys.executable, forkserver.__file__, "serve", name, "pytest"])
    try:
        for _ in range(600):
            if Path(name + ".pid").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert Path(name + ".pid").exists(), "the server never listened"
        yield name, proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_failed_rewrites_under_long_paths_do_not_grow_the_memo_without_bound(server: tuple[str, int]) -> None:
    name, pid = server
    before = peak_rss_mib(Path(f"/proc/{pid}/status").read_text())
    flood = memo_flood(str(Path(forkserver.__file__).parent), name)
    done = subprocess.run([sys.executable, "-c", flood], capture_output=True, text=True, timeout=600, check=False)
    assert done.stdout.strip() == "flooded", done.stderr[-2000:]
    grown = peak_rss_mib(Path(f"/proc/{pid}/status").read_text()) - before
    assert grown < MEMO_GROWTH_MIB, f"the server grew by {grown} MiB"
