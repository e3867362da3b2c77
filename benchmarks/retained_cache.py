"""Retained KV cache vs re-prefilling the whole history, on tiny GLM-5 and GLM-4.5 architectures.

A 40-turn SWE-agent conversation runs twice per architecture with the same prompts and seeds:
with the in-process backend keeping its cache across turns, and re-prefilling the whole prompt
every turn (`retain_cache=False`, the same code otherwise). Each turn samples 30 tokens (fewer
if the model samples a stop token). The 10- and 20-turn figures are the first turns of the 40-turn
conversation; `tokens_40` is the prompt at turn 40 (the smaller of the two architectures').

The conversation is a real one apart from the model's turns (a random tiny model's tokens stand in
for its tool calls): the system prompt is `ModelPolicy`'s, rendered from the real `swe` tool
registry; the user turn is `TASK_PROMPT` with the demo task `swedojo-demo__textkit-1`'s issue; and
observation N is what the real tool returns for call N of `TRAJECTORY`, a plausible run on that
task (look around, reproduce, fix, add a test, run tests, check), executed once in a local sandbox
of the demo repo before the timed runs. Pytest durations are fixed to 0.05s and the sandbox path
shown as /testbed, so every run sees the same prompts.

Sizes, in the tiny tokenizer's tokens: it has 512 ids and spends ~1.6 characters per token where
a production tokenizer spends ~3.5-4 on code, so the same text is about twice as many tokens here.
System prompt 3,520 tokens (5.7k characters), task 535, observations 12-565 tokens, 152 on average
(median 107; three over 400: an edit, a test log, a diff), ~11.4k tokens in the prompt at turn
40. That is a focused agent (file views of 5-8 lines, greps with a path, single tests,
`pytest -q | tail`) and on the small side of real trajectories, whose file windows, full test
logs and long greps often run to hundreds or thousands of tokens each and tens of thousands by
turn 40. The limit is this 2-core CPU: the baseline grows with the square of the context
(re-prefilling GLM-5's prompt at turn 40 takes ~19 s) and the benchmark takes ~7.5 minutes on
a quiet machine. Smaller observations would shorten it (~100 tokens for 6 minutes) at
somewhat lower ratios (~11 estimated from partial runs at 137 tokens), larger ones lengthen it
(237 tokens, 15k at turn 40: ~9 minutes, also ~11 estimated). Longer assistant turns would lower the ratios: real ones
(thinking plus a tool call) are often 100-300 tokens, and decoding costs both runs the same, so
the 30 sampled tokens here flatter the cache somewhat.

The four runs (two modes, two architectures) each go in a fresh process, two at a time (one per
core, one thread each, so each has its own peak RSS): GLM-5's re-prefill run, the longest, on one
core; the two cached runs and then GLM-4.5's re-prefill run on the other. So every cached run
shares the machine with a re-prefill run, and the only run that may finish alone, with the
machine to itself, is a re-prefill run: any bias favours the baseline.

Per architecture and length: tokens prefilled, mean time per turn, time of the last turn, peak
RSS, and four ratios (re-prefill / cached), each the smaller of the two architectures:
whole-conversation time (`ratio_N`), last-turn time (`last_turn_ratio_40`), prefill time, i.e.
time to first token (`prefill_ratio_40`), and whole-conversation CPU time (`cpu_ratio_40`). Each
run has one thread, so CPU time leaves out waiting for a core: when it differs much from
`ratio_40`, other load slowed the runs unevenly (the cached runs finish first, so load late in
the benchmark slows only the baseline and inflates `ratio_40`). The cached run's logits are
checked against a full recompute at turns 10, 20 and 40 (one causal forward over the turn-40
prompt, which extends the others), and the logprobs of the tokens both runs sampled are compared
(on GLM-5 a float-rounding near-tie in the indexer's top-k can flip one selection now and then;
see `dsa.py`).
"""

from __future__ import annotations

import multiprocessing
import re
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import pairwise
from typing import Any

CHECKPOINTS = (10, 20, 40)
ARCHS = {"glm_moe_dsa": "GLM-5 arch (GlmMoeDsa)", "glm4_moe": "GLM-4.5 arch (Glm4Moe)"}
SIZE = {"hidden_size": 256, "num_layers": 3, "num_experts": 8, "index_topk": 512}
SAMPLED_TOKENS = 30
TASK = "swedojo-demo__textkit-1"
WORKDIR = "/testbed"
"""Where the task prompt says the repository is (as in a docker sandbox): the same text every run."""

