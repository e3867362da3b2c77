"""`dojo gen` on the bundled demo repositories: validated tasks kept per minute, yield per strategy.

For each demo repo: `--from history` over its whole history, then `--from mutations` up to
`--max-tasks` tasks (default 20, the issue's bar per repo). Every task counted was validated end to
end (gold resolves, empty does not) in fresh sandboxes. Rates are wall time on this machine, so
they fall when other work shares the CPUs. The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from swedojo.datasets.demo import DEMO_ORG, demo_projects, materialise_demo
from swedojo.datasets.gen import GenSettings, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tasks", type=int, default=20, help="mutation tasks per repo")
    parser.add_argument("--repos", default=",".join(demo_projects()), help="comma-separated demo projects")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
