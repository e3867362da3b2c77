"""The plan-execute-verify loop: the `model` policy.

The model first writes a plan, then acts through validated tool calls on the sandbox; when it
submits, the harness verifies (runs the tests related to the change) and feeds failures back
before it accepts. The message list is the trajectory; it is checkpointed after every step.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import BaseModel, Field
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from swedojo.agent.backends import (
    RAW_ARGUMENTS_KEY,
    BackendError,
    Generation,
    Message,
    ModelBackend,
    SamplingParams,
    TransientBackendError,
)
from swedojo.agent.base import Interrupted, RunContext, derived_seed
from swedojo.sandboxes import scope as sandbox_scope
from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.sandboxes.scope import ScopeClosedError
from swedojo.schema import (
    EnvSpec,
    ExitStatus,
    Step,
    TaskInstance,
    TaskKind,
    ToolCall,
    Trajectory,
)
from swedojo.testrun.command import selects_tests
from swedojo.testrun.patches import patch_files
from swedojo.testrun.run import TestRunError, run_tests
from swedojo.tools.base import ToolContext, ToolResult
from swedojo.tools.dispatch import FormatErrorCounter
from swedojo.tools.formats import get_format
from swedojo.tools.formats.base import FormatError, excerpt
from swedojo.tools.registry import ToolRegistry, ToolSetConfig

SYSTEM_PROMPT = """You are a careful software engineer working in a sandboxed copy of a repository.
You act only through the tools below. Work in three phases:
1. Plan: read the issue, then write a short numbered plan before acting.
2. Execute: inspect the code, reproduce the problem, make the smallest correct change.
3. Verify: run the relevant tests (and a reproduction) and fix what fails; then call `submit`.
Make one or more tool calls per turn.

{tools}"""

TASK_PROMPT = """The repository is checked out at {workdir}. Resolve this issue:

<issue>
{issue}
</issue>

