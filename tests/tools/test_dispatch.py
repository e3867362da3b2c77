"""Validation before dispatch: unknown, altered or ill-formed calls are never executed."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolfixtures import AlteredBash

from swedojo.sandboxes.local import LocalSandbox
from swedojo.schema import ToolCall, Trajectory
from swedojo.tools.base import ToolContext, ToolResult
from swedojo.tools.dispatch import CallRejection, FormatErrorCounter
from swedojo.tools.formats import FORMATS
from swedojo.tools.registry import FingerprintMismatchError, ToolRegistry, ToolSetConfig

TOUCH = "touch SENTINEL"


def sentinel(sandbox: LocalSandbox) -> bool:
    return (Path(sandbox.workdir) / "SENTINEL").exists()


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCall(name="bahs", arguments={"command": TOUCH}), "Did you mean 'bash'?"),
        (ToolCall(name="Bash", arguments={"command": TOUCH}), "Did you mean 'bash'?"),
        (
            ToolCall(name="shell_exec", arguments={"command": TOUCH}),
            "Available tools: bash, str_replace_editor, search, run_tests, submit.",
        ),
        (
            ToolCall(name="bash", arguments={"command": TOUCH, "cwd": "/"}),
            "unexpected argument 'cwd' (accepted: command)",
        ),
        (ToolCall(name="bash", arguments={"cmd": TOUCH}), "missing required argument 'command'"),
        (
            ToolCall(name="bash", arguments={"command": ["touch", "SENTINEL"]}),
            "argument 'command': Input should be a valid string",
        ),
        (
            ToolCall(name="run_tests", arguments={"tests": "tests/test_calc.py"}),
            "argument 'tests': Input should be a valid list",
        ),
    ],
)
def test_invalid_calls_are_rejected_with_a_precise_message_and_never_run(
    call: ToolCall, expected: str, sandbox: LocalSandbox, ctx: ToolContext, registry: ToolRegistry
) -> None:
    rejection = registry.validate(call)
    assert isinstance(rejection, CallRejection)
    result = registry.dispatch(call, sandbox, ctx)
    assert result.rejected and result.is_error
    assert expected in result.output, result.output
    assert "not executed" in result.output or "Unknown tool" in result.output
    assert not sentinel(sandbox)


def test_the_same_call_when_valid_does_run(sandbox, ctx, registry) -> None:
    result = registry.dispatch(ToolCall(name="bash", arguments={"command": TOUCH}), sandbox, ctx)
    assert not result.rejected and "[exit code: 0]" in result.output
    assert sentinel(sandbox)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("glm", "<tool_call>bash<arg_key>command</arg_key><arg_value>touch SENTINEL</arg_value>"),
        ("glm", "<tool_call>bash<arg_key>command</arg_key>touch SENTINEL</tool_call>"),
        ("openai", '```json\n{"name": "bash", "arguments": {"command": "touch SENTINEL"}\n```'),
        ("react", "Action: bash\nAction Input: touch SENTINEL"),
    ],
)
def test_malformed_markup_dispatches_nothing(name, text, sandbox, ctx, registry) -> None:
    parsed = FORMATS[name].parse(text, registry.specs())
    results = [registry.dispatch(call, sandbox, ctx) for call in parsed.calls]
    assert parsed.errors and not results
    assert not sentinel(sandbox)


def test_replay_with_an_altered_tool_is_refused_before_any_dispatch(sandbox, ctx) -> None:
    recorded = ToolSetConfig().build("minimal")
    trajectory = Trajectory(instance_id="t", policy="replay", tool_fingerprints=recorded.fingerprints())
    altered = ToolRegistry([AlteredBash(), recorded.get("submit")])

    def replay(registry: ToolRegistry, calls: list[ToolCall]) -> list[ToolResult]:
        registry.check_replay(trajectory.tool_fingerprints)
        return [registry.dispatch(call, sandbox, ctx) for call in calls]

    with pytest.raises(FingerprintMismatchError, match="changed: bash"):
        replay(altered, [ToolCall(name="bash", arguments={"command": TOUCH})])
    assert not sentinel(sandbox)


def test_observations_are_capped_keeping_head_and_tail(sandbox, registry) -> None:
    ctx = ToolContext(max_output_bytes=2_000)
    result = registry.dispatch(
        ToolCall(name="bash", arguments={"command": "echo FIRST; seq 1 20000; echo LAST"}), sandbox, ctx
    )
    assert len(result.output.encode()) < 2_200
    assert result.output.startswith("FIRST") and result.output.endswith("[exit code: 0]")
    assert "bytes of output cut" in result.output and "LAST" in result.output


def test_format_error_counter_counts_consecutive_turns_without_an_executed_call() -> None:
    counter = FormatErrorCounter()
    rejected = ToolResult(output="bad", is_error=True, rejected=True)
    ran = ToolResult(output="ok")
    failed = ToolResult(output="no such file", is_error=True)
    assert counter.record([]) == 1
    assert counter.record([rejected]) == 2
    assert counter.record([rejected, ran]) == 0
    assert counter.record([rejected]) == 1
    assert counter.record([failed]) == 0  # the tool ran; its own error is not a format error
    assert counter.total == 3
