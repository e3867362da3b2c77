"""`dojo gen REPO --from history|mutations`: a validated task suite for training and evaluation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from swedojo.progress import shown

if TYPE_CHECKING:
    from swedojo.datasets.gen.many import UnitRunner

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


UnitRunners = Callable[[str, "str | None", int], "UnitRunner"]
"""(--executor, --address, --workers) -> where the units run; given by the layer that knows the
executors (`swedojo.cli`), which `swedojo.datasets` may not import."""


def gen_command(unit_runners: UnitRunners | None = None) -> Callable[..., None]:
    """The `dojo gen` command; `unit_runners` gives --executor's runners (without it: local only)."""

    def command(
        repos: list[str] = typer.Argument(None, help="Local git repos (paths), URLs, or owner/name inside --mirror; "
                                          "several: one unit each, merged into OUT/suite.jsonl."),
        mode: str = typer.Option(..., "--from", help="history (mine fix commits) or mutations (inject bugs)."),
        out: Path = typer.Option(None, help="Output directory (default gen/<owner>__<name>; several repos: gen, one "
                                 "directory per repo inside); an existing one is resumed."),
        repo_list: Path = typer.Option(None, "--repos", help="A file of repositories, one path or URL a line (# comments)."),
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
        executor: str = typer.Option("local", help="Where the repos' units run: local (one after another here) or ray "
                                     "(a task each on a Ray cluster; every node must see the repos and --out)."),
        address: str = typer.Option(None, help="For --executor ray: the cluster to join (host:port of `ray start --head`); "
                                    "without it a Ray of --workers CPUs is started here for the run."),
    ) -> None:
        """Make training environments: mine fix commits or inject bugs, and validate every task end to end."""
        repos = list(repos or [])
        if repo_list is not None or len(repos) != 1 or executor != "local":
            _gen_many(repos, repo_list, mode, out, executor, address, unit_runners, mirror,
                      {"seed": seed, "max_tasks": max_tasks, "max_candidates": max_candidates,
                       "max_minutes": max_minutes, "timeout_s": timeout, "rev_range": rev_range, "history_commits": last,
                       "issues_dir": issues_dir, "combine": combine, "workers": workers, "backend": backend,
                       "launch": launch, "pool": pool})
            return
        (repo,) = repos
        from swedojo.datasets.gen.core import GitError, repo_name
        from swedojo.datasets.gen.journal import JournalMismatchError
        from swedojo.datasets.gen.run import UnknownModeError, generate
        from swedojo.datasets.gen.settings import GenSettings
        from swedojo.datasets.gen.synthesis import (
            NoMutableSourcesError,
            NoPassingTestsError,
        )
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

    return command


def _gen_many(repos: list[str], repo_list: Path | None, mode: str, out: Path | None, executor: str,
              address: str | None, unit_runners: UnitRunners | None, mirror: Path | None,
              options: dict[str, Any]) -> None:
    """Several repositories (or any on Ray): one unit each under `out`, then the merged suite."""
    from swedojo.datasets.gen.journal import JournalMismatchError
    from swedojo.datasets.gen.many import (
        DuplicateRepoError,
        generate_many,
        plan_units,
        read_repo_list,
        read_state,
    )
    from swedojo.datasets.gen.run import UnknownModeError
    from swedojo.datasets.gen.settings import GenSettings
    from swedojo.errors import BadInputError
    from swedojo.repos import RepoNotFoundError
    from swedojo.sandboxes.registry import UnknownBackendError
    from swedojo.sandboxes.registry import backend as sandbox_backend

    out = out or Path("gen")
    try:
        if repo_list is not None:
            if not repo_list.is_file():
                raise BadInputError(f"--repos {repo_list}: no such file")
            repos = repos + read_repo_list(repo_list)
        if not repos:
            raise BadInputError("no repository: give one or more REPOS, or --repos FILE")
        sandbox_backend(options["backend"])
        if unit_runners is None and executor != "local":
            raise BadInputError(f"--executor {executor} is not available here")
        runner = unit_runners(executor, address, options["workers"]) if unit_runners else None
        units = plan_units(repos, mode, GenSettings(out=out, **options), mirror)
        console.print(f"generating up to {options['max_tasks']} tasks from each of {len(units)} repos by {mode} "
                      f"(seed {options['seed']}, executor {executor}) -> {out}")
        with shown(console, lambda: f"{sum(read_state(u).done for u in units)} of {len(units)} repos done"):
            result = generate_many(units, out, runner) if runner else generate_many(units, out)
    except (BadInputError, RepoNotFoundError, UnknownModeError, JournalMismatchError, UnknownBackendError,
            DuplicateRepoError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    table = Table(title=f"units of {out}")
    for column in ("repo", "state", "kept", "runs"):
        table.add_column(column, justify="left" if column in ("repo", "state") else "right")
    for unit in result.units:
        state = "done" if unit.done else (f"failed: {unit.error}" if unit.error else "unfinished")
        table.add_row(unit.name, state, str(unit.kept), str(unit.runs))
    console.print(table)
    unfinished = [u for u in result.units if not u.done]
    console.print(f"{len(result.instances)} tasks from {len(result.units)} repos ({len(result.ran)} run now, "
                  f"{len(result.units) - len(result.ran)} done before)" +
                  (f"; {len(unfinished)} unfinished: rerun to continue" if unfinished else ""))
    if not result.instances:
        console.print(f"[red]no tasks[/red]: {mode} made none from these repos")
        raise typer.Exit(1)
    console.print(f"suite: {result.suite}  ({result.report.kept} tasks)  yield: {out / 'yield.json'}  "
                  f"units: {out / 'units.json'}")
    console.print(f"evaluate: dojo eval --suite {result.suite} --policy gold")
    if any(u.error for u in unfinished):
        raise typer.Exit(1)
