"""Test names a benchmark lists, matched to the ids our log parsers give, by one rule set for all.

Benchmarks that parse logs with a function of their own per repository (Multi-SWE-bench) name
tests in that function's form: a ctest or script name (`format-test`, `compression/basic.sh`), a
test file (`test/timezone.test.js`: the file's own result), a file and a title
(`test/timezone.test.js:TZ with Locale`), or a title with some or all of its suites' titles
(`res .redirect(url) should work`, `should work`). Our ids are `file::title` for jest, vitest and
mocha (the file's path from the work tree), a title path alone for the TAP parsers, a name alone
for ctest and automake. A listed name is matched by the first of these rules that matches any id (the more
specific first):

1. exact: the listed name is an id.
2. full title: it is an id's title (after `file::`; an id without `::` is all title).
3. file and title: it is `FILE:TITLE`, FILE is the id's file (the same path, or one of the two
   ends with `/` and the other: a benchmark run from a package's directory) and TITLE is the id's
   title or the title's last part (see 4).
4. title suffix: an id's title ends with the listed name after the separator the parser puts
   between a suite's title and what lies in it (`TITLE_SEPARATORS`: " > " for jest, vitest and the
   TAP parsers, " " for mocha, whose full titles join with spaces, so that any tail of whole words
   of a mocha title matches); no rule for other parsers.
5. whole file: it is a file (as in 3) of ids: it names every test of the file.
6. script name: it and an id without a title are one path, or one ends with `/` and the other
   (`compression/basic.sh` and `tests/cli-tests/compression/basic.sh`).

A name that a rule matches to several ids names them all, and its status is the worst of theirs,
as `testrun.ids` does for a bare function name: the benchmark's parser read those tests under the
one name, so it merged them too (a title that two suites share, a file's tests). jest's ids of a
test named as one before it (`title (2)`) are compared without the counter, and every title with
its white space runs made one space and its ends stripped (a log line loses a title's trailing
space). Two files of one name (`test/timezone.test.js` and `test/plugin/timezone.test.js`) are
two files to rules 3 and 5; a listed name that is a file's name alone names both. Rules that
depend on the parser are keyed by the parser's name (`EnvSpec.log_parser`), never by repository. A name no
rule matches is `unmatched`; grading names it and counts it as missing from the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from pydantic import BaseModel

Rule = Literal["exact", "full title", "file and title", "title suffix", "whole file", "script name"]

TITLE_SEPARATORS: dict[str, str] = {
    "jest": " > ", "vitest": " > ", "mocha": " ", "tap": " > ", "ava": " > ", "node-tap": " > ",
}
"""Parser -> what its ids put between a suite's title and the titles in it."""

_DUPLICATE_COUNTER = re.compile(r" \(\d+\)$")
_COUNTED_PARSERS = frozenset({"jest", "vitest", "mocha"})
"""Parsers whose id of a test named as one before it ends with a counter (`title (2)`)."""


class ListedMatch(BaseModel):
    """The ids one listed name names."""

    rule: Rule
    """The rule that matched it."""
    ids: list[str]
    """Our parser's ids, in the order they were seen; the name's status is the worst of theirs."""


class NameMatch(BaseModel):
    """Listed test names matched to the ids of a log."""

    matched: dict[str, ListedMatch] = {}
    """Listed name -> the ids it names and by which rule."""
    unmatched: list[str] = []
    """Listed names no rule matched, in listed order."""


class _Id(NamedTuple):
    """An id of ours cut into its file and title."""

    id: str
    file: str
    """The part before `::`; empty when the id has none."""
    title: str
    """The part after `::` (the whole id when it has none), without the duplicate counter (jest, mocha)."""


def _cut(test_id: str, parser: str) -> _Id:
    file, cut, title = test_id.partition("::")
    if not cut:
        file, title = "", test_id
    if parser in _COUNTED_PARSERS:
        title = _DUPLICATE_COUNTER.sub("", title)
    return _Id(test_id, file, _spaced(title))


def _spaced(text: str) -> str:
    """`text` with its runs of white space made one space and its ends stripped: a benchmark's
    parser reads a title out of a log line, where a title's trailing space is lost."""
    return " ".join(text.split())


def _same_file(listed: str, file: str) -> bool:
    """Whether the listed path names our id's file."""
    return bool(file) and _same_path(listed, file)


def _same_path(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _title_is(title: str, wanted: str, separator: str) -> bool:
    return title == wanted or bool(separator) and title.endswith(separator + wanted)


def _match_one(name: str, ids: list[_Id], separator: str) -> tuple[Rule, list[str]] | None:
    file, colon, title = name.partition(":")
    title = title.removeprefix(":")
    rules: list[tuple[Rule, Iterable[str]]] = [
        ("full title", (i.id for i in ids if i.title == name)),
        ("file and title", (i.id for i in ids if colon and _same_file(file, i.file)
                            and _title_is(i.title, title, separator))),
        ("title suffix", (i.id for i in ids if separator and i.title.endswith(separator + name))),
        ("whole file", (i.id for i in ids if _same_file(name, i.file))),
        ("script name", (i.id for i in ids if not i.file and _same_path(name, i.id))),
    ]
    for rule, found in rules:
        if named := list(found):
            return rule, named
    return None


def match_listed(listed: Sequence[str], seen: Iterable[str], parser: str = "") -> NameMatch:
    """Each listed name -> the ids of `seen` (those a log gave `parser`) it names, by the first rule
    of the module's that matches; names none matches are `unmatched`."""
    seen = list(dict.fromkeys(seen))
    known = set(seen)
    ids = [_cut(test_id, parser) for test_id in seen]
    separator = TITLE_SEPARATORS.get(parser, "")
    result = NameMatch()
    for name in dict.fromkeys(listed):
        found = ("exact", [name]) if name in known else _match_one(_spaced(name), ids, separator)
        if found is None:
            result.unmatched.append(name)
        else:
            result.matched[name] = ListedMatch(rule=found[0], ids=found[1])
    return result
