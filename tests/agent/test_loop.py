"""The plan-execute-verify loop on a real repo and sandbox, driven by the scripted backend."""


from taskrepo import make_task_repo

from swedojo.agent.backends.scripted import ScriptedBackend
from swedojo.agent.backends.tiny import build_tokenizer
from swedojo.agent.loop import AgentConfig, LoopLimits, ModelPolicy
from swedojo.agent.policies import RunContext
from swedojo.repos import resolve_repo
from swedojo.rewards.grading import grade
from swedojo.sandboxes.environment import default_python_env
from swedojo.schema import EvalStatus, ExitStatus, ToolCall, Trajectory
from swedojo.tools.formats import get_format

GLM = get_format("glm")


def call(name, **arguments):
    return GLM.render_calls([ToolCall(name=name, arguments=arguments)])


FIX = dict(command="str_replace", path="calc.py", old_str="        return low\n    return value",
           new_str="        return low\n    if value > high:\n        return high\n    return value")
WRONG_FIX = dict(command="str_replace", path="calc.py", old_str="        return low\n    return value",
                 new_str="        return low\n    if value > high:\n        return low\n    return value")
TEST = dict(command="insert", path="test_calc.py", insert_line=9,
            new_str="\n\ndef test_clamp_high_regression():\n    assert clamp(50, 0, 10) == 10\n")


def setup(tmp_path):
    mirror, task = make_task_repo(tmp_path)
    env = default_python_env(task.repo, task.base_commit, resolve_repo(task.repo, mirror), "local")
    return env, task


def solve(env, task, script, tmp_path, **limits):
    backend = ScriptedBackend(script, build_tokenizer())
    policy = ModelPolicy(backend, AgentConfig(limits=LoopLimits(**limits)))
    saved = []
    run = RunContext(spec=env.spec, checkpoint=lambda t: saved.append(t.model_dump_json()))
    with env.open(task.base_commit) as sandbox:
        trajectory = policy.solve(task, sandbox, run)
    return trajectory, saved, policy


def test_scripted_model_solves_the_task_through_real_tools(tmp_path):
    env, task = setup(tmp_path)
    script = [
        {"reasoning": "Read the code first.", "content": "Plan:\n1. read calc.py\n2. fix clamp\n3. test\n" + call("str_replace_editor", command="view", path="calc.py")},
        {"reasoning": "The upper bound is missing.", "content": call("str_replace_editor", **FIX) + call("str_replace_editor", **TEST)},
        {"content": call("run_tests", tests=["test_calc.py"])},
        {"content": call("submit")},
    ]
    trajectory, saved, policy = solve(env, task, script, tmp_path)
    assert trajectory.exit_status == ExitStatus.SUBMITTED, [s.observation for s in trajectory.steps]
    assert [s.phase for s in trajectory.steps] == ["plan", "execute", "execute", "submit"]
    assert "1. read calc.py" in trajectory.steps[0].content
    assert "def clamp" in trajectory.steps[0].observation
    assert "2 passed" in trajectory.steps[2].observation or "3 PASSED" in trajectory.steps[2].observation
    assert "+    if value > high:" in trajectory.patch
    assert trajectory.tool_fingerprints == policy.registry.fingerprints()
    # token in, token out: every turn's prompt extends the previous context exactly
    assert trajectory.initial_prompt_token_ids and all(s.response_token_ids for s in trajectory.steps)
    assert all(len(s.response_logprobs) == len(s.response_token_ids) for s in trajectory.steps)
    assert all(s.prompt_token_ids and "prompt_reset" not in s.usage for s in trajectory.steps[1:])
    # saved after every step, the last save is the final trajectory
    assert len(saved) >= len(trajectory.steps)
    assert Trajectory.model_validate_json(saved[-1]) == trajectory
    report = grade(env, task, trajectory.patch)
    assert report.status == EvalStatus.RESOLVED


def test_verification_sends_a_failing_submission_back(tmp_path):
    env, task = setup(tmp_path)
    script = [
        {"content": "Plan: fix it.\n" + call("str_replace_editor", **WRONG_FIX) + call("str_replace_editor", **TEST)},
        {"content": call("submit")},
        {"content": call("str_replace_editor", command="undo_edit", path="calc.py") + call("str_replace_editor", **FIX)},
        {"content": call("submit")},
    ]
    trajectory, _, _ = solve(env, task, script, tmp_path)
    assert trajectory.steps[1].phase == "verify"
    assert "Verification failed" in trajectory.steps[1].observation
    assert "test_clamp_high_regression" in trajectory.steps[1].observation
    assert trajectory.exit_status == ExitStatus.SUBMITTED
    assert grade(env, task, trajectory.patch).status == EvalStatus.RESOLVED


