"""`dojo`: the command line. Each subsystem keeps its commands in its own module; this file wires them."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from swedojo.datasets.gen.cli import gen_command
from swedojo.errors import BadInputError
from swedojo.progress import RunProgress, reporting, shown
from swedojo.repolaunch.cli import launch_command
from swedojo.rewards.cli import export_command, mismatch_command
from swedojo.rundir import IssueRunDir, RunDir
from swedojo.sandboxes.cli import sandbox_app
from swedojo.sandboxes.registry import names as sandbox_backends
from swedojo.schema import ALL_SCHEMAS, Step
from swedojo.serve.cli import serve_command
from swedojo.tools.cli import tools_command

if TYPE_CHECKING:
    from swedojo.datasets.gen.many import UnitRunner
    from swedojo.evaluate import Summary
    from swedojo.repolaunch.fallback import SetupAgent
    from swedojo.repolaunch.many import LaunchRunner


def _gen_unit_runner(executor: str, address: str | None, workers: int) -> UnitRunner:
    """`dojo gen --executor`: where its units run (the executors are a layer above the datasets)."""
    from swedojo.executors import gen_unit_runner

    return gen_unit_runner(executor, address, workers)


def _launch_unit_runner(executor: str, address: str | None, workers: int) -> LaunchRunner:
    """`dojo launch --repos --executor`: where its launches run (the executors are a layer above the launch)."""
    from swedojo.executors import launch_unit_runner

    return launch_unit_runner(executor, address, workers)


def _setup_agent(model: str, max_steps: int | None, api_key_env: str) -> SetupAgent:
    """`dojo launch --agent-model`: the agent loop as the launch's setup agent."""
    from swedojo.agent.backends import BackendError, load_backend
    from swedojo.agent.setup import ModelSetupAgent, SetupAgentSettings

    try:
        backend = load_backend(model, api_key_env=api_key_env) if model.startswith(("http://", "https://")) \
            else load_backend(model)
    except BackendError as exc:
        raise typer.BadParameter(str(exc), param_hint="--agent-model") from exc
    settings = SetupAgentSettings() if max_steps is None else SetupAgentSettings(max_steps=max_steps)
    return ModelSetupAgent(backend, settings, name=model)


PIPED_HELP_WIDTH = 160
"""Columns of help written to a pipe or a file (rich's default there is 80, where the options
table cut option names: `--perceptual-mod…`); `TERMINAL_WIDTH` sets another."""