Start with your plan."""

_TEST_FILE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|conftest\.py)$")


class LoopLimits(BaseModel):
    """When a run stops without a submission; each maps to an ExitStatus."""

    max_steps: int = 40
    """Assistant turns."""
    max_tokens: int = 200_000
    """Tokens sampled over the whole run."""
    max_total_tokens: int | None = None
    """Prompt and completion tokens over the run, as the backend counts them (each turn's whole
    prompt again: what a hosted API bills); `--token-limit`. None: no limit."""
    max_cost_usd: float | None = None
    """US dollars the run may spend at the provider's list price (`--cost-limit`); a turn whose cost
    is unknown ends a run that has this limit. None: no limit."""
    max_wall_s: float = 1800.0
    """Wall time of the run."""
    max_format_errors: int = 3
    """Consecutive turns without one valid tool call."""
    max_timeouts: int = 3
    """Consecutive tool calls that timed out."""


class AgentConfig(BaseModel):
    """Everything that shapes a `model` run besides the model itself."""

    tool_set: str = "swe"
    """Named tool set (fixes the tools and their fingerprints)."""
    front_end_tool_set: str = "web"
    """Tool set for front-end tasks (`TaskInstance.checks`): their pages are judged in a browser."""
    tool_format: str | None = None
    """How the model writes tool calls: glm, openai, react or native (through the API's tool calling,
    for a backend whose `tool_format` is native); None: as the backend says (`tool_format`), else as
    its chat template does (`ChatFormat.tool_format`; glm for a model served over HTTP, whose server
    parses the calls)."""
    tools: ToolSetConfig = Field(default_factory=ToolSetConfig)
    """Available tool sets."""
    limits: LoopLimits = Field(default_factory=LoopLimits)
    """Stopping limits."""
    sampling: SamplingParams = Field(default_factory=lambda: SamplingParams(temperature=0.0, max_new_tokens=512))
    """Sampling for every turn."""
    verify_rounds: int = 1
    """How many times a submission whose related tests fail is sent back before it is accepted."""
    backend_retries: int = 3
    """Attempts for a transient backend error."""


def related_tests(sandbox: Sandbox, patch: str) -> list[str]:
    """Test files the change touches, or that are named after a changed module."""
    changed = patch_files(patch)
    tests = [f for f in changed if _TEST_FILE.search(f)]
    listed = sandbox.exec("git ls-files -- '*.py'")
    known = listed.output.splitlines() if listed.ok else []
    for source in changed:
        stem = source.rsplit("/", 1)[-1].removesuffix(".py")
        if source.endswith(".py") and not _TEST_FILE.search(source):
            tests += [k for k in known if k.rsplit("/", 1)[-1] in (f"test_{stem}.py", f"{stem}_test.py")]
    return [t for t in dict.fromkeys(tests) if sandbox.exec(f"test -f {shlex.quote(t)}").ok]


def verify(sandbox: Sandbox, spec: EnvSpec | None, patch: str) -> str:
    """Problems with a submission, for the model; empty when it may be accepted."""
    if not patch.strip():
        return "Verification: the work tree has no changes, so there is nothing to submit. Make the fix first."
    if spec is None:
        return ""
    tests = related_tests(sandbox, patch)
    if not tests or not selects_tests(spec):  # the whole suite would report failures that are not the change's
        return ""
    try:
        result = run_tests(sandbox, spec, tests, agent_shell=True)
    except TestRunError as exc:
        return f"Verification could not read the tests' results: {exc}"
    failing = result.failing()
    if result.exit_code == 0 and not result.timed_out and not failing:
        return ""
    listed = "\n".join(failing[:20]) or f"(exit code {result.exit_code}, no per-test results)"
    return (f"Verification failed: tests related to your change do not pass:\n{listed}\n"
            f"--- log tail ---\n{result.log[-2000:]}\nFix this, then submit again.")


def structured_calls(calls: list[ToolCall]) -> tuple[list[ToolCall], list[FormatError]]:
    """Calls a server parsed; one whose arguments were not a JSON object becomes a format error."""
    good = [c for c in calls if RAW_ARGUMENTS_KEY not in c.arguments]
    bad = [FormatError(message=f"The arguments of tool call {c.name!r} are not a JSON object.", excerpt=excerpt(str(c.arguments[RAW_ARGUMENTS_KEY])))
           for c in calls if RAW_ARGUMENTS_KEY in c.arguments]
    return good, bad


@dataclass
class Episode:
    """One run's state, handed to every step, so a ModelPolicy object keeps no per-run state."""

    sandbox: Sandbox
    """Where the tools act."""
    run: RunContext
    """What the rollout handed the policy."""
    trajectory: Trajectory
    """The run so far."""
    messages: list[Message]
    """The conversation the next turn is sampled from."""
    conversation: str
    """The backend's id for this conversation (its cache), released when the run ends."""
    tools: ToolContext
    """What every tool call sees besides the sandbox."""
    registry: ToolRegistry
    """The tools of this run (the task's kind picks the set)."""
    verify_left: int
    """How many more submissions may be sent back for failing tests."""
    started: float = field(default_factory=time.monotonic)
    """Monotonic start time, for `max_wall_s`."""
    sampled: int = 0
    """Tokens sampled so far, for `max_tokens`."""
    cost_usd: float = 0.0
    """Dollars spent so far on the turns whose cost is known, for `max_cost_usd`."""
    unpriced_turn: int | None = None
    """The first turn whose cost is unknown, if any."""
    sandbox_lost: bool = False
    """The sandbox failed: its work tree can no longer be read."""
    timeouts: int = 0
    """Consecutive turns with a timed-out call."""
    format_errors: FormatErrorCounter = field(default_factory=FormatErrorCounter)
    """Consecutive turns without one valid call."""
    context: list[int] = field(default_factory=list)
    """Prompt and sampled ids of the last turn: what the next prompt should extend."""


def native_tool_format(backend: ModelBackend) -> str:
    """The tool-call format the backend says its model uses (`native`: the API's tool calling), else
    that of its chat template, when it renders prompts itself; else glm."""
    said = getattr(backend, "tool_format", None)  # a provider's model: native, or JSON calls in text
    if isinstance(said, str):
        return said
    chat = getattr(backend, "chat", None)  # in-process and scripted backends render in a chat format
    return chat.tool_format if chat is not None else "glm"


