"""Tasks from history (SWE-bench / SWE-Gym / R2E-Gym style): commits that fix code and test it.

A commit of the first-parent line qualifies when it changes both tests and non-doc source (a merge:
what it brought into that line, as a merged pull request's diff). Its diff splits into the test
patch and the gold patch; the suite runs twice at the parent with only the test patch and twice
with both, each state in a fresh sandbox. FAIL_TO_PASS: tests failing (or absent) before and
passing after; PASS_TO_PASS: passing in every run; tests that change outcome between two runs of
one state are dropped as flaky.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import partial

from swedojo.datasets.gen.core import (
    InvalidTaskError,
    Target,
    diff,
    flaky_between,
    git,
    in_order,
    is_doc_file,
    is_test_file,
    prepare_repo,
    prove_task,
    write_envspec,
)
from swedojo.datasets.gen.environments import commit_environment, run_environment
from swedojo.datasets.gen.journal import Entry, Header, Journal, Outcome
from swedojo.datasets.gen.settings import GenSettings, RunCounts
from swedojo.datasets.gen.statements import history_statement
from swedojo.repolaunch.errors import LaunchError
from swedojo.sandboxes.environment import Environment, PrepareError
from swedojo.schema import TaskInstance
from swedojo.testrun.patches import PatchApplyError, apply_patch
from swedojo.testrun.run import SuiteRun, TestRunError, run_suite

STRATEGY = "history"


def _twice(env: Environment, commit: str, patches: list[str], settings: GenSettings,
           baseline_s: float | None) -> tuple[SuiteRun, SuiteRun]:
    """Apply `patches` at `commit` in a fresh sandbox and run the suite twice; the runs' limit is
    relative to `baseline_s` (None: this state is the baseline, measured by its first run)."""
    sandbox = env.open(commit)
    try:
        for patch in patches:
            apply_patch(sandbox, patch)
        first = run_suite(sandbox, env.spec, settings.baseline_limit() if baseline_s is None else settings.limit(baseline_s))
        return first, run_suite(sandbox, env.spec, settings.limit(first.duration_s if baseline_s is None else baseline_s))
    finally:
        sandbox.close()


def _states(env: Environment, parent: str, test_patch: str, patch: str,
            settings: GenSettings) -> tuple[tuple[SuiteRun, SuiteRun], tuple[SuiteRun, SuiteRun]]:
    """The suite twice with the test patch alone, then twice with the fix too, at `parent`."""
    before = _twice(env, parent, [test_patch], settings, None)
    return before, _twice(env, parent, [test_patch, patch], settings, before[0].duration_s)


def _mine(target: Target, settings: GenSettings, env: Environment, sha: str, parents: list[str]) -> Entry:
    entry = Entry(key=sha, strategy=STRATEGY, outcome=Outcome.NOT_QUALIFIED)
    if not parents:
        entry.detail = "root commit"
        return entry
    # A merge is judged by what it brought into the first-parent line: a merged pull request's
    # whole change, as SWE-bench takes a PR's diff against its base.
    parent, source = parents[0], target.source
    changed = git(source, "diff-tree", "--no-commit-id", "--name-only", "-r", "--no-renames", parent, sha).splitlines()
    tests = [f for f in changed if is_test_file(f)]
    rest = [f for f in changed if not is_test_file(f)]
    if not tests or not [f for f in rest if not is_doc_file(f)]:
        entry.detail = "changes no tests" if not tests else "changes no source"
        return entry
    test_patch, patch = diff(source, parent, sha, tests), diff(source, parent, sha, rest)
    try:
        try:
            before, after = _states(env, parent, test_patch, patch, settings)
        except PrepareError:  # the project no longer builds as the walk's last commit does
            env = commit_environment(target, parent, settings, env)
            before, after = _states(env, parent, test_patch, patch, settings)
    except (PrepareError, LaunchError) as exc:
        entry.outcome, entry.detail = Outcome.NO_ENVIRONMENT, str(exc).splitlines()[0][:300]
        return entry
    except PatchApplyError as exc:
        entry.outcome, entry.detail = Outcome.PATCH_FAILED, str(exc)
        return entry
    except TestRunError as exc:
        entry.outcome, entry.detail = Outcome.INVALID, str(exc)
        return entry
    entry.compiled = True
    if any(run.timed_out for run in (*before, *after)):
        entry.outcome = Outcome.TIMED_OUT
        return entry
    flaky = flaky_between(*before) | flaky_between(*after)
    stable = sorted(t for t in after[0].statuses if t not in flaky and after[0].passed(t))
    fail_to_pass = [t for t in stable if not before[0].passed(t)]
    pass_to_pass = [t for t in stable if before[0].passed(t)]
    entry.failing, entry.broke = fail_to_pass, bool(fail_to_pass)
    if not fail_to_pass:
        entry.outcome, entry.detail = Outcome.NO_BREAK, "no FAIL_TO_PASS test"
        return entry
    message = git(source, "log", "-1", "--format=%B", sha)
    instance = TaskInstance(
        instance_id=f"{target.slug}-{sha[:7]}", repo=target.repo, base_commit=parent, patch=patch,
        test_patch=test_patch, created_at=git(source, "show", "-s", "--format=%cI", sha).strip(),
        problem_statement=history_statement(message, before[0].log, fail_to_pass, patch, settings.issues_dir),
        FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass, environment_setup_commit=parent, gen_strategy=STRATEGY,
    )
    try:
        prove_task(env, instance)
    except InvalidTaskError as exc:
        entry.outcome, entry.detail = Outcome.INVALID, str(exc)
        return entry
    write_envspec(target, env.spec.model_copy(update={"flaky_tests": sorted(flaky)}))
    entry.outcome, entry.instance = Outcome.KEPT, instance
    return entry


def generate_history(target: Target, settings: GenSettings, counts: RunCounts) -> None:
    """Walk the first-parent history, newest first, until `settings.max_tasks` tasks are kept: the
    commits of `settings.rev_range`, else HEAD's last `settings.history_commits`.

    Every commit is judged in the environment of the walk's newest commit (as SWE-bench shares one
    environment between the instances of a version); one whose project does not build there (its
    build backend changed) gets an environment launched for it. Dependencies that differ in a way
    the build does not notice make a commit yield no task, never a wrong one."""
    walk = [settings.rev_range] if settings.rev_range else [f"--max-count={settings.history_commits}", "HEAD"]
    lines = git(target.source, "log", "--first-parent", "--format=%H %P", *walk).splitlines()
    if not lines:
        return
    commits = [(line.split()[0], line.split()[1:]) for line in lines]
    tip = commits[0][0]
    prepare_repo(target, [tip])
    journal = Journal(target.out / "journal" / f"{target.slug}.history.jsonl",
                      Header(repo=target.repo, mode=STRATEGY, tip=tip, seed=0,  # no sampling here
                             backend=settings.backend, launch=settings.launch))
    with run_environment(target, tip, target.repo_dir, settings) as env:
        jobs = (journal.entries.get(sha) or partial(_timed_mine, target, settings, env, sha, parents)
                for sha, parents in commits)
        _walk(jobs, journal, settings, counts)


def _walk(jobs: Iterator[Entry | Callable[[], Entry]], journal: Journal, settings: GenSettings, counts: RunCounts) -> None:
    kept = 0
    with (ThreadPoolExecutor(settings.workers, thread_name_prefix="swedojo-gen") as pool,
          closing(in_order(pool, settings.workers, jobs, counts.start, lambda _: None)) as verdicts):
        for entry, new in verdicts:
            if new:
                journal.record(entry)
                counts.evaluated += 1
            else:
                counts.reused += 1
            kept += entry.outcome == Outcome.KEPT
            if kept >= settings.max_tasks:
                break


def _timed_mine(target: Target, settings: GenSettings, env: Environment, sha: str, parents: list[str]) -> Entry:
    start = time.monotonic()
    entry = _mine(target, settings, env, sha, parents)
    entry.seconds = round(time.monotonic() - start, 3)
    return entry