class DojoGroup(TyperGroup):
    """The `dojo` command group: the one place a `BadInputError` from any command (or any layer below
    it) becomes one line on stderr and exit status 2, instead of a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """As click's, but a usage error (a missing or unknown option, a bad value) is one line on
        stderr and exit status 2, as bad input is everywhere else, rather than a usage and a box."""
        import typer.rich_utils

        if typer.rich_utils.MAX_WIDTH is None and not sys.stdout.isatty():
            typer.rich_utils.MAX_WIDTH = PIPED_HELP_WIDTH
        if not kwargs.pop("standalone_mode", True):
            return super().main(*args, standalone_mode=False, **kwargs)
        clicks = sys.modules[typer.BadParameter.__module__]  # click's errors, wherever this typer takes them from
        try:
            result = super().main(*args, standalone_mode=False, **kwargs)
        except getattr(clicks, "NoArgsIsHelpError", ()) as exc:  # `dojo` or a group alone: its help
            exc.show()
            sys.exit(exc.exit_code)
        except clicks.UsageError as exc:
            helped = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
            typer.echo(f"error: {' '.join(exc.format_message().split())}{helped}", err=True)
            sys.exit(exc.exit_code)
        except clicks.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BadInputError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(cls=DojoGroup, no_args_is_help=True, add_completion=False,
                  help="swedojo: SWE environments, agents, rewards and RL data.")
console = Console(soft_wrap=True)
app.command("tools")(tools_command)
app.command("export")(export_command)
app.command("mismatch")(mismatch_command)
app.command("gen")(gen_command(_gen_unit_runner))
app.command("launch")(launch_command(_setup_agent, _launch_unit_runner))
app.add_typer(sandbox_app, name="sandbox")
app.command("serve")(serve_command)


def _print_version(asked: bool) -> None:
    if asked:
        from swedojo import __version__

        typer.echo(f"swedojo {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                      help="Print the version and exit.")) -> None:
    """swedojo: SWE environments, agents, rewards and RL data."""


@app.command()
def schema(name: str = typer.Argument("", help="One model name; all when empty.")) -> None:
    """Print the JSON Schemas of the contracts (TaskInstance, EnvSpec, Trajectory, ...)."""
    if name and name not in ALL_SCHEMAS:
        raise typer.BadParameter(f"unknown schema {name!r}; known: {', '.join(ALL_SCHEMAS)}")
    models = {name: ALL_SCHEMAS[name]} if name else ALL_SCHEMAS
    typer.echo(json.dumps({k: m.model_json_schema() for k, m in models.items()}, indent=2))


API_KEY_ENV = typer.Option("OPENAI_API_KEY", help="For an http(s) --model: the variable that holds its API key.")


COST_LIMIT = typer.Option(None, min=0.0, help="For a model: US dollars each instance may spend at the provider's list "
                          "price (a provider's model litellm prices); past it the instance stops (limit_cost).")
TOKEN_LIMIT = typer.Option(None, min=1, help="For a model: prompt plus completion tokens each instance may use "
                           "(each turn's whole prompt counts, as a hosted API bills); past it the instance stops (limit_tokens).")
COST_LIMIT_RUN = typer.Option(None, min=0.0, help="For a model: US dollars the whole run may spend (a priced model); once "
                              "its instances reach it no new one starts, and the summary says so.")
TOKEN_LIMIT_RUN = typer.Option(None, min=1, help="For a model: prompt plus completion tokens the whole run may use; once "
                               "its instances reach it no new one starts, and the summary says so.")


def _agent_config(max_steps: int = 40, temperature: float = 0.0, cost_limit: float | None = None,
                  token_limit: int | None = None):
    from swedojo.agent.loop import AgentConfig, LoopLimits

    config = AgentConfig(limits=LoopLimits(max_steps=max_steps, max_cost_usd=cost_limit, max_total_tokens=token_limit))
    config.sampling.temperature = temperature
    return config


def _default_run_dir() -> Path:
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


def _records(n: int) -> str:
    return f"{n} suite record{'s' if n != 1 else ''}"


def _print_summary(summary, out: Path, skipped: int = 0) -> None:
    """The table of statuses; `skipped`: suite records left out of the rate because they could not be read."""
    table = Table(title=f"{summary.suite} · policy {summary.policy}")
    table.add_column("status")
    table.add_column("instances", justify="right")
    for status, count in summary.counts.items():
        if count:
            table.add_row(status, str(count))
    if summary.not_submitted:
        table.add_row("not submitted", str(len(summary.not_submitted)))
    if summary.prompt_tokens or summary.completion_tokens:
        table.add_row("tokens (prompt + completion)", f"{summary.prompt_tokens} + {summary.completion_tokens}")
        unknown = f" ({len(summary.cost_unknown)} instance(s) at no known price left out)" if summary.cost_unknown else ""
        cost = "unknown" if summary.cost_usd is None else f"${summary.cost_usd:.4f}{unknown}"
        table.add_row("model cost", cost)
    left_out = f"; {_records(skipped)} skipped" if skipped else ""
    # A stopped run's rate is over the instances it got to: those never started say nothing of the policy.
    if summary.not_started:
        left_out += f"; {summary.not_started} not started"
    done = summary.total - summary.not_started
    rate = summary.resolved / done if done else 0.0
    table.add_row("[bold]resolved rate[/bold]", f"[bold]{summary.resolved}/{done} ({rate:.0%}{left_out})[/bold]")
    console.print(table)
    run_dir = RunDir(out)
    console.print(f"results: {run_dir.results}  summary: {run_dir.summary}  preds: {run_dir.preds}  "
                  f"SWE-bench reports: {run_dir.logs}/")


def _resume_command(ctx: typer.Context, out: Path) -> str:
    """The `dojo eval` that continues this run: the options as given, with --out and without --restart."""
    args = ["dojo", "eval"]
    for param in ctx.command.params:  # every one an option
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name == "DEFAULT" or param.name in ("out", "restart"):
            continue
        value = ctx.params[param.name]
        if getattr(param, "is_flag", False):
            args.append(param.opts[0] if value else param.secondary_opts[0])
            continue
        for item in value if param.multiple else [value]:
            args += [param.opts[0], str(item)]
    return shlex.join([*args, "--out", str(out)])


@contextmanager
def _first_interrupt_stops(stop: threading.Event) -> Iterator[None]:
    """Inside the block a first Ctrl-C sets `stop` (a run in flight ends cleanly, resumable); a second
    one raises KeyboardInterrupt, for a user who cannot wait for the running instances."""

    def interrupted(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        console.print("[yellow]stopping[/yellow]: no new instance starts, the running ones finish (Ctrl-C again to stop at once)")

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Inside the block SIGINT raises KeyboardInterrupt even where the process started with it ignored
    (a background job of a non-interactive shell does, and Python then installs no handler), so a
    `kill -INT` stops a run as Ctrl-C does, as it stops `dojo eval`."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    suite: str = typer.Option(..., help="A registered suite name (e.g. demo) or a .jsonl/.json/.parquet file."),
    policy: str = typer.Option("gold", help="gold, empty, model or replay."),
    predictions: Path = typer.Option(None, help="Grade this SWE-bench predictions file (JSON list, JSON object by "
                                     "instance id, or JSONL) instead of running a policy."),
    out: Path = typer.Option(None, help="Run directory (default runs/<timestamp>); an existing one is resumed."),
    backend: str = typer.Option("local", help=f"Sandbox backend: {', '.join(sandbox_backends())}."),
    mirror: Path = typer.Option(None, help="Directory of local repos as owner/name[.git], for offline use."),
    workers: int = typer.Option(1, help="Instances evaluated at once."),
    pool: int = typer.Option(0, help="Warm sandboxes kept ready per image (docker backend only; 0: off)."),
    instance: list[str] = typer.Option(None, help="Only these instance ids (repeatable)."),
    limit: int = typer.Option(None, min=1, help="Only the first N instances (after --instance and --slice)."),
    slice_: str = typer.Option(None, "--slice", help="Only instances A to B-1 of the suite, as Python's A:B (either may be left out)."),
    rewards: str = typer.Option("tiers", help="tiers: score every reward tier (gated); resolved: SWE-bench grading only (faster)."),
    perceptual_model: Path = typer.Option(None, help="With --rewards tiers: a local image-classification checkpoint "
                                          "(transformers) that tier visual of front-end tasks rates each frame with."),
    model: str = typer.Option(None, help="For --policy model: checkpoint dir, http(s) URL[#served-model], tiny:ARCH, scripted:FILE or a provider's model (openai/gpt-4o, anthropic/claude-sonnet-4-5)."),
    api_key_env: str = API_KEY_ENV,
    trajectories: Path = typer.Option(None, help="For --policy replay: a run's trajectories/ directory."),
    max_steps: int = typer.Option(40, help="For --policy model: assistant turns before the run stops."),
    cost_limit: float = COST_LIMIT,
    token_limit: int = TOKEN_LIMIT,
    cost_limit_run: float = COST_LIMIT_RUN,
    token_limit_run: int = TOKEN_LIMIT_RUN,
    temperature: float = typer.Option(0.0, min=0.0, help="For --policy model: the sampling temperature (0: greedy)."),
    seed: int = typer.Option(0, help="For --policy model with a temperature: the sampling seed. Each instance's episode "
                             "samples with a seed of its own derived from this one and its id, so a run samples the "
                             "same in any order."),
    launch: bool = typer.Option(None, "--launch/--no-launch", help="Build each (repo, setup commit)'s environment "
                                "with RepoLaunch, cached (default: on, except for bundled suites, which need none)."),
    restart: bool = typer.Option(False, help="Set an existing run's results aside (to previous-<time>/) and start over."),
    instance_timeout: float = typer.Option(None, min=1, help="Wall-clock budget per instance in seconds, agent "
                                           "and grading together; past it the instance is timed_out."),
    executor: str = typer.Option("local", help="Where instances run: local (--workers threads here) or ray (a task each "
                                 "on a Ray cluster; every node must see this machine's paths, e.g. a shared filesystem)."),
    address: str = typer.Option(None, help="For --executor ray: the cluster to join (host:port of `ray start --head`); "
                                "without it a Ray of --workers CPUs is started here for the run."),
) -> None:
    """Evaluate a policy, or grade a predictions file, on a bench suite: per-instance results, summary,
    sb-cli predictions, SWE-bench's reports.

    An existing --out is resumed when it was made by the same suite, policy (or predictions file),
    model, rewards, temperature and seed; its infra_error instances are tried again."""
    from swedojo.evaluate import evaluate, pending, to_grade
    from swedojo.executors import ExecutorError
    from swedojo.rundir import RunInUseError
    from swedojo.settings import RunLimits, RunMismatchError, RunSettings

    settings = RunSettings.checked(
        suite=suite, out=out or _default_run_dir(), instance_ids=instance or [], slice=slice_, limit=limit,
        policy=policy if ctx.get_parameter_source("policy").name != "DEFAULT" else "", predictions=predictions,
        model=model or "", api_key_env=api_key_env, trajectories=trajectories,
        agent=_agent_config(max_steps, temperature, cost_limit, token_limit), rewards=rewards,
        perceptual_model=perceptual_model, backend=backend, mirror=mirror, launch=launch, workers=workers, pool=pool,
        executor=executor, address=address, seed=seed, instance_timeout_s=instance_timeout, restart=restart,
        limits=RunLimits(max_cost_usd=cost_limit_run, max_total_tokens=token_limit_run))
    if settings.policy == "model" and settings.model:
        console.print(f"loading model {settings.model} ...")
    try:
        run = settings.prepare()
    except (RunMismatchError, RunInUseError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    out, instances = run.run_dir.root, run.instances
    for err in run.record_errors:
        console.print(f"[yellow]skipped record[/yellow] {err}")
    if run.predictions:
        for note in run.predictions.match([i.instance_id for i in instances]).notes():
            console.print(f"[yellow]{escape(note)}[/yellow]")
    todo = len(pending(to_grade(instances, run.predictions), run.run_dir))
    kept = f" ({len(instances) - todo} kept from the earlier run)" if todo < len(instances) else ""
    console.print(f"evaluating {todo} of {len(instances)} instances of {suite}{kept} with policy {settings.policy} on the "
                  f"{backend} backend -> {out}")

    board = RunProgress(todo)

    def show(result) -> None:
        board.finish(result.instance_id, result.status)
        mark = "[green]resolved[/green]" if result.resolved else f"[red]{result.status.value}[/red]"
        why = f"  {result.error}" if result.error else ""
        console.print(f"  {result.instance_id}: {mark} ({result.duration_s:.1f}s){why}")

    stop = threading.Event()
    resume = escape(_resume_command(ctx, out))
    try:
        with shown(console, board.describe, board), _first_interrupt_stops(stop):
            summary = evaluate(run, show, lambda instance, what: board.stage(instance.instance_id, what), stop)
    except ExecutorError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}; resume with: {resume}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        done = len(RunDir(out).read_results())
        console.print(f"[red]interrupted[/red]: {done} of {len(instances)} instances have results, the running ones "
                      f"were abandoned; resume with: {resume}")
        raise typer.Exit(130) from None
    # Instances named by id are all there, whatever else failed to load; any other selection may lack some.
    skipped = len(run.record_errors) if not instance else 0
    _print_summary(summary, out, skipped)
    if summary.stopped_by:  # the run did what it was told: not an interruption
        console.print(f"[yellow]run limit reached[/yellow]: {summary.stopped_by}; {summary.not_started} instance(s) not "
                      f"started, left out of the resolved rate; raise the limit and resume with: {resume}")
    elif summary.not_started:
        graded = summary.total - len(summary.not_submitted)
        console.print(f"[yellow]stopped[/yellow]: {graded - summary.not_started} of {graded} instances done, "
                      f"{summary.not_started} not started; resume with: {resume}")
        raise typer.Exit(130)
    infra = summary.counts.get("infra_error", 0)
    if infra:
        console.print(f"[red]{infra} instance(s) ended in infra_error[/red]: the harness or environment failed, not "
                      f"the policy; see the errors in {RunDir(out).results}")
    if skipped:
        console.print(f"[red]skipped {_records(skipped)} that could not be read[/red]: left out of the resolved rate "
                      f"(each named above and in {RunDir(out).summary} record_errors)")
    if infra or skipped:
        raise typer.Exit(1)


@app.command("report")
def report_command(
    run_dir: Path = typer.Argument(..., help="A run directory of `dojo eval` or `dojo run`."),
    out: Path = typer.Option(None, help="Directory to write the report into (default RUN_DIR/report)."),
) -> None:
    """Write a static HTML report of a run: counts, resolved rate per repository, reward and tier
    distributions, the instances (filterable by status), and each instance's patch, test log and
    trajectory. Self-contained: it loads nothing from the network. Exits 2 on a path that is not a run."""
    from swedojo.report import NoResultsError, NotARunDirError, write_report

    try:
        written = write_report(run_dir, out)
    except (NotARunDirError, NoResultsError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if not written.instances:
        console.print(f"empty run: {escape(str(run_dir))} selected no instances; the report says so: {written.index}")
        return
    console.print(f"report of {written.instances} instance{'s' if written.instances != 1 else ''}: {written.index}")


@app.command()
def demo(out: Path = typer.Option(None, help="Run directory (default runs/demo-<timestamp>).")) -> None:
    """The pipeline on the embedded defaults: demo suite with gold and empty, the agent on a tiny model, RL export."""
    from swedojo.evaluate import evaluate
    from swedojo.rewards.export import export_tokens
    from swedojo.settings import RunSettings

    root = out or Path("runs") / f"demo-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    problems: list[str] = []
    console.rule("swedojo demo")
    console.print("1. materialising the bundled demo suite as git repositories with history ...")
    runs = {name: RunSettings.checked(suite="demo", policy=name, out=root / name).prepare() for name in ("gold", "empty")}
    tasks = runs["gold"].instances
    repos = sorted({i.repo for i in tasks})
    console.print(f"   {len(tasks)} tasks over {len(repos)} repos ({', '.join(repos)}) in {runs['gold'].settings.mirror}")
    for step, (name, run) in enumerate(runs.items(), start=2):
        what = "applies each task's reference fix" if name == "gold" else "submits no change"
        console.print(f"{step}. policy [bold]{name}[/bold] {what}; each patch is graded in a fresh local sandbox")
        summary = evaluate(run)
        _print_summary(summary, root / name)
        problems += demo_problems(name, summary, root / name)
    console.print(f"4. the plan-execute-verify agent on {tasks[0].instance_id} with a tiny in-process GLM-5-architecture MoE")
    console.print("   (random weights: its answers are junk; what matters is the trajectory, tokens, logprobs, limits and reward)")
    console.print("loading model tiny:glm_moe_dsa ...")
    summary = evaluate(RunSettings.checked(suite="demo", limit=1, policy="model", model="tiny:glm_moe_dsa",
                                           agent=_agent_config(max_steps=2), out=root / "model").prepare())
    _print_summary(summary, root / "model")
    console.print("5. trainer-ready token records (prompt/response ids, loss mask, rollout logprobs, reward, advantage)")
    exported = export_tokens([root / "model"], root / "model-tokens")
    console.print(f"   {exported.written} record(s): {', '.join(str(f) for f in exported.files)}")
    if summary.counts.get("infra_error", 0):
        problems.append("the agent's run ended in infra_error: " + "; ".join(_errors(root / "model")))
    if not exported.written:
        problems.append("no token record was exported from the agent's run")
    if problems:
        for problem in problems:
            console.print(f"[red]demo failed:[/red] {problem}")
        console.print(f"Everything is under {root}")
        raise typer.Exit(1)
    total = len(tasks)
    console.print(f"done: gold resolved {total}/{total}, empty 0/{total}, the agent's run exported. Everything is under {root}")


def _errors(run_dir: Path) -> list[str]:
    """The distinct errors of a run's unresolved instances, for a one-line reason."""
    return sorted({f"{r.instance_id}: {r.status.value} {r.error}".strip()
                   for r in RunDir(run_dir).read_results().values() if not r.resolved})[:5]


