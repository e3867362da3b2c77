"""Procedural bug injection (SWE-smith style): stdlib `ast` finds the sites, text edits make the bug.

Every mutation is a byte-span replacement in the original file, located from the nodes'
line/column offsets, so the diff is as small as the change and the rest of the file (formatting,
comments) is untouched. Sites are enumerated in a fixed order, so ids and order are deterministic.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator

from pydantic import BaseModel

OPERATORS = (
    "flip_comparison", "off_by_one", "swap_arguments", "drop_branch", "drop_statement",
    "change_constant", "invert_condition", "wrong_return", "change_operator",
)
"""Every procedural operator, in enumeration order."""


class Edit(BaseModel):
    """Replace bytes [start, end) of one file with `text`."""

    path: str
    """File, relative to the repository root."""
    start: int
    """First byte replaced."""
    end: int
    """One past the last byte replaced."""
    text: str
    """Replacement text."""


class Mutation(BaseModel):
    """One candidate bug: where it is, what kind it is, and the edit that makes it."""

    id: str
    """Stable hash of the edit."""
    operator: str
    """One of OPERATORS (or the model strategy's name)."""
    path: str
    """File, relative to the repository root."""
    function: str
    """Qualified name of the function the edit is in."""
    line: int
    """First line the edit touches (1-based)."""
    edits: list[Edit]
    """The edits (one for procedural mutations)."""


class OverlappingEditsError(ValueError):
    """Two edits of one file overlap, so they cannot both be applied."""


def edit_id(edits: list[Edit]) -> str:
    """A stable id for a set of edits."""
    digest = hashlib.sha1()
    for e in sorted(edits, key=lambda e: (e.path, e.start)):
        digest.update(f"{e.path}\0{e.start}\0{e.end}\0{e.text}\0".encode())
    return digest.hexdigest()[:12]


def apply_edits(source: bytes, edits: list[Edit]) -> bytes:
    """`source` with the edits of one file applied (they must not overlap)."""
    out = source
    last = len(source) + 1
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        if e.end > last:
            raise OverlappingEditsError(f"{e.path}: edits overlap at byte {e.start}")
        out = out[: e.start] + e.text.encode() + out[e.end :]
        last = e.start
    return out


_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_CMP_FLIP = {"<": ["<=", ">"], "<=": ["<", ">="], ">": [">=", "<"], ">=": [">", "<="], "==": ["!="],
             "!=": ["=="], "is": ["is not"], "is not": ["is"], "in": ["not in"], "not in": ["in"]}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
        ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&"}
_BIN_SWAP = {"+": "-", "-": "+", "*": "/", "/": "*", "//": "/", "%": "//", "**": "*", "<<": ">>",
             ">>": "<<", "|": "&", "&": "|", "^": "|"}
_BOOL = {ast.And: "and", ast.Or: "or"}
_TOKEN = re.compile(r"\*\*=?|//=?|<<=?|>>=?|[!=<>]=|[-+*/%@&|^<>=~]=?|[()]|[A-Za-z_]\w*|\S")
_ATOMIC = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict)
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
"""Operators that bind at least as tightly as `+ 1`, so `expr + 1` needs no parentheses."""
_DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Raise, ast.Delete, ast.Break, ast.Continue)


