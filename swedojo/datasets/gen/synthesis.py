"""Tasks by bug injection (SWE-smith style): mutate the repo's own functions, keep what tests catch.

Every candidate runs in a reusable work tree (write the mutant, run, restore): first only the
tests that call the code it changes (the baseline's reach map; a mutant no test calls is rejected
without a run), then, if one of them broke, the whole suite once, which fixes FAIL_TO_PASS and
PASS_TO_PASS. Only survivors get a task commit and the end-to-end validation in fresh sandboxes.
Pairs of kept mutants in different functions make harder tasks.
"""

from __future__ import annotations

import hashlib
import queue
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import partial
from itertools import combinations
from pathlib import Path
from typing import NamedTuple

from swedojo.datasets.gen.core import (
    InvalidTaskError,
    Target,
    commit_files,
    diff,
    flaky_between,
    git,
    git_bytes,
    in_order,
    is_doc_file,
    is_test_file,
    prepare_repo,
    prove_task,
    write_envspec,
)
from swedojo.datasets.gen.environments import run_environment
from swedojo.datasets.gen.journal import Baseline, Entry, Header, Journal, Outcome
from swedojo.datasets.gen.mutations import Edit, OverlappingEditsError, apply_edits
from swedojo.datasets.gen.reach import edited_lines, record
from swedojo.datasets.gen.settings import GenSettings, RunCounts
from swedojo.datasets.gen.statements import mutation_statement
from swedojo.datasets.gen.strategies import Strategy
from swedojo.sandboxes.base import Sandbox
from swedojo.sandboxes.environment import Environment
from swedojo.schema import TaskInstance
from swedojo.testrun.run import SuiteRun, TestRunError, run_suite, run_tests

COMBINED = "combined"
"""Strategy name of two-mutant tasks."""
PAIR_TRIES = 4
"""Pairs tried per combined task still wanted (most pairs fail the same tests as a kept task)."""
_NOT_SOURCE = {"setup.py", "noxfile.py", "fabfile.py", "conftest.py"}


PACE_MARGIN = 1.5
"""A run cut while its tests kept finishing gets this much more than its pace needs for all of them..."""
MAX_PACE_FACTOR = 10.0
"""...but never more than this many times its first limit."""


class NoPassingTestsError(RuntimeError):
    """The suite has no test that passes reliably at the commit, so no mutant can be caught."""


class NoMutableSourcesError(RuntimeError):
    """The repository has no source file the mutation operators can change (they read Python)."""


def source_files(repo: Path, commit: str) -> dict[str, bytes]:
    """The repo's own Python modules at `commit` (not tests, docs or packaging scripts)."""
    names = git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
    keep = [n for n in names if n.endswith(".py") and not is_test_file(n) and not is_doc_file(n)
            and n.split("/")[-1] not in _NOT_SOURCE and not any(p.startswith(".") for p in n.split("/"))]
    return {n: git_bytes(repo, "cat-file", "blob", f"{commit}:{n}") for n in keep}


class Candidate(NamedTuple):
    """One candidate bug, before it is realised."""

    key: str
    strategy: str
    tag: str
    functions: list[str]
    edits: Callable[[], list[Edit]]