def demo_problems(policy: str, summary: Summary, run_dir: Path) -> list[str]:
    """What is wrong with the demo's gold or empty run: gold must resolve every task, empty none."""
    if policy == "gold" and summary.resolved != summary.total:
        return [f"gold resolved {summary.resolved}/{summary.total} demo tasks (it must resolve all): "
                + "; ".join(_errors(run_dir))]
    if policy == "empty" and summary.resolved:
        return [f"empty resolved {summary.resolved}/{summary.total} demo tasks (it must resolve none)"]
    return []


STEP_ARGS_CHARS = 100
"""A step's tool arguments on the console, at most (the trajectory has them whole)."""
STEP_RESULT_LINES, STEP_RESULT_CHARS = 2, 120
"""The first lines of what a step's tools returned on the console, and their width at most."""


def _one_line(text: str, limit: int) -> str:
    """Untrusted text (a model's, a tool's) as one console line: whitespace runs made one space,
    control characters shown as `\\xNN` (no escape sequence reaches the terminal), rich markup
    escaped, cut at `limit` characters."""
    from swedojo.sandboxes.cli import inert

    line = " ".join(text.split())
    return escape(inert(line if len(line) <= limit else line[: limit - 1] + "…"))


def step_lines(step: Step) -> list[str]:
    """How `dojo run` shows a step as it is done: each tool call with its arguments in short, then
    the first lines of what came back, so the operator follows the agent rather than a spinner."""
    phase = "" if step.phase == "execute" else f" ({step.phase})"
    calls = []
    for call in step.tool_calls:
        values = list(call.arguments.values())
        args = str(values[0]) if len(values) == 1 else " ".join(f"{k}={v}" for k, v in call.arguments.items())
        calls.append(f"{_one_line(call.name, 40)}{': ' + _one_line(args, STEP_ARGS_CHARS) if args else ''}")
    head = f"step {step.index + 1}{phase} · " + ("; ".join(calls) if calls else "no tool call")
    said = [line for line in (step.observation or step.content).splitlines() if line.strip()][:STEP_RESULT_LINES]
    return [head, *(f"    [dim]{_one_line(line, STEP_RESULT_CHARS)}[/dim]" for line in said)]


