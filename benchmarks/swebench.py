"""SWE-bench Lite gold and empty over the dev split, offline, on the docker backend.

Data: `../shared/swebench/lite-dev.jsonl` (or `--suite`), 103 real instances of pallets/flask,
psf/requests, pytest-dev/pytest and sympy/sympy. Their repositories must be mirrored locally as
`MIRROR/<owner>/<name>` (`--mirror`, default `$SWEDOJO_SWEBENCH_MIRROR`); without them the
benchmark names what is missing and exits 2. Nothing of theirs is in this project.

Runs `dojo eval --policy gold` (environments built: cold), then `--policy empty` (every
environment cached: warm) into `--out`, and reports per repo the resolved counts, environments
built vs reused, build times, grading times, the warm per-instance time beyond the test run
itself (SWE-bench's harness publishes about 77 s), and every instance gold does not resolve with
its reason. The baseline measured in the same run is the cold pass. Last line: `RESULT ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITE = ROOT.parent / "shared" / "swebench" / "lite-dev.jsonl"


def _results(run: Path) -> dict[str, dict]:
    lines = (run / "results.jsonl").read_text().splitlines() if (run / "results.jsonl").is_file() else []
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def _eval(policy: str, suite: Path, mirror: Path, out: Path, extra: list[str]) -> float:
    start = time.monotonic()
    command = [sys.executable, "-m", "swedojo.cli", "eval", "--suite", str(suite), "--policy", policy,
               "--backend", "docker", "--mirror", str(mirror), "--rewards", "resolved", "--out", str(out), *extra]
    print("$", " ".join(command), flush=True)
    code = subprocess.run(command, check=False).returncode
    if code not in (0, 1):  # 1: it ran, and some instances ended in infra_error (counted in the figures)
        sys.exit(f"`dojo eval --policy {policy}` exited {code}: it did not run, so there is no figure to report")
    return time.monotonic() - start


def _environments(run: Path) -> tuple[list[float], int, int]:
    """Build seconds of each environment the run built, and counts built / reused."""
    seconds, built, reused = [], 0, 0
    for layers in (run / "environments").glob("*/layers.json"):
        data = json.loads(layers.read_text())
        fresh = [layer for layer in data if not layer["cached"] and layer["name"] in ("deps", "repo")]
        if fresh:
            built += 1
            seconds.append(sum(layer["seconds"] for layer in data))
        else:
            reused += 1
    return seconds, built, reused


def print_misses(gold: dict[str, dict], empty: dict[str, dict]) -> None:
    """Every instance gold does not resolve, with its reason, and every one empty resolves."""
    for iid, result in sorted(gold.items()):
        if not result["resolved"]:
            print(f"not resolved: {iid}: {result['status']}: {(result['error'] or result['report'].get('error', ''))[:300]}")
    for iid, result in sorted(empty.items()):
        if result["resolved"]:
            print(f"empty resolved: {iid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    parser.add_argument("--mirror", type=Path, default=os.environ.get("SWEDOJO_SWEBENCH_MIRROR"))
    parser.add_argument("--out", type=Path, default=Path("runs") / f"swebench-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--slice", default=None, help="Only instances A:B of the suite.")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    instances = [json.loads(line) for line in args.suite.read_text().splitlines() if line.strip()] \
        if args.suite.is_file() else []
    repos = sorted({i["repo"] for i in instances})
    missing = [r for r in repos if args.mirror is None or not (args.mirror / r).exists()]
    if not instances or missing:
        print(f"needs the suite {args.suite} and local mirrors of {', '.join(repos or ['its repositories'])} as "
              f"MIRROR/<owner>/<name> (--mirror or $SWEDOJO_SWEBENCH_MIRROR); missing: "
              f"{', '.join(missing) or args.suite}", file=sys.stderr)
        return 2
    extra = ["--workers", str(args.workers)] + (["--slice", args.slice] if args.slice else [])
    gold_s = _eval("gold", args.suite, args.mirror, args.out / "gold", extra)
    empty_s = _eval("empty", args.suite, args.mirror, args.out / "empty", extra)
    gold, empty = _results(args.out / "gold"), _results(args.out / "empty")
    repo_of = {i["instance_id"]: i["repo"] for i in instances}
    per_repo: dict[str, Counter] = defaultdict(Counter)
    for iid, result in gold.items():
        per_repo[repo_of[iid]]["total"] += 1
        per_repo[repo_of[iid]]["gold"] += result["resolved"]
        per_repo[repo_of[iid]]["empty"] += empty.get(iid, {}).get("resolved", False)
    for repo, counts in sorted(per_repo.items()):
        print(f"{repo}: gold {counts['gold']}/{counts['total']}, empty {counts['empty']}/{counts['total']}")
    cold, built, reused = _environments(args.out / "gold")
    warm_launch = [r["duration_s"] - r["report"]["duration_s"] for r in empty.values()]
    grading = [r["report"]["duration_s"] for r in gold.values() if r["report"]["duration_s"]]
    beyond_tests = [r["duration_s"] - r["report"].get("test_duration_s", 0.0) for r in empty.values()]
    print(f"environments: {built} built, {reused} reused; build median {statistics.median(cold or [0]):.0f}s cold, "
          f"launch median {statistics.median(warm_launch or [0]):.1f}s warm")
    print(f"grading median {statistics.median(grading or [0]):.1f}s per instance; warm instance beyond its test run: "
          f"median {statistics.median(beyond_tests or [0]):.1f}s (SWE-bench's harness: about 77 s)")
    print(f"wall: gold {gold_s:.0f}s, empty {empty_s:.0f}s")
    print_misses(gold, empty)
    gold_resolved = sum(r["resolved"] for r in gold.values())
    offline = sorted(iid for iid, r in gold.items() if r["status"] == "needs_network")
    print(f"not scorable offline (every FAIL_TO_PASS test needs the network, the reference patch's run "
          f"too): {len(offline)}: {', '.join(offline) or 'none'}")
    scored = len(gold) - len(offline)
    print(f"RESULT gold_resolved={gold_resolved} gold_total={len(gold)} gold_needs_network={len(offline)} "
          f"gold_resolved_of_scorable={gold_resolved}/{scored} empty_resolved="
          f"{sum(r['resolved'] for r in empty.values())} median_eval_s={statistics.median(grading or [0]):.1f} "
          f"warm_beyond_tests_s={statistics.median(beyond_tests or [0]):.1f} envs_built={built} "
          f"cold_build_median_s={statistics.median(cold or [0]):.0f}")
    return 0 if gold_resolved == len(gold) else 1


if __name__ == "__main__":
    sys.exit(main())
