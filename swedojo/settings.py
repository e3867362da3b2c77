"""What a run is, in one object: `RunSettings`, validated once, builds the run's objects.

`dojo eval`, `dojo demo` and `dojo run` parse their options into it, the rollout service builds
a batch's resolver and rewards from it, and a Ray worker rebuilds its resolver from it: one place
says what a suite, a policy, a backend or a limit means. `RunSettings.prepare` loads what the
settings name (suite, model, predictions), checks what needs the machine (a Ray address, a
mirror's layout, the run directory) and claims the directory, so that every run records its
`run.json`. Bad input anywhere in it is a `BadInputError`: one line, exit status 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swedojo import __version__
from swedojo.agent.backends import BackendError, ModelBackend, load_backend
from swedojo.agent.base import Policy
from swedojo.agent.factory import make_policy
from swedojo.agent.loop import AgentConfig
from swedojo.datasets.io import RecordError, SuiteFormatError, select_instances
from swedojo.datasets.predictions import PredictionsFile, load_predictions
from swedojo.datasets.registry import SUITES, Suite, load_suite
from swedojo.errors import BadInputError, output_dir
from swedojo.executors import Executor
from swedojo.executors import executor as make_executor
from swedojo.repos import RepoNotFoundError, resolve_repo
from swedojo.rewards.compose import RewardConfig
from swedojo.rewards.web.perceptual import PerceptualModelError, load_scorer
from swedojo.rollout import EnvironmentResolver
from swedojo.rundir import (
    InstanceResult,
    RunDir,
    RunManifest,
    suite_sha256,
    write_atomic,
)
from swedojo.sandboxes.registry import backend as sandbox_backend
from swedojo.schema import TaskInstance

if TYPE_CHECKING:
    from swedojo.sandboxes.pool import SandboxPool


class RunLimits(BaseModel):
    """What a whole run may spend (`dojo eval --cost-limit-run`, `--token-limit-run`), over every
    result in its directory (a resumed run's earlier ones too): once its results reach a limit, no
    further instance starts; those running finish (a limit per instance is `LoopLimits`')."""

    max_cost_usd: float | None = None
    """US dollars at the provider's list price over the run's instances; None: no limit."""
    max_total_tokens: int | None = None
    """Prompt plus completion tokens over the run's instances; None: no limit."""

    def reached(self, results: list[InstanceResult]) -> str:
        """The limit `results` reach and what they spent, as `Summary.stopped_by` says it; empty when none."""
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in results)
        cost = sum(r.cost_usd or 0.0 for r in results)
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            return f"{tokens} tokens, prompt and completion, over the run (limit --token-limit-run={self.max_total_tokens})"
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            return f"${cost:.6f} spent over the run (limit --cost-limit-run={self.max_cost_usd:g})"
        return ""


class RunSettings(BaseModel):
    """Everything that makes a run what it is, as the options of `dojo eval` give it."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    """A registered suite name (`demo`) or a suite file; for `dojo run`, where the issue came from."""
    out: Path
    """The run directory; an existing one is resumed (`restart`: set aside first)."""
    instance_ids: list[str] = Field(default_factory=list)
    """Only these instances of the suite (all when empty)."""
    slice: str | None = None
    """Only instances A to B-1 of what is left, as Python's `A:B`."""
    limit: int | None = Field(default=None, ge=1)
    """Only the first N instances of what is left."""
    policy: str = ""
    """gold, empty, model, replay or predictions; empty: predictions with `predictions`, else gold."""
    predictions: Path | None = None
    """A SWE-bench predictions file whose patches are graded instead of a policy's."""
    model: str = ""
    """The model policy's model (`--model`): checkpoint dir, http(s) URL, tiny:ARCH, scripted:FILE or a provider's."""
    api_key_env: str = "OPENAI_API_KEY"
    """For an http(s) model, or a provider's when not the default: the variable that holds its API key."""
    trajectories: Path | None = None
    """The replay policy's trajectories directory."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The model policy's loop: tools, per-instance limits, sampling."""
    rewards: str = "tiers"
    """tiers: every reward tier is scored (gated); resolved: SWE-bench grading only."""
    perceptual_model: Path | None = None
    """With tiers: a local image-classification checkpoint tier visual of front-end tasks rates frames with."""
    backend: str = "local"
    """The sandbox backend of every instance."""
    mirror: Path | None = None
    """Local repos as owner/name[.git]; once prepared, where the suite's repos are (a bundled suite's own)."""
    launch: bool | None = None
    """Launch each environment with RepoLaunch; None: on, except for bundled suites, which need none."""
    workers: int = 1
    """Instances at once (local threads, or the CPUs of a Ray started here)."""
    pool: int = Field(default=0, ge=0)
    """Warm sandboxes kept ready per image (a pooled backend, local executor); 0: off."""
    executor: str = "local"
    """Where instances run: local or ray."""
    address: str | None = None
    """For ray: the cluster to join (host:port); None: a Ray is started here for the run."""
    seed: int = 0
    """A model policy's sampling seed; each episode samples with one derived from it and its instance's id."""
    limits: RunLimits = Field(default_factory=RunLimits)
    """What the whole run may spend."""
    instance_timeout_s: float | None = None
    """Each instance's wall-clock budget in seconds, agent and grading together; None: unbounded."""
    restart: bool = False
    """Set an existing run's results aside (to previous-<time>/) and start over."""

    @classmethod
    def checked(cls, **values: object) -> RunSettings:
        """The settings of `values`, or BadInputError saying in one line what is wrong with them."""
        try:
            return cls(**values)
        except ValidationError as exc:
            raise BadInputError("; ".join(_said(error) for error in exc.errors())) from None

    @model_validator(mode="after")
    def _consistent(self) -> RunSettings:
        """What can be told wrong without the machine, in the words of the options that set it."""
        if self.rewards not in ("tiers", "resolved"):
            raise ValueError(f"unknown --rewards {self.rewards!r}; choose tiers or resolved")
        if self.perceptual_model and self.rewards != "tiers":
            raise ValueError("--perceptual-model rates frames for the reward tiers: it needs --rewards tiers")
        sandbox_backend(self.backend)  # UnknownBackendError names the known ones
        if self.pool > 0 and self.executor != "local":
            raise ValueError("--pool keeps warm sandboxes in this process: it is for --executor local")
        if self.predictions and self.policy not in ("", "predictions"):
            raise ValueError("--predictions grades the file's patches: leave out --policy")
        self.policy = self.policy or ("predictions" if self.predictions else "gold")
        return self

    @property
    def launching(self) -> bool:
        """Whether environments are launched with RepoLaunch (bundled suites need none)."""
        return self.launch if self.launch is not None else self.suite not in SUITES

    @property
    def run_seed(self) -> int | None:
        """The sampling seed of the run's episodes: only a model policy samples."""
        return self.seed if self.policy == "model" else None

    def reward_config(self) -> RewardConfig | None:
        """The tiers' configuration; None: SWE-bench grading only."""
        return RewardConfig(perceptual_model=self.perceptual_model) if self.rewards == "tiers" else None

    def resolver(self, launch_dir: Path, pool: SandboxPool | None = None) -> EnvironmentResolver:
        """The instances' environments: launched into `launch_dir`, with warm sandboxes from `pool`."""
        return EnvironmentResolver(backend=self.backend, mirror=self.mirror, launch=self.launching,
                                   launch_dir=launch_dir, pool=pool)

    def load_model(self) -> ModelBackend:
        """The backend `model` names; a provider's model reads its key from `api_key_env` only when one
        other than the default is given (else from the provider's own variable). A cost limit needs a
        model whose price is known."""
        spec = self.model
        if spec.startswith(("http://", "https://")) or (
                self.api_key_env != "OPENAI_API_KEY" and not spec.startswith(("tiny:", "scripted:"))
                and not Path(spec).is_dir()):
            backend = load_backend(spec, api_key_env=self.api_key_env)
        else:
            backend = load_backend(spec)
        per_instance = self.agent.limits.max_cost_usd
        limit, option = (per_instance, "--cost-limit") if per_instance is not None else \
            (self.limits.max_cost_usd, "--cost-limit-run")
        if limit is not None and not getattr(backend, "priced", False):
            raise BackendError(f"{option}: the price of {spec} is not known (only a provider's model that litellm's "
                               "price map lists has one), so its cost cannot be counted")
        return backend

    def manifest(self, instances: list[TaskInstance], predictions: PredictionsFile | None) -> RunManifest:
        """`run.json` of a run of `instances`. Without a perceptual model the rewards read as they did
        before there was one, so older runs resume."""
        rewards = self.reward_config()
        return RunManifest(suite=self.suite, suite_sha256=suite_sha256(instances), policy=self.policy,
                           model=predictions.fingerprint if predictions else self.model,
                           rewards=rewards.model_dump_json(exclude_none=True) if rewards else "resolved",
                           temperature=self.agent.sampling.temperature if self.policy == "model" else None,
                           seed=self.run_seed, swedojo_version=__version__)

    def sandbox_pool(self) -> SandboxPool | None:
        """Warm sandboxes for the run, when asked for and the backend keeps them; the caller closes it."""
        if self.pool <= 0 or not sandbox_backend(self.backend).pooled:
            return None
        from swedojo.sandboxes.pool import SandboxPool

        return SandboxPool(self.pool)

    def prepare(self) -> Run:
        """The run's objects, built once: suite and instances, predictions, the policy's factory (its
        model loaded), the executor; then the run directory made and claimed (`claim`: RunMismatchError,
        RunInUseError when it is another run's)."""
        try:
            settings = self._resolved()
            runner = make_executor(settings.executor, settings.workers, settings.address)
            model = settings.load_model() if settings.policy == "model" and settings.model else None
            preds = load_predictions(settings.predictions) if settings.predictions else None
            patches = preds.patches() if preds else None
            policy, agent = settings.policy, settings.agent

            def policy_factory() -> Policy:
                return make_policy(policy, model, settings.trajectories, agent, patches)

            policy_factory()  # a policy that lacks what it needs says so now, not in every instance
            suite, instances = settings.load_suite()
            _check_mirror([i.repo for i in suite.loaded.instances], suite.mirror)
        except (SuiteFormatError, ValueError, PerceptualModelError, BackendError) as exc:
            raise BadInputError(str(exc)) from None
        settings = settings.model_copy(update={"mirror": suite.mirror})
        run_dir = RunDir(output_dir(settings.out))
        claim(run_dir, settings.manifest(instances, preds), settings.restart)
        return Run(settings, instances, suite.loaded.errors, preds, policy_factory, runner, run_dir)

    def _resolved(self) -> RunSettings:
        """These settings with the perceptual model loaded (it must load) and named by its own path."""
        if not self.perceptual_model:
            return self
        return self.model_copy(update={"perceptual_model": load_scorer(self.perceptual_model).path})

    def load_suite(self) -> tuple[Suite, list[TaskInstance]]:
        """The suite and its selected instances; BadInputError for a suite or a selection that cannot be."""
        try:
            suite = load_suite(self.suite, self.mirror)
            return suite, select_instances(suite.loaded.instances, self.instance_ids, self.slice, self.limit)
        except (SuiteFormatError, ValueError) as exc:
            raise BadInputError(str(exc)) from None


@dataclass(frozen=True)
class Run:
    """A run's objects, built from its settings by `RunSettings.prepare`; its directory is claimed."""

    settings: RunSettings
    """The settings, with the suite's mirror and the perceptual model's path as found."""
    instances: list[TaskInstance]
    """The selected instances, in order."""
    record_errors: list[RecordError]
    """The suite's records that could not be loaded."""
    predictions: PredictionsFile | None
    """The predictions graded, when the policy is theirs."""
    policy_factory: Callable[[], Policy]
    """A fresh policy for each instance."""
    executor: Executor
    """What runs the instances."""
    run_dir: RunDir
    """Where the run's files go."""


def _said(error: dict) -> str:
    """One error of a `ValidationError` as the user reads it: a check's own words, else the field and why."""
    cause = error.get("ctx", {}).get("error")
    if error["type"] == "value_error" and cause is not None:
        return str(cause)
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _check_mirror(repos: list[str], mirror: Path | None) -> None:
    """A `--mirror` directory that holds none of the suite's repositories has the wrong layout: stop
    before every instance ends as an infra_error saying so (one missing is that instance's
    infra_error, as a partial mirror may be meant; a mirror not here at all is the executor's to
    find, as a Ray node that cannot see it says so)."""
    named = sorted({r for r in repos if "://" not in r and not r.startswith("git@")})  # a URL would be cloned
    missing: list[str] = []
    for repo in named if mirror is not None and mirror.is_dir() else []:
        try:
            resolve_repo(repo, mirror)
            return
        except RepoNotFoundError as exc:
            missing.append(str(exc))
    if missing:
        others = f"; nor are the other {len(missing) - 1} repositories of the run" if len(missing) > 1 else ""
        raise BadInputError(f"--mirror: {missing[0]}{others}")


class RunMismatchError(Exception):
    """The run directory holds results made by other inputs (suite, policy, model, rewards)."""


def claim(run_dir: RunDir, manifest: RunManifest, restart: bool = False) -> None:
    """Make `run_dir` this run's: take its lock (RunInUseError while another live run has it), write
    its manifest, or check that a resumed run has the same inputs. The lock is held until
    `evaluate` ends (or the process does: a killed run lets go of it).

    `restart`: an earlier run's files are moved to `previous-<time>/` first (nothing is deleted;
    the content-hashed baselines and environments stay, they hold for any inputs).
    """
    run_dir.hold()
    made = run_dir.results.is_file() or run_dir.manifest.is_file()
    if made and not restart:
        if not run_dir.manifest.is_file():
            raise RunMismatchError(f"{run_dir.root} holds results but no {run_dir.manifest.name}, so what made them is "
                                   "unknown: use another --out, or --restart to set them aside")
        differences = RunManifest.model_validate_json(run_dir.manifest.read_text()).differences(manifest)
        if differences:
            raise RunMismatchError(f"{run_dir.root} was made by other inputs ({'; '.join(differences)}): "
                                   "use another --out, or --restart to set the earlier results aside")
    if made and restart:
        aside = run_dir.root / f"previous-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir()
        reports = run_dir.root.glob(run_dir.swebench_report("*").name)
        # The manifest last: a restart killed half way leaves a directory that the same command sets aside again.
        for path in (run_dir.results, run_dir.summary, run_dir.preds, run_dir.trajectories, run_dir.logs, *reports,
                     run_dir.manifest):
            if path.exists():
                path.rename(aside / path.name)
    write_atomic(run_dir.manifest, manifest.model_dump_json(indent=1))