_REPRO = "python -c \"from textkit import truncate; print([truncate('hello world', w) for w in range(6)])\""
_FIX = (
    "    if len(text) <= width:\n        return text\n",
    "    if len(text) <= width:\n        return text\n    if width <= len(ellipsis):\n        return ellipsis[:width]\n",
)
_NEW_TEST = """
    def test_width_smaller_than_ellipsis(self):
        assert truncate("hello world", 2) == ".."
        assert truncate("hello world", 0) == ""
"""
_DOC = ("marking the cut with `ellipsis`.", "marking the cut with `ellipsis` (cut itself when `width` is smaller).")
Call = tuple[str, dict[str, Any]]


def _view(path: str, first: int | None = None, last: int | None = None) -> Call:
    return "str_replace_editor", {"command": "view", "path": path, **({"view_range": [first, last]} if first else {})}


def _edit(path: str, old: str, new: str) -> Call:
    return "str_replace_editor", {"command": "str_replace", "path": path, "old_str": old, "new_str": new}


def _grep(pattern: str, **options: str) -> Call:
    return "search", {"command": "grep", "pattern": pattern, **options}


def _bash(command: str) -> Call:
    return "bash", {"command": command}


def _pytest(arguments: str, lines: int = 3) -> Call:
    return _bash(f"python -m pytest -q {arguments}".rstrip() + f" 2>&1 | tail -{lines}")


TRAJECTORY: list[Call] = [
    _view("."),
    _grep("def truncate"),
    _view("textkit/wrap.py", 8, 14),
    _bash(_REPRO),
    _grep(r"truncate\(", path="textkit"),
    _view("tests/test_wrap.py", 9, 16),
    _pytest("tests/test_wrap.py -k Truncate"),
    _view("textkit/__init__.py", 1, 6),
    _bash("git log --oneline -3"),
    _bash("python -c \"from textkit import truncate; print(repr(truncate('hello world', 1, ellipsis='~~')))\""),
    _view("textkit/wrap.py", 8, 15),
    _edit("textkit/wrap.py", *_FIX),
    _bash(_REPRO),
    _pytest("tests/test_wrap.py -k Truncate"),
    _grep(r"len\(ellipsis\)", path="textkit"),
    _view("tests/test_wrap.py", 24, 29),
    ("str_replace_editor", {"command": "insert", "path": "tests/test_wrap.py", "insert_line": 29, "new_str": _NEW_TEST}),
    ("run_tests", {"tests": ["tests/test_wrap.py::TestTruncate::test_width_smaller_than_ellipsis"]}),
    _bash("git diff"),
    _grep("truncate", include="*.md"),
    _view("README.md", 1, 5),
    _view("textkit/wrap.py", 19, 24),
    _bash("python -c \"from textkit.wrap import truncate_words; print(repr(truncate_words('a b c', 0)))\""),
    _pytest("tests/test_wrap.py"),
    _grep("FILTERS", path="textkit"),
    _view("textkit/template.py", 13, 19),
    _bash("python -c \"from textkit import render; print(render('{name|upper}', {'name': 'ab'}))\""),
    _view("textkit/case.py", 1, 8),
    _grep("def .*width", path="textkit"),
    _pytest("tests/test_wrap.py -k ellipsis"),
    _edit("textkit/wrap.py", *_DOC),
    _view("textkit/wrap.py", 8, 14),
    _pytest("tests/test_wrap.py -k smaller", lines=2),
    _bash("git diff --stat"),
    ("search", {"command": "find_files", "pattern": "test_*.py"}),
    _pytest(""),
    _bash("git status --short"),
    _view("tests/test_wrap.py", 30, 37),
    _pytest("", lines=2),
    ("submit", {}),
]
"""The agent's tool calls, one per turn: each observation is what the real tool returns."""


