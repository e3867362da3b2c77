"""`launch`: repository + commit -> a built, validated environment and its `EnvSpec`.

Stages (each failure is a `LaunchError` subclass naming its stage, with the build log kept):
resolve (find the repo and commit) -> analyse (rules, `detect.analyse`) -> install (layers,
cached: local venv or docker images) -> test-discovery and validate (the suite twice with the
network off in a sandbox of the environment, baseline and flaky tests; once more with the network
on when tests failed, for the tests that need it). When the rules fail (at analyse, or at install,
test-discovery or validate after every plan they had), an optional `SetupAgent` proposes a plan,
which is built from scratch and validated once; the `EnvSpec` says it came from the agent.

A launch is cached twice over: the layers by content, and the validated `EnvSpec` by commit
(local: in the dependency layer; docker: by the final image's id), so launching the same commit
again only resolves, checks out, analyses and looks the layers up.

`rebuild` builds every layer an `EnvSpec` names again from the spec alone, with no cache, and
validates: the same test statuses prove the spec is enough to make the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from swedojo.repolaunch.analysis import PythonPlanning, RepoAnalysis, version_key
from swedojo.repolaunch.buildlog import BuildLog, cause
from swedojo.repolaunch.detect import NoBuildSystemError, analyse, undated
from swedojo.repolaunch.errors import (
    AnalyseError,
    DiscoveryError,
    EngineBuildError,
    InstallError,
    LaunchError,
    NoRuntimeError,
    ResolveError,
    ValidateError,
)
from swedojo.repolaunch.fallback import NoPlanError, SetupAgent, SetupRequest
from swedojo.repolaunch.local import build_env, default_cache_dir, rebuild_env
from swedojo.repolaunch.recipes import UnsupportedLanguageError, recipe_of
from swedojo.repolaunch.recipes.base import Adaptation, LanguageRecipe
from swedojo.repolaunch.recipes.python import (
    distributions,
    interpreter_direction,
    unimportable,
)
from swedojo.repolaunch.registries import unreachable_registry, unreachable_source
from swedojo.repolaunch.validate import failing_tests, passing_among, validate
from swedojo.repos import CommitNotFoundError, RepoNotFoundError, checkout, resolve_repo
from swedojo.sandboxes.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from swedojo.sandboxes.environment import Environment, PrepareError, prepare
from swedojo.schema import EnvSpec, SetupAgentRun, TestStatus
from swedojo.testrun.command import runnable
from swedojo.testrun.parsers import IDS_REVISION


class UnsupportedBackendError(ValueError):
    """`launch` was asked for a backend it cannot build."""


def default_backend() -> str:
    """docker where an engine answers, else local."""
    from swedojo.sandboxes import docker_available

    return "docker" if docker_available() else "local"


def environment(spec: EnvSpec, source: Path, config: SandboxConfig | None = None) -> Environment:
    """Fresh sandboxes (repo layer built in each) on a launched environment: what eval and run use."""
    return Environment(spec=spec, source=source, config=config or SandboxConfig())


@contextmanager
def prepared_sandbox(env: Environment, commit: str, log: BuildLog, timeout: float = 1800.0) -> Iterator[Sandbox]:
    """A sandbox of `env` at `commit` with the repo layer built, its output going to the build log."""
    def echo(command: str, result: ExecResult) -> None:
        log.write(f"$ {command}\n{result.output}\n[exit {result.exit_code} after {result.duration_s:.1f}s]\n")

    try:
        sandbox = env.open(commit, prepared=False)
    except SandboxError as exc:
        raise InstallError(f"no sandbox on the environment: {exc}", log.path) from exc
    try:
        log.begin(f"repo layer in a fresh sandbox: {' && '.join(env.spec.rebuild_commands) or 'nothing to build'}")
        prepare(sandbox, env.spec, timeout, echo)
        yield sandbox
    except PrepareError as exc:
        raise InstallError(str(exc), log.path) from exc
    finally:
        sandbox.close()


def _commit_info(source: Path, commit: str, log: BuildLog) -> tuple[str, datetime]:
    proc = subprocess.run(["git", "-C", str(source), "log", "-1", "--format=%H%n%cI", f"{commit}^{{commit}}", "--"],
                          capture_output=True, text=True, check=False)
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        raise ResolveError(f"{source}: no commit {commit!r} ({proc.stderr.strip().splitlines()[-1:] or 'git failed'})",
                           log.path)
    return lines[0], datetime.fromisoformat(lines[1])


def _resolve(repo: str, commit: str, mirror: Path | None, log: BuildLog) -> tuple[Path, str, datetime]:
    log.begin(f"resolve {repo} @ {commit or 'HEAD'}")
    try:
        source = resolve_repo(repo, mirror)
    except RepoNotFoundError as exc:
        raise ResolveError(str(exc), log.path) from exc
    sha, when = _commit_info(source, commit or "HEAD", log)
    log.write(f"commit {sha}, committed {when.isoformat()}\n")
    return source, sha, when


@contextmanager
def _checkout(source: Path, sha: str, log: BuildLog) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="swedojo-launch-") as tmp:
        os.chmod(tmp, 0o755)  # install steps run as a sandbox uid (`local.BUILD_LIMITS`)
        workdir = Path(tmp) / "repo"
        try:
            for note in checkout(source, sha, workdir):
                log.write(f"{note}\n")
        except (RepoNotFoundError, CommitNotFoundError) as exc:
            raise ResolveError(str(exc), log.path) from exc
        yield workdir


def _analyse(workdir: Path, when: datetime, log: BuildLog) -> RepoAnalysis:
    """What the rules make of the work tree."""
    log.begin("analyse")
    try:
        analysis = analyse(workdir, when)
    except NoBuildSystemError as exc:
        raise AnalyseError(str(exc), log.path) from exc
    _describe(analysis, log)
    return analysis


def _describe(analysis: RepoAnalysis, log: BuildLog) -> None:
    """The plan into the build log; NoRuntimeError before any backend looks for a runtime when no
    recipe builds it (one reason on all backends)."""
    for item in analysis.evidence:
        log.write(f"  {item.file}: {item.says}\n")
    log.write(f"  -> {analysis.language} / {analysis.build_system}, the project asks for runtime "
              f"{analysis.runtime_version or 'any'}; tests: {analysis.test_command} [{analysis.log_parser}]\n")
    try:
        recipe_of(analysis)
    except UnsupportedLanguageError as exc:
        raise NoRuntimeError(str(exc), log.path) from exc


def _base_spec(repo: str, sha: str, backend: str, analysis: RepoAnalysis, log: BuildLog) -> EnvSpec:
    try:
        recipe = recipe_of(analysis)
        install, rebuild = recipe.install_plan(analysis), recipe.sandbox_steps(analysis)
    except UnsupportedLanguageError as exc:
        raise InstallError(str(exc), log.path) from exc
    return EnvSpec(repo=repo, commit=sha, backend=backend, language=analysis.language,
                   build_system=analysis.build_system,
                   runtime_version=analysis.runtime_version, install_commands=install, rebuild_commands=rebuild,
                   build_command=analysis.build_command, repo_layer_in_tree=recipe.repo_layer_in_tree,
                   test_command=analysis.test_command,
                   log_parser=analysis.log_parser, work_tree_mb=analysis.work_tree_mb,
                   resolution_date=analysis.resolution_date, requirement_changes=analysis.requirement_changes)


class _Built(BaseModel):
    """A backend's answer: the spec (unvalidated), where its validated copy is cached, and whether
    every layer came from the cache."""

    spec: EnvSpec
    """The environment as built, before validation."""
    cached_spec: Path
    """Where the validated spec of this build is kept."""
    hit: bool
    """Nothing was built."""
    layers: list[dict[str, object]] = Field(default_factory=list)
    """Docker layers (`images.Layer` dumps): tags, ids, sizes, build times."""


def _docker_cache(cache_dir: Path | None) -> Path:
    """Next to the local layers: validated specs by final image id."""
    return (cache_dir or default_cache_dir()).parent / "docker"


class _LocalBuilder:
    """Layers of the local backend: a cached venv (or toolchain dir) on the host."""

    def ready(self, log: BuildLog) -> None:
        """Nothing to wait for: the host is there."""

    def runtimes(self, analysis: RepoAnalysis, log: BuildLog) -> list[str]:
        """The runtimes this host has for the analysis, in the order to try them (the recipe's
        `local_runtimes`): before any build, one line naming what is needed when it has none."""
        return recipe_of(analysis).local_runtimes(analysis, log)

    def build(self, repo: str, sha: str, workdir: Path, analysis: RepoAnalysis, log: BuildLog,
              cache_dir: Path | None) -> _Built:
        env, hit = build_env(workdir, analysis, log, cache_dir)
        spec = _base_spec(repo, sha, "local", analysis, log)
        spec.runtime_version, spec.resolved_dependencies = env.runtime.version, env.resolved
        spec.workdir = ""  # each local sandbox has its own work tree
        spec.env_vars.update(env.sandbox_env())
        return _Built(spec=spec, cached_spec=env.root / "specs" / f"{sha}.json", hit=hit)

    def pin(self, spec: EnvSpec) -> None:
        """`build` already pinned the versions."""

    def rebuild(self, spec: EnvSpec, workdir: Path, log: BuildLog, cache_dir: Path | None) -> list[dict[str, object]]:
        rebuild_env(spec, workdir, log)
        return []


class _DockerBuilder:
    """Layers of the docker backend: base, runtime, deps and repo images."""

    def ready(self, log: BuildLog) -> None:
        """An engine answers, else InstallError."""
        from swedojo.sandboxes import docker_available

        if not docker_available():
            raise InstallError("no Docker Engine answers (`make docker-up` starts one; or use --backend local)",
                               log.path)

    def runtimes(self, analysis: RepoAnalysis, log: BuildLog) -> list[str]:
        """The runtimes Debian releases ship for the analysis, in the order to try them (the
        recipe's `docker_runtimes`)."""
        try:
            return recipe_of(analysis).docker_runtimes(analysis)
        except InstallError as exc:
            raise type(exc)(exc.message, log.path) from exc

    def build(self, repo: str, sha: str, workdir: Path, analysis: RepoAnalysis, log: BuildLog,
              cache_dir: Path | None) -> _Built:
        from swedojo.repolaunch import images

        spec = images.plan(_base_spec(repo, sha, "docker", analysis, log), analysis, workdir, log)
        layers = images.build_images(spec, workdir, log)
        final = layers[-1].image_id.removeprefix("sha256:")[:24]
        return _Built(spec=spec, cached_spec=_docker_cache(cache_dir) / "specs" / f"{final}.json",
                      hit=all(layer.cached for layer in layers), layers=[layer.model_dump() for layer in layers])

    def pin(self, spec: EnvSpec) -> None:
        """The versions the dependency layer resolved, read from its image."""
        from swedojo.repolaunch.images import resolved

        spec.resolved_dependencies, exact = resolved(spec)
        spec.runtime_version = exact or spec.runtime_version

    def rebuild(self, spec: EnvSpec, workdir: Path, log: BuildLog, cache_dir: Path | None) -> list[dict[str, object]]:
        from swedojo.repolaunch import images

        self.ready(log)
        images.ensure_base(spec.base_image.split(":")[-1], log)
        built = images.build_images(spec, workdir, log, nocache=True)
        return [layer.model_dump() for layer in built]


_BUILDERS = {"local": _LocalBuilder(), "docker": _DockerBuilder()}
"""How `launch` and `rebuild` make the layers of each backend they can build for."""
BACKENDS = tuple(_BUILDERS)
"""The sandbox backends `launch` can build an environment for."""


def _builder(backend: str) -> _LocalBuilder | _DockerBuilder:
    if backend not in _BUILDERS:
        raise UnsupportedBackendError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    return _BUILDERS[backend]


def launch(repo: str, out: Path, commit: str = "", backend: str = "local", mirror: Path | None = None,
           cache_dir: Path | None = None, agent: SetupAgent | None = None, log: BuildLog | None = None,
           runs: int = 2, test_timeout: float = 1800.0, tests: list[str] | None = None) -> EnvSpec:
    """Build (or reuse) the environment of `repo` at `commit` (HEAD when empty) and validate it.

    Python: each admitted interpreter the backend has is tried in turn (up to `MAX_RUNTIMES`)
    until one builds and validates; the failed ones are in the build log and `EnvSpec.attempts`.
    `tests`: validate on these test files or ids only (an evaluation validates on what it grades;
    a whole real suite can take hours). Writes `envspec.json`, `analysis.json` and `build.log` into
    `out` (docker: `layers.json` too).
    """
    _builder(backend)
    out.mkdir(parents=True, exist_ok=True)
    own_log = log is None
    log = log or BuildLog(out / "build.log")
    try:
        return _launch(repo, out, commit, backend, mirror, cache_dir, agent, log, runs, test_timeout, list(tests or []))
    finally:
        if own_log:
            log.close()


class _PlanMemo(BaseModel):
    """The rules' plan that validated a commit last time, kept so that launching it again (a resumed
    evaluation, its empty-patch pass) goes to that plan at once instead of failing through the ones
    before it, each failure a validation run of the suite. Keyed by the first plan, so a change of
    the rules (another first analysis) or of the tests validated on starts afresh."""

    analysis: RepoAnalysis
    """The plan that validated."""
    failed: int
    """Plans that failed before it."""

    @staticmethod
    def path(cache_dir: Path | None, backend: str, sha: str, first: RepoAnalysis, tests: list[str], runs: int) -> Path:
        key = hashlib.sha256("\0".join([backend, sha, first.model_dump_json(), *tests, str(runs)]).encode()).hexdigest()
        return (cache_dir or default_cache_dir()).parent / "plans" / f"{sha[:12]}-{key[:16]}.json"


def _remembered(memo: Path, attempt: Callable[[RepoAnalysis], EnvSpec], log: BuildLog) -> EnvSpec | None:
    """The environment of the plan that validated last time, if it still does; None: run the plans."""
    try:
        known = _PlanMemo.model_validate_json(memo.read_text())
    except (OSError, ValidationError):
        return None  # none kept, or one no longer readable: the plans decide
    log.begin(f"the plan that validated this commit before, after {known.failed} that failed: trying it first")
    try:
        return attempt(known.analysis)
    except (InstallError, DiscoveryError, ValidateError) as exc:
        log.begin(f"it failed now at {exc.stage}: {exc.message}; the rules' plans from the first")
        return None


def _launch(repo: str, out: Path, commit: str, backend: str, mirror: Path | None, cache_dir: Path | None,
            agent: SetupAgent | None, log: BuildLog, runs: int, test_timeout: float, tests: list[str]) -> EnvSpec:
    source, sha, when = _resolve(repo, commit, mirror, log)
    builder = _builder(backend)
    builder.ready(log)
    with _checkout(source, sha, log) as workdir:
        request = SetupRequest(repo=repo, source=source, commit=sha, backend=backend, analysis=None, stage="",
                               failure="", log_path=log.path, trajectory=out / "setup-agent.json")
        plan_of: dict[int, RepoAnalysis] = {}  # id of a spec an attempt returned -> its plan

        def attempt(analysis: RepoAnalysis) -> EnvSpec:
            spec = _attempt(repo, sha, workdir, source, out, analysis, request, builder, log, cache_dir, runs,
                            test_timeout, tests)
            plan_of[id(spec)] = analysis
            return spec

        try:
            first = _analyse(workdir, when, log)
            memo = _PlanMemo.path(cache_dir, backend, sha, first, tests, runs)
            spec = _remembered(memo, attempt, log) or _by_rules(first, workdir, when, backend, request, builder, log,
                                                               attempt)
            if spec.attempts and id(spec) in plan_of:
                memo.parent.mkdir(parents=True, exist_ok=True)
                written = memo.with_name(f".{memo.name}.{os.getpid()}.{threading.get_ident()}")
                written.write_text(_PlanMemo(analysis=plan_of[id(spec)], failed=len(spec.attempts)).model_dump_json())
                written.replace(memo)  # whole or not at all, for a launch of the same commit beside
        except NoRuntimeError:
            raise  # no plan of commands brings a runtime the backend lacks
        except (AnalyseError, InstallError, DiscoveryError, ValidateError) as exc:
            if agent is None:
                if isinstance(exc, AnalyseError):
                    exc.message += "; no setup agent is configured to take over (dojo launch --agent-model)"
                raise
            spec = _by_agent(agent, request.model_copy(update={"stage": exc.stage, "failure": exc.message}), exc,
                             builder, log, attempt)
        (out / "envspec.json").write_text(spec.model_dump_json(indent=2))
        return spec


def _by_rules(analysis: RepoAnalysis, workdir: Path, when: datetime, backend: str, request: SetupRequest,
              builder: _LocalBuilder | _DockerBuilder, log: BuildLog,
              attempt: Callable[[RepoAnalysis], EnvSpec]) -> EnvSpec:
    """The rules' plans, one after another until one validates (Python: each runtime the backend
    has, then the retries the failed attempt's log suggests); the last failure raises, naming the
    plans tried. `request.analysis` follows the plan being tried."""
    recipe = recipe_of(analysis)
    runtimes = builder.runtimes(analysis, log)
    plans = [PythonPlanning(runtime=runtime) for runtime in runtimes][:MAX_RUNTIMES]
    failed: list[str] = []
    dropped: list[str] = []
    adapted: list[Adaptation] = []
    best: EnvSpec | None = None  # a validated environment whose tests skipped for want of modules
    rounds = 0
    while plans and len(failed) < MAX_ATTEMPTS:
        plan = plans.pop(0)
        if recipe.replans and plan != PythonPlanning(runtime=analysis.runtime_version):
            log.begin(f"analyse again for {plan.describe()}")
            analysis = analyse(workdir, when, plan)
        elif plan.runtime != analysis.runtime_version:  # the analysis says what the environment gets
            analysis = analysis.model_copy(update={"runtime_version": plan.runtime})
        if dropped and analysis.resolution_date:
            analysis = undated(analysis, dropped[-1])
        for adaptation in adapted:
            analysis = recipe.adapt(analysis, adaptation)
        request.analysis = analysis
        log.write(f"runtime on the {backend} backend: {analysis.language} {analysis.runtime_version}\n")
        started = log.path.stat().st_size if log.path.is_file() else 0
        try:
            spec = attempt(analysis)
        except (InstallError, DiscoveryError, ValidateError) as exc:
            said = f"{_since(log, started)}\n{exc.message}"  # the attempt's log and how it ended
            offline = (unreachable_registry(recipe.registry, analysis, workdir, exc.message, said)
                       or unreachable_source(analysis, exc.message, said)) if isinstance(exc, InstallError) else ""
            exc.message = offline or "; ".join([exc.message, *(line for line in cause(said)
                                                               if line not in exc.message)])
            if backend == "local" and (wanted := [p for c in recipe.adaptations(analysis, said) for p in c.packages]):
                exc.message += f"; the host lacks what Debian's {', '.join(wanted)} would bring (the local backend " \
                               "uses the host's tools; an image gets them)"
            what = plan.describe() if recipe.replans else f"{analysis.language} {analysis.runtime_version}"
            failed.append(f"{what}: [{exc.stage}] {exc.message}")
            if best is not None:  # what the skips named broke the environment: the one without it stands
                log.begin(f"the environment with {what} failed at {exc.stage}: {exc.message}; the one before stands")
                best.attempts = [*best.attempts, failed[-1]]
                return best
            if isinstance(exc, EngineBuildError):
                plans.clear()
            elif _dated(analysis) and (why := _undatable(said)):
                dropped.append(f"{analysis.build_system}: {analysis.resolution_date}: {why}")
                log.write(f"the registry cannot resolve as of {analysis.resolution_date} ({why}): "
                          "the date bound is dropped, the dependencies will be the latest\n")
                plans.insert(0, plan)
            elif change := _adaptation(recipe, analysis, said, adapted, backend):
                adapted.append(change)
                log.write(f"the log says `{change.cause}`: trying again with {change.name}\n")
                plans.insert(0, plan)
            elif recipe.replans and (wanted := unimportable(said, plan.optional, workdir)):
                log.write(f"the log says modules the repository does not provide are missing: trying again with "
                          f"{', '.join(wanted)} installed\n")
                plans.insert(0, plan.model_copy(update={"optional": (*plan.optional, *wanted)}))
            elif retry := recipe.retry(plan, analysis, said):
                plans.insert(0, retry)
            elif offline or not _INTERPRETER_TROUBLE.search(said):
                plans.clear()  # nothing says the interpreter is the trouble: another one would fail alike
            elif direction := interpreter_direction(said):
                plans = _toward(direction, analysis.runtime_version, runtimes, plans, failed_runtimes(failed, runtimes))
                log.write(f"the log says the code wants a{'n older' if direction < 0 else ' newer'} interpreter than "
                          f"{analysis.runtime_version}: trying {', '.join(p.runtime for p in plans[:MAX_RUNTIMES]) or 'none left'}\n")
            log.begin(f"the environment with {what} failed at {exc.stage}: {exc.message}"
                      + ("; trying the next plan" if plans else ""))
            if not plans or len(failed) >= MAX_ATTEMPTS:
                if len(failed) > 1:
                    exc.message = f"{exc.message} (tried {len(failed)} plans: {'; '.join(failed[:-1])})"
                raise
            continue
        spec.attempts, spec.pins_dropped = failed, dropped
        if best is not None:  # the plan with what the skips named validated too: the better of the two
            log.write(f"with {', '.join(plan.optional)} installed: {_passing(spec)} tests pass, {_passing(best)} before\n")
            if _passing(spec) < _passing(best):
                return best
        if recipe.replans and rounds < MAX_SKIP_ROUNDS \
                and (wanted := distributions(list(spec.skipped_for_modules), plan.optional, workdir)):
            rounds += 1
            log.begin(f"tests skipped for want of {', '.join(spec.skipped_for_modules)}: installing "
                      f"{', '.join(wanted)} and validating again")
            best = spec
            plans = [plan.model_copy(update={"optional": (*plan.optional, *wanted)})]
            continue
        return spec
    raise AssertionError("unreachable: every attempt returns or raises")


def failed_runtimes(failed: list[str], runtimes: list[str]) -> set[str]:
    """The runtimes the failed plans' descriptions name."""
    return {r for r in runtimes for line in failed if line.startswith(f"python {r}")}


def _toward(direction: int, current: str, runtimes: list[str], plans: list[PythonPlanning],
            tried: set[str]) -> list[PythonPlanning]:
    """The plans to try next after the code asked for an older (-1) or newer (1) interpreter than
    `current`: the backend's runtimes that way not tried yet, nearest first (up to `MAX_RUNTIMES`),
    then the other plans left."""
    key = version_key(current)
    way = sorted((r for r in runtimes if r not in tried and r != current
                  and (version_key(r) < key if direction < 0 else version_key(r) > key)),
                 key=version_key, reverse=direction < 0)[:MAX_RUNTIMES]
    ahead = [PythonPlanning(runtime=r) for r in way]
    return ahead + [p for p in plans if p.runtime not in way]


def _passing(spec: EnvSpec) -> int:
    return sum(1 for status in spec.test_status.values() if status.counts_as_pass)


def _adaptation(recipe: LanguageRecipe, analysis: RepoAnalysis, said: str, adapted: list[Adaptation],
                backend: str) -> Adaptation | None:
    """The first change the failed attempt's log calls for that the launch has not made yet. Debian
    packages go into the runtime layer of an image: the local backend uses the host's tools as they are."""
    names = {change.name for change in adapted}
    return next((change for change in recipe.adaptations(analysis, said)
                 if change.name not in names and not (change.packages and backend == "local")), None)


def _by_agent(agent: SetupAgent, request: SetupRequest, failure: LaunchError, builder: _LocalBuilder | _DockerBuilder,
              log: BuildLog, attempt: Callable[[RepoAnalysis], EnvSpec]) -> EnvSpec:
    """The setup agent's plan after the rules' `failure`, built from scratch and validated once;
    a failure names the stage and what became of the agent (no plan, or its plan failing)."""
    log.begin(f"setup agent ({agent.name}): the rules failed at {failure.stage}; trajectory {request.trajectory}")
    try:
        analysis = agent.propose(request)
    except NoPlanError as exc:
        raise type(failure)(f"{failure.message}; the setup agent ({agent.name}) found no plan: {exc}",
                            log.path) from exc
    log.begin("the setup agent's plan")
    _describe(analysis, log)
    try:
        runtime = builder.runtimes(analysis, log)[0]
        spec = attempt(analysis.model_copy(update={"runtime_version": runtime}))
    except (InstallError, DiscoveryError, ValidateError) as exc:
        raise type(exc)(f"the setup agent's plan failed: {exc.message} (the rules had failed at {failure.stage}: "
                        f"{failure.message})", log.path) from exc
    spec.attempts = [f"the rules: [{failure.stage}] {failure.message}"]
    spec.setup_agent = SetupAgentRun(stage=failure.stage, failure=failure.message, model=agent.name,
                                     trajectory=str(request.trajectory))
    return spec


_UNDATABLE = re.compile(r"^.*(?:code ETARGET|code ENOVERSIONS|No matching version found for|No versions available for"
                        r"|does not provide upload-time metadata).*$", re.MULTILINE)
"""What npm and pip say when a date-bounded install cannot be resolved: no version of a package
published before the date (or none with a publish time), an index without upload times."""


def _dated(analysis: RepoAnalysis) -> bool:
    """Whether the install commands carry the resolution date (an install from a lock file does not)."""
    return bool(analysis.resolution_date) and any(analysis.resolution_date in c for c in analysis.install_commands)


def _undatable(said: str) -> str:
    """The lines of a failed attempt's log saying its date bound cannot be met; empty if none does."""
    lines = dict.fromkeys(m.group(0).strip() for m in _UNDATABLE.finditer(said))
    return "; ".join(list(lines)[:3])


_INTERPRETER_TROUBLE = re.compile(r"Traceback \(most recent call last\)|INTERNALERROR|SyntaxError|ImportError"
                                  r"|No matching distribution found|Requires-Python|requires a different Python"
                                  r"|note: module requires Go|go\.mod requires go|requires rustc \d"
                                  r"|is not supported by the following package|feature `edition\d+` is required"
                                  r"|^\S+\.(?:c|cc|cpp|cxx|h|hh|hpp|hxx):\d+:\d+: error: ", re.MULTILINE)
"""A failed attempt another interpreter or toolchain may cure: the code, its runner or a
dependency broke on this one, or the index has no release of a requirement for it, or a module
or crate asks for a newer Go or rustc, or C or C++ code did not compile with this compiler and C library."""


def _since(log: BuildLog, offset: int) -> str:
    with log.path.open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


MAX_ATTEMPTS = 8
"""Environments a launch builds before it gives up."""
MAX_SKIP_ROUNDS = 2
"""Times a launch installs what the baseline's skips name and validates again."""
MAX_RUNTIMES = 3
"""Runtimes a launch tries before it gives up (each a full build of the dependency layer, and one
more without requirement files when those were in the failed one)."""


def _attempt(repo: str, sha: str, workdir: Path, source: Path, out: Path, analysis: RepoAnalysis,
             request: SetupRequest, builder: _LocalBuilder | _DockerBuilder, log: BuildLog, cache_dir: Path | None,
             runs: int, test_timeout: float, tests: list[str]) -> EnvSpec:
    """One environment for `analysis`: built (or looked up) and validated; `request.spec` is the
    environment as built, for a setup agent should validation fail."""
    built = builder.build(repo, sha, workdir, analysis, log, cache_dir)
    if built.layers:
        (out / "layers.json").write_text(json.dumps(built.layers, indent=2))
    (out / "analysis.json").write_text(analysis.model_dump_json(indent=2))
    spec = built.spec
    spec.ids_revision = IDS_REVISION
    spec.test_scope = runnable(spec, [t for t in tests if (workdir / t.split("::")[0]).is_file()])
    if tests and not spec.test_scope:
        log.write(f"none of {', '.join(tests[:5])} is a test file here: validating on the whole suite\n")
    if built.hit and built.cached_spec.is_file():
        previous = EnvSpec.model_validate_json(built.cached_spec.read_text())
        if previous.model_dump(exclude=_VALIDATED) == spec.model_dump(exclude=_VALIDATED):
            log.write(f"validated spec cache hit: {built.cached_spec}\n")
            return previous.model_copy(update={"repo": repo})
    builder.pin(spec)
    request.spec = spec
    spec = _validated(spec, source, log, runs, test_timeout)
    built.cached_spec.parent.mkdir(parents=True, exist_ok=True)
    built.cached_spec.write_text(spec.model_dump_json(indent=2))
    log.begin(f"done: {len(spec.test_status)} tests, {len(spec.flaky_tests)} flaky, "
              f"{len(spec.network_tests)} need the network")
    return spec


_VALIDATED = {"repo", "test_status", "flaky_tests", "network_tests", "skipped_for_modules", "resolved_dependencies",
              "runtime_version", "attempts", "pins_dropped", "setup_agent", "suite_seconds"}
"""EnvSpec fields validation (or the built layer) fills in; the rest must match for a spec cache hit."""


def _validated(spec: EnvSpec, source: Path, log: BuildLog, runs: int, test_timeout: float) -> EnvSpec:
    """`spec` with its baseline: `runs` runs with the network off, then the failing tests with it on
    (and those that passed there alone with it off again, where the runner ran them alone)."""
    config = SandboxConfig(command_timeout_s=test_timeout, total_time_s=(runs + 2) * test_timeout)
    env = environment(spec, source, config)
    with prepared_sandbox(env, spec.commit, log, test_timeout) as sandbox:
        baseline = validate(sandbox, spec, log, runs, test_timeout, spec.test_scope)
    needs_network: list[str] = []
    if failing := failing_tests(baseline):
        online = env.model_copy(update={"config": config.model_copy(update={"network": True})})
        with prepared_sandbox(online, spec.commit, log, test_timeout) as sandbox:
            needs_network, alone = passing_among(sandbox, spec, log, failing, "with the network on (tests failed with "
                                                 "it off)", test_timeout)
        if needs_network and alone:
            with prepared_sandbox(env, spec.commit, log, test_timeout) as sandbox:
                offline, _ = passing_among(sandbox, spec, log, needs_network, "with the network off, of those alone",
                                           test_timeout)
            needs_network = sorted(set(needs_network) - set(offline))
        log.write(f"network tests: {len(needs_network)}\n")
    return spec.model_copy(update={"test_status": baseline.test_status, "flaky_tests": baseline.flaky_tests,
                                   "network_tests": needs_network, "suite_seconds": round(baseline.seconds, 1),
                                   "skipped_for_modules": baseline.skipped_for_modules})


class RebuildReport(BaseModel):
    """`dojo launch --rebuild`: the environment made again from its `EnvSpec`, compared."""

    same: bool
    """Every test outside the flaky and network tests has the status it had."""
    differences: dict[str, list[str | None]] = Field(default_factory=dict)
    """Test -> [status in the spec, status after the rebuild] (None: absent)."""
    ignored: list[str] = Field(default_factory=list)
    """Flaky or network tests (of either run), not compared."""
    layers: list[dict[str, object]] = Field(default_factory=list)
    """Layers as rebuilt (docker)."""


def compare(before: EnvSpec, after: EnvSpec) -> RebuildReport:
    """Test statuses of two validations of one environment, flaky and network tests aside."""
    ignored = set(before.flaky_tests) | set(after.flaky_tests) | set(before.network_tests) | set(after.network_tests)
    differences: dict[str, list[str | None]] = {}
    for test in sorted(set(before.test_status) | set(after.test_status)):
        old, new = before.test_status.get(test), after.test_status.get(test)
        if test not in ignored and old != new:
            differences[test] = [old.value if isinstance(old, TestStatus) else None,
                                 new.value if isinstance(new, TestStatus) else None]
    return RebuildReport(same=not differences, differences=differences, ignored=sorted(ignored))


def rebuild(spec: EnvSpec, out: Path, mirror: Path | None = None, cache_dir: Path | None = None,
            log: BuildLog | None = None, runs: int = 2, test_timeout: float = 1800.0) -> RebuildReport:
    """Make every layer of `spec` again from scratch from the spec alone, validate, compare.

    Writes `envspec.rebuilt.json` and `rebuild.json` into `out`; the docker layers keep their
    tags (the images they replace are removed where nothing else uses them).
    """
    out.mkdir(parents=True, exist_ok=True)
    own_log = log is None
    log = log or BuildLog(out / "rebuild.log")
    try:
        builder = _builder(spec.backend)
        source, sha, _ = _resolve(spec.repo, spec.commit, mirror, log)
        with _checkout(source, sha, log) as workdir:
            layers = builder.rebuild(spec, workdir, log, cache_dir)
        after = _validated(spec.model_copy(update={"test_status": {}, "flaky_tests": [], "network_tests": []}),
                           source, log, runs, test_timeout)
        report = compare(spec, after).model_copy(update={"layers": layers})
        (out / "envspec.rebuilt.json").write_text(after.model_dump_json(indent=2))
        (out / "rebuild.json").write_text(report.model_dump_json(indent=2))
        log.begin(f"rebuild done: {'same statuses' if report.same else f'{len(report.differences)} differ'}")
        return report
    finally:
        if own_log:
            log.close()
