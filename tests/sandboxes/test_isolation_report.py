"""`dojo sandbox info`: what confines a sandbox of each backend on this machine, and what is missing here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, env_without

from swedojo.sandboxes.base import Isolation
from swedojo.sandboxes.hostnet import nat_problem
from swedojo.sandboxes.local import bubblewrap_problem

DOJO = str(Path(sys.executable).with_name("dojo"))
THIS_CHECKOUT = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def info(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([DOJO, "sandbox", "info", *args], env={**(env or os.environ), **THIS_CHECKOUT},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def missing_lines(report: str) -> list[str]:
    return [line.removeprefix("  - ") for line in report.partition("\nmissing:\n")[2].splitlines()]


@pytest.mark.parametrize("name", BACKENDS)
def test_the_report_lists_what_is_enforced_and_what_is_missing(name: str) -> None:
    iso = Isolation.model_validate_json(info("--backend", name, "--json"))
    report = info("--backend", name)
    assert iso.backend == name and iso.uid != 0 and not iso.network
    assert report.startswith(f"{name} sandbox isolation on this machine\nin force:\n"), report
    for limit in ("memory", "pids"):  # bounded for all processes together, or said plainly that they are not
        assert limit in iso.cgroup or any("cgroup" in line and limit in line for line in iso.missing), iso
    if iso.cgroup:
        assert "  cgroup limits: " in report
    assert missing_lines(report) == (iso.missing or ["nothing"])
    # the CPU share and the work tree's size: bounded as a whole, or said plainly that they are not
    assert "cpu" in iso.cgroup or any("CPU time is limited per process" in line for line in iso.missing), iso
    assert any(place.startswith("work tree") for place in iso.disk_mb) or any(
        "work tree's total size is not capped" in line for line in iso.missing), iso
    if name == "local" and bubblewrap_problem() is None:
        assert set(iso.namespaces) == {"mount", "pid", "ipc", "uts", "net"} and iso.read_only_root and iso.seccomp
        assert iso.rlimits["nproc"] > 0 and "  namespaces: mount, pid, ipc, uts, net\n" in report
    opened = Isolation.model_validate_json(info("--backend", name, "--network", "--json"))
    assert opened.network and ("net" in opened.namespaces) == bool(opened.network_via), opened
    through = f"through {opened.network_via}" if opened.network_via else "in the host's network namespace"
    assert f"  network: on, {through}\n" in info("--backend", name, "--network")
    if name == "local" and bubblewrap_problem() is None and nat_problem() is None:
        assert opened.network_via.startswith("user-mode NAT (slirp4netns)")
        assert not any("network" in line for line in opened.missing), opened.missing
    if name == "docker":
        assert any("the bridge's gateway is the host" in line for line in opened.missing), opened.missing


@pytest.mark.skipif(os.geteuid() != 0 or bubblewrap_problem() is not None,
                    reason="without root or bubblewrap the network on is the host's for other reasons, said otherwise")
def test_a_host_without_slirp4netns_is_told_plainly(tmp_path: Path) -> None:
    report = info("--backend", "local", "--network", env=env_without(tmp_path, "slirp4netns"))
    said = [line for line in missing_lines(report) if line.startswith("network on: commands share the host's network")]
    assert len(said) == 1 and "slirp4netns not installed" in said[0], report
    assert "  namespaces: mount, pid, ipc, uts\n" in report and "  network: on, in the host's network namespace\n" in report


@pytest.mark.skipif(os.geteuid() != 0, reason="without bubblewrap a root harness still runs sandboxes as a uid of their own")
def test_a_host_without_bubblewrap_is_told_plainly(tmp_path: Path) -> None:
    report = info("--backend", "local", env=env_without(tmp_path, "bwrap"))
    assert "bubblewrap (bwrap) is not installed: no namespaces" in "\n".join(missing_lines(report)), report
    assert "namespaces:" not in report and "read-only root" not in report
    assert "  seccomp syscall filter\n" in report, "what remains is still listed"


def test_a_host_without_a_usable_cgroup_is_told_plainly() -> None:
    report = info("--backend", "local", env={**os.environ, "SWEDOJO_CGROUP_ROOT": "/nonexistent"})
    assert "cgroup limits:" not in report
    assert any(line.startswith("no cgroup (") and "limited per process" in line for line in missing_lines(report)), report
