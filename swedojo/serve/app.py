"""The rollout service's HTTP API (FastAPI): submit batches, poll or stream finished groups, cancel,
update the weight version. The schema is at `/openapi.json`, the interactive docs at `/docs`.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Query, status
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from swedojo.serve.api import (
    BatchCreated,
    BatchReport,
    BatchRequest,
    GroupPage,
    WeightVersion,
)
from swedojo.serve.service import (
    BadBatchError,
    RolloutService,
    UnknownBatchError,
    VersionRegressionError,
)

STREAM_POLL_S = 15.0
"""How long the stream waits for a group before it checks the batch again."""


def create_app(service: RolloutService, token: str) -> FastAPI:
    """The API over `service`; every call must carry `Authorization: Bearer <token>`."""
    bearer = HTTPBearer(auto_error=False)

    def authorized(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a bearer token is required (the one `dojo serve` printed "
                                "or was given)", headers={"WWW-Authenticate": "Bearer"})

    app = FastAPI(title="swedojo rollout service", version="1", dependencies=[Depends(authorized)],
                  description="RL rollouts on SWE tasks for a trainer: batches of groups in, token records out. "
                              "Every call carries `Authorization: Bearer <token>`.")

    def batch_or_404(call, *args):
        try:
            return call(*args)
        except UnknownBatchError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc

    @app.post("/batches", status_code=status.HTTP_201_CREATED)
    def submit(request: BatchRequest) -> BatchCreated:
        """Roll out `group_size` samples of every instance; finished groups come from /groups or /stream."""
        try:
            return service.submit(request)
        except BadBatchError as exc:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from exc

    @app.get("/batches/{batch_id}")
    def report(batch_id: str) -> BatchReport:
        """Counts so far: groups done and dropped, samples refilled, infra failures, stale drops."""
        return batch_or_404(service.report, batch_id)

    @app.get("/batches/{batch_id}/groups")
    def groups(batch_id: str, cursor: int = Query(0, ge=0),
               wait: float = Query(0.0, ge=0.0, le=300.0, description="Seconds to wait for a group (long poll).")) -> GroupPage:
        """Groups finished after `cursor`, in order; `next_cursor` continues."""
        return batch_or_404(service.groups, batch_id, cursor, wait)

    @app.get("/batches/{batch_id}/stream", response_class=StreamingResponse,
             responses={200: {"content": {"application/x-ndjson": {}},
                              "description": "One GroupOut JSON object per line, as each group finishes."}})
    def stream(batch_id: str) -> StreamingResponse:
        """Finished groups as NDJSON, one per line, until the batch finishes or is cancelled."""
        batch_or_404(service.report, batch_id)

        def lines() -> Iterator[str]:
            cursor = 0
            while True:
                page = service.groups(batch_id, cursor, STREAM_POLL_S)
                for group in page.groups:
                    yield group.model_dump_json() + "\n"
                cursor = page.next_cursor
                if page.done:
                    return

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.delete("/batches/{batch_id}")
    def cancel(batch_id: str) -> BatchReport:
        """Cancel the batch: its sandboxes are stopped and none of its samples is reported afterwards."""
        return batch_or_404(service.cancel, batch_id)

    @app.get("/weights")
    def weights() -> WeightVersion:
        """The current weight version."""
        return WeightVersion(version=service.version)

    @app.post("/weights")
    def update_weights(update: WeightVersion) -> WeightVersion:
        """The trainer's weights moved on: samples started from now on record this version."""
        try:
            return WeightVersion(version=service.set_version(update.version))
        except VersionRegressionError as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc

    return app


@dataclass
class RunningServer:
    """A service answering on a loopback port in a thread of this process (tests, notebooks)."""

    server: uvicorn.Server
    thread: threading.Thread
    url: str
    token: str
    """The bearer token every call must carry."""

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join()


class ServerStartError(RuntimeError):
    """uvicorn did not start listening."""


def serve_in_thread(service: RolloutService, host: str = "127.0.0.1", port: int = 0,
                    start_timeout_s: float = 30.0, token: str = "") -> RunningServer:
    """Serve `service` on `host:port` (0: a free port) in a daemon thread; returns once it listens.
    `token`: the bearer token calls must carry (default: a fresh one, in the answer)."""
    token = token or secrets.token_urlsafe(24)
    server = uvicorn.Server(uvicorn.Config(create_app(service, token), host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="swedojo-serve-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ServerStartError(f"the rollout service did not start listening on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    return RunningServer(server=server, thread=thread, url=f"http://{bound[0]}:{bound[1]}", token=token)
