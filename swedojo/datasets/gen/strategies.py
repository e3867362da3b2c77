"""Where candidate bugs come from: a `Strategy` lists sites, then turns one site into edits.

Listing is cheap and deterministic (the generator samples from it with a seeded RNG); realising
may be costly (a model call), so it happens only for the sites actually tried.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from typing import Protocol

from swedojo.datasets.gen.mutations import Edit, Mutation, mutations_of


class Strategy(Protocol):
    """A source of candidate bugs in the repo's own (non-test) code."""

    name: str
    """Key in the journal and in yield.json."""
    tag: str
    """Infix of the instance ids it produces (says nothing about the bug)."""

    def sites(self, files: dict[str, bytes]) -> list[Mutation]:
        """Every place this strategy could inject a bug, in a fixed order."""
        ...

    def realise(self, site: Mutation, files: dict[str, bytes]) -> list[Edit]:
        """The edits that make the bug at `site`; empty when it yields none."""
        ...


class ProceduralMutations:
    """SWE-smith-style AST operators (flip comparison, off-by-one, drop branch, ...)."""

    name = "mutation"
    tag = "mut"

    def sites(self, files: dict[str, bytes]) -> list[Mutation]:
        return [m for path in sorted(files) for m in mutations_of(path, files[path])]

    def realise(self, site: Mutation, files: dict[str, bytes]) -> list[Edit]:
        return site.edits


class Model(Protocol):
    """Anything that completes a prompt (the agent's model backends, or a test double)."""

    def complete(self, prompt: str) -> str:
        """The model's answer to `prompt`."""
        ...


PROMPT = """Rewrite the body of this Python function from its signature and docstring alone.
Reply with the body only (no signature, no docstring), as Python code.

{signature}
{docstring}
"""


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out


def _body_only(answer: str) -> str:
    """The code in a model answer, without fences, a repeated signature or docstring."""
    fenced = re.search(r"```(?:python)?\n(.*?)```", answer, re.DOTALL)
    code = textwrap.dedent(fenced.group(1) if fenced else answer).strip("\n")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code + "\n"
    if len(tree.body) == 1 and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        fn = tree.body[0]
        body = fn.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
            body = body[1:]
        lines = code.splitlines()[body[0].lineno - 1 : fn.end_lineno]
        code = textwrap.dedent("\n".join(lines))
    return code + "\n"


class ModelRewrite:
    """Rewrites one documented function from its signature and docstring (SWE-smith's LM rewrite).

    The model's version replaces the body as it is; the same validation as for procedural
    mutants decides whether it is a task (it must break some tests and leave others passing).
    """

    name = "model_rewrite"
    tag = "llm"

    def __init__(self, model: Model) -> None:
        self.model = model

    def sites(self, files: dict[str, bytes]) -> list[Mutation]:
        out: list[Mutation] = []
        for path in sorted(files):
            data = files[path]
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                continue
            for qualname, fn in _functions(tree):
                if ast.get_docstring(fn) is None or len(fn.body) < 2 or fn.body[1].lineno == fn.body[0].end_lineno:
                    continue
                key = hashlib.sha1(f"{path}\0{qualname}\0{self.name}".encode()).hexdigest()[:12]
                out.append(Mutation(id=key, operator=self.name, path=path, function=qualname,
                                    line=fn.body[1].lineno, edits=[]))
        return out

    def realise(self, site: Mutation, files: dict[str, bytes]) -> list[Edit]:
        data = files[site.path]
        fn = dict(_functions(ast.parse(data)))[site.function]
        lines = data.decode().splitlines(keepends=True)
        signature = "".join(lines[fn.lineno - 1 : fn.body[0].lineno - 1]).rstrip()
        docstring = "".join(lines[fn.body[0].lineno - 1 : fn.body[0].end_lineno]).rstrip()
        body_lines = lines[fn.body[1].lineno - 1 : fn.end_lineno]
        indent = re.match(r"\s*", body_lines[0]).group()  # type: ignore[union-attr]
        answer = self.model.complete(PROMPT.format(signature=textwrap.dedent(signature), docstring=docstring))
        new_body = textwrap.indent(_body_only(answer), indent)
        start = sum(len(line.encode()) for line in lines[: fn.body[1].lineno - 1])
        end = start + sum(len(line.encode()) for line in body_lines)
        if not body_lines[-1].endswith("\n"):
            new_body = new_body.rstrip("\n")
        if new_body == "".join(body_lines):
            return []
        return [Edit(path=site.path, start=start, end=end, text=new_body)]