def conversation() -> tuple[str, str, list[str]]:
    """(system prompt, task prompt, one observation per turn), built as `ModelPolicy` builds them."""
    from swedojo.agent.loop import SYSTEM_PROMPT, TASK_PROMPT, AgentConfig
    from swedojo.datasets.registry import load_suite
    from swedojo.sandboxes.environment import default_python_env
    from swedojo.schema import ToolCall
    from swedojo.tools.base import ToolContext
    from swedojo.tools.formats import get_format

    config = AgentConfig()
    registry = config.tools.build(config.tool_set)
    system = SYSTEM_PROMPT.format(tools=get_format("glm").render_tools(registry.specs()))  # the tiny model speaks GLM
    suite = load_suite("demo")
    instance = next(i for i in suite.loaded.instances if i.instance_id == TASK)
    task = TASK_PROMPT.format(workdir=WORKDIR, issue=instance.problem_statement.strip())
    assert suite.mirror is not None
    env = default_python_env(instance.repo, instance.base_commit, suite.mirror / instance.repo, "local")
    sandbox = env.open()
    try:
        context = ToolContext(env=env.spec)
        outputs = [registry.dispatch(ToolCall(name=n, arguments=a), sandbox, context).output for n, a in TRAJECTORY]
        workdir = sandbox.workdir
    finally:
        sandbox.close()
    return system, task, [re.sub(r"\bin \d+\.\d+s\b", "in 0.05s", o.replace(workdir, WORKDIR)) for o in outputs]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(arch: str, retain: bool, dialogue: tuple[str, str, list[str]]) -> dict:
    """One 40-turn conversation in this process: per-turn measurements (and, cached, the logit check)."""
    import torch

    torch.set_num_threads(1)  # two runs share two cores; more threads per run would thrash
    from swedojo.agent.backends import Message, SamplingParams
    from swedojo.agent.backends.inprocess import InProcessBackend
    from swedojo.agent.backends.tiny import TinySize, build_tiny

    started = time.perf_counter()
    system, task, observations = dialogue
    model, tokenizer = build_tiny(arch, TinySize(**SIZE))
    backend = InProcessBackend(model, tokenizer, retain_cache=retain)
    messages = [Message.system(system), Message.user(task)]
    baseline = _peak_mb()
    turns = []
    for turn in range(max(CHECKPOINTS)):
        params = SamplingParams(temperature=1.0, max_new_tokens=SAMPLED_TOKENS, seed=turn)
        cpu = time.process_time()
        generation = backend.generate(messages, params)
        cpu = time.process_time() - cpu
        usage = generation.usage
        turns.append(
            {
                "prefill": usage.prefill_tokens,
                "prompt": usage.prompt_tokens,
                "seconds": usage.seconds,
                "prefill_seconds": usage.prefill_seconds,
                "cpu_seconds": cpu,
                "peak_mb": _peak_mb(),
                "sampled": generation.token_ids,
                "logprobs": generation.logprobs,
            }
        )
        messages = [*messages, generation.message(), Message.observation(observations[turn])]
    result = {"turns": turns, "baseline_mb": baseline, "logit_diff": 0.0}
    if retain:  # the cache path again, turn by turn on a fresh conversation, against a full recompute
        prompts = [backend.chat.render(messages[: 2 * k]) for k in range(1, max(CHECKPOINTS) + 1)]
        cached = {}
        for k, prompt in enumerate(prompts, 1):
            logits = backend.next_token_logits(prompt, conversation_id="check")
            if k in CHECKPOINTS:
                cached[k] = logits
        # Every prompt extends the previous ones, so one causal forward over the last recomputes them all.
        assert all(prompts[-1][: len(p)] == p for p in prompts)
        with torch.inference_mode():
            full = model(input_ids=torch.tensor([prompts[-1]])).logits[0].float()
        result["logit_diff"] = max(float((cached[k] - full[len(prompts[k - 1]) - 1]).abs().max()) for k in CHECKPOINTS)
    result["observation_tokens"] = [len(backend.chat.encode(o, special=False)) for o in observations]
    result["wall"] = time.perf_counter() - started
    return result


def _ratio(full: list[dict], cached: list[dict], key: str) -> float:
    return sum(t[key] for t in full) / sum(t[key] for t in cached)


