"""`dojo sandbox`: run commands in the same hardened sandbox the agent gets, to debug an environment."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from swedojo.repos import CommitNotFoundError, RepoNotFoundError, resolve_repo
from swedojo.sandboxes import (
    Sandbox,
    SandboxConfig,
    SandboxError,
    open_sandbox,
)
from swedojo.sandboxes.base import Isolation
from swedojo.sandboxes.environment import prepare
from swedojo.sandboxes.registry import UnknownBackendError, names
from swedojo.sandboxes.registry import backend as backend_class
from swedojo.schema import EnvSpec

if TYPE_CHECKING:
    from swedojo.sandboxes.image_disk import PruneResult

sandbox_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Run commands in a hardened sandbox.",
)

CommandArg = typer.Argument(
    ..., help="The command, after `--`, run by bash in the work tree: one word is a command line as "
    "bash reads it (`-- 'make && make test'`), several are the program and its arguments, each passed as it is "
    "(`-- sh -c \"grep -q 'a b' f\"`)."
)
BackendOpt = typer.Option(
    "",
    "--backend",
    help=f"Sandbox backend: {', '.join(names())} (default: the EnvSpec's, else local).",
)
ImageOpt = typer.Option("", "--image", help="Docker image (docker backend).")
EnvOpt = typer.Option(
    None, "--env", help="EnvSpec JSON file: image, workdir, env vars, repo and commit."
)
RepoOpt = typer.Option(
    "", "--repo", help="Repository (path or URL) to check out into the work tree (local backend, default: the "
    "repository of the current directory)."
)
CommitOpt = typer.Option(
    "", "--commit", help="Commit to check out (default: the EnvSpec's, else HEAD)."
)
NetworkOpt = typer.Option(False, "--network", help="Allow network access from inside.")
TimeoutOpt = typer.Option(120.0, "--timeout", help="Per-command timeout in seconds.")


def _open(
    backend: str,
    image: str,
    env: Path | None,
    repo: str,
    commit: str,
    network: bool,
    timeout: float,
) -> Sandbox:
    """Open the sandbox the options describe; exit with a one-line error when that fails."""
    workdir = "/testbed"
    env_vars: dict[str, str] = {}
    try:
        if env is not None:
            spec = EnvSpec.model_validate_json(env.read_text())
            backend, image, workdir, env_vars = (
                backend or spec.backend,
                image or spec.image,
                spec.workdir or workdir,
                spec.env_vars,
            )
            repo, commit = repo or spec.repo, commit or spec.commit
        backend = backend or "local"
        if backend == "local" and not repo:  # its work tree is always a checkout: of the repository here
            repo = _current_repository()
        source = resolve_repo(repo) if repo else None
        config = SandboxConfig(network=network, command_timeout_s=timeout, env=env_vars)
        sandbox = open_sandbox(
            backend,
            image=image,
            source=source,
            commit=(commit or "HEAD") if source else None,
            config=config,
            workdir=workdir,
        )
        if env is not None and source is not None:
            try:
                prepare(sandbox, spec)  # the repo layer, as every agent and grader sandbox gets it
            except BaseException:
                sandbox.close()
                raise
        return sandbox
    except (
        OSError,
        ValueError,
        SandboxError,
        RepoNotFoundError,
        CommitNotFoundError,
    ) as exc:
        typer.echo(f"error: {inert(str(exc))}", err=True)
        raise typer.Exit(2) from None


def _current_repository() -> str:
    """The top of the git work tree the command runs in (the local backend checks out its HEAD)."""
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise ValueError("the local backend checks out a repository into its work tree: give --repo PATH-or-URL "
                         "or --env ENVSPEC, or run the command inside a git repository")
    return found.stdout.strip()


def command_line(words: list[str]) -> str:
    """What bash runs for the words after `--`: one word is a command line already; several are an
    argv, each quoted, so `sh -c "grep -q 'a b' f"` reaches sh as three arguments."""
    return words[0] if len(words) == 1 else shlex.join(words)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Every C0 control but newline and tab, DEL, and the C1 controls (U+009B is a CSI too)."""


