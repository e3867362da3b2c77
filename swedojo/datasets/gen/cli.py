"""`dojo gen REPO --from history|mutations`: a validated task suite for training and evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from swedojo.progress import shown

console = Console()


def _journal_progress(out: Path) -> str:
    """What the journals (one verdict appended per candidate) say so far."""
    lines = [json.loads(line) for path in sorted((out / "journal").glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    verdicts = [line for line in lines if "key" in line]  # the others are baselines
    if not verdicts:
        return "building the environment and the baseline test runs"
    kept = sum(v.get("outcome") == "kept" for v in verdicts)
    return f"{len(verdicts)} candidates judged, {kept} kept; last: {verdicts[-1].get('outcome')}"


def gen_command(
    repo: str = typer.Argument(..., help="A local git repo (path), or owner/name inside --mirror."),
    mode: str = typer.Option(..., "--from", help="history (mine fix commits) or mutations (inject bugs)."),
    out: Path = typer.Option(None, help="Output directory (default gen/<owner>__<name>); an existing one is resumed."),
    seed: int = typer.Option(0, help="Seed of the candidate sampling: the same seed gives the same suite."),
    max_tasks: int = typer.Option(20, "--max-tasks", "--limit", help="Stop once this many validated tasks are kept."),
    rev_range: str = typer.Option(None, "--range", help="History: only commits in A..B (default: the last --last)."),
    last: int = typer.Option(200, "--last", min=1, help="History: walk HEAD's last N first-parent commits, newest "
                             "first."),
    mirror: Path = typer.Option(None, help="Directory of local repos as owner/name, for REPO given as owner/name."),
    issues_dir: Path = typer.Option(None, help="History: issue texts as N.md / N.txt / N.json, for commits naming #N."),
    max_candidates: int = typer.Option(None, help="Stop after evaluating this many new candidates (rerun to continue)."),
    max_minutes: float = typer.Option(None, help="Start no candidate after this many minutes (rerun to continue)."),
    timeout: float = typer.Option(None, help="A fixed limit in seconds on every test run (the old behaviour); "
                                         "default: a multiple of the baseline's time plus a margin."),
    combine: bool = typer.Option(True, help="Mutations: make a fifth of the tasks from two mutants."),
    workers: int = typer.Option(2, min=1, help="Candidates evaluated at once (the suite is the same at any width)."),
    backend: str = typer.Option("local", help="Sandbox backend the candidates are judged on: local or docker."),
    launch: bool = typer.Option(True, "--launch/--no-launch", help="Build the environment with RepoLaunch from what "
                                "the repo declares (its dependencies, its test command); off: the plain pytest one."),
    pool: int = typer.Option(2, min=0, help="Warm containers kept ready for the run's sandboxes (docker; 0: none)."),
) -> None:
    """Make training environments: mine fix commits or inject bugs, and validate every task end to end."""
    from swedojo.datasets.gen.core import GitError, repo_name
    from swedojo.datasets.gen.journal import JournalMismatchError
    from swedojo.datasets.gen.run import UnknownModeError, generate
    from swedojo.datasets.gen.settings import GenSettings
    from swedojo.datasets.gen.synthesis import NoMutableSourcesError, NoPassingTestsError
    from swedojo.repolaunch.errors import LaunchError
    from swedojo.repos import RepoNotFoundError, resolve_repo
    from swedojo.sandboxes.registry import UnknownBackendError
    from swedojo.sandboxes.registry import backend as sandbox_backend

    try:
        out = out or Path("gen") / repo_name(repo, resolve_repo(repo, mirror)).replace("/", "__")
        sandbox_backend(backend)  # an unknown name fails here, before anything is built
        settings = GenSettings(out=out, seed=seed, max_tasks=max_tasks, max_candidates=max_candidates, max_minutes=max_minutes,
                               timeout_s=timeout, rev_range=rev_range, history_commits=last, issues_dir=issues_dir,
                               combine=combine,
                               workers=workers, backend=backend, launch=launch, pool=pool)
        console.print(f"generating up to {max_tasks} tasks from {repo} by {mode} (seed {seed}) -> {out}")
        with shown(console, lambda: _journal_progress(out)):
            result = generate(repo, mode, settings, mirror)
    except (RepoNotFoundError, UnknownModeError, JournalMismatchError, NoPassingTestsError, NoMutableSourcesError,
            GitError, UnknownBackendError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    except LaunchError as exc:
        console.print(f"[red]error:[/red] the environment could not be built, at stage {exc.stage}: {exc.message}")
        console.print(f"build log: {exc.log_path}")
        raise typer.Exit(1) from None
    table = Table(title=f"yield of {out}")
    for column in ("strategy", "candidates", "compiled", "broke tests", "kept", "s/kept"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name, y in result.report.strategies.items():
        per = f"{y.seconds_per_kept:.1f}" if y.seconds_per_kept is not None else "-"
        table.add_row(name, str(y.candidates), str(y.compiled), str(y.broke_tests), str(y.kept), per)
    console.print(table)
    counts = result.counts
    state = "stopped at --max-candidates or --max-minutes; rerun to continue" if counts.interrupted else "done"
    console.print(f"{len(result.instances)} tasks from {result.repo} ({counts.evaluated} candidates evaluated, "
                  f"{counts.reused} replayed from the journal): {state}")
    if not result.instances:  # an empty suite is no success, and `dojo eval` of it would say nothing
        where = f"commits {rev_range}" if rev_range else f"the last {last} commits"
        tried = f"in {where} of its history; try --range A..B or --last N" if mode == "history" else \
            "from its mutants; try another --seed or more --max-candidates"
        console.print(f"[red]no tasks[/red]: {mode} made none from {result.repo} {tried}" +
                      (" (or rerun to continue)" if counts.interrupted else ""))
        raise typer.Exit(1)
    console.print(f"suite: {result.suite}  ({result.report.kept} tasks, {result.report.tasks_per_min} tasks/min)  "
                  f"repos: {out / 'repos'}  yield: {out / 'yield.json'}")
    console.print(f"evaluate: dojo eval --suite {result.suite} --policy gold")
