"""`dojo`: the command line. Each subsystem keeps its commands in its own module; this file wires them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from swedojo.schema import ALL_SCHEMAS
from swedojo.tools.cli import tools_command

app = typer.Typer(no_args_is_help=True, add_completion=False, help="swedojo: SWE environments, agents, rewards and RL data.")
console = Console()
app.command("tools")(tools_command)


@app.callback()
def main() -> None:
    """swedojo: SWE environments, agents, rewards and RL data."""


@app.command()
def schema(name: str = typer.Argument("", help="One model name; all when empty.")) -> None:
    """Print the JSON Schemas of the contracts (TaskInstance, EnvSpec, Trajectory, ...)."""
    if name and name not in ALL_SCHEMAS:
        raise typer.BadParameter(f"unknown schema {name!r}; known: {', '.join(ALL_SCHEMAS)}")
    models = {name: ALL_SCHEMAS[name]} if name else ALL_SCHEMAS
    typer.echo(json.dumps({k: m.model_json_schema() for k, m in models.items()}, indent=2))


def _default_run_dir() -> Path:
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


def _print_summary(summary, out: Path) -> None:
    table = Table(title=f"{summary.suite} · policy {summary.policy}")
    table.add_column("status")
    table.add_column("instances", justify="right")
    for status, count in summary.counts.items():
        if count:
            table.add_row(status, str(count))
    table.add_row("[bold]resolved[/bold]", f"[bold]{summary.resolved}/{summary.total} ({summary.resolved_rate:.0%})[/bold]")
    console.print(table)
    console.print(f"results: {out}/results.jsonl  summary: {out}/summary.json  preds: {out}/preds.json")


@app.command("eval")
def eval_command(
    suite: str = typer.Option(..., help="A registered suite name (e.g. demo) or a .jsonl/.json/.parquet file."),
    policy: str = typer.Option("gold", help="gold, empty, model or replay."),
    out: Path = typer.Option(None, help="Run directory (default runs/<timestamp>); an existing one is resumed."),
    backend: str = typer.Option("local", help="Sandbox backend: local or docker."),
    mirror: Path = typer.Option(None, help="Directory of local repos as owner/name[.git], for offline use."),
    workers: int = typer.Option(1, help="Instances evaluated at once."),
    instance: list[str] = typer.Option(None, help="Only these instance ids (repeatable)."),
) -> None:
    """Evaluate a policy on a bench suite: per-instance results, summary, sb-cli predictions."""
    from swedojo.agent.policies import make_policy
    from swedojo.datasets.io import SuiteFormatError
    from swedojo.datasets.registry import load_suite
    from swedojo.evaluate import evaluate
    from swedojo.rollout import EnvironmentResolver

    try:
        make_policy(policy)
        loaded_suite = load_suite(suite, mirror)
    except (SuiteFormatError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    instances = loaded_suite.loaded.instances
    if instance:
        instances = [i for i in instances if i.instance_id in set(instance)]
    for err in loaded_suite.loaded.errors:
        console.print(f"[yellow]skipped record[/yellow] {err}")
    out = out or _default_run_dir()
    console.print(f"evaluating {len(instances)} instances of {suite} with policy {policy} on the {backend} backend -> {out}")

    def show(result) -> None:
        mark = "[green]resolved[/green]" if result.resolved else f"[red]{result.status.value}[/red]"
        why = f"  {result.error}" if result.error else ""
        console.print(f"  {result.instance_id}: {mark} ({result.duration_s:.1f}s){why}")

    resolver = EnvironmentResolver(backend=backend, mirror=loaded_suite.mirror)
    summary = evaluate(instances, lambda: make_policy(policy), resolver, out, suite, loaded_suite.loaded.errors, workers, show)
    _print_summary(summary, out)


@app.command()
def demo(out: Path = typer.Option(None, help="Run directory (default runs/demo-<timestamp>).")) -> None:
    """The main job on the embedded defaults: evaluate the bundled demo suite, gold and empty."""
    from swedojo.agent.policies import make_policy
    from swedojo.datasets.registry import load_suite
    from swedojo.evaluate import evaluate
    from swedojo.rollout import EnvironmentResolver

    root = out or Path("runs") / f"demo-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    console.rule("swedojo demo")
    console.print("1. materialising the bundled demo suite as git repositories with history ...")
    suite = load_suite("demo")
    repos = sorted({i.repo for i in suite.loaded.instances})
    console.print(f"   {len(suite.loaded.instances)} tasks over {len(repos)} repos ({', '.join(repos)}) in {suite.mirror}")
    resolver = EnvironmentResolver(backend="local", mirror=suite.mirror)
    for step, name in ((2, "gold"), (3, "empty")):
        what = "applies each task's reference fix" if name == "gold" else "submits no change"
        console.print(f"{step}. policy [bold]{name}[/bold] {what}; each patch is graded in a fresh local sandbox")
        summary = evaluate(suite.loaded.instances, lambda: make_policy(name), resolver, root / name, "demo")
        _print_summary(summary, root / name)
    console.print(f"done: gold should resolve every task and empty none. Everything is under {root}")


if __name__ == "__main__":
    app()
