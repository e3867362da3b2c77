"""ModelPolicy's steps: a subclass replaces one, and the text parser never sees a turn the server already structured."""

from taskrepo import make_task_repo

from swedojo.agent.backends.scripted import ScriptedBackend
from swedojo.agent.backends.tiny import build_tokenizer
from swedojo.agent.base import RunContext
from swedojo.agent.loop import AgentConfig, Episode, LoopLimits, ModelPolicy
from swedojo.repos import resolve_repo
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import ExitStatus, Step, ToolCall
from swedojo.tools.base import ToolResult
from swedojo.tools.formats import get_format

GLM = get_format("glm")
WRONG_FIX = {"command": "str_replace", "path": "calc.py", "old_str": "        return low\n    return value",
             "new_str": "        return low\n    if value > high:\n        return low\n    return value"}
TEST = {"command": "insert", "path": "test_calc.py", "insert_line": 9,
        "new_str": "\n\ndef test_clamp_high_regression():\n    assert clamp(50, 0, 10) == 10\n"}


def call(name, **arguments):
    return GLM.render_calls([ToolCall(name=name, arguments=arguments)])


def run(tmp_path, policy):
    mirror, task = make_task_repo(tmp_path)
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")
    with env.open(task.base_commit) as sandbox:
        return policy.solve(task, sandbox, RunContext(spec=env.spec))


class Unreviewed(ModelPolicy):
    """Accepts every submission, whatever its tests say."""

    def review(self, episode: Episode, patch: str) -> str:
        return ""


def test_a_subclass_replaces_one_step(tmp_path):
    script = [{"content": "Plan.\n" + call("str_replace_editor", **WRONG_FIX) + call("str_replace_editor", **TEST)},
              {"content": call("submit")}]
    trajectory = run(tmp_path, Unreviewed(ScriptedBackend(script, build_tokenizer())))
    assert trajectory.exit_status == ExitStatus.SUBMITTED
    assert [s.phase for s in trajectory.steps] == ["plan", "submit"]
    assert "+    if value > high:" in trajectory.patch  # the wrong fix: ModelPolicy would have sent it back


class CountingFormat:
    """The GLM format, counting how often its parser runs."""

    def __init__(self):
        self.parsed = 0

    def __getattr__(self, name):
        return getattr(GLM, name)

    def parse(self, text, specs=()):
        self.parsed += 1
        return GLM.parse(text, specs)


def test_structured_calls_are_used_as_the_server_sent_them_and_never_parsed(tmp_path):
    # The content also holds GLM markup for another call: it must neither run nor be parsed.
    script = [{"content": "Plan. " + call("bash", command="touch never"),
               "tool_calls": [ToolCall(name="bash", arguments={"command": "echo served"}, call_id="c0")]},
              "Plain text: the only turn the parser reads."]
    policy = ModelPolicy(ScriptedBackend(script), AgentConfig(tool_format="glm", limits=LoopLimits(max_steps=2)))
    policy.format = counting = CountingFormat()
    trajectory = run(tmp_path, policy)
    assert trajectory.steps[0].tool_calls == [ToolCall(name="bash", arguments={"command": "echo served"}, call_id="c0")]
    assert "served" in trajectory.steps[0].observation and not trajectory.steps[0].error
    assert "No tool call found" in trajectory.steps[1].error
    assert counting.parsed == 1


def test_an_observation_carries_the_images_its_result_shows_and_the_result_records_only_their_names():
    policy = ModelPolicy(ScriptedBackend([]))
    shot = ToolResult(output="Screenshot saved as t.files/screenshot-001.png.", files=["t.files/screenshot-001.png"],
                      images=["/runs/t.files/screenshot-001.png"])
    plain = ToolResult(output="ok")
    step = Step(index=0, phase="execute")
    observed = policy.observe(step, [ToolCall(name="browser", call_id="c1"), ToolCall(name="bash", call_id="c2")],
                              [shot, plain], [])
    assert [(m.tool_call_id, m.images) for m in observed] == [("c1", ["/runs/t.files/screenshot-001.png"]), ("c2", [])]
    assert "images" not in shot.model_dump()  # a path on this machine is not part of any record