def main() -> int:
    started = time.perf_counter()
    dialogue = conversation()
    ratios = {n: float("inf") for n in CHECKPOINTS}
    prefill_ratios = {n: float("inf") for n in CHECKPOINTS}
    last_ratios = {n: float("inf") for n in CHECKPOINTS}
    cpu_ratios = {n: float("inf") for n in CHECKPOINTS}
    max_diff, tokens = 0.0, sys.maxsize
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn, max_tasks_per_child=1) as pool:
        # GLM-5's re-prefill run (the longest) on one core; on the other the cached runs, then the
        # other re-prefill run.
        first, *others = ARCHS
        order = [(first, False), *((arch, True) for arch in ARCHS), *((arch, False) for arch in others)]
        futures = {(arch, retain): pool.submit(run, arch, retain, dialogue) for arch, retain in order}
        for arch, label in ARCHS.items():
            cached, full = futures[arch, True].result(), futures[arch, False].result()
            same = [t["sampled"] for t in cached["turns"]] == [t["sampled"] for t in full["turns"]]
            logprob_diff = max(
                abs(x - y) for a, b in zip(cached["turns"], full["turns"]) for x, y in zip(a["logprobs"], b["logprobs"])
            )
            max_diff = max(max_diff, cached["logit_diff"])
            tokens = min(tokens, cached["turns"][-1]["prompt"])
            sizes = cached["observation_tokens"]
            print(
                f"== {label}, {SIZE}\n   conversation: system+task {cached['turns'][0]['prompt']} tokens, "
                f"{len(sizes)} observations of {min(sizes)}-{max(sizes)} tokens (mean {sum(sizes) / len(sizes):.0f}), "
                f"{SAMPLED_TOKENS} sampled per turn; runs took {cached['wall']:.0f}s cached, {full['wall']:.0f}s re-prefill\n"
                f"   same sampled tokens in both runs: {same}; cached logits vs a full recompute "
                f"at turns {CHECKPOINTS}: max diff {cached['logit_diff']:.1e}; sampled-token logprobs, cached vs "
                f"re-prefill run: max diff {logprob_diff:.1e}"
            )
            print(
                f"{'turns':>5} {'mode':>10} {'prefilled':>9} {'prompt':>6} {'s/turn':>7} {'last s':>7} "
                f"{'peak MB':>7} {'+MB':>5} | {'ratio':>5} {'last':>5} {'ttft':>5} {'cpu':>5}"
            )
            for n in CHECKPOINTS:
                c, f = cached["turns"][:n], full["turns"][:n]
                for mode, window, base in (("cached", c, cached), ("re-prefill", f, full)):
                    print(
                        f"{n:>5} {mode:>10} {sum(t['prefill'] for t in window):>9} {window[-1]['prompt']:>6} "
                        f"{sum(t['seconds'] for t in window) / n:>7.3f} {window[-1]['seconds']:>7.3f} "
                        f"{window[-1]['peak_mb']:>7.0f} {window[-1]['peak_mb'] - base['baseline_mb']:>5.0f}",
                        end="\n" if mode == "cached" else "",
                    )
                print(
                    f" | {_ratio(f, c, 'seconds'):>5.1f} {f[-1]['seconds'] / c[-1]['seconds']:>5.1f} "
                    f"{_ratio(f, c, 'prefill_seconds'):>5.1f} {_ratio(f, c, 'cpu_seconds'):>5.1f}"
                )
                new_only = all(t["prefill"] <= t["prompt"] - p["prompt"] for p, t in pairwise(c))
                print(f"{'':>5} cached run prefilled only tokens added since the previous turn: {new_only}")
                ratios[n] = min(ratios[n], _ratio(f, c, "seconds"))
                prefill_ratios[n] = min(prefill_ratios[n], _ratio(f, c, "prefill_seconds"))
                last_ratios[n] = min(last_ratios[n], f[-1]["seconds"] / c[-1]["seconds"])
                cpu_ratios[n] = min(cpu_ratios[n], _ratio(f, c, "cpu_seconds"))
    print(
        f"ratio = re-prefill / cached time of the whole N-turn conversation (last: of turn N; ttft: prefill time; "
        f"cpu: in CPU time); "
        f"benchmark took {time.perf_counter() - started:.0f}s"
    )
    last = max(CHECKPOINTS)
    print(
        "RESULT "
        + " ".join(f"ratio_{n}={ratios[n]:.1f}" for n in CHECKPOINTS)
        + f" prefill_ratio_{last}={prefill_ratios[last]:.1f} last_turn_ratio_{last}={last_ratios[last]:.1f}"
        f" cpu_ratio_{last}={cpu_ratios[last]:.1f} tokens_{last}={tokens} max_logit_diff={max_diff:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
