"""The contracts between subsystems.

Every object that crosses a stage boundary or is written to disk is one of these models, so each
stage can run alone, be resumed, cached, or shipped to another machine.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class TestStatus(str, Enum):
    """Outcome of one test as read from a test log."""

    __test__ = False  # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"
    XPASS = "XPASS"

    @property
    def counts_as_pass(self) -> bool:
        """SWE-bench counts XFAIL as passed (the test ran and behaved as declared)."""
        return self in (TestStatus.PASSED, TestStatus.XFAIL)


class Viewport(BaseModel):
    """A browser window size in CSS pixels."""

    width: int = Field(gt=0)
    """Width."""
    height: int = Field(gt=0)
    """Height."""


class Requirement(BaseModel):
    """Elements a page must hold: how many match a simple selector (`tag`, `#id`, `.class`, `[attr]`,
    `[attr=value]`, compounds of these; no combinators)."""

    selector: str
    """What to count."""
    min: int = 1
    """At least this many."""
    max: int | None = None
    """At most this many (None: no bound)."""


class StaticChecks(BaseModel):
    """Tier static of a front-end task: what the page files must hold, read without a browser.

    Always checked besides: HTML and CSS parse without errors, every image has an `alt`, no
    resource is loaded from the network, no image asset is missing or duplicated."""

    required: list[Requirement] = Field(default_factory=list)
    """Elements each page must hold."""
    min_text_chars: dict[str, int] = Field(default_factory=dict)
    """Selector -> each match must hold at least this many characters of text (alt text not
    counted): content written as text, not drawn into an image."""


class Action(BaseModel):
    """One user action of a scripted interaction, done as a user would in the browser."""

    do: Literal["click", "fill", "type", "press", "drag", "check", "select"]
    """click; fill/type `value` into it; press key `value`; drag it onto the element `value`
    selects; check a box; select the option `value`."""
    selector: str
    """The element acted on (a CSS selector; the first match)."""
    value: str = ""
    """Text, key, option or drop target, as `do` needs."""


class Expectation(BaseModel):
    """A DOM state a scripted interaction must end in."""

    selector: str
    """The elements looked at (a CSS selector)."""
    count: int | None = None
    """Exactly this many match."""
    text: str | None = None
    """Their visible text, joined, contains this."""
    visible: bool | None = None
    """Every match is rendered and visible (True) or none is (False)."""
    order: list[str] | None = None
    """Their visible texts, trimmed, are exactly these in document order."""
    columns: int | None = None
    """They are laid out in this many columns (distinct left edges)."""


class Scenario(BaseModel):
    """A scripted interaction on a freshly loaded page: actions, then the DOM state expected."""

    name: str
    """Shown in the evidence."""
    page: str = ""
    """The page, relative to the repo root (default: the task's first page)."""
    viewport: Viewport | None = None
    """Window size (default: the first of `RuntimeChecks.viewports`)."""
    steps: list[Action] = Field(default_factory=list)
    """Done in order."""
    expect: list[Expectation] = Field(default_factory=list)
    """All must hold after the steps."""


class RuntimeChecks(BaseModel):
    """Tier runtime of a front-end task: the page rendered in headless Chromium.

    Always checked besides, at every viewport: no console error, no page error, no failed
    request, no broken image; no horizontal scrolling; every text of the page rendered, visible
    (not `visibility`/`opacity`/transparent colour), on screen, not clipped by an `overflow` or
    `clip-path` box, not cut by `text-overflow`, at least `min_font_px`, not squeezed (line
    height below the font size, negative letter spacing) and not overlapping other text."""

    viewports: list[Viewport] = Field(default_factory=lambda: [Viewport(width=1280, height=720)])
    """Window sizes the page is rendered at."""
    frames: str = ""
    """CSS selector of slide-like frames: each must fit the viewport's width, have
    `aspect_ratio`, and hold all of its content inside it. Empty: the page is one frame."""
    aspect_ratio: float | None = None
    """Width / height every frame must have (1% tolerance), e.g. 16/9."""
    min_font_px: float = 12.0
    """Smallest computed font size of any text."""
    may_hide: list[str] = Field(default_factory=list)
    """CSS selectors whose text may be hidden at load (an error message before validation)."""
    min_gap_px: dict[str, float] = Field(default_factory=dict)
    """CSS selector -> the boxes of its matches must not overlap and keep at least this gap."""
    max_image_area: float = 0.5
    """Images, canvases and SVGs together cover at most this fraction of any frame."""
    scenarios: list[Scenario] = Field(default_factory=list)
    """Scripted interactions."""


class VisualChecks(BaseModel):
    """Tier visual of a front-end task: deterministic measures of each frame's screenshot."""

    whitespace: tuple[float, float] = (0.15, 0.97)
    """Bounds of the fraction of empty 16 px tiles (a single colour): neither blank nor crammed."""
    max_dominance: float = 0.97
    """The most common colour covers at most this fraction of a frame."""
    min_contrast: float = 4.5
    """WCAG contrast ratio every text must reach on screen (3.0 for large text)."""
    max_imbalance: float = 0.35
    """How far the centre of the ink may lie from the frame's centre, in half-frame units."""
    min_perceptual: float = 0.5
    """Score in [0, 1] every frame must reach from the perceptual model, when one is given
    (`dojo eval --perceptual-model`); without one, frames are not rated."""


class PageChecks(BaseModel):
    """The `checks` section of a front-end task: the pages it is about and each tier's checks."""

    pages: list[str]
    """HTML files, relative to the repo root, the agent works on; each is checked and rendered."""
    static: StaticChecks = Field(default_factory=StaticChecks)
    """Tier static."""
    runtime: RuntimeChecks = Field(default_factory=RuntimeChecks)
    """Tier runtime."""
    visual: VisualChecks = Field(default_factory=VisualChecks)
    """Tier visual."""


class TaskKind(str, Enum):
    """What a task asks for, which decides its tools, its sandbox and how it is graded."""

    CODE = "code"
    """A code change, graded by the repository's tests (FAIL_TO_PASS, PASS_TO_PASS)."""
    FRONT_END = "front_end"
    """Pages judged in a browser by the front-end tiers (`TaskInstance.checks`), not by tests."""


class TaskInstance(BaseModel):
    """One task in SWE-bench's field names; unknown fields (v5, Live, Gym, smith) are kept."""

    model_config = ConfigDict(extra="allow")

    instance_id: str
    """Unique id, conventionally `owner__name-NUMBER`."""
    repo: str
    """`owner/name`, a git URL, or a local path."""
    base_commit: str
    """Commit the agent starts from."""
    patch: str = ""
    """Gold patch (source changes only)."""
    test_patch: str = ""
    """Patch that adds or changes the tests that check the fix."""
    problem_statement: str = ""
    """The issue text the agent sees."""
    hints_text: str = ""
    """Comments made before the fix; optional help."""
    created_at: str = ""
    """When the issue or fix was created (ISO 8601)."""
    version: str = ""
    """Release line of the repo, used to share environments."""
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    """Tests that fail before the gold patch and pass after it."""
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    """Tests that pass before and must still pass after."""
    environment_setup_commit: str = ""
    """Commit whose dependencies define the environment (SWE-bench); base_commit when empty."""
    passed_at_base: list[str] = Field(default_factory=list)
    """Listed tests the benchmark's own run passed at the base commit, where its record says so
    (Multi-SWE-bench's per-stage statuses); empty where it does not. Of these, what this
    environment's validated baseline fails at the base commit is no patch's failure."""
    checks: PageChecks | None = None
    """Set on a front-end task: judged by the browser tiers (static, runtime, visual), not by tests."""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _decode_test_list(cls, value: Any) -> Any:
        """Published SWE-bench files carry these lists as JSON-encoded strings."""
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return []
            decoded = json.loads(text)
            if not isinstance(decoded, list):
                raise ValueError(f"expected a JSON list of test ids, got {type(decoded).__name__}")
            return decoded
        return value

    @property
    def setup_commit(self) -> str:
        return self.environment_setup_commit or self.base_commit

    @property
    def kind(self) -> TaskKind:
        """The one place that says how a task's kind is told: a front-end task has `checks`."""
        return TaskKind.CODE if self.checks is None else TaskKind.FRONT_END

    def to_swebench(self) -> dict[str, Any]:
        """The record as SWE-bench publishes it: test lists as JSON strings, extras kept."""
        record = self.model_dump(mode="json")
        record["FAIL_TO_PASS"] = json.dumps(self.FAIL_TO_PASS)
        record["PASS_TO_PASS"] = json.dumps(self.PASS_TO_PASS)
        return record


class SetupAgentRun(BaseModel):
    """The setup agent's part in an environment: the rules failed, and the plan is the agent's."""

    stage: str
    """Stage the rules failed at: analyse, install, test-discovery or validate."""
    failure: str
    """How the rules failed there."""
    model: str
    """The model the agent ran (`dojo launch --agent-model`)."""
    trajectory: str
    """The agent's trajectory file, in the launch's out dir."""


class EnvSpec(BaseModel):
    """How to build an environment for a repo at a commit, run its tests and read the results."""

    repo: str
    """`owner/name`, URL or path of the repository."""
    commit: str
    """Commit the environment was built for."""
    language: str = "python"
    """Main language detected."""
    build_system: str = ""
    """What the environment was set up from (pyproject, setup.py, package.json, make, ...)."""
    runtime_version: str = ""
    """Interpreter or toolchain version (e.g. python 3.11)."""
    base_image: str = ""
    """Docker base image tag (locally made Debian root)."""
    backend: str = "local"
    """Sandbox backend the environment was built for and runs on (a name in
    `swedojo.sandboxes.registry`: local, docker)."""
    image: str = ""
    """Final image tag for the docker backend; empty for the local backend."""
    workdir: str = "/testbed"
    """Where the repository lives inside the environment."""
    install_commands: list[str] = Field(default_factory=list)
    """Plain shell steps that install the project and its dependencies."""
    toolchain_commands: list[str] = Field(default_factory=list)
    """Runtime layer: steps run as root on `base_image` (system packages, interpreter, pinned pip);
    empty for the local backend, which uses the host's runtime."""
    rebuild_commands: list[str] = Field(default_factory=list)
    """Repo layer: steps run in the work tree of every fresh sandbox (install or build the project
    at the sandbox's commit on top of the dependency layer)."""
    layers: dict[str, str] = Field(default_factory=dict)
    """Image tag of each docker layer in build order (base, runtime, deps, repo); `image` is the last."""
    build_command: str = ""
    """Incremental build of the work tree as it is, run before every test run (launch validation,
    grading, tiers, the agent's `run_tests`), so compiled tests never run a build older than the
    code; empty where the test command builds what it runs (pytest, cargo, go, Maven)."""
    repo_layer_in_tree: bool = False
    """The repo layer writes nothing outside the work tree (and `.git/info/exclude`): a fresh docker
    sandbox at the image's commit takes the image's repo-layer outputs in place of running it
    (`sandboxes.prebuilt`). Where it is False and `build_command` is set, the outputs are taken and
    the repo layer runs on them (an incremental build)."""
    work_tree_mb: int = 0
    """Room (MiB) the work tree of each sandbox needs for what the build and tests write, where a
    launch step ran out of the default (`SandboxConfig.disk_mb`); 0: the default. Memory grows
    with it where the work tree is memory (a tmpfs)."""
    test_command: str = "python -m pytest -rA -p no:cacheprovider"
    """Command that runs tests; test ids are appended to it."""
    log_parser: str = "pytest"
    """Name of the parser that maps the test log to per-test statuses."""
    env_vars: dict[str, str] = Field(
        default_factory=lambda: {
            "TZ": "UTC",
            "LC_ALL": "C.UTF-8",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    """Environment fixed for every test run, so results reproduce across machines."""
    resolved_dependencies: dict[str, str] = Field(default_factory=dict)
    """Package -> version pinned at build time."""
    resolution_date: str = ""
    """Dependencies were resolved as of this date (the commit date)."""
    test_status: dict[str, TestStatus] = Field(default_factory=dict)
    """Baseline status of every test at `commit`."""
    ids_revision: int = 0
    """The parsers' id revision its `test_status` was read with (`testrun.parsers.IDS_REVISION`); a
    cached spec of another revision is validated again, so a baseline keeps the ids grading reads."""
    flaky_tests: list[str] = Field(default_factory=list)
    """Tests whose status differed between validation runs."""
    network_tests: list[str] = Field(default_factory=list)
    """Tests that need the network (fail with it off)."""
    test_scope: list[str] = Field(default_factory=list)
    """The test files or ids validation ran (empty: the whole suite); the baseline covers only them."""
    suite_seconds: float = 0.0
    """Wall time of the slowest validation run (of `test_scope` where set), on the machine that
    launched the environment: a suite that slow is given a multiple of it to run in when graded
    (`testrun.run.time_limit`). 0: not measured (a spec written before it was)."""
    attempts: list[str] = Field(default_factory=list)
    """Environments tried before this one, each with the stage and reason it failed (runtime first)."""
    pins_dropped: list[str] = Field(default_factory=list)
    """Date bounds given up, each with the registry's words: it could not resolve the dependencies
    as of the commit date (npm ETARGET / ENOVERSIONS where it serves no publish times before it, an
    index without upload times for pip), so they are the latest ones and `resolution_date` is empty."""
    requirement_changes: list[str] = Field(default_factory=list)
    """Requirement lines of the project the install did not take as written, each with what it
    took instead and why (a VCS requirement from the index, an invalid line dropped)."""
    skipped_for_modules: dict[str, str] = Field(default_factory=dict)
    """Modules the baseline's skips and collection errors say are missing -> the runner's reason:
    what the environment could not provide (the launch installs what it can and validates again)."""
    setup_agent: SetupAgentRun | None = None
    """Set when the setup agent made the plan (install, repo layer and test commands, parser) because
    the rules failed; None: the rules made it. Either way the plan is the plain commands above, so
    `--rebuild` replays it with no agent."""

    @model_validator(mode="before")
    @classmethod
    def _migrate_backend(cls, data: Any) -> Any:
        """Migration of envspec files written before `backend` existed: those name an image only
        when they are for docker, so one with an image and no `backend` key loads as docker.
        Nothing is guessed at run time: every spec made now names its backend."""
        if isinstance(data, dict) and "backend" not in data and data.get("image"):
            return {**data, "backend": "docker"}
        return data


class ToolCall(BaseModel):
    """One call the model asked for, as parsed from its text."""

    name: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments by parameter name."""
    call_id: str = ""
    """Id used to pair the call with its result (OpenAI style); may be empty."""


class LogprobKind(str, Enum):
    """Which distribution `Generation.logprobs` were taken from, so a trainer knows what it compares."""

    TEMPERATURE = "temperature"
    """log_softmax(logits / temperature), before top-k/top-p truncation: what a trainer recomputes."""
    RAW = "raw"
    """log_softmax(logits) of the model; used for greedy decoding (temperature 0)."""
    SERVER = "server"
    """As an inference engine (vLLM, SGLang) reported them with the ids of the tokens it sampled
    (vLLM's default is the raw distribution)."""
    PROVIDER = "provider"
    """As a hosted API (or any server not known to be an engine) reported them, over tokens it names
    by text, not id: for inspection, never for training (no token ids to align them with)."""
    REPLAYED = "replayed"
    """Placeholder 0.0 for replayed text: no model sampled these tokens."""
    NONE = "none"
    """No logprobs."""


class Step(BaseModel):
    """One assistant turn and what the environment answered."""

    index: int
    """Position in the trajectory, from 0."""
    phase: str = "execute"
    """Loop phase: plan, execute, verify or submit."""
    reasoning: str = ""
    """The model's thinking for this turn (kept: retained thinking)."""
    content: str = ""
    """The visible assistant text (without reasoning)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls parsed from the turn."""
    observation: str = ""
    """What the tools returned, as shown to the model."""
    files: list[str] = Field(default_factory=list)
    """Files this turn's tools saved (screenshots), relative to the trajectory file's directory."""
    error: str = ""
    """A model-visible error for this turn (bad tool call, format error), if any."""
    prompt_token_ids: list[int] = Field(default_factory=list)
    """Tokens added to the context before this turn's generation (observation and role markers)."""
    response_token_ids: list[int] = Field(default_factory=list)
    """The exact tokens the model sampled for this turn."""
    response_logprobs: list[float] = Field(default_factory=list)
    """Log-probability of each sampled token under the rollout policy."""
    logprob_kind: LogprobKind | None = None
    """Which distribution `response_logprobs` come from; `replayed` and `none` mark placeholders that
    no trainer may use. None in trajectories written before it was recorded."""
    routed_experts: list[list[list[int]]] = Field(default_factory=list)
    """MoE routing replay, when the backend recorded it: [tokens, layers, top_k] expert ids of the
    tokens this turn fed to the model after the previous turn's (the previous turn's last sampled
    token, then this turn's prompt and sampled tokens but its last); over all steps they make the
    trajectory's `rollout_routed_experts` (one row per token but the last; -1 on dense layers)."""
    usage: dict[str, float] = Field(default_factory=dict)
    """Prompt tokens, tokens prefilled, tokens served from cache, completion tokens, seconds."""
    cost_usd: float | None = None
    """What this turn cost in US dollars at the provider's list price (litellm's price map); None
    when unknown (a local model, a server or a model without a known price), never 0.0 for unknown."""
    started_at: datetime = Field(default_factory=_utcnow)
    """When the turn began."""


class ExitStatus(str, Enum):
    """Why an agent run ended."""

    SUBMITTED = "submitted"
    LIMIT_STEPS = "limit_steps"
    LIMIT_TOKENS = "limit_tokens"
    LIMIT_TIME = "limit_time"
    FORMAT_ERRORS = "format_errors"
    TIMEOUTS = "timeouts"
    LIMIT_COST = "limit_cost"
    INFRA_ERROR = "infra_error"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    """Stopped by the operator (Ctrl-C) mid-run: neither the agent's ending nor a limit's; the
    trajectory holds the steps done and the work tree's diff so far (`RUNNING` is what a killed
    process leaves, with no ending at all)."""


class Trajectory(BaseModel):
    """A whole run: the message list is the trajectory, plus what a trainer needs."""

    instance_id: str
    """The task this run worked on."""
    policy: str
    """Policy name (model, gold, empty, replay)."""
    model: str = ""
    """Model identifier, if any."""
    policy_version: str = ""
    """Weights version used for sampling (for off-policy correction)."""
    group_id: str = ""
    """Rollouts of the same task in one batch share a group id."""
    system_prompt: str = ""
    """System prompt shown to the model."""
    task_prompt: str = ""
    """First user message."""
    initial_prompt_token_ids: list[int] = Field(default_factory=list)
    """Tokens of the prompt before the first assistant turn."""
    steps: list[Step] = Field(default_factory=list)
    """Turns in order."""
    tool_fingerprints: dict[str, str] = Field(default_factory=dict)
    """Tool name -> signature fingerprint of every tool the run could call."""
    toolset_fingerprint: str = ""
    """Hash over all tool fingerprints."""
    exit_status: ExitStatus = ExitStatus.RUNNING
    """Why the run ended."""
    stopped_by: str = ""
    """The limit that ended the run and its setting, e.g. `3 turns in a row without a valid tool call
    (limit max_format_errors=3)`, or the operator's Ctrl-C (`interrupted`); empty when neither did."""
    patch: str = ""
    """The submitted diff against base_commit."""
    error: str = ""
    """Fatal error message, when exit_status is infra_error."""
    logprob_kind: LogprobKind | None = None
    """The kind of logprobs the steps hold, the one all its model turns share: `server` (an inference
    engine's, vLLM or SGLang, with the ids of the tokens it sampled), `temperature` or `raw` (an
    in-process model's, with ids), `provider` (a hosted API's, over its own tokens, no ids), `replayed`
    (placeholders) or `none`. None: no model turn, turns of different kinds (each step says its
    own), or a trajectory written before it was recorded."""
    prompt_tokens: int = 0
    """Prompt tokens over all turns, as the backend counted them (each turn's whole prompt: what a
    hosted API bills)."""
    completion_tokens: int = 0
    """Completion tokens over all turns."""
    cost_usd: float | None = None
    """What the run cost in US dollars, the sum of its steps' `cost_usd`; None when any turn's cost
    is unknown (or there was no model turn), never 0.0 for unknown."""
    started_at: datetime = Field(default_factory=_utcnow)
    """Start time."""
    finished_at: datetime | None = None
    """End time, None while running."""


class EvalStatus(str, Enum):
    """Outcome of grading one candidate patch; infra_error is never the agent's fault."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    EMPTY_PATCH = "empty_patch"
    PATCH_FAILED = "patch_failed"
    INFRA_ERROR = "infra_error"
    NEEDS_NETWORK = "needs_network"
    """Every FAIL_TO_PASS test failed for want of the network (with the reference patch too): not scored."""
    NOT_SCORABLE = "not_scorable"
    """A listed test cannot run in this environment for want of a module (skipped, or its file not
    collected), with the reference patch too (`RewardReport.environment_gaps`): neither a verdict
    on the patch nor the harness's failure; not scored."""
    NOT_GRADED = "not_graded"
    """No tests are known (`dojo run` on a raw issue): only the format and static tiers were scored."""
    TIMED_OUT = "timed_out"
    """The instance's wall-clock budget (`dojo eval --instance-timeout`, agent and grading together)
    ran out: its sandboxes were stopped and nothing was graded. Neither the harness's failure nor
    a verdict on the patch; a resumed run keeps it."""


class TierScore(BaseModel):
    """One reward tier with the evidence behind its score."""

    tier: int
    """Place in the registered tiers (`swedojo.rewards.tiers.TIERS`): 0 format, 1 static, 2 tests, 3 verification."""
    name: str
    """Tier name."""
    score: float
    """In [0, 1]."""
    passed: bool
    """Whether the tier counts as passed for gating."""
    scored: bool = True
    """False when the tier had nothing to check (no test to watch, no file of its kind): it is then
    neither passed nor failed, and composing leaves it out of the mean and the gate."""
    evidence: dict[str, Any] = Field(default_factory=dict)
    """What the score is based on."""


class RewardReport(BaseModel):
    """How a candidate patch fared on one task."""

    instance_id: str
    """Task graded."""
    status: EvalStatus
    """Overall outcome."""
    resolved: bool = False
    """Every FAIL_TO_PASS and PASS_TO_PASS test passed."""
    fail_to_pass: dict[str, TestStatus | None] = Field(default_factory=dict)
    """Status of each FAIL_TO_PASS test; None = missing from the log (counts as failed)."""
    pass_to_pass: dict[str, TestStatus | None] = Field(default_factory=dict)
    """Status of each PASS_TO_PASS test; None = missing from the log (counts as failed)."""
    missing_modules: list[str] = Field(default_factory=list)
    """Modules the test log says could not be imported that neither the repository nor any patch
    provides: dependencies the environment lacks (an environment launched at another commit
    than the base may lack what the base's code imports)."""
    standins: str = ""
    """Whether local stand-ins of public test services (httpbin.org) served the tests, after a run
    without them failed for want of the network, or why they could not."""
    not_tests: dict[str, str] = Field(default_factory=dict)
    """Listed ids that name no test, left out of scoring (id -> why): fragments of a log line that
    the dataset's own parser read as a test, such as pytest's progress column (`[100%]`)."""
    tampering: list[str] = Field(default_factory=list)
    """What the guard of the graded pytest run found changed in pytest's machinery, or reported
    otherwise than it ran, that the reference patch's run does not show (`testrun.guard`): the
    candidate is unresolved, its tests' statuses unknown."""
    unmatched_tests: list[str] = Field(default_factory=list)
    """Listed tests that name no test of the log, in SWE-bench's forms (`testrun.ids`) or by any
    rule of `testrun.names` (a benchmark's own parser's names): they count as failed, as missing
    from the log, and are named here so that a name our parser cannot read is never silent."""
    needs_network: dict[str, str] = Field(default_factory=dict)
    """Listed tests left out of scoring: they failed for want of the network, with the candidate and
    with the reference patch alike (test -> the reason the runner printed)."""
    fails_at_base: dict[str, str] = Field(default_factory=dict)
    """Listed tests some of whose tests were left out of scoring: they did not pass in this run, this
    environment's validated baseline fails them at the base commit too, and the benchmark's record
    says its own run passed the listed test there (Multi-SWE-bench's per-stage statuses): the
    environment cannot reproduce that baseline, so their failure is no patch's. The listed test's
    other tests are scored; one with none left is left out (test -> how many, and which)."""
    environment_gaps: dict[str, str] = Field(default_factory=dict)
    """Listed tests that did not run, with the reference patch's run showing the same: the
    environment lacks a module they need (skipped for it, or their file not collected; a module
    the sandbox cannot import and no patch provides: test -> "module: the runner's reason"), or
    their file could not be collected (test -> "not collected: file: the error"); any makes the
    report `not_scorable`."""
    restored: dict[str, str] = Field(default_factory=dict)
    """Test infrastructure the candidate changed (conftest.py, pytest configuration, sitecustomize,
    .pth files, ...; `testrun.patches.TEST_INFRASTRUCTURE`), put back as it was before the tests
    ran: path -> why."""
    test_exit_code: int | None = None
    """Exit code of the test command."""
    test_duration_s: float = 0.0
    """Wall time of the test command alone (the rest of `duration_s` is the harness's)."""
    tiers: list[TierScore] = Field(default_factory=list)
    """Per-tier scores, when reward tiers were computed."""
    reward: float = 0.0
    """Scalar reward."""
    error: str = ""
    """One-line reason for patch_failed, infra_error, needs_network or not_scorable."""
    log_tail: str = ""
    """End of the test log, for a quick look."""
    test_output: str = Field("", exclude=True)
    """The grading test run's whole log in SWE-bench's `test_output.txt` layout (the command, the
    log between its start and end markers, the exit code); never written with the report: `dojo
    eval` keeps it as `logs/<instance_id>/test_output.txt`."""
    duration_s: float = 0.0
    """Wall time of grading."""


ALL_SCHEMAS: dict[str, type[BaseModel]] = {
    "TaskInstance": TaskInstance,
    "EnvSpec": EnvSpec,
    "Step": Step,
    "Trajectory": Trajectory,
    "RewardReport": RewardReport,
}
