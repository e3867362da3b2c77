"""`dojo`: the command line. Each subsystem keeps its commands in its own module; this file wires them."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from swedojo.schema import ALL_SCHEMAS

app = typer.Typer(no_args_is_help=True, add_completion=False, help="swedojo: SWE environments, agents, rewards and RL data.")
console = Console()


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


if __name__ == "__main__":
    app()
