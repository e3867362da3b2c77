"""`dojo launch`: build and validate an environment, with a live view of the steps and the log on a
terminal, and a line naming the running step every 10 s when piped."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from swedojo.errors import BadInputError, output_dir
from swedojo.progress import shown
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.errors import LaunchError, RebuildMismatchError, ResolveError
from swedojo.repolaunch.fallback import SetupAgent
from swedojo.repolaunch.launch import (
    BACKENDS,
    UnsupportedBackendError,
    default_backend,
    launch,
    rebuild,
)
from swedojo.repolaunch.many import (
    LaunchRunner,
    LaunchState,
    launch_many,
    plan_launches,
    read_launch_list,
    read_state,
    run_here,
)
from swedojo.schema import EnvSpec

console = Console(stderr=True)
SHOWN_STEPS = 6
"""Finished steps listed above the running one."""


class Progress:
    """Rendered by rich's refresh thread: the last steps with their times, the running one with a
    spinner, total elapsed time, and the tail of the build log."""

    def __init__(self, log: BuildLog, title: str) -> None:
        self.log = log
        self.title = title
        self.spinner = Spinner("dots")

    def __rich__(self) -> Panel:
        timeline = self.log.timeline()[1:] or self.log.timeline()  # "starting" only until a step begins
        steps = Table.grid(padding=(0, 1))
        steps.add_column(width=2)
        steps.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        steps.add_column(justify="right")
        for name, seconds in timeline[-SHOWN_STEPS - 1:-1]:
            steps.add_row(Text("✓", style="green"), Text(name, style="dim"), Text(f"{seconds:.1f}s", style="dim"))
        name, seconds = timeline[-1]
        steps.add_row(self.spinner, Text(name, style="bold"), f"{seconds:.1f}s")
        tail = Text("\n".join(line[:160] for line in self.log.tail(8)), style="dim")
        return Panel(Group(steps, Text(""), tail), title=f"{self.title}  {self.log.elapsed:5.1f}s", title_align="left")


def _live(log: BuildLog, title: str) -> AbstractContextManager[None]:
    def running() -> str:
        name, seconds = log.timeline()[-1]
        return f"{title}: {name} ({seconds:.0f}s in this step)"

    return shown(console, running, Progress(log, title))


def _fail(exc: LaunchError) -> typer.Exit:
    console.print(f"[red]launch failed at stage {exc.stage}:[/red] {exc.message}")
    console.print(f"build log: {exc.log_path}")
    return typer.Exit(1)


AgentFactory = Callable[[str, int | None, str], SetupAgent]
"""(model spec, step budget or None for the agent's default, API key variable) -> the setup agent;
given by the layer that has the agent loop (`swedojo.cli`)."""


LaunchRunners = Callable[[str, "str | None", int], LaunchRunner]
"""(executor name, Ray address, workers) -> where `--repos`'s units run; given by the layer that
knows the executors (`swedojo.cli`)."""


def launch_command(agents: AgentFactory | None = None, runners: LaunchRunners | None = None) -> Callable[..., None]:
    """The `dojo launch` command; `agents` makes the setup agent `--agent-model` names, `runners`
    the executor `--repos` runs its launches on."""

    def command(
        repo: str | None = typer.Argument(None, help="Local path, git URL, or owner/name (with --mirror); or --repos."),
        commit: str = typer.Option("", help="Commit to build for (default: HEAD)."),
        out: Path = typer.Option(..., help="Directory for envspec.json, analysis.json and build.log (with --repos: "
                                           "a directory per repository and commit, and launches.json)."),
        repos: Path | None = typer.Option(None, "--repos", help="Launch every `REPO [COMMIT]` line of this file "
                                          "instead of one REPO; a rerun launches only those not ready."),
        executor: str = typer.Option("local", help="With --repos: local (one launch after another) or ray (a "
                                     "task per launch)."),
        address: str | None = typer.Option(None, help="With --executor ray: the cluster's address (default: a Ray "
                                           "started here with --workers CPUs)."),
        workers: int = typer.Option(1, min=1, help="With --executor ray and no --address: CPUs of the Ray started here."),
        backend: str = typer.Option("auto", help="docker (layered images), local (venv) or auto: docker where an "
                                                 "engine answers."),
        mirror: Path | None = typer.Option(None, help="Directory of local mirrors for owner/name repos."),
        rebuild_: bool = typer.Option(False, "--rebuild", help="Then build every layer again from scratch from "
                                      "OUT/envspec.json alone and check the tests give the same statuses."),
        agent_model: str = typer.Option("", help="When the rules cannot set the repo up, a setup agent with this "
                                        "model finds a plan: a checkpoint dir, http(s) URL[#served-model], tiny:ARCH "
                                        "or scripted:FILE, as `dojo run --model` (default: none, the launch fails)."),
        agent_budget: int | None = typer.Option(None, min=1, help="The setup agent's assistant turns (default 30)."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", help="For an http(s) --agent-model: the variable that "
                                        "holds its API key."),
    ) -> None:
        """Build (or reuse) the environment of REPO at a commit, run its tests twice, write its EnvSpec."""
        chosen = default_backend() if backend == "auto" else backend
        if chosen not in BACKENDS:
            raise typer.BadParameter(f"unknown backend {backend!r}; choose auto, {', '.join(BACKENDS)}",
                                     param_hint="--backend")
        if (repo is None) == (repos is None):
            raise BadInputError("give one REPO or --repos FILE")
        if repos is not None:
            if commit or rebuild_ or agent_model:
                raise BadInputError("--repos takes each commit from its file, and no --rebuild or --agent-model")
            _launch_list(repos, output_dir(out), chosen, mirror, runners, executor, address, workers)
            return
        if agent_model and agents is None:
            raise typer.BadParameter("this command has no setup agent to run", param_hint="--agent-model")
        agent = agents(agent_model, agent_budget, api_key_env) if agent_model and agents else None
        output_dir(out)
        spec_path = out / "envspec.json"
        if not (rebuild_ and spec_path.is_file()):
            _launch(repo, out, commit, chosen, mirror, agent)
        if rebuild_:
            _rebuild(EnvSpec.model_validate_json(spec_path.read_text()), out, mirror)
        typer.echo(str(spec_path))

    return command


def _launch_list(path: Path, out: Path, backend: str, mirror: Path | None, runners: LaunchRunners | None,
                 executor: str, address: str | None, workers: int) -> None:
    if not path.is_file():
        raise BadInputError(f"--repos {path}: no such file")
    units = plan_launches(read_launch_list(path), out, backend, mirror)
    if not units:
        raise BadInputError(f"--repos {path}: no repository in it")
    if runners is None and executor != "local":
        raise BadInputError(f"--executor {executor}: this command runs launches here only")
    try:
        runner = runners(executor, address, workers) if runners else run_here
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    done = sum(read_state(u).done for u in units)
    console.print(f"launching {len(units) - done} of {len(units)} environments ({done} ready from an earlier run) "
                  f"on {executor} -> {out}")

    def said(state: LaunchState) -> None:
        where = f"{state.repo}{' ' + state.commit if state.commit else ''}"
        if state.done:
            console.print(f"[green]ready[/green] {where} in {state.seconds:.0f}s: {state.tests} tests "
                          f"({state.passed} pass){', ' + state.image if state.image else ''}")
        else:
            console.print(f"[red]failed[/red] {where}: {state.error} (log: {out / state.unit / 'build.log'})")

    report = launch_many(units, out, runner, said)
    console.print(f"{report.ready} of {len(units)} environments ready -> {out / 'launches.json'}")
    if report.ready < len(units):
        raise typer.Exit(1)


def _launch(repo: str, out: Path, commit: str, backend: str, mirror: Path | None, agent: SetupAgent | None) -> EnvSpec:
    log = BuildLog(out / "build.log")
    try:
        with _live(log, f"launch {repo} ({backend})"):
            spec = launch(repo, out, commit=commit, backend=backend, mirror=mirror, agent=agent, log=log)
    except UnsupportedBackendError as exc:
        raise typer.BadParameter(str(exc), param_hint="--backend") from exc
    except ResolveError as exc:  # no such repository or commit: the user's to fix, as for every command
        raise BadInputError(exc.message) from None
    except LaunchError as exc:
        raise _fail(exc) from exc
    finally:
        log.close()
    passed = sum(1 for status in spec.test_status.values() if status.counts_as_pass)
    where = f"image {spec.image}" if spec.image else "local environment"
    console.print(f"[green]environment ready[/green] in {log.elapsed:.1f}s ({where}): {spec.language} "
                  f"{spec.runtime_version}, {len(spec.test_status)} tests ({passed} pass, {len(spec.flaky_tests)} "
                  f"flaky, {len(spec.network_tests)} need the network)")
    if spec.setup_agent:
        console.print(f"the plan is the setup agent's ({spec.setup_agent.model}; the rules failed at "
                      f"{spec.setup_agent.stage}): trajectory {spec.setup_agent.trajectory}")
    return spec


def _rebuild(spec: EnvSpec, out: Path, mirror: Path | None) -> None:
    log = BuildLog(out / "rebuild.log")
    try:
        with _live(log, f"rebuild {spec.repo} from its EnvSpec (no cache)"):
            report = rebuild(spec, out, mirror=mirror, log=log)
    except LaunchError as exc:
        raise _fail(exc) from exc
    finally:
        log.close()
    if not report.same:
        for test, (before, after) in report.differences.items():
            console.print(f"  {test}: {before} -> {after}")
        raise _fail(RebuildMismatchError(f"{len(report.differences)} test(s) changed status after the rebuild",
                                         out / "rebuild.log"))
    console.print(f"[green]rebuilt from the EnvSpec[/green] in {log.elapsed:.1f}s: the same status for all "
                  f"{len(spec.test_status) - len(report.ignored)} compared tests ({len(report.ignored)} flaky or "
                  "network tests left out)")
