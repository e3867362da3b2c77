"""A rollout service on a free loopback port, and a JSON client for it."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import running

from swedojo.agent.backends.tiny import save_tiny
from swedojo.serve.app import RunningServer, serve_in_thread
from swedojo.serve.service import RolloutService

LIVENESS_S = 120.0
"""How long a wait for something the service must do may take before the test fails (not a speed check)."""


class Client:
    """The service's HTTP API, as a trainer calls it."""

    def __init__(self, server: RunningServer, service: RolloutService) -> None:
        self.url = server.url
        self.token = server.token
        self.service = service

    def request(self, method: str, path: str, body: dict | None = None, token: str | None = None) -> urllib.request.Request:
        """A call carrying the service's bearer token (`token`: another one; "": none)."""
        token = self.token if token is None else token
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        return urllib.request.Request(self.url + path, data=json.dumps(body).encode() if body is not None else None,
                                      method=method, headers=headers)

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        with urllib.request.urlopen(self.request(method, path, body), timeout=LIVENESS_S) as response:
            return json.load(response)

    def stream(self, batch_id: str) -> list[dict]:
        """Every group of the batch from the NDJSON stream, until it ends."""
        with urllib.request.urlopen(self.request("GET", f"/batches/{batch_id}/stream"), timeout=600) as response:
            return [json.loads(line) for line in response if line.strip()]

    def wait_for(self, batch_id: str, done, what: str) -> dict:
        """The batch's report once `done(report)` holds."""
        deadline = time.monotonic() + LIVENESS_S
        while not done(report := self.call("GET", f"/batches/{batch_id}")):
            assert time.monotonic() < deadline, f"the service never got to: {what} ({report})"
            time.sleep(0.05)
        return report


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """`serve(**service options)` -> a Client of a service answering on a free loopback port."""
    started: list[tuple[RunningServer, RolloutService]] = []

    def start(**options) -> Client:
        service = RolloutService(tmp_path / "served", **options)
        server = serve_in_thread(service)
        started.append((server, service))
        return Client(server, service)

    yield start
    for server, service in started:
        service.close()
        server.stop()


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GLM-5-architecture checkpoint: the policy the service loads and the trainer steps."""
    return save_tiny("glm_moe_dsa", tmp_path_factory.mktemp("tiny-glm"))


class Gate:
    """A command the scripted policy runs first (`sleep` of a unique length) that holds each sample
    in flight until the test releases it by killing the sleep: the test decides when samples finish."""

    def __init__(self, tag: int) -> None:
        self.argv = ["sleep", f"{tag}{os.getpid()}"]
        self.command = " ".join(self.argv)

    def wait(self, count: int) -> list[int]:
        """The pids of `count` samples held at the gate, once they are."""
        deadline = time.monotonic() + LIVENESS_S
        while len(pids := running(self.argv)) < count:
            assert time.monotonic() < deadline, f"{len(pids)} samples reached the gate, expected {count}"
            time.sleep(0.05)
        return pids

    def release(self, count: int) -> None:
        """Let `count` held samples go on; returns once their sleeps are gone, so a later `wait` or
        `release` never counts a killed one that has not exited yet."""
        killed = self.wait(count)[:count]
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + LIVENESS_S
        while set(killed) & set(running(self.argv)):
            assert time.monotonic() < deadline, f"killed sleeps {killed} never exited"
            time.sleep(0.05)

    def gone(self) -> bool:
        """No sample is held (a liveness bound for the kills of a cancelled batch's sandboxes)."""
        deadline = time.monotonic() + LIVENESS_S
        while running(self.argv) and time.monotonic() < deadline:
            time.sleep(0.05)
        return running(self.argv) == []
