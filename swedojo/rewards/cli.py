"""`dojo export`: run directories to trainer-ready JSONL / Parquet."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from swedojo.rundir import RunDir

console = Console(soft_wrap=True)  # one line per record, whatever the terminal width


class ExportFormat(str, Enum):
    """What `dojo export` writes."""

    MESSAGES = "messages"
    TOKENS = "tokens"


def export_command(
    run_dirs: list[Path] = typer.Argument(
        ..., help="Run directories of `dojo eval` or `dojo run`; several over one suite are several rollouts per task."
    ),
    fmt: ExportFormat = typer.Option(
        ..., "--format", help="messages (chat JSONL for SFT) or tokens (RL records, JSONL + Parquet)."
    ),
    out: Path = typer.Option(
        None, help="Output file (default RUN_DIR/<format>.jsonl); tokens also writes the .parquet beside it."
    ),
    std: bool = typer.Option(
        True, "--std/--no-std", help="Divide advantages by the group's reward std (GRPO) or not (Dr. GRPO)."
    ),
    drop_zero_variance: bool = typer.Option(False, help="Leave out groups whose rewards are all equal."),
) -> None:
    """Export trajectories with rewards for training. Exits 1 when any record was refused, 2 when the
    directories are not runs or cannot be exported together (scored with other reward settings)."""
    # Imported here so that pyarrow loads only for this command.
    from swedojo.rewards.advantages import AdvantageConfig
    from swedojo.rewards.export import RunDirError, export_messages, export_tokens

    out = out or RunDir(run_dirs[0]).export(fmt.value)
    try:
        if fmt == ExportFormat.TOKENS:
            config = AdvantageConfig(normalize_by_std=std, drop_zero_variance=drop_zero_variance)
            summary = export_tokens(run_dirs, out, config)
        else:
            summary = export_messages(run_dirs, out)
    except RunDirError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    for skipped in summary.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(str(skipped))}")
    if summary.dropped:
        console.print(f"[yellow]dropped[/yellow] {len(summary.dropped)} samples of zero-variance groups")
    for refused in summary.refused:
        console.print(f"[red]refused[/red] {escape(str(refused))}")
    console.print(f"wrote {summary.written} records: {escape('  '.join(str(f) for f in summary.files))}")
    if summary.refused:
        raise typer.Exit(1)


def mismatch_command(
    run_dir: Path = typer.Argument(..., help="A run directory (dojo eval --out, or dojo run --out)."),
    model: str = typer.Option("", help="The in-process model that sampled the run (default: the trajectories' model)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Training/inference mismatch: rollout logprobs vs one full forward pass, and IcePop's mask rate."""
    from swedojo.agent.backends import BackendError, load_backend
    from swedojo.rewards.mismatch import MismatchError, checkable, load_trajectories, mismatch_report

    try:
        trajectories = checkable(load_trajectories(run_dir))
        spec = model or trajectories[0].model
        backend = load_backend(spec)
        if not hasattr(backend, "model"):
            raise MismatchError(f"{spec}: not an in-process model; mismatch needs the weights")
        report = mismatch_report(trajectories, backend.model)
    except (MismatchError, BackendError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    typer.echo(f"{report.tokens} sampled tokens in {report.trajectories} trajectories")
    typer.echo(f"ratio p_train/p_infer: min {report.ratio_min:.6f} max {report.ratio_max:.6f}")
    typer.echo("quantiles: " + " ".join(f"{k}={v:.6f}" for k, v in report.quantiles.items()))
    typer.echo(f"max |dlogp| {report.max_abs_logprob_diff:.2e}; IcePop [0.5, 5] would mask {report.icepop_masked_fraction:.2%}")
