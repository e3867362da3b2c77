"""`dojo gen` on the bundled demo repositories or on a real one: validated tasks per minute, yield.

Demo mode (default): for each demo repo, `--from history` over its whole history, then `--from
mutations` up to `--max-tasks` tasks (default 20, the issue's bar per repo).

Real mode (`--repo PATH` to a git repo, or `--repo owner/name` looked up as a fetched mirror,
`<mirrors>/<owner>+<name>/repo`; absent, it says so and measures nothing), in the environment
RepoLaunch builds for it on `--backend` (its dependencies installed): mutations as `dojo gen`
runs them now (limits relative to the baseline, test selection, `--workers` at once) up to
`--max-tasks` or `--minutes`; then the old behaviour (a fixed 90 s limit, the whole suite for
every candidate, one at a time) on the same seed for `--old-minutes`; then history over the last
`--history-commits` commits up to 5 tasks or `--history-minutes`. Per mode: kept tasks and
candidates per minute, yield, seconds per kept task, and the share of candidates by outcome.

Every task counted was validated end to end (gold resolves, empty does not) in fresh sandboxes.
Rates are wall time on this machine, so they fall when other work shares the CPUs (the load
average is printed). The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from swedojo.datasets.demo import DEMO_ORG, demo_projects, materialise_demo
from swedojo.datasets.gen import GenSettings, generate
from swedojo.datasets.gen.journal import read_entries

MIRRORS = Path(os.environ.get("SWEDOJO_MIRRORS", "/work/.mirror"))
"""Where fetched repositories are, as `<owner>+<name>/repo`."""


def _mirror_of(repo: str, root: Path) -> tuple[str, Path] | None:
    """`owner/name` and a mirror root holding it as `root/owner/name` (a link to the git dir); None when absent."""
    path = Path(repo)
    if path.is_dir():
        name = f"{path.resolve().parent.name}/{path.resolve().name}"
        git_dir = path.resolve()
    else:
        name, git_dir = repo, MIRRORS / repo.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            return None
    if "+" in name.split("/")[0] and name.endswith("/repo"):  # a fetched mirror given by path
        name = name.split("/")[0].replace("+", "/", 1)
    link = root / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(git_dir)
    return name, root


def _measure(label: str, repo: str, mirror: Path, mode: str, settings: GenSettings) -> dict[str, float]:
    """One `generate` run in a fresh output directory: its rates and the share of each outcome."""
    start = time.monotonic()
    result = generate(repo, mode, settings, mirror)
    minutes = (time.monotonic() - start) / 60
    entries = read_entries(settings.out / "journal" / f"{repo.replace('/', '__')}.{mode}.jsonl")
    kept = len(result.instances)
    shares = Counter(e.outcome.value for e in entries)
    print(f"{label}: {kept} tasks from {len(entries)} candidates in {minutes:.1f} min "
          f"({kept / minutes:.2f} tasks/min, {len(entries) / minutes:.1f} candidates/min, "
          f"{60 * minutes / kept if kept else float('nan'):.0f} s per task); outcomes: "
          + ", ".join(f"{k} {v / len(entries):.0%}" for k, v in shares.most_common()), flush=True)
    return {"kept": kept, "candidates": len(entries), "minutes": round(minutes, 2),
            "kept_per_min": round(kept / minutes, 2), "candidates_per_min": round(len(entries) / minutes, 1),
            "yield": round(kept / len(entries), 3) if entries else 0.0,
            "s_per_kept": round(60 * minutes / kept, 1) if kept else 0.0,
            **{f"cut_{k}": round(v / len(entries), 3) for k, v in shares.items() if k != "kept"}}


def real(args: argparse.Namespace) -> None:
    """The real-repository mode (see the module's docstring)."""
    root = Path(tempfile.mkdtemp(prefix="swedojo-bench-gen-"))
    found = _mirror_of(args.repo, root / "mirror")
    if found is None:
        print(f"no mirror of {args.repo} under {MIRRORS} (fetch it first); the real-repository part is skipped")
        print(f"RESULT repo={args.repo} skipped=no_mirror")
        return
    repo, mirror = found
    load = os.getloadavg()[0]
    print(f"{repo}: outputs in {root}; load average {load:.1f} on {os.cpu_count()} cores", flush=True)
    new = _measure("mutations, now", repo, mirror, "mutations", GenSettings(
        out=root / "new", seed=args.seed, max_tasks=args.max_tasks, max_minutes=args.minutes, workers=args.workers,
        backend=args.backend))
    old = _measure("mutations, old (fixed 90 s, whole suite, one at a time)", repo, mirror, "mutations", GenSettings(
        out=root / "old", seed=args.seed, max_tasks=args.max_tasks, max_minutes=args.old_minutes, timeout_s=90.0,
        select_tests=False, workers=1, backend=args.backend))
    tip = subprocess.run(["git", "-C", str(mirror / repo), "rev-list", "--first-parent", f"--max-count={args.history_commits}",
                          "HEAD"], capture_output=True, text=True, check=True).stdout.split()
    history = _measure("history", repo, mirror, "history", GenSettings(
        out=root / "history", max_tasks=5, max_minutes=args.history_minutes, workers=args.workers,
        rev_range=f"{tip[-1]}..{tip[0]}", backend=args.backend))
    load_after = os.getloadavg()[0]
    fields = {f"new_{k}": v for k, v in new.items()} | {f"old_{k}": v for k, v in old.items()} | {
        "history_kept": history["kept"], "history_candidates": history["candidates"],
        "history_minutes": history["minutes"], "load_before": round(load, 1), "load_after": round(load_after, 1)}
    fields["backend"] = args.backend
    print(f"RESULT repo={repo} " + " ".join(f"{k}={v}" for k, v in fields.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tasks", type=int, default=20, help="mutation tasks per repo")
    parser.add_argument("--repos", default=",".join(demo_projects()), help="comma-separated demo projects")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repo", help="a real repository: a git repo's path, or owner/name among the fetched mirrors")
    parser.add_argument("--workers", type=int, default=2, help="real mode: candidates evaluated at once")
    parser.add_argument("--backend", default="local", help="real mode: sandbox backend (docker: warm pooled containers)")
    parser.add_argument("--minutes", type=float, default=15.0, help="real mode: budget of the mutations as now")
    parser.add_argument("--old-minutes", type=float, default=5.0, help="real mode: budget of the old behaviour")
    parser.add_argument("--history-commits", type=int, default=200, help="real mode: history over this many last commits")
    parser.add_argument("--history-minutes", type=float, default=15.0, help="real mode: budget of history mode")
    args = parser.parse_args()
    if args.repo:
        real(args)
        return
    mirror = materialise_demo()
    out = Path(tempfile.mkdtemp(prefix="swedojo-bench-gen-"))
    history_kept, mutation_kept, mutation_seconds, per_repo = 0, 0, 0.0, {}
    report = None
    for name in args.repos.split(","):
        repo = f"{DEMO_ORG}/{name}"
        start = time.monotonic()
        history = generate(repo, "history", GenSettings(out=out, seed=args.seed, max_tasks=1000), mirror)
        history_s = time.monotonic() - start
        start = time.monotonic()
        mutations = generate(repo, "mutations", GenSettings(out=out, seed=args.seed, max_tasks=args.max_tasks), mirror)
        seconds = time.monotonic() - start
        report = mutations.report
        history_kept += len(history.instances)
        mutation_kept += len(mutations.instances)
        mutation_seconds += seconds
        per_repo[name] = len(mutations.instances)
        print(f"{repo}: history {len(history.instances)} tasks in {history_s:.0f}s; "
              f"mutations {len(mutations.instances)} tasks in {seconds:.0f}s "
              f"({len(mutations.instances) / (seconds / 60):.1f}/min)", flush=True)
    assert report is not None
    print(f"{'strategy':<14}{'candidates':>11}{'compiled':>10}{'broke':>7}{'kept':>6}{'s/kept':>8}")
    for strategy, y in report.strategies.items():
        per = f"{y.seconds_per_kept:.1f}" if y.seconds_per_kept is not None else "-"
        print(f"{strategy:<14}{y.candidates:>11}{y.compiled:>10}{y.broke_tests:>7}{y.kept:>6}{per:>8}")
    print(f"outputs: {out}  (dojo eval --suite {out / 'suite.jsonl'} --policy gold)")
    single = report.strategies.get("mutation")
    candidates = sum(y.candidates for s, y in report.strategies.items() if s != "history")
    print(
        f"RESULT tasks_per_min={mutation_kept / (mutation_seconds / 60):.2f} kept={mutation_kept} "
        f"candidates={candidates} mutation_yield={single.kept / single.candidates if single else 0:.2f} "
        f"min_kept_per_repo={min(per_repo.values())} history_kept={history_kept} repos={len(per_repo)}"
    )


if __name__ == "__main__":
    main()
