"""Tool-call formats: renderer/parser round trips, real-looking model outputs, and fuzzing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from swedojo.schema import ToolCall
from swedojo.tools.base import ToolResult, ToolSpec
from swedojo.tools.formats import FORMATS, FormatError, ParseResult, get_format
from swedojo.tools.registry import ToolRegistry

SPEC = ToolSpec(
    name="probe",
    version="1",
    description="A tool whose arguments cover every JSON type.",
    returns="nothing",
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "maybe_text": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "mode": {"enum": ["a", "b"]},
            "count": {"type": "integer"},
            "flag": {"type": "boolean"},
            "data": {},
        },
    },
)

CODE = 'def f(x):\n    """Doc — ünïcödé ✓."""\n    return {"a": [x, None]}\n\n'

CALLS = [
    ToolCall(
        name="str_replace_editor",
        arguments={
            "command": "str_replace",
            "path": "src/ü.py",
            "old_str": CODE,
            "new_str": CODE.replace("x", "y") + "# 注释\n",
        },
    ),
    ToolCall(
        name="probe",
        arguments={
            "text": "  leading and trailing  \n",
            "count": 3,
            "flag": False,
            "data": {"nested": [1, 2.5, {"deep": None}], "s": "</x>"},
        },
    ),
    ToolCall(name="submit", arguments={}),
]


@pytest.fixture(params=sorted(FORMATS))
def fmt(request: pytest.FixtureRequest):
    return FORMATS[request.param]


def specs(registry: ToolRegistry) -> list[ToolSpec]:
    return [*registry.specs(), SPEC]


def test_round_trip_several_calls_nested_values_unicode_and_code(fmt, registry) -> None:
    text = fmt.render_calls(CALLS)
    parsed = fmt.parse("Let me fix it.\n" + text, specs(registry))
    assert parsed.errors == []
    assert parsed.calls == CALLS
    assert "Let me fix it." in parsed.content


def test_openai_round_trip_keeps_call_ids(registry) -> None:
    calls = [c.model_copy(update={"call_id": f"call_{i}"}) for i, c in enumerate(CALLS)]
    assert get_format("openai").parse(get_format("openai").render_calls(calls), specs(registry)).calls == calls


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "bash",
    "command",
    "ls",
    "{",
    "}",
    "[",
    "]",
    '"name"',
    '"arguments"',
    '"function"',
    '"tool_calls"',
    ":",
    ",",
    '"',
    "\\",
    "```",
    "```json\n",
    "\n",
    "Action:",
    "Action Input:",
    "Observation:",
    "Thought:",
    "null",
    "1e999",
    "[[[[[[[[",
    '{"name": "bash", "arguments": ',
    '"{\\"command\\": 1}"',
    "<think>",
    "\r\n",
    "\x00",
    "é",
    "\ud7ff",
]
TEXT = st.text() | st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=12).map("".join)
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "text": TEXT,
        "maybe_text": TEXT,
        "mode": st.sampled_from(["a", "b"]),
        "count": st.integers(),
        "flag": st.booleans(),
        "data": st.lists(JSON, max_size=3) | st.dictionaries(st.text(max_size=8), JSON, max_size=3),
    },
)
CALL_LISTS = st.lists(st.builds(ToolCall, name=st.just("probe"), arguments=ARGUMENTS), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALL_LISTS)
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_round_trip_generated_calls(name: str, calls: list[ToolCall]) -> None:
    fmt = FORMATS[name]
    if name == "glm":  # GLM markup has no escaping: a value cannot hold its closing tags
        assume(
            not any(
                tag in json.dumps(c.arguments, ensure_ascii=False)
                for c in calls
                for tag in ("</arg_value>", "</tool_call>")
            )
        )
    parsed = fmt.parse(fmt.render_calls(calls), [SPEC])
    assert parsed.errors == []
    assert parsed.calls == calls


MALFORMED = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=MALFORMED)
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_parsers_never_raise_on_malformed_text(name: str, text: str, registry: ToolRegistry) -> None:
    parsed = FORMATS[name].parse(text, specs(registry))
    assert isinstance(parsed, ParseResult)
    assert parsed.calls or parsed.errors
    for call in parsed.calls:
        registry.validate(call)  # validation does not raise either


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_parsers_survive_deep_nesting(name: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = (
        f'{{"name": "bash", "arguments": {{"a": {deep}}}}}\n'
        f"<tool_call>bash<arg_key>a</arg_key><arg_value>{deep}</arg_value></tool_call>\n"
        f'Action: bash\nAction Input: {{"a": {deep}}}'
    )
    parsed = FORMATS[name].parse(text, [])
    assert isinstance(parsed, ParseResult) and (parsed.calls or parsed.errors)


# --- GLM ---------------------------------------------------------------------------------------

GLM45_OUTPUT = """<think>The bug is in calc.py.</think>
I will look at the file first.
<tool_call>str_replace_editor
<arg_key>command</arg_key>
<arg_value>view</arg_value>
<arg_key>path</arg_key>
<arg_value>calc.py</arg_value>
<arg_key>view_range</arg_key>
<arg_value>[1, 20]</arg_value>
</tool_call>
<tool_call>bash
<arg_key>command</arg_key>
<arg_value>python -c "print(1)"</arg_value>
</tool_call>"""


def test_glm_reads_glm45_style_with_newlines(registry) -> None:
    parsed = get_format("glm").parse(GLM45_OUTPUT, registry.specs())
    assert parsed.errors == []
    assert parsed.calls == [
        ToolCall(name="str_replace_editor", arguments={"command": "view", "path": "calc.py", "view_range": [1, 20]}),
        ToolCall(name="bash", arguments={"command": 'python -c "print(1)"'}),
    ]
    assert "I will look at the file first." in parsed.content


def test_glm_decodes_values_by_the_schema_type(registry) -> None:
    text = (
        "<tool_call>str_replace_editor<arg_key>command</arg_key><arg_value>insert</arg_value>"
        "<arg_key>path</arg_key><arg_value>123</arg_value><arg_key>insert_line</arg_key><arg_value>3</arg_value>"
        "<arg_key>new_str</arg_key><arg_value>null</arg_value></tool_call>"
    )
    (call,) = get_format("glm").parse(text, registry.specs()).calls
    assert call.arguments == {"command": "insert", "path": "123", "insert_line": 3, "new_str": "null"}
    # a value that is not JSON stays text, and validation then says what type was expected
    bad = get_format("glm").parse(text.replace("<arg_value>3<", "<arg_value>three<"), registry.specs()).calls[0]
    assert bad.arguments["insert_line"] == "three"
    assert "valid integer" in registry.validate(bad).message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value>", "not closed by </tool_call>"),
        ("<tool_call>bash<arg_key>command</arg_key>ls</tool_call>", "pairs"),
        (
            '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
            "tool name right after <tool_call>",
        ),
        (
            "<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value><arg_key>command</arg_key><arg_value>pwd</arg_value></tool_call>",
            "given twice",
        ),
        (
            "<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value><tool_call>bash</tool_call>",
            "</tool_call> before the next <tool_call>",
        ),
        ("bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>", "outside a <tool_call> block"),
        ("I think I am done.", "No tool call found"),
    ],
)
def test_glm_malformed_markup_says_what_was_expected(text: str, expected: str, registry) -> None:
    parsed = get_format("glm").parse(text, registry.specs())
    assert parsed.calls == []
    assert any(expected in e.message for e in parsed.errors), parsed.errors


def test_glm_keeps_good_calls_next_to_a_bad_one(registry) -> None:
    text = "<tool_call>bash<arg_key>command</arg_key>oops</tool_call>\n<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>"
    parsed = get_format("glm").parse(text, registry.specs())
    assert parsed.calls == [ToolCall(name="bash", arguments={"command": "ls"})]
    assert len(parsed.errors) == 1


# --- OpenAI JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'Sure.\n```json\n{"name": "bash", "arguments": {"command": "ls -la"}}\n```',
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
        '{"name": "bash", "arguments": "{\\"command\\": \\"ls -la\\"}"}',
        '[{"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls -la\\"}"}}]',
        '{"tool_calls": [{"name": "bash", "parameters": {"command": "ls -la"}}]}',
        'I will run {"name": "bash", "arguments": {"command": "ls -la"}} now.',
    ],
)
def test_openai_reads_common_shapes(text: str) -> None:
    parsed = get_format("openai").parse(text)
    assert parsed.errors == []
    assert [(c.name, c.arguments) for c in parsed.calls] == [("bash", {"command": "ls -la"})]


def test_openai_ignores_json_that_is_not_a_call() -> None:
    text = (
        'The config is\n```json\n{"debug": true}\n```\nand {"x": 1}.\n```json\n{"name": "submit", "arguments": {}}\n```'
    )
    parsed = get_format("openai").parse(text)
    assert parsed.calls == [ToolCall(name="submit")] and parsed.errors == []
    assert '{"debug": true}' in parsed.content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"name": "bash", "arguments": {"command": "ls"}\n```', "Invalid JSON"),
        ('{"name": "bash", "arguments": {"command": "ls"}', "Invalid JSON"),
        ('{"name": "bash", "arguments": "{command: ls}"}', "string that is not valid JSON"),
        ('{"name": "bash", "arguments": ["ls"]}', "must be a JSON object"),
        ('{"name": 7, "arguments": {}}', '"name" string'),
        ("{'name': 'bash', 'arguments': {'command': 'ls'}}", "No tool call found"),
    ],
)
def test_openai_malformed_calls_say_what_was_expected(text: str, expected: str) -> None:
    parsed = get_format("openai").parse(text)
    assert parsed.calls == []
    assert any(expected in e.message for e in parsed.errors), parsed.errors


# --- ReAct -------------------------------------------------------------------------------------


def test_react_reads_thought_action_and_drops_imagined_observations() -> None:
    text = (
        'Thought: I should list the files.\nAction: bash\nAction Input: {"command": "ls"}\n'
        "Observation: calc.py\nThought: now submit\nAction: submit\nAction Input: {}"
    )
    parsed = get_format("react").parse(text)
    assert parsed.calls == [ToolCall(name="bash", arguments={"command": "ls"})]
    assert parsed.content.startswith("Thought: I should list the files.")


def test_react_accepts_a_fenced_action_input() -> None:
    text = 'Thought: edit\nAction: `str_replace_editor`\nAction Input:\n```json\n{"command": "view", "path": "a.py"}\n```\n'
    parsed = get_format("react").parse(text)
    assert parsed.errors == []
    assert parsed.calls == [ToolCall(name="str_replace_editor", arguments={"command": "view", "path": "a.py"})]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thought: x\nAction: bash\n", "Action Input"),
        ("Action: bash\nAction Input: ls -la", "not valid JSON"),
        ('Action: bash\nAction Input: ["ls"]', "must be a JSON object"),
        ('Thought: hmm\nAction Input: {"command": "ls"}', 'without an "Action: TOOL" line'),
        ("Thought: I am done.", "No tool call found"),
    ],
)
def test_react_malformed_says_what_was_expected(text: str, expected: str) -> None:
    parsed = get_format("react").parse(text)
    assert parsed.calls == []
    assert any(expected in e.message for e in parsed.errors), parsed.errors


# --- rendering of tools and results ------------------------------------------------------------


def test_tool_list_rendering_names_every_tool_and_the_call_syntax(fmt, registry) -> None:
    text = fmt.render_tools(registry.specs())
    if fmt.name == "native":  # the schemas travel in the request's `tools`: the prompt names the tools
        assert all(spec.name in text for spec in registry.specs()) and "tool calling" in text
        return
    for spec in registry.specs():
        assert spec.name in text and json.dumps(spec.parameters, ensure_ascii=False)[:40] in text
    assert {"glm": "<arg_key>", "openai": '"arguments"', "react": "Action Input:"}[fmt.name] in text


def test_observation_rendering() -> None:
    results = [ToolResult(output="ok")]
    errors = [FormatError(message="bad", excerpt="<tool_call>")]
    assert (
        get_format("glm").render_observation(results, errors)
        == "<tool_response>ok</tool_response>\n<tool_response>bad (near: '<tool_call>')</tool_response>"
    )
    assert get_format("react").render_observation(results) == "Observation: ok"