class _Source:
    """A file's bytes with node -> byte-span helpers (ast columns are UTF-8 byte offsets)."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.line_starts = [0]
        for i, byte in enumerate(data):
            if byte == 0x0A:
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()

    def line_end(self, line: int) -> int:
        """Offset just past line `line` (including its newline)."""
        return self.line_starts[line] if line < len(self.line_starts) else len(self.data)

    def whole_lines(self, first: ast.stmt, last: ast.stmt) -> tuple[int, int] | None:
        """Span of the full lines from `first` to `last`, if nothing else shares those lines."""
        start, end = self.offset(first.lineno, first.col_offset), self.offset(last.end_lineno, last.end_col_offset)
        line_start, line_end = self.line_starts[first.lineno - 1], self.line_end(last.end_lineno)
        before = self.data[line_start:start].decode()
        after = self.data[end:line_end].decode().strip()
        if before.strip() or (after and not after.startswith("#")):
            return None
        return line_start, line_end

    def token_span(self, left: ast.AST, right: ast.AST, op: str) -> tuple[int, int] | None:
        """Byte span of operator `op` between two nodes, when the gap holds exactly it (and parens)."""
        gap_start, gap_end = self.span(left)[1], self.span(right)[0]
        gap = self.data[gap_start:gap_end].decode()
        if not gap.isascii() or "#" in gap or "\\" in gap:
            return None
        tokens = [m for m in _TOKEN.finditer(gap) if m.group() not in "()"]
        if [m.group() for m in tokens] != op.split():
            return None
        return gap_start + tokens[0].start(), gap_start + tokens[-1].end()


class _Collector:
    """Walks one module and yields (operator, function, node line, start, end, replacement)."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.found: list[tuple[str, str, int, int, int, str]] = []

    def add(self, operator: str, function: str, line: int, span: tuple[int, int] | None, text: str) -> None:
        if span is not None and self.src.data[span[0]:span[1]].decode() != text:
            self.found.append((operator, function, line, span[0], span[1], text))

    def module(self, tree: ast.Module) -> None:
        self._scope(tree.body, "")

    def _scope(self, body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{stmt.name}"
                self._function(stmt, name)
                self._scope(stmt.body, f"{name}.<locals>.")
            elif isinstance(stmt, ast.ClassDef):
                self._scope(stmt.body, f"{prefix}{stmt.name}.")
            else:
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.stmt):
                        self._scope([child], prefix)

    def _function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> None:
        body = fn.body[1:] if ast.get_docstring(fn, clean=False) is not None else fn.body
        self._block(body, name)

    def _block(self, body: list[ast.stmt], fn: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # their own scope
            self._statement(stmt, body, fn)
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    self._block(block, fn)
            for handler in getattr(stmt, "handlers", []):
                self._block(handler.body, fn)
            for case in getattr(stmt, "cases", []):
                self._block(case.body, fn)
            for node in _expressions(stmt):
                self._expression(node, fn)

    def _statement(self, stmt: ast.stmt, siblings: list[ast.stmt], fn: str) -> None:
        src = self.src
        if isinstance(stmt, ast.If):
            self._drop_branch(stmt, siblings, fn)
            self._invert(stmt.test, fn)
        if isinstance(stmt, _DROPPABLE) and len(siblings) > 1 and _has_effect(stmt):
            self.add("drop_statement", fn, stmt.lineno, src.whole_lines(stmt, stmt), "")
        if isinstance(stmt, ast.AugAssign) and type(stmt.op) in _BIN:
            op = _BIN[type(stmt.op)]
            swapped = _BIN_SWAP.get(op)
            if swapped:
                self.add("change_operator", fn, stmt.lineno, src.token_span(stmt.target, stmt.value, op + "="), swapped + "=")
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            self._wrong_return(stmt, fn)

    def _drop_branch(self, node: ast.If, siblings: list[ast.stmt], fn: str) -> None:
        src = self.src
        if not node.orelse:
            if len(siblings) > 1:
                self.add("drop_branch", fn, node.lineno, src.whole_lines(node, node), "")
            return
        first = node.orelse[0]
        line = src.data[src.line_starts[first.lineno - 1]:src.line_end(first.lineno)].decode().lstrip()
        if len(node.orelse) == 1 and isinstance(first, ast.If) and line.startswith("elif"):
            # Drop the elif clause; its own else/elif then belongs to the outer if.
            start = src.line_starts[first.lineno - 1]
            end_span = src.whole_lines(first.body[-1], first.body[-1])
            if end_span is not None:
                self.add("drop_branch", fn, first.lineno, (start, end_span[1]), "")
            return
        else_line = next((n for n in range(node.body[-1].end_lineno + 1, first.lineno + 1)
                          if re.match(rb"\s*else\s*:", src.data[src.line_starts[n - 1]:src.line_end(n)])), None)
        end_span = src.whole_lines(node.orelse[-1], node.orelse[-1]) if first.lineno != else_line else None
        if else_line is not None and end_span is not None:
            self.add("drop_branch", fn, else_line, (src.line_starts[else_line - 1], end_span[1]), "")

    def _invert(self, test: ast.expr, fn: str) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            operand = test.operand
            text = self.src.text(operand)
            if not isinstance(operand, (*_ATOMIC, ast.Compare)):
                text = f"({text})"
            self.add("invert_condition", fn, test.lineno, self.src.span(test), text)
            return
        text = self.src.text(test)
        wrapped = text if isinstance(test, (*_ATOMIC, ast.Compare, ast.UnaryOp)) else f"({text})"
        self.add("invert_condition", fn, test.lineno, self.src.span(test), f"not {wrapped}")

    def _wrong_return(self, stmt: ast.Return, fn: str) -> None:
        value, src = stmt.value, self.src
        assert value is not None
        span = src.span(value)
        if not (isinstance(value, ast.Constant) and value.value is None):
            self.add("wrong_return", fn, stmt.lineno, span, "None")
        others: list[ast.expr] = []
        if isinstance(value, ast.BinOp):
            others = [value.left, value.right]
        elif isinstance(value, ast.BoolOp):
            others = list(value.values)
        elif isinstance(value, ast.IfExp):
            others = [value.body, value.orelse]
        elif isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            others = [a for a in value.args if not isinstance(a, ast.Starred)]
        for other in others:
            text = src.text(other)
            if isinstance(other, (ast.Tuple, ast.Yield, ast.NamedExpr)):
                text = f"({text})"
            self.add("wrong_return", fn, stmt.lineno, span, text)

    def _expression(self, node: ast.expr, fn: str) -> None:
        src = self.src
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                token = _CMP[type(op)]
                span = src.token_span(left, right, token)
                for flipped in _CMP_FLIP[token]:
                    self.add("flip_comparison", fn, node.lineno, span, flipped)
                left = right
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            op = _BIN[type(node.op)]
            self.add("change_operator", fn, node.lineno, src.token_span(node.left, node.right, op), _BIN_SWAP[op])
        elif isinstance(node, ast.BoolOp):
            op = _BOOL[type(node.op)]
            other = "or" if op == "and" else "and"
            self.add("change_operator", fn, node.lineno, src.token_span(node.values[0], node.values[1], op), other)
        elif isinstance(node, ast.IfExp):
            self._invert(node.test, fn)
        elif isinstance(node, ast.Constant):
            self._constant(node, fn)
        elif isinstance(node, ast.Call):
            self._call(node, fn)
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if bound is not None and not isinstance(bound, ast.Constant):
                    self._plus_minus_one(bound, fn)

    def _constant(self, node: ast.Constant, fn: str) -> None:
        value, span, text = node.value, self.src.span(node), self.src.text(node)
        if isinstance(value, bool):
            self.add("change_constant", fn, node.lineno, span, str(not value))
        elif isinstance(value, int) and text == str(value):
            self.add("off_by_one", fn, node.lineno, span, str(value + 1))
            if value > 0:
                self.add("off_by_one", fn, node.lineno, span, str(value - 1))
            if value > 1:
                self.add("change_constant", fn, node.lineno, span, str(value * 2))
        elif isinstance(value, float) and text == repr(value):
            self.add("change_constant", fn, node.lineno, span, repr(value * 2 if value else 1.0))
        elif isinstance(value, (str, bytes)) and value and "\n" not in text:
            prefix = re.match(r"[A-Za-z]*", text).group()  # type: ignore[union-attr]
            self.add("change_constant", fn, node.lineno, span, prefix + text[len(prefix)] * 2)

    def _call(self, node: ast.Call, fn: str) -> None:
        src, args = self.src, node.args
        if any(isinstance(a, ast.Starred) for a in args):
            return
        for a, b in zip(args, args[1:], strict=False):
            ta, tb = src.text(a), src.text(b)
            start, mid_a = src.span(a)
            mid_b, end = src.span(b)
            gap = src.data[mid_a:mid_b].decode()
            if ta != tb and gap.strip() == "," and "\n" not in ta + tb:
                self.add("swap_arguments", fn, node.lineno, (start, end), tb + gap + ta)
        if isinstance(node.func, ast.Name) and node.func.id == "range" and args:
            bound = args[1] if len(args) >= 2 else args[0]
            if not isinstance(bound, ast.Constant):
                self._plus_minus_one(bound, fn)

    def _plus_minus_one(self, node: ast.expr, fn: str) -> None:
        text = self.src.text(node)
        binds_tighter = (isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not)) or (
            isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC))
        if not (isinstance(node, _ATOMIC) or binds_tighter):
            text = f"({text})"
        for delta in (" + 1", " - 1"):
            self.add("off_by_one", fn, node.lineno, self.src.span(node), text + delta)


