"""A real Ray cluster on this machine for a test or a benchmark: a head and worker nodes on loopback.

Each node is `ray start --block` in a process group of its own; a node is killed as a lost machine
would be, every process of it at once: its group (raylet, GCS, agents) and every descendant of
its `ray start` (Ray's workers are in sessions of their own, with their sandboxes below them).
Nothing of the cluster outlives `close()`; `ray stop` is never used, it would stop every Ray on the machine.
Token authentication is off: the cluster listens on loopback only and lives for one test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

from background_job import AS_A_BACKGROUND_JOB

from swedojo.executors import local_ip_towards

RAY = Path(sys.executable).parent / "ray"

FAST_NODE_DEATH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                   "health_check_timeout_ms": 1000, "health_check_failure_threshold": 3}
"""A lost node is noticed in ~2 s rather than Ray's default of tens of seconds."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class RayCluster:
    """`with RayCluster() as cluster:` starts the head (`head_cpus`, 0: it runs no instance);
    `add_node` adds worker nodes; `address` is what `--address` takes."""

    def __init__(self, head_cpus: int = 1) -> None:
        # Short: Ray's unix sockets live under it, and a socket path has at most 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="swray-", dir="/tmp"))
        self.head_cpus = head_cpus
        self.address = f"127.0.0.1:{_free_port()}"
        self.nodes: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
        self._auth_mode = os.environ.get("RAY_AUTH_MODE")

    def __enter__(self) -> Self:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # for the drivers of this process, too
        try:
            self._start("head", self.head_cpus, "127.0.0.1", "--head", f"--port={self.address.split(':')[1]}",
                        "--include-dashboard=false", f"--dashboard-port={_free_port()}",
                        f"--system-config={json.dumps(FAST_NODE_DEATH)}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_node(self, name: str, cpus: int = 1, ip: str = "127.0.0.2", cores: set[int] | None = None,
                 sigint_ignored: bool = False) -> None:
        """A worker node named `name` (`ray start --node-name`), on its own loopback address so
        that a driver here never attaches to it (killing it must not kill the driver). `cores`: the
        CPU cores every process of the node (raylet, workers, their sandboxes) may run on, as on a
        machine of its own with that many cores; None: any core of this machine. `sigint_ignored`:
        started as `ray start &` in a non-interactive shell starts it, every process of the node with
        SIGINT ignored."""
        self._start(name, cpus, ip, f"--address={self.address}", cores=cores, sigint_ignored=sigint_ignored)

    def _start(self, name: str, cpus: int, ip: str, *args: str, cores: set[int] | None = None,
               sigint_ignored: bool = False) -> None:
        ports = {option: _free_port() for option in ("--node-manager-port", "--object-manager-port",
                                                      "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                                      "--runtime-env-agent-port", "--metrics-export-port")}
        command = [str(RAY), "start", "--block", f"--node-name={name}", f"--node-ip-address={ip}", f"--num-cpus={cpus}",
                   "--object-store-memory=80000000", f"--temp-dir={self.root}", "--disable-usage-stats",
                   *(f"{option}={port}" for option, port in ports.items()), *args]
        log = (self.root / f"{name}.log").open("w")
        if sigint_ignored:  # as a background job: the shell ignores SIGINT, and exec keeps it ignored
            command = [*AS_A_BACKGROUND_JOB, *command]
        if cores:  # taskset execs `ray start`: the node's process is still the one started here
            command = ["taskset", "--cpu-list", ",".join(map(str, sorted(cores))), *command]
        self.nodes[name] = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def wait_for(self, ray, alive: int, timeout_s: float = 120.0) -> None:
        """Until the cluster `ray` is connected to has `alive` live nodes (their CPUs registered)."""
        deadline = time.monotonic() + timeout_s
        while sum(node["Alive"] for node in ray.nodes()) < alive:
            for name, node in self.nodes.items():
                assert node.poll() is None, f"ray node {name} exited {node.returncode}:\n{self.log(name)[-3000:]}"
            assert time.monotonic() < deadline, f"fewer than {alive} live Ray nodes after {timeout_s:g}s"
            time.sleep(0.2)

    def connect(self, ray, timeout_s: float = 120.0) -> None:
        """`ray.init` this process to the cluster, once its head answers."""
        deadline = time.monotonic() + timeout_s
        while True:
            head = self.nodes["head"]
            assert head.poll() is None, f"ray head exited {head.returncode}:\n{self.log('head')[-3000:]}"
            try:
                ray.init(address=self.address, _node_ip_address=local_ip_towards(self.address), log_to_driver=False,
                         logging_level="WARNING")
                return
            except ConnectionError:
                assert time.monotonic() < deadline, f"no Ray head at {self.address} after {timeout_s:g}s"
                time.sleep(0.5)

    def kill(self, name: str) -> None:
        """Kill node `name` at once, every process of it (as a machine that is lost)."""
        node = self.nodes[name]
        tree = _descendants(node.pid)
        try:
            os.killpg(node.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        node.wait()

    def close(self) -> None:
        for name in list(self.nodes):
            self.kill(name)
        if self._auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = self._auth_mode
        shutil.rmtree(self.root, ignore_errors=True)