class _Mutator:
    """Evaluates candidates against one baseline and turns survivors into tasks.

    Up to `settings.workers` candidates are evaluated at once, each in a work tree of its own kept
    for the whole run; verdicts are settled and journaled in candidate order (a duplicate is one
    of an earlier candidate in that order), so the same seed gives the same suite at any width.
    """

    def __init__(self, target: Target, repo: Path, head: str, env: Environment, sandboxes: list[Sandbox],
                 files: dict[str, bytes], baseline: Baseline, settings: GenSettings, journal: Journal,
                 counts: RunCounts) -> None:
        self.target, self.repo, self.head, self.env = target, repo, head, env
        self.files, self.baseline, self.settings, self.journal, self.counts = files, baseline, settings, journal, counts
        self.date = git(repo, "show", "-s", "--format=%cI", head).strip()
        self.seen: set[frozenset[str]] = set()
        self.timeout_s = settings.limit(baseline.seconds)
        self.idle: queue.SimpleQueue[Sandbox] = queue.SimpleQueue()
        for sandbox in sandboxes:
            self.idle.put(sandbox)
        self.width = len(sandboxes)

    def _timed(self, candidate: Candidate) -> Entry:
        sandbox = self.idle.get()
        try:
            start = time.monotonic()
            entry = self._evaluate(sandbox, candidate.key, candidate.strategy, candidate.tag, candidate.edits(),
                                   candidate.functions)
            entry.seconds = round(time.monotonic() - start, 3)
            return entry
        finally:
            self.idle.put(sandbox)

    def _verdicts(self, pool: ThreadPoolExecutor, candidates: Iterator[Candidate]) -> Iterator[Entry]:
        """Verdicts in candidate order: the journal's, or new ones evaluated `width` at a time (see
        `in_order`); stops when the candidate budget is spent."""
        jobs = (self.journal.entries.get(c.key) or partial(self._timed, c) for c in candidates)
        for entry, new in in_order(pool, self.width, jobs, self.counts.start, self._dropped):
            if new:
                entry = self._settle(entry)
            else:
                self.counts.reused += 1
            if entry.outcome == Outcome.KEPT:
                self.seen.add(frozenset(entry.failing))
            yield entry

    def _dropped(self, entry: Entry) -> None:
        if entry.instance is not None:
            _drop_branch(self.repo, entry.instance.instance_id)

    def _settle(self, entry: Entry) -> Entry:
        """A new verdict in candidate order: a duplicate of an earlier kept one is dropped; journaled."""
        if entry.outcome == Outcome.KEPT and entry.instance is not None and frozenset(entry.failing) in self.seen:
            _drop_branch(self.repo, entry.instance.instance_id)
            entry.outcome, entry.instance = Outcome.DUPLICATE, None
        self.journal.record(entry)
        self.counts.evaluated += 1
        return entry

    def run(self, strategies: list[Strategy]) -> None:
        """Single mutants first (shuffled per strategy by the seed), then pairs of the kept ones."""
        settings = self.settings
        combined_target = (settings.max_tasks + 2) // 5 if settings.combine else 0  # a fifth, rounded
        singles: list[Entry] = []
        with ThreadPoolExecutor(self.width, thread_name_prefix="swedojo-gen") as pool:
            if settings.max_tasks - combined_target > 0:
                with closing(self._verdicts(pool, self._singles(strategies))) as verdicts:
                    for entry in verdicts:
                        singles += [entry] if entry.outcome == Outcome.KEPT else []
                        if len(singles) >= settings.max_tasks - combined_target:
                            break
            if self.counts.interrupted:
                return
            pairs = [(a, b) for a, b in combinations(singles, 2) if not set(a.functions) & set(b.functions)]
            random.Random(f"{settings.seed}:{COMBINED}").shuffle(pairs)
            kept = len(singles)
            if kept >= settings.max_tasks:
                return
            tries = (Candidate(f"{a.key}+{b.key}", COMBINED, "mix", [*a.functions, *b.functions],
                               partial(list, [*a.edits, *b.edits])) for a, b in pairs[: PAIR_TRIES * (settings.max_tasks - kept)])
            with closing(self._verdicts(pool, tries)) as verdicts:
                for entry in verdicts:
                    kept += entry.outcome == Outcome.KEPT
                    if kept >= settings.max_tasks:
                        break

    def _singles(self, strategies: list[Strategy]) -> Iterator[Candidate]:
        for strategy in strategies:
            sites = strategy.sites(self.files)
            random.Random(f"{self.settings.seed}:{strategy.name}").shuffle(sites)
            for site in sites:
                yield Candidate(site.id, strategy.name, strategy.tag, [f"{site.path}:{site.function}"],
                                partial(strategy.realise, site, self.files))

    def _evaluate(self, sandbox: Sandbox, key: str, strategy: str, tag: str, edits: list[Edit], functions: list[str]) -> Entry:
        entry = Entry(key=key, strategy=strategy, outcome=Outcome.NOT_COMPILED, edits=edits, functions=functions)
        by_path: dict[str, list[Edit]] = defaultdict(list)
        for e in edits:
            by_path[e.path].append(e)
        mutant: dict[str, bytes] = {}
        try:
            for path, file_edits in sorted(by_path.items()):
                mutant[path] = apply_edits(self.files[path], file_edits)
                compile(mutant[path], path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverlappingEditsError) as exc:
            entry.detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return entry
        if not mutant or all(mutant[p] == self.files[p] for p in mutant):
            entry.detail = "no change"
            return entry
        entry.compiled = True
        selected = self._selection(edits)
        if selected == []:
            entry.outcome, entry.detail = Outcome.NOT_REACHED, "no test calls the mutated code"
            return entry
        try:
            for path, data in mutant.items():
                sandbox.write_file(path, data)
            if selected is not None:  # the tests that call it first: most mutants break none of them
                first = self._paced(lambda limit: run_tests(sandbox, self.env.spec, selected, limit), len(selected),
                                    self.settings.limit(self._baseline_of(selected)))
                if first.timed_out:
                    entry.outcome, entry.detail = Outcome.TIMED_OUT, f"{len(selected)} selected tests"
                    return entry
                if all(first.passed(t) for t in selected):
                    entry.outcome, entry.detail = Outcome.NO_BREAK, f"none of the {len(selected)} tests calling it broke"
                    return entry
            # the whole suite may be slower than at the baseline by what the selected tests already were
            slower = 0.0 if selected is None else max(0.0, first.duration_s - self._baseline_of(selected))
            run = self._paced(lambda limit: run_suite(sandbox, self.env.spec, limit), len(self.baseline.statuses),
                              self.timeout_s + self.settings.timeout_factor * slower)
        except TestRunError as exc:
            entry.outcome, entry.detail = Outcome.INVALID, str(exc)
            return entry
        finally:
            for path in mutant:
                sandbox.write_file(path, self.files[path])
        if run.timed_out:
            entry.outcome = Outcome.TIMED_OUT
            return entry
        broken = sorted(t for t in self.baseline.passing if not run.passed(t))
        still = sorted(t for t in self.baseline.passing if run.passed(t))
        entry.failing, entry.broke = broken, bool(broken)
        if not broken:
            entry.outcome = Outcome.NO_BREAK
        elif not still:
            entry.outcome = Outcome.NONE_LEFT
        elif frozenset(broken) in self.seen:  # of an earlier candidate already settled
            entry.outcome = Outcome.DUPLICATE
        else:
            entry.instance = self._task(key, strategy, tag, mutant, broken, still, run.log)
            entry.outcome = Outcome.KEPT
            try:
                prove_task(self.env, entry.instance)
            except InvalidTaskError as exc:
                _drop_branch(self.repo, entry.instance.instance_id)
                entry.outcome, entry.detail, entry.instance = Outcome.INVALID, str(exc), None
        return entry

    def _selection(self, edits: list[Edit]) -> list[str] | None:
        """The tests a candidate runs first: the baseline's passing tests that call the code it
        changes, and those the map does not know; None: the whole suite (no map, or the code runs
        outside every test)."""
        reach = self.baseline.reach
        reaching = None if reach is None else reach.reaching(edited_lines(edits, self.files))
        if reach is None or reaching is None:
            return None
        calling = set(reaching)
        return [t for t in self.baseline.passing if t in calling or t not in reach.tests]

    def _paced(self, run: Callable[[float], SuiteRun], expected: int, limit: float) -> SuiteRun:
        """`run(limit)`, and once more with the limit its pace asks for when it was cut while its tests
        kept finishing: a mutant that fails hundreds of tests pays for their tracebacks, and that is
        slow, not hung. A run that stalled (a tenth of its tests or fewer done) is not given more."""
        result = run(limit)
        done = len(result.statuses)
        if not result.timed_out or done <= expected // 10 or not result.duration_s:
            return result
        needed = PACE_MARGIN * result.duration_s * max(expected, done) / done
        return run(min(needed, MAX_PACE_FACTOR * limit)) if needed > limit else result

    def _baseline_of(self, tests: list[str]) -> float:
        """What a run of `tests` took at the baseline: their times plus the runner's start (the
        baseline's time not spent in tests), never more than the whole suite's."""
        assert self.baseline.reach is not None
        whole, seconds = self.baseline.seconds, self.baseline.reach.seconds
        start = max(0.0, whole - sum(seconds.values()))
        return min(whole, start + sum(seconds.get(t, whole) for t in tests))

    def _task(self, key: str, strategy: str, tag: str, mutant: dict[str, bytes], broken: list[str],
              still: list[str], log: str) -> TaskInstance:
        instance_id = f"{self.target.slug}-{tag}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
        base = commit_files(self.repo, self.head, mutant, f"Task {instance_id}", _branch(instance_id))
        patch = diff(self.repo, base, self.head, sorted(mutant))
        return TaskInstance(
            instance_id=instance_id, repo=self.target.repo, base_commit=base, patch=patch, test_patch="",
            problem_statement=mutation_statement(log, broken, patch), created_at=self.date,
            FAIL_TO_PASS=broken, PASS_TO_PASS=still, environment_setup_commit=self.head, gen_strategy=strategy,
        )


