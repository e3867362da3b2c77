"""`dojo tools`: the tools of a tool set as the model sees them, with their fingerprints."""

from __future__ import annotations

import json

import typer

from swedojo.tools.formats import FORMATS, get_format
from swedojo.tools.registry import ToolSetConfig


def tools_command(
    set_name: str = typer.Option("", "--set", help="Tool set; the config's default when empty."),
    format_name: str = typer.Option("glm", "--format", help=f"Tool-call format: {', '.join(FORMATS)}."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: schemas, fingerprints and the prompt section."),
) -> None:
    """List the tools of a tool set with their schemas and fingerprints, as the model would see them."""
    config = ToolSetConfig()
    try:
        registry = config.build(set_name or None)
        fmt = get_format(format_name)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0])) from None
    prompt = fmt.render_tools(registry.specs())
    if as_json:
        tools = [{**spec.model_dump(), "fingerprint": spec.fingerprint} for spec in registry.specs()]
        record = {
            "set": set_name or config.default,
            "format": fmt.name,
            "fingerprint": registry.fingerprint,
            "tools": tools,
            "prompt": prompt,
        }
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        return
    typer.echo(prompt)
    typer.echo(f"\n# fingerprints (set {set_name or config.default}, format {fmt.name})")
    for spec in registry.specs():
        typer.echo(f"{spec.name:<20} v{spec.version:<4} {spec.fingerprint}")
    typer.echo(f"{'(tool set)':<26} {registry.fingerprint}")