def inert(text: str) -> str:
    """Text from a sandbox as the operator's terminal may show it: control characters written as
    `\\xNN`, so no escape sequence (window title, clipboard, cursor, colours) or bell reaches it;
    printable text, newlines and tabs as they are."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", text)


def _show(output: str) -> None:
    output = inert(output)
    typer.echo(output, nl=bool(output) and not output.endswith("\n"))


@sandbox_app.command("exec")
def exec_command(
    command: list[str] = CommandArg,
    backend: str = BackendOpt,
    image: str = ImageOpt,
    env: Path | None = EnvOpt,
    repo: str = RepoOpt,
    commit: str = CommitOpt,
    network: bool = NetworkOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Run one command in a fresh sandbox; its output is printed and its exit code returned (124: timed out)."""
    with _open(backend, image, env, repo, commit, network, timeout) as sandbox:
        result = sandbox.exec(command_line(command))
    _show(result.output)
    raise typer.Exit(124 if result.timed_out else result.exit_code or 0)


@sandbox_app.command("shell")
def shell_command(
    backend: str = BackendOpt,
    image: str = ImageOpt,
    env: Path | None = EnvOpt,
    repo: str = RepoOpt,
    commit: str = CommitOpt,
    network: bool = NetworkOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """An interactive loop over one persistent sandbox terminal (cwd and env persist); Ctrl-D leaves."""
    with _open(backend, image, env, repo, commit, network, timeout) as sandbox:
        typer.echo(
            f"{type(sandbox).__name__}, work tree {sandbox.workdir}; Ctrl-D leaves", err=True
        )
        while True:
            try:
                line = input("$ ")
            except EOFError:
                break
            if not line.strip():
                continue
            result = sandbox.exec(line)
            _show(result.output)
            if not result.ok:
                typer.echo(
                    "[timed out]" if result.timed_out else f"[exit {result.exit_code}]",
                    err=True,
                )


def _report(iso: Isolation) -> str:
    """The isolation report in plain words: what is in force, then what is missing here."""
    enforced = [
        f"namespaces: {', '.join(iso.namespaces)}" if iso.namespaces else "",
        "read-only root file system (but the work tree and a private /tmp)" if iso.read_only_root else "",
        "seccomp syscall filter" if iso.seccomp else "",
        f"uid {iso.uid}" + (", no capabilities" if iso.uid else " (root)"),
        ("network: off" if not iso.network else f"network: on, through {iso.network_via}" if iso.network_via
         else "network: on, in the host's network namespace"),
        f"host Unix sockets covered: {', '.join(iso.masked_sockets)}" if iso.masked_sockets else "",
        f"per-process limits: {', '.join(f'{k}={v}' for k, v in iso.rlimits.items())}" if iso.rlimits else "",
        f"cgroup limits: {', '.join(f'{k}={v}' for k, v in iso.cgroup.items())}" if iso.cgroup else "",
        f"size caps: {', '.join(f'{k}={v} MiB' for k, v in iso.disk_mb.items())}" if iso.disk_mb else "",
    ]
    lines = [f"{iso.backend} sandbox isolation on this machine", "in force:"]
    lines += [f"  {line}" for line in enforced if line]
    if iso.visible:  # a whitelist: what is not listed is not there
        lines += ["  visible file system (nothing else of the host's):"]
        lines += [f"    {path}: {what}" for path, what in iso.visible.items()]
    lines += ["missing:"] + [f"  - {line}" for line in iso.missing or ["nothing"]]
    return "\n".join(lines)


@sandbox_app.command("info")
def info_command(
    backend: str = typer.Option("local", "--backend", help=f"Sandbox backend: {', '.join(names())}."),
    network: bool = NetworkOpt,
    as_json: bool = typer.Option(False, "--json", help="The report as JSON (an `Isolation`)."),
) -> None:
    """What confines a sandbox on this machine (namespaces, seccomp, limits, network) and what is missing here."""
    try:
        iso = backend_class(backend).isolation_for(SandboxConfig(network=network))
    except (UnknownBackendError, SandboxError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(iso.model_dump_json(indent=2) if as_json else _report(iso))


@sandbox_app.command("prune")
def prune_command(
    everything: bool = typer.Option(
        False, "--all", help="Remove every labelled container, not only orphans."
    ),
    unused_days: float = typer.Option(
        None, "--unused-days", min=0, help="Also remove the layer images (runtime, deps, env) unused for this many days."
    ),
    budget_gb: float = typer.Option(
        None, "--budget-gb", min=0, help="Also remove layer images, least recently used first, until the engine's "
        "image layers fit this many GB (never one a running job holds).",
    ),
) -> None:
    """Remove leftover sandbox containers (whose owning process is gone; every docker run does this as it
    starts), with --unused-days the layer images no run has used for that long, and with --budget-gb
    the least recently used ones until the images fit."""
    from swedojo.sandboxes.docker import prune

    try:
        removed = prune(everything)
        images: list[tuple[str, PruneResult]] = []
        if unused_days is not None:
            from swedojo.sandboxes.image_disk import prune_unused

            images.append((f"unused for {unused_days:g} days", prune_unused(unused_days)))
        if budget_gb is not None:
            from swedojo.sandboxes.image_disk import prune_to_budget

            images.append((f"to fit {budget_gb:g} GB", prune_to_budget(budget_gb * 1024)))
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"removed {len(removed)} sandbox container(s)")
    for why_removed, result in images:
        for tag, why in result.kept.items():
            typer.echo(f"kept {tag}: {why}")
        typer.echo(f"removed {len(result.removed)} image tag(s) {why_removed}"
                   + "".join(f"\n  {tag}" for tag in result.removed))


@sandbox_app.command("images")
def images_command(
    as_json: bool = typer.Option(False, "--json", help="The report as JSON (a `DiskUse`, or with --by-repo a list of `RepositoryUse`)."),
    by_repo: bool = typer.Option(False, "--by-repo", help="Per repository: its environments and the dependency layers they share."),
) -> None:
    """Disk use of swedojo's docker images, largest first, with when each was last used (or per repository)."""
    from swedojo.sandboxes.image_disk import by_repository, disk_use

    try:
        use = disk_use()
        repositories = by_repository(use) if by_repo else []
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if by_repo:
        if as_json:
            typer.echo(json.dumps([r.model_dump() for r in repositories], indent=2))
            return
        typer.echo(f"{'envs':>5} {'envs MB':>8} {'deps MB':>8}  repository (dependency layers)")
        for repo in repositories:
            typer.echo(f"{repo.environments:5d} {repo.environments_mb:8.0f} {repo.dependency_mb:8.0f}  "
                       f"{repo.repository} ({len(repo.dependency_layers)})")
        typer.echo("envs MB: what the environments add over their dependency layers (unique sizes); deps MB: what "
                   "their dependency layers add over the runtime, shared by the commits that use each")
        return
    if as_json:
        typer.echo(use.model_dump_json(indent=2))
        return
    typer.echo(f"{'size MB':>9} {'unique MB':>9}  {'last used':<16}  tags")
    for image in use.images:
        used = f"{image.last_used:%Y-%m-%d %H:%M}" if image.last_used else "never recorded"
        typer.echo(f"{image.size_mb:9.0f} {image.unique_mb:9.0f}  {used:<16}  {', '.join(image.tags)}")
    typer.echo(f"{len(use.images)} swedojo image(s); unique: what removing it alone frees (the rest is shared "
               f"with images built on it or under it); all image layers of the engine: {use.engine_layers_mb:.0f} MB")