def _branch(instance_id: str) -> str:
    return f"swedojo-gen/{instance_id}"


def _drop_branch(repo: Path, instance_id: str) -> None:
    """Delete the task commit's branch of a candidate that is not kept after all."""
    git(repo, "update-ref", "-d", f"refs/heads/{_branch(instance_id)}")


def _baseline(sandbox: Sandbox, env: Environment, settings: GenSettings) -> Baseline:
    """Two runs of the suite: the first times it, the second records the reach map (when selecting)."""
    first = run_suite(sandbox, env.spec, settings.baseline_limit())
    if settings.select_tests:
        second, reach = record(sandbox, env.spec, settings.baseline_limit())
    else:
        second, reach = run_suite(sandbox, env.spec, settings.baseline_limit()), None
    flaky = flaky_between(first, second)
    passing = sorted(t for t in first.statuses if first.passed(t) and t not in flaky)
    return Baseline(statuses=first.statuses, passing=passing, flaky=sorted(flaky),
                    seconds=round(first.duration_s, 3), reach=reach)


def generate_mutations(target: Target, settings: GenSettings, strategies: list[Strategy], counts: RunCounts) -> None:
    """Inject bugs at the source's HEAD until `settings.max_tasks` tasks are kept (or candidates run out)."""
    head = git(target.source, "rev-parse", "HEAD^{commit}").strip()
    repo = prepare_repo(target, [head])
    journal = Journal(target.out / "journal" / f"{target.slug}.mutations.jsonl",
                      Header(repo=target.repo, mode="mutations", tip=head, seed=settings.seed,
                             backend=settings.backend, launch=settings.launch))
    files = source_files(repo, head)
    if not files:
        names = git(repo, "ls-tree", "-r", "--name-only", head).splitlines()
        kinds = sorted({n.rsplit(".", 1)[-1] for n in names if "." in n.split("/")[-1]}, key=str.lower)[:12]
        raise NoMutableSourcesError(
            f"{target.repo}@{head[:12]}: no Python module to mutate (the mutation operators read Python's syntax; "
            f"its files are {', '.join('.' + k for k in kinds) or 'none'}): `--from history` mines any language's fixes")
    with run_environment(target, head, repo, settings) as env:
        _mutate(target, repo, head, env, files, journal, settings, strategies, counts)


def _mutate(target: Target, repo: Path, head: str, env: Environment, files: dict[str, bytes], journal: Journal,
            settings: GenSettings, strategies: list[Strategy], counts: RunCounts) -> None:
    sandboxes = [env.open(head)]
    try:
        if journal.baseline is None:
            journal.record_baseline(_baseline(sandboxes[0], env, settings))
        baseline = journal.baseline
        assert baseline is not None
        write_envspec(target, env.spec.model_copy(update={"test_status": baseline.statuses, "flaky_tests": baseline.flaky}))
        if not baseline.passing:
            raise NoPassingTestsError(f"{target.repo}@{head[:12]}: no test passes reliably; nothing can catch a mutant")
        sandboxes += [env.open(head) for _ in range(settings.workers - 1)]
        _Mutator(target, repo, head, env, sandboxes, files, baseline, settings, journal, counts).run(strategies)
    finally:
        for sandbox in sandboxes:
            sandbox.close()
