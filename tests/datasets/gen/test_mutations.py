"""The mutation engine: every operator gives a compiling, minimal diff; order and ids are deterministic."""

from __future__ import annotations

import ast
import difflib
import random

import pytest

from swedojo.datasets.gen.mutations import (
    OPERATORS,
    Edit,
    OverlappingEditsError,
    apply_edits,
    mutations_of,
)
from swedojo.datasets.gen.strategies import ModelRewrite, ProceduralMutations

SAMPLE = b'''\
"""Sample module: every operator has somewhere to act."""

import math


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low  # keep this comment
    elif value > high:
        return high
    else:
        value = int(value)
    return value


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)
        return len(self.items)

    def top(self, n=1):
        if not self.items:
            raise IndexError("empty")
        total = 0
        for i in range(n):
            total += i * 2
        return self.items[-n:] if n > 1 and total else self.items[-1]


def power(base, exponent):
    result = math.pow(base, exponent)
    if result is None:
        result = 0.5
    return result - 1
'''


def _changed(before: bytes, after: bytes) -> tuple[list[int], list[str]]:
    """Old line numbers touched by the diff, and the changed lines."""
    a, b = before.decode().splitlines(), after.decode().splitlines()
    touched, lines = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            touched += list(range(i1 + 1, i2 + 1)) or [i1]
            lines += a[i1:i2] + b[j1:j2]
    return touched, lines


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_operator_compiles_and_changes_only_its_span(operator):
    mutations = [m for m in mutations_of("sample.py", SAMPLE) if m.operator == operator]
    assert mutations, f"{operator} found nothing to mutate"
    original = ast.dump(ast.parse(SAMPLE))
    for m in mutations:
        (edit,) = m.edits
        mutant = apply_edits(SAMPLE, m.edits)
        compile(mutant, "sample.py", "exec")
        assert ast.dump(ast.parse(mutant)) != original, m
        # The bytes outside the span are untouched, and the diff stays within the span's lines.
        assert mutant[: edit.start] == SAMPLE[: edit.start]
        assert mutant[edit.start + len(edit.text.encode()):] == SAMPLE[edit.end:]
        first = SAMPLE[: edit.start].count(b"\n") + 1
        last = SAMPLE[: max(edit.end - 1, edit.start)].count(b"\n") + 1
        touched, _ = _changed(SAMPLE, mutant)
        assert touched and all(first <= line <= last for line in touched), (m, touched)
        assert m.line in range(first, last + 1)
        assert "# keep this comment" in mutant.decode()  # comments survive
    assert all(m.function and not m.function.startswith("<") for m in mutations)


def test_examples_of_each_operator():
    seen = {(m.operator, _changed(SAMPLE, apply_edits(SAMPLE, m.edits))[1][-1].strip())
            for m in mutations_of("sample.py", SAMPLE)}
    for expected in [
        ("flip_comparison", "if value <= low:"),
        ("off_by_one", "for i in range(n + 1):"),
        ("swap_arguments", "result = math.pow(exponent, base)"),
        ("change_constant", "result = 1.0"),
        ("invert_condition", "if self.items:"),
        ("wrong_return", "return None"),
        ("change_operator", "total -= i * 2"),
        ("change_operator", "return self.items[-n:] if n > 1 or total else self.items[-1]"),
    ]:
        assert expected in seen, expected
    drops = [m for m in mutations_of("sample.py", SAMPLE) if m.operator in ("drop_branch", "drop_statement")]
    removed = {tuple(_changed(SAMPLE, apply_edits(SAMPLE, m.edits))[1]) for m in drops}
    assert ("    else:", "        value = int(value)") in removed
    assert ("    elif value > high:", "        return high") in removed
    assert ("        self.items.append(item)",) in removed


def test_docstrings_signatures_and_module_level_code_are_left_alone():
    for m in mutations_of("sample.py", SAMPLE):
        text = SAMPLE[m.edits[0].start:m.edits[0].end].decode()
        assert "Limit value" not in text and "def " not in text and "import" not in text
    assert mutations_of("broken.py", b"def f(:\n") == []


def test_enumeration_and_sampling_are_deterministic():
    first, second = mutations_of("sample.py", SAMPLE), mutations_of("sample.py", SAMPLE)
    assert [m.id for m in first] == [m.id for m in second]
    assert len({m.id for m in first}) == len(first)
    sites = ProceduralMutations().sites({"b.py": SAMPLE, "a.py": SAMPLE})
    assert [s.path for s in sites[: len(first)]] == ["a.py"] * len(first)

    def sample(seed: int) -> list[str]:
        shuffled = list(sites)
        random.Random(f"{seed}:mutation").shuffle(shuffled)
        return [s.id for s in shuffled]

    assert sample(7) == sample(7) and sample(7) != sample(8)


def test_overlapping_edits_are_refused():
    edits = [Edit(path="x.py", start=0, end=5, text="a"), Edit(path="x.py", start=3, end=8, text="b")]
    with pytest.raises(OverlappingEditsError):
        apply_edits(b"0123456789", edits)


class FixedBody:
    """A stand-in for a model backend: always answers with the same (buggy) body."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.body


def test_model_rewrite_replaces_the_body_from_signature_and_docstring():
    model = FixedBody("```python\ndef clamp(value, low, high):\n    return max(low, value)\n```")
    strategy = ModelRewrite(model)
    files = {"sample.py": SAMPLE}
    (site,) = strategy.sites(files)  # only clamp has a docstring and a body
    assert site.function == "clamp"
    edits = strategy.realise(site, files)
    mutant = apply_edits(SAMPLE, edits).decode()
    compile(mutant, "sample.py", "exec")
    assert '    """Limit value to [low, high]."""\n    return max(low, value)\n\n\nclass Stack:' in mutant
    assert "def clamp(value, low, high):" in model.prompts[0] and "Limit value" in model.prompts[0]
    assert "return low" not in model.prompts[0]  # the body is not shown to the model
