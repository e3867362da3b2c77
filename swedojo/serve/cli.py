"""`dojo serve`: the rollout service on an HTTP port."""

from __future__ import annotations

from pathlib import Path

import typer

from swedojo.sandboxes.registry import backend as sandbox_backend
from swedojo.sandboxes.registry import names as sandbox_backends


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default: the API has no auth)."),
    port: int = typer.Option(8377, help="Port to listen on."),
    backend: str = typer.Option("local", help=f"Sandbox backend: {', '.join(sandbox_backends())}."),
    pool: int = typer.Option(0, help="Warm sandboxes kept ready per image (docker backend only; 0: off)."),
    max_concurrent: int = typer.Option(4, min=1, help="Samples rolled out at once, over all batches."),
    mirror: Path = typer.Option(None, help="Directory of local repos as owner/name[.git], for offline use."),
    out: Path = typer.Option(Path("runs") / "serve", help="Where each batch's trajectories are written."),
) -> None:
    """Serve RL rollouts over HTTP: POST /batches (suite, instances, group size, sampling, policy,
    weight version), then GET /batches/{id}/groups or /stream for finished groups with token
    records; POST /weights moves the weight version; DELETE /batches/{id} cancels. Schema: /openapi.json."""
    import uvicorn

    from swedojo.serve.app import create_app
    from swedojo.serve.service import RolloutService

    if backend not in sandbox_backends():
        raise typer.BadParameter(f"unknown backend {backend!r}; choose one of {', '.join(sandbox_backends())}",
                                 param_hint="--backend")
    warm = None
    if pool > 0 and sandbox_backend(backend).pooled:
        from swedojo.sandboxes.pool import SandboxPool

        warm = SandboxPool(pool)
    service = RolloutService(out, backend=backend, max_concurrent=max_concurrent, pool=warm, mirror=mirror)
    typer.echo(f"rollout service on http://{host}:{port} ({backend} sandboxes, {max_concurrent} at once) -> {out}")
    try:
        uvicorn.run(create_app(service), host=host, port=port, log_level="info")
    finally:
        service.close()
        if warm is not None:
            warm.close()