def test_format_errors_and_unknown_tools_end_the_run_without_executing(tmp_path):
    env, task = setup(tmp_path)
    sneaky = call("bash", command="touch /tmp/never").replace("bash", "bsh")
    script = ["I will just talk.", sneaky, '<tool_call>bash<arg_key>command</arg_key>', "more talk"]
    trajectory, _, _ = solve(env, task, script, tmp_path, max_format_errors=3)
    assert trajectory.exit_status == ExitStatus.FORMAT_ERRORS
    assert len(trajectory.steps) == 3
    assert "No tool call found" in trajectory.steps[0].error
    assert "Unknown tool 'bsh'" in trajectory.steps[1].error and "Did you mean 'bash'" in trajectory.steps[1].error
    assert trajectory.steps[2].error
    assert trajectory.patch == ""


def test_step_limit_and_timeouts(tmp_path):
    env, task = setup(tmp_path)
    looping = [call("bash", command="echo hi")] * 5
    trajectory, _, _ = solve(env, task, looping, tmp_path, max_steps=3)
    assert trajectory.exit_status == ExitStatus.LIMIT_STEPS and len(trajectory.steps) == 3
    env.config.command_timeout_s = 1.0
    slow = [call("bash", command="sleep 30")] * 3
    trajectory, _, _ = solve(env, task, slow, tmp_path, max_timeouts=2)
    assert trajectory.exit_status == ExitStatus.TIMEOUTS and len(trajectory.steps) == 2
    assert "timed out" in trajectory.steps[0].observation


def test_server_tool_calls_with_broken_json_are_format_errors():
    from swedojo.agent.backends.openai_http import RAW_ARGUMENTS_KEY
    from swedojo.agent.loop import structured_calls

    good, errors = structured_calls([ToolCall(name="bash", arguments={"command": "ls"}),
                                     ToolCall(name="bash", arguments={RAW_ARGUMENTS_KEY: '{"command": "ls'})])
    assert [c.arguments for c in good] == [{"command": "ls"}]
    assert "not a JSON object" in errors[0].message and '{"command": "ls' in errors[0].excerpt


def test_an_episode_whose_scope_closes_stops_sampling_at_the_next_token_and_takes_no_next_step(tmp_path, tiny):
    """A cancelled batch or an instance out of time closes the episode's sandbox scope from another
    thread; the in-process model went on sampling to its token budget, and the loop on to its next
    steps, holding the node's CPUs for minutes after the cancel. Now the generation ends at the next
    token (finish `cancelled`) and the loop at its next step, as a lost sandbox."""
    from swedojo.agent.backends.base import FinishReason, SamplingParams
    from swedojo.sandboxes.scope import SandboxScope, scoped

    env, task = setup(tmp_path)
    backend = tiny("glm_moe_dsa")
    scope = SandboxScope()
    forwards = []

    def close_on_the_first_decode(_module, _args, _output):
        forwards.append(scope.closed_because)
        if len(forwards) == 2:  # the prefill, then the first decode step
            scope.close("the batch was cancelled")

    policy = ModelPolicy(backend, AgentConfig(sampling=SamplingParams(temperature=0.0, max_new_tokens=200)))
    hook = backend.model.register_forward_hook(close_on_the_first_decode)
    try:
        with scoped(scope), env.open(task.base_commit) as sandbox:
            trajectory = policy.solve(task, sandbox, RunContext(spec=env.spec))
    finally:
        hook.remove()
    assert forwards == ["", ""], f"{len(forwards)} forwards, {len(forwards) - 2} after the scope closed"
    assert trajectory.exit_status == ExitStatus.INFRA_ERROR
    assert "the batch was cancelled" in trajectory.error and len(trajectory.steps) <= 1
    # asked outside any episode, a closed scope gives no token at all
    with scoped(scope):
        generation = backend.generate_ids([1, 2, 3], SamplingParams(max_new_tokens=50), conversation_id="closed")
    assert generation.finish_reason == FinishReason.CANCELLED and generation.token_ids == []
