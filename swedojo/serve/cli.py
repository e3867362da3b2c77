"""`dojo serve`: the rollout service on an HTTP port."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import typer

from swedojo.errors import BadInputError
from swedojo.sandboxes.registry import backend as sandbox_backend
from swedojo.sandboxes.registry import names as sandbox_backends


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8377, help="Port to listen on."),
    backend: str = typer.Option("local", help=f"Sandbox backend: {', '.join(sandbox_backends())}."),
    pool: int = typer.Option(0, help="Warm sandboxes kept ready per image (docker backend only; 0: off)."),
    max_concurrent: int = typer.Option(4, min=1, help="Samples rolled out at once, over all batches."),
    mirror: Path = typer.Option(None, help="Directory of local repos as owner/name[.git], for offline use."),
    out: Path = typer.Option(Path("runs") / "serve", help="Where each batch's trajectories are written."),
    token_env: str = typer.Option("SWEDOJO_SERVE_TOKEN", help="Variable holding the bearer token every call must "
                                  "carry; unset or empty: a fresh token is made and printed."),
    endpoint: list[str] = typer.Option([], help="A model server a batch may name (http(s)://host/v1[#model], or a provider's model such as openai/gpt-4o); repeat."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Variable whose value is the endpoints' API key."),
    max_group_size: int = typer.Option(64, min=1, help="Largest group a batch may ask for."),
    max_batch_samples: int = typer.Option(1024, min=1, help="Most samples one batch may ask for."),
    max_queued_samples: int = typer.Option(4096, min=1, help="Most unfinished samples over all batches."),
    executor: str = typer.Option("local", help="Where samples run: local (threads here) or ray (a task each on a "
                                 "Ray cluster's nodes; the model must be an --endpoint)."),
    address: str | None = typer.Option(None, help="With --executor ray: the cluster's address (default: a Ray "
                                       "started here with --max-concurrent CPUs)."),
) -> None:
    """Serve RL rollouts over HTTP: POST /batches (suite, instances, group size, sampling, policy,
    weight version), then GET /batches/{id}/groups or /stream for finished groups with token
    records; POST /weights moves the weight version; DELETE /batches/{id} cancels. Schema: /openapi.json."""
    import uvicorn

    from swedojo.executors import RaySession
    from swedojo.serve.app import create_app
    from swedojo.serve.service import RolloutService, ServiceLimits

    if backend not in sandbox_backends():
        raise typer.BadParameter(f"unknown backend {backend!r}; choose one of {', '.join(sandbox_backends())}",
                                 param_hint="--backend")
    warm = None
    if pool > 0 and sandbox_backend(backend).pooled:
        from swedojo.sandboxes.pool import SandboxPool

        warm = SandboxPool(pool)
    if executor not in ("local", "ray") or (address and executor != "ray"):
        raise BadInputError(f"--executor {executor!r}{' --address' if address else ''}: choose local, or ray "
                            "(with --address for a cluster of your own)")
    limits = ServiceLimits(endpoints=endpoint, api_key_env=api_key_env, max_group_size=max_group_size,
                           max_batch_samples=max_batch_samples, max_queued_samples=max_queued_samples)
    cluster = RaySession(address, max_concurrent) if executor == "ray" else None
    service = RolloutService(out, backend=backend, max_concurrent=max_concurrent, pool=warm, mirror=mirror, limits=limits,
                             ray=cluster)
    token = os.environ.get(token_env) or secrets.token_urlsafe(24)
    typer.echo(f"rollout service on http://{host}:{port} ({backend} sandboxes, {max_concurrent} at once"
               f"{' on Ray ' + (address or 'started here') if cluster else ''}) -> {out}")
    typer.echo(f"calls must carry: Authorization: Bearer {token}" if not os.environ.get(token_env)
               else f"calls must carry the bearer token in ${token_env}")
    try:
        uvicorn.run(create_app(service, token), host=host, port=port, log_level="info")
    finally:
        service.close()
        if warm is not None:
            warm.close()
        if cluster is not None:
            cluster.close()