def _has_effect(stmt: ast.stmt) -> bool:
    """Dropping a bare string or an annotation-only line would change nothing a test can see."""
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, (ast.Call, ast.Await))
    return not isinstance(stmt, ast.AnnAssign) or stmt.value is not None


def _expressions(stmt: ast.stmt) -> Iterator[ast.expr]:
    """The expression nodes that belong to `stmt` itself (not to its nested statements or f-strings)."""
    nested = (ast.stmt, ast.excepthandler, ast.match_case)
    stack: list[ast.AST] = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, nested)]
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.JoinedStr, ast.Lambda)):
            continue  # f-string internals have unreliable positions before 3.12
        if isinstance(node, ast.expr):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def mutations_of(path: str, data: bytes) -> list[Mutation]:
    """Every procedural mutation of the functions in one file, in a fixed order.

    Files that do not parse yield none. Duplicate edits (same span, same text) are listed once,
    under the first operator that produced them.
    """
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError):
        return []
    collector = _Collector(_Source(path, data))
    collector.module(tree)
    seen: set[tuple[int, int, str]] = set()
    out: list[Mutation] = []
    for operator, function, line, start, end, text in sorted(collector.found, key=lambda f: (f[3], f[4], OPERATORS.index(f[0]))):
        if (start, end, text) in seen:
            continue
        seen.add((start, end, text))
        edits = [Edit(path=path, start=start, end=end, text=text)]
        out.append(Mutation(id=edit_id(edits), operator=operator, path=path, function=function, line=line, edits=edits))
    return out
