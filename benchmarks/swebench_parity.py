"""Parity with SWE-bench's own harness on real SWE-bench Lite instances: its log parser and grading
(the `swebench` package, the `parity` extra) run on the test logs our gold and empty runs record.

The instances are those of `--suite` (default `../shared/swebench/lite-dev.jsonl`) whose repository
has a mirror under `--mirror DIR` as `DIR/owner/name`, up to `--per-repo` per repository; absent
mirrors are named and skipped. For each graded instance: whether SWE-bench reads every test of the
log as we do (FAIL_TO_PASS and PASS_TO_PASS; the documented differences of
tests/rewards/test_swebench_parity.py are counted apart, not hidden), and whether its resolution
status equals our verdict. Ends with `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# This directory holds benchmarks/swebench.py, which would shadow the package of that name.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
try:
    from swebench.harness.grading import (
        get_eval_tests_report,
        get_logs_eval,
        get_resolution_status,
    )
    from swebench.harness.log_parsers.python import (
        MAP_REPO_TO_PARSER_PY as MAP_REPO_TO_PARSER,
    )
    from swebench.types import TestSpec as SwebenchSpec
except ImportError:
    print("the swebench package is not installed (pip install -e '.[parity]'): nothing measured")
    print("RESULT skipped=no_swebench")
    sys.exit(0)

from swedojo.repolaunch.launch import default_backend

ROOT = Path(__file__).resolve().parent.parent
DOJO = str(Path(sys.executable).with_name("dojo"))


def _sample(suite: Path, mirror: Path, per_repo: int) -> tuple[list[dict], list[str]]:
    rows = [json.loads(line) for line in suite.read_text().splitlines() if line.strip()]
    chosen, absent, counts = [], set(), {}
    for row in rows:
        repo = row["repo"]
        if not (mirror / repo).exists():
            absent.add(repo)
            continue
        if counts.get(repo, 0) < per_repo:
            counts[repo] = counts.get(repo, 0) + 1
            chosen.append(row)
    return chosen, sorted(absent)


def _eval(suite: Path, mirror: Path, backend: str, policy: str, ids: list[str], out: Path) -> dict[str, dict]:
    command = [DOJO, "eval", "--suite", str(suite), "--mirror", str(mirror), "--backend", backend, "--policy", policy, "--rewards",
               "resolved", "--workers", "2", "--out", str(out), *[arg for i in ids for arg in ("--instance", i)]]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    print(f"dojo eval --policy {policy}: exit {proc.returncode}; {proc.stdout.strip().splitlines()[-1:]}", flush=True)
    return {json.loads(line)["instance_id"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}


def _tests(field: object) -> list[str]:
    return json.loads(field) if isinstance(field, str) else list(field or [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT.parent / "shared" / "swebench" / "lite-dev.jsonl")
    parser.add_argument("--mirror", type=Path, default=Path("/work/mirrors"))
    parser.add_argument("--per-repo", type=int, default=6)
    parser.add_argument("--backend", default=None, help="sandbox backend (default: docker where an engine answers: "
                        "its Debian releases bring the older Pythons old commits need)")
    args = parser.parse_args()
    if not args.suite.is_file():
        print(f"no suite at {args.suite}: nothing measured")
        print("RESULT skipped=no_suite")
        return
    rows, absent = _sample(args.suite, args.mirror, args.per_repo)
    if absent:
        print(f"no mirror under {args.mirror} for {', '.join(absent)}: their instances are left out")
    if not rows:
        print("RESULT skipped=no_mirrors")
        return
    ids = [r["instance_id"] for r in rows]
    backend = args.backend or default_backend()
    root = Path(tempfile.mkdtemp(prefix="swedojo-bench-parity-"))
    print(f"{len(ids)} instances of {', '.join(sorted({r['repo'] for r in rows}))}; runs in {root}", flush=True)
    graded = statuses_same = verdicts_same = 0
    differences: list[str] = []
    for policy in ("gold", "empty"):
        results = _eval(args.suite, args.mirror, backend, policy, ids, root / policy)
        for row in rows:
            result = results.get(row["instance_id"])
            log = root / policy / "logs" / row["instance_id"] / "test_output.txt"
            if result is None or not log.is_file():
                continue  # an empty patch is never run; an infra_error has no log
            f2p, p2p = _tests(row["FAIL_TO_PASS"]), _tests(row["PASS_TO_PASS"])
            spec = SwebenchSpec(instance_id=row["instance_id"], image="", eval_script_list=[], repo=row["repo"],
                                version=row["version"], FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
                                log_parser=MAP_REPO_TO_PARSER[row["repo"]].__name__, eval_type="pass_and_fail")
            theirs, found = get_logs_eval(spec, str(log))
            ours = {**result["report"]["fail_to_pass"], **result["report"]["pass_to_pass"]}
            graded += 1
            differing = [t for t in f2p + p2p if ours.get(t) != theirs.get(t)]
            statuses_same += not differing
            resolved = found and get_resolution_status(
                get_eval_tests_report(theirs, {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})) == "RESOLVED_FULL"
            verdicts_same += resolved == result["resolved"]
            if differing or resolved != result["resolved"]:
                differences.append(f"{policy} {row['instance_id']}: ours resolved={result['resolved']} theirs "
                                   f"resolved={resolved}; {len(differing)} tests read otherwise, e.g. "
                                   + "; ".join(f"{t}: {ours.get(t)} vs {theirs.get(t)}" for t in differing[:3]))
    for line in differences:
        print(line)
    print(f"RESULT backend={backend} instances={len(ids)} graded_logs={graded} statuses_same={statuses_same} verdicts_same={verdicts_same} "
          f"differences={len(differences)} repos_absent={len(absent)}")


if __name__ == "__main__":
    main()