class ModelPolicy:
    """Plan, execute, verify, submit, with a model backend and typed tools.

    `solve` is a short loop over steps a subclass may override one at a time: `start`, then per turn
    `query` the backend, `record` the step, `parse` the calls, `execute` them, `observe` the results,
    `review` a submission, `checkpoint` the trajectory and check `stop_reason`; at the end `finish`.
    """

    name = "model"
    system_prompt = SYSTEM_PROMPT
    """The system prompt's template ({tools}): a subclass with another job has its own."""
    task_prompt = TASK_PROMPT
    """The task prompt's template ({workdir}, {issue}: the instance's problem statement)."""

    def __init__(self, backend: ModelBackend, config: AgentConfig | None = None) -> None:
        self.backend = backend
        self.config = config or AgentConfig()
        self.registry = self.config.tools.build(self.config.tool_set)
        self.front_end_registry = self.config.tools.build(self.config.front_end_tool_set)
        self.format = get_format(self.config.tool_format or native_tool_format(backend))

    def solve(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext | None = None) -> Trajectory:
        episode = self.start(instance, sandbox, run or RunContext())
        limits = self.config.limits
        status = ExitStatus.LIMIT_STEPS
        try:
            for index in range(limits.max_steps):
                if time.monotonic() - episode.started > limits.max_wall_s:
                    status = ExitStatus.LIMIT_TIME
                    break
                if (scope := sandbox_scope.current()) is not None and scope.closed_because:
                    raise ScopeClosedError(f"no next step: {scope.closed_because}")
                stop = self.step(episode, index)
                if stop is not None:
                    status = stop
                    break
        except SandboxError as exc:
            status, episode.trajectory.error = ExitStatus.INFRA_ERROR, f"sandbox: {exc}"
            episode.sandbox_lost = True
        except BackendError as exc:  # the model could not answer (a server error, a script run out): not the agent's doing
            status, episode.trajectory.error = ExitStatus.INFRA_ERROR, f"model backend: {type(exc).__name__}: {exc}"
        except KeyboardInterrupt:  # the operator's Ctrl-C: keep what was done, then stop as asked
            status = ExitStatus.INTERRUPTED
        finally:
            self.backend.release(episode.conversation)
            episode.tools.close()
        trajectory = self.finish(episode, status)
        if status == ExitStatus.INTERRUPTED:
            raise Interrupted(trajectory)
        return trajectory

    def start(self, instance: TaskInstance, sandbox: Sandbox, run: RunContext) -> Episode:
        """The prompts, an empty trajectory and the conversation they open."""
        registry = self.registry if instance.kind == TaskKind.CODE else self.front_end_registry
        system = self.system_prompt.format(tools=self.format.render_tools(registry.specs()))
        task = self.task_prompt.format(workdir=sandbox.workdir, issue=instance.problem_statement.strip())
        trajectory = Trajectory(
            instance_id=instance.instance_id, policy=self.name, model=self.backend.name, group_id=run.group_id,
            policy_version=self.backend.version,
            system_prompt=system, task_prompt=task, tool_fingerprints=registry.fingerprints(),
            toolset_fingerprint=registry.fingerprint,
        )
        return Episode(sandbox=sandbox, run=run, trajectory=trajectory, messages=[Message.system(system), Message.user(task)],
                       conversation=f"{instance.instance_id}-{id(trajectory)}",
                       tools=ToolContext(env=run.spec, files_dir=run.files_dir), registry=registry,
                       verify_left=self.config.verify_rounds)

    def step(self, episode: Episode, index: int) -> ExitStatus | None:
        """One turn; the status when the run ends with it."""
        generation = self.query(episode)
        episode.messages.append(generation.message())
        step = self.record(episode, index, generation)
        calls, errors = self.parse(generation, episode.registry)
        step.tool_calls = calls
        results = self.execute(episode, calls)
        step.files = [name for result in results for name in result.files]
        observations = self.observe(step, calls, results, errors)
        submission = next((r for r in results if r.submitted), None)
        problems = self.review(episode, submission.patch) if submission is not None else ""
        if problems:
            step.phase = "verify"
            observations.append(Message.observation(problems))
        elif submission is not None:
            step.phase = "submit"
            episode.trajectory.patch = submission.patch
        step.observation = "\n".join(m.content for m in observations)
        episode.trajectory.steps.append(step)
        self.checkpoint(episode)
        if step.phase == "submit":
            return ExitStatus.SUBMITTED
        episode.messages += observations
        return self.stop_reason(episode, results)

    def query(self, episode: Episode) -> Generation:
        """The next assistant turn; a transient backend error is retried."""
        update: dict[str, object] = {"stop": [*self.config.sampling.stop, *self.format.stop]}
        if episode.run.seed is not None:
            update["seed"] = derived_seed(episode.run.seed, len(episode.trajectory.steps))  # each turn its own stream
        sampling = self.config.sampling.model_copy(update=update)
        call = retry(
            retry=retry_if_exception_type(TransientBackendError),
            stop=stop_after_attempt(self.config.backend_retries),
            wait=wait_exponential(multiplier=0.5, max=8),
            reraise=True,
        )(self.backend.generate)
        if self.format.name == "native":  # the tools travel with the request, as the API's `tools`
            tools = [spec.openai() for spec in episode.registry.specs()]
            return call(episode.messages, sampling, conversation_id=episode.conversation, tools=tools)
        return call(episode.messages, sampling, conversation_id=episode.conversation)

    def record(self, episode: Episode, index: int, generation: Generation) -> Step:
        """The turn's step as sampled, its new prompt tokens, and its tokens and cost counted against the limits."""
        usage = generation.usage
        step = Step(index=index, phase="plan" if index == 0 else "execute", reasoning=generation.reasoning,
                    content=generation.content, response_token_ids=generation.token_ids,
                    response_logprobs=generation.logprobs, logprob_kind=generation.logprob_kind,
                    usage={**usage.model_dump(exclude={"cost_usd"}), "temperature": self.config.sampling.temperature},
                    cost_usd=usage.cost_usd)
        episode.context = self._record_prompt(episode.trajectory, step, generation, episode.context)
        episode.sampled += usage.completion_tokens or len(generation.token_ids)
        trajectory = episode.trajectory
        trajectory.prompt_tokens += usage.prompt_tokens
        trajectory.completion_tokens += usage.completion_tokens or len(generation.token_ids)
        if usage.cost_usd is None:
            episode.unpriced_turn = index if episode.unpriced_turn is None else episode.unpriced_turn
        else:
            episode.cost_usd += usage.cost_usd
        trajectory.cost_usd = episode.cost_usd if episode.unpriced_turn is None else None
        kinds = {s.logprob_kind for s in trajectory.steps} | {generation.logprob_kind}
        trajectory.logprob_kind = generation.logprob_kind if len(kinds) == 1 else None
        return step

    def parse(self, generation: Generation, registry: ToolRegistry) -> tuple[list[ToolCall], list[FormatError]]:
        """The turn's calls and format errors: the calls a server already parsed, else those in the text."""
        if generation.tool_calls:
            return structured_calls(generation.tool_calls)
        parsed = self.format.parse(generation.content, registry.specs())
        return parsed.calls, parsed.errors

    def execute(self, episode: Episode, calls: list[ToolCall]) -> list[ToolResult]:
        """Validate and run each call in the sandbox; a rejected call comes back as a result."""
        return [episode.registry.dispatch(call, episode.sandbox, episode.tools) for call in calls]

    def observe(self, step: Step, calls: list[ToolCall], results: list[ToolResult], errors: list[FormatError]) -> list[Message]:
        """What the model reads next: each call's result, then the format errors; both also set `step.error`."""
        observations = [Message.observation(r.output, c.call_id, r.images) for r, c in zip(results, calls)]
        if errors:
            step.error = "\n".join(e.render() for e in errors)
            observations.append(Message.observation(step.error))
        rejected = [r.output for r in results if r.rejected]
        if rejected and not step.error:
            step.error = "\n".join(rejected)
        return observations

    def review(self, episode: Episode, patch: str) -> str:
        """Problems to send a submission back with (each uses one of `verify_rounds`); empty accepts it."""
        if episode.verify_left <= 0:
            return ""
        problems = verify(episode.sandbox, episode.run.spec, patch)
        if problems:
            episode.verify_left -= 1
        return problems

    def checkpoint(self, episode: Episode) -> None:
        """Hand the trajectory so far to the rollout, so a killed run leaves it on disk."""
        episode.run.checkpoint(episode.trajectory)

    def stop_reason(self, episode: Episode, results: list[ToolResult]) -> ExitStatus | None:
        """The limit the turn's results reached, if any."""
        limits = self.config.limits
        episode.timeouts = episode.timeouts + 1 if any(r.timed_out for r in results) else 0
        if episode.format_errors.record(results) >= limits.max_format_errors:
            return ExitStatus.FORMAT_ERRORS
        if episode.timeouts >= limits.max_timeouts:
            return ExitStatus.TIMEOUTS
        if episode.sampled >= limits.max_tokens:
            return ExitStatus.LIMIT_TOKENS
        if limits.max_total_tokens is not None and self._total_tokens(episode) >= limits.max_total_tokens:
            return ExitStatus.LIMIT_TOKENS
        if limits.max_cost_usd is not None and (episode.unpriced_turn is not None or episode.cost_usd >= limits.max_cost_usd):
            return ExitStatus.LIMIT_COST
        return None

    @staticmethod
    def _total_tokens(episode: Episode) -> int:
        return episode.trajectory.prompt_tokens + episode.trajectory.completion_tokens

    def finish(self, episode: Episode, status: ExitStatus) -> Trajectory:
        """Close the trajectory: the work tree's diff unless a patch was submitted (or the sandbox is
        lost), the status, a last checkpoint."""
        trajectory = episode.trajectory
        if status != ExitStatus.SUBMITTED and not episode.sandbox_lost:
            try:
                trajectory.patch = episode.sandbox.diff()
            except SandboxError as exc:
                status, trajectory.error = ExitStatus.INFRA_ERROR, f"sandbox: {exc}"
        trajectory.exit_status = status
        trajectory.stopped_by = self.limit_reached(episode, status)
        trajectory.finished_at = datetime.now(UTC)
        self.checkpoint(episode)
        return trajectory

    def limit_reached(self, episode: Episode, status: ExitStatus) -> str:
        """The limit behind a limit status, with its setting, so a reader knows which one to raise."""
        limits = self.config.limits
        if status == ExitStatus.LIMIT_STEPS:
            return f"{len(episode.trajectory.steps)} steps (limit max_steps={limits.max_steps})"
        if status == ExitStatus.LIMIT_TOKENS and episode.sampled < limits.max_tokens:
            return (f"{self._total_tokens(episode)} tokens, prompt and completion "
                    f"(limit max_total_tokens={limits.max_total_tokens})")
        if status == ExitStatus.LIMIT_TOKENS:
            return f"{episode.sampled} tokens sampled (limit max_tokens={limits.max_tokens})"
        if status == ExitStatus.LIMIT_COST and episode.unpriced_turn is not None:
            return (f"the cost of turn {episode.unpriced_turn} is unknown (no price for {self.backend.name}), so the "
                    f"limit cannot be kept (limit max_cost_usd={limits.max_cost_usd:g})")
        if status == ExitStatus.LIMIT_COST:
            return f"${episode.cost_usd:.6f} spent (limit max_cost_usd={limits.max_cost_usd:g})"
        if status == ExitStatus.LIMIT_TIME:
            return f"{time.monotonic() - episode.started:.0f}s of wall time (limit max_wall_s={limits.max_wall_s:g})"
        if status == ExitStatus.FORMAT_ERRORS:
            return (f"{episode.format_errors.consecutive} turns in a row without a valid tool call "
                    f"(limit max_format_errors={limits.max_format_errors})")
        if status == ExitStatus.TIMEOUTS:
            return f"{episode.timeouts} turns in a row with a timed-out tool call (limit max_timeouts={limits.max_timeouts})"
        if status == ExitStatus.INTERRUPTED:
            return f"Ctrl-C (SIGINT) after {len(episode.trajectory.steps)} steps"
        return ""

    @staticmethod
    def _record_prompt(trajectory: Trajectory, step: Step, generation: Generation, context: list[int]) -> list[int]:
        """Store only the prompt tokens this turn added; with retained thinking they extend `context`."""
        prompt = generation.prompt_token_ids
        if not prompt:
            return context
        step.routed_experts = generation.routed_experts
        if not trajectory.initial_prompt_token_ids:
            trajectory.initial_prompt_token_ids = list(prompt)
        elif prompt[: len(context)] == context:
            step.prompt_token_ids = prompt[len(context):]
            step.routed_experts = generation.routed_experts[len(context) - 1 :]  # earlier rows are in earlier steps
        else:
            step.prompt_token_ids = list(prompt)
            step.usage["prompt_reset"] = 1.0
        return list(prompt) + list(generation.token_ids)
