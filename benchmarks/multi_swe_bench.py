"""Multi-SWE-bench gold and empty, as published, on the docker backend: C, C++, JavaScript, TypeScript.

Data: `../shared/multi-swe-bench/*.jsonl` (or `--data DIR`), real instances in Multi-SWE-bench's
own format, read by `dojo eval --suite` without conversion. Their repositories must be mirrored
locally as `MIRROR/<owner>/<name>` (`--mirror`, default `$SWEDOJO_MSB_MIRROR`); without them the
benchmark names what is missing and exits 2. Nothing of theirs is in this project.

Runs `dojo eval --policy gold` (environments built: cold), then `--policy empty` (cached: warm),
and reports per repository the resolved counts, listed test names that matched no test of our
parser's log (`unmatched_tests`), listed passing tests left out because the environment fails them
at the base commit where the benchmark's run passed them (`fails_at_base`), environments built and reused, median build and grading time, and
every instance gold does not resolve with its reason. `--per-repo N` takes the first N instances of
each repository, after the first `--skip K` (a long suite measured in parts). Last line: `RESULT ...`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "multi-swe-bench"
_SWEBENCH = importlib.util.spec_from_file_location("swebench_benchmark", Path(__file__).with_name("swebench.py"))
assert _SWEBENCH and _SWEBENCH.loader
swebench = importlib.util.module_from_spec(_SWEBENCH)
_SWEBENCH.loader.exec_module(swebench)  # its eval driver and result readers, shared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--mirror", type=Path, default=os.environ.get("SWEDOJO_MSB_MIRROR"))
    parser.add_argument("--out", type=Path, default=Path("runs") / f"msb-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--per-repo", type=int, default=0, help="Only the first N instances of each repository.")
    parser.add_argument("--skip", type=int, default=0,
                        help="Leave out the first N instances of each repository (before --per-repo counts).")
    parser.add_argument("--repos", default="", help="Only these repositories (owner/name, comma-separated).")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    records: list[dict] = []
    for file in sorted(args.data.glob("*.jsonl")) if args.data.is_dir() else []:
        rows = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if not args.repos or f"{r['org']}/{r['repo']}" in args.repos.split(",")]
        rows = rows[args.skip:]
        records += rows[:args.per_repo] if args.per_repo else rows
    repos = sorted({f"{r['org']}/{r['repo']}" for r in records})
    missing = [r for r in repos if args.mirror is None or not (args.mirror / r).exists()]
    if not records or missing:
        print(f"needs Multi-SWE-bench files in {args.data} and local mirrors of {', '.join(repos or ['their repositories'])}"
              f" as MIRROR/<owner>/<name> (--mirror or $SWEDOJO_MSB_MIRROR); missing: {', '.join(missing) or args.data}",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    suite = args.out / "suite.jsonl"  # the records as published, only chosen
    suite.write_text("".join(json.dumps(r) + "\n" for r in records))
    extra = ["--workers", str(args.workers)]
    gold_s = swebench._eval("gold", suite, args.mirror, args.out / "gold", extra)
    empty_s = swebench._eval("empty", suite, args.mirror, args.out / "empty", extra)
    gold, empty = swebench._results(args.out / "gold"), swebench._results(args.out / "empty")
    repo_of = {r.get("instance_id") or f"{r['org']}__{r['repo']}-{r['number']}": f"{r['org']}/{r['repo']}"
               for r in records}
    per_repo: dict[str, Counter] = defaultdict(Counter)
    unmatched: dict[str, set[str]] = defaultdict(set)
    at_base: dict[str, set[str]] = defaultdict(set)
    for iid, result in gold.items():
        counts = per_repo[repo_of[iid]]
        counts["total"] += 1
        counts["gold"] += result["resolved"]
        counts["empty"] += empty.get(iid, {}).get("resolved", False)
        counts["infra"] += result["status"] == "infra_error"
        unmatched[repo_of[iid]] |= set(result.get("report", {}).get("unmatched_tests", []))
        at_base[repo_of[iid]] |= {f"{iid}: {t}" for t in result.get("report", {}).get("fails_at_base", {})}
    for repo, counts in sorted(per_repo.items()):
        names = sorted(unmatched[repo])
        print(f"{repo}: gold {counts['gold']}/{counts['total']}, empty {counts['empty']}/{counts['total']}, "
              f"infra_error {counts['infra']}, unmatched test names {len(names)}"
              + (f" ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''})" if names else "")
              + (f"; left out, failing at base here only: {', '.join(sorted(at_base[repo]))}" if at_base[repo] else ""))
    cold, built, reused = swebench._environments(args.out / "gold")
    grading = [r["report"]["duration_s"] for r in gold.values() if r.get("report", {}).get("duration_s")]
    print(f"environments: {built} built, {reused} reused; build median {statistics.median(cold or [0]):.0f}s; "
          f"grading median {statistics.median(grading or [0]):.1f}s; wall: gold {gold_s:.0f}s, empty {empty_s:.0f}s")
    swebench.print_misses(gold, empty)
    gold_resolved = sum(r["resolved"] for r in gold.values())
    empty_resolved = sum(r["resolved"] for r in empty.values())
    print(f"RESULT gold_resolved={gold_resolved} gold_total={len(gold)} empty_resolved={empty_resolved} "
          f"infra_errors={sum(c['infra'] for c in per_repo.values())} "
          f"unmatched_names={sum(len(v) for v in unmatched.values())} "
          f"fails_at_base={sum(len(v) for v in at_base.values())} envs_built={built} envs_reused={reused} "
          f"build_median_s={statistics.median(cold or [0]):.0f} grading_median_s={statistics.median(grading or [0]):.1f}")
    return 0 if gold_resolved == len(gold) and empty_resolved == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