def _issue_text(issue: str | None, issue_text: str | None) -> tuple[str, str]:
    """The issue's text and where it came from (the run's suite name): a file or URL (`--issue`),
    standard input (`--issue -`), or the text itself (`--issue-text`), exactly one of them."""
    import sys

    from swedojo.rollout import IssueError, read_issue

    if (issue is None) == (issue_text is None):
        raise IssueError("give the issue once: --issue FILE|URL|- or --issue-text TEXT")
    if issue_text is not None:
        text, source = issue_text, "--issue-text"
    elif issue == "-":
        text, source = sys.stdin.read(), "stdin"
    else:
        text, source = read_issue(issue), issue
    if not text.strip():
        raise IssueError(f"the issue ({source}) is empty")
    return text, source


@app.command("run")
def run_command(
    repo: str = typer.Option(..., help="Repository: a local path or a git URL."),
    issue: str = typer.Option(None, help="The issue: a text/markdown file, a GitHub issue URL (needs network), or - "
                              "for standard input."),
    issue_text: str = typer.Option(None, "--issue-text", help="The issue's text itself (instead of --issue)."),
    model: str = typer.Option(..., help="Checkpoint dir, http(s) URL[#served-model], tiny:ARCH, scripted:FILE or a provider's model (openai/gpt-4o, anthropic/claude-sonnet-4-5)."),
    api_key_env: str = API_KEY_ENV,
    commit: str = typer.Option("", help="Commit to start from (default: HEAD)."),
    env: Path = typer.Option(None, "--env", help="An envspec.json written by `dojo launch`: the agent works in that "
                             "environment (default: one launched now for the repo, into OUT/environment)."),
    launch: bool = typer.Option(True, "--launch/--no-launch", help="Without --env: launch the repo's environment "
                                "with RepoLaunch; off: the plain pytest environment, enough for pure-stdlib repos."),
    backend: str = typer.Option(None, help=f"Sandbox backend: {', '.join(sandbox_backends())} (default: the --env "
                                "spec's, else local)."),
    out: Path = typer.Option(None, help="Run directory, a new one (default runs/run-<timestamp>)."),
    max_steps: int = typer.Option(20, help="Assistant turns before the run stops."),
    cost_limit: float = COST_LIMIT,
    token_limit: int = TOKEN_LIMIT,
) -> None:
    """Run the agent on one issue in the repo's own environment, showing each step as it is done.
    Writes a run directory of one instance, as `dojo eval` does (`dojo report`, `export` and
    `mismatch` read it), with the patch at its top and a reward report (format and static tiers; a
    raw issue names no test). Ctrl-C stops the agent and keeps its steps and diff so far (exit 130)."""
    from pydantic import ValidationError

    from swedojo.agent.backends import BackendError
    from swedojo.evaluate import evaluate_issue
    from swedojo.repolaunch.errors import LaunchError
    from swedojo.repos import CommitNotFoundError, RepoNotFoundError
    from swedojo.rollout import IssueError
    from swedojo.schema import EnvSpec, ExitStatus
    from swedojo.settings import RunSettings

    out = out or Path("runs") / f"run-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    files = IssueRunDir(out)
    try:
        spec = EnvSpec.model_validate_json(env.read_text()) if env else None
    except (OSError, ValidationError) as exc:
        console.print(f"[red]error:[/red] --env {env}: not an EnvSpec ({str(exc).splitlines()[0]})")
        raise typer.Exit(2) from None
    doing = ["starting"]

    def show(step: Step) -> None:
        for line in step_lines(step):
            console.print(line)

    try:
        if spec and backend and backend != spec.backend:
            raise IssueError(f"--backend {backend}, but {env} is an environment of the {spec.backend} backend")
        text, source = _issue_text(issue, issue_text)
        settings = RunSettings.checked(suite=source, out=out, policy="model", model=model, api_key_env=api_key_env,
                                       agent=_agent_config(max_steps, 0.0, cost_limit, token_limit),
                                       backend=backend or "local", launch=launch)
        with _ctrl_c_interrupts(), shown(console, lambda: doing[0]), reporting(lambda what: doing.__setitem__(0, what)):
            result = evaluate_issue(settings, repo, text, commit=commit, spec=spec, on_step=show)
    except LaunchError as exc:
        console.print(f"[red]error:[/red] no environment for {repo}: {escape(str(exc))}; pass one with --env, or "
                      "--no-launch for the plain pytest environment")
        raise typer.Exit(2) from None
    except (IssueError, BackendError, RepoNotFoundError, CommitNotFoundError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:  # before the agent started, or while its patch was checked: recorded as interrupted
        console.print(f"[red]interrupted[/red] while {escape(doing[0])}: recorded as interrupted, nothing scored; "
                      f"look at it: dojo report {out}")
        raise typer.Exit(130) from None
    trajectory = result.trajectory
    console.print(f"exit status: [bold]{trajectory.exit_status.value}[/bold] after {len(trajectory.steps)} steps"
                  + (f" ({escape(trajectory.error)})" if trajectory.error else "")
                  + (f"; stopped: {trajectory.stopped_by}" if trajectory.stopped_by else ""))
    look = f"look at it: dojo report {out}"
    if trajectory.exit_status == ExitStatus.INTERRUPTED:
        console.print(f"[red]interrupted[/red]: nothing was scored; the trajectory ({files.trajectory(result.instance.instance_id)}) "
                      f"and the diff so far ({files.patch}, {len(trajectory.patch.splitlines())} lines) are kept; {look}")
        raise typer.Exit(130)
    sampled = sum(len(s.response_token_ids) for s in trajectory.steps)
    report = result.report
    scored = ", ".join(f"{t.name} {t.score:.2f}" for t in report.tiers if t.scored) or "no tier"
    spec = result.environment
    where = spec.image or spec.env_vars.get("SWEDOJO_ENV") or "the plain Python environment (--no-launch, or no build file to launch from)"
    console.print(f"environment: {spec.language or 'python'} {spec.runtime_version} on the {spec.backend} backend, {where}")
    cost = "unknown" if trajectory.cost_usd is None else f"${trajectory.cost_usd:.4f}"
    console.print(f"tokens sampled: {sampled}; tokens used: {trajectory.prompt_tokens} prompt + "
                  f"{trajectory.completion_tokens} completion, cost {cost}; patch: {len(trajectory.patch.splitlines())} lines; "
                  f"{report.status.value}: reward {report.reward:.2f} from {scored}")
    for tier in report.tiers:
        if not tier.scored:
            console.print(f"  {tier.name} not scored: {tier.evidence.get('not_scored')}")
    console.print(f"patch: {files.patch}  run: {out} ({look}; export it: dojo export {out} --format messages)")


if __name__ == "__main__":
    app()
