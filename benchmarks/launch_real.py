"""`dojo launch` on real public repositories of six language families, cold then warm, on docker.

The repositories (`REPOS`: owner/name, a release tag's commit, family, and whether it needs no
registry but Debian's to build and test) must be mirrored locally as `MIRROR/<owner>/<name>`
(`--mirror`, default `$SWEDOJO_LAUNCH_MIRROR`); the benchmark names those missing and launches
the rest (`--only` picks some). Nothing of theirs is in this project.

Each repo is launched at its commit on the docker backend ("cold": its dependency and repo
layers built; the toolchain's runtime layer, shared by a language, is timed apart when built),
then again ("warm": every layer and the validated spec cached). Layers the cold launch built are
removed afterwards (`--keep-images` keeps them), so a later run is cold again. Results go to
`OUT/results.jsonl`, one line per repo, and a run with the same `--out` resumes after the repos
it has (the last line of a repo counts; `--retry-failed` launches the failed ones again). Prints a table (outcome: ok, or the failed stage and the launch's one-line reason) and
ends with `RESULT ...`; exits 1 when a dependency-free repo did not launch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

from swedojo.repolaunch.errors import LaunchError
from swedojo.repolaunch.launch import launch
from swedojo.sandboxes.docker import api
from swedojo.schema import TestStatus


class Real(NamedTuple):
    """One repository at one commit."""

    repo: str
    commit: str
    family: str
    dependency_free: bool
    """Builds and tests with nothing from a language registry (npm and PyPI answer here, so JS and
    Python repos whose only dependencies are test tools from there count)."""


REPOS = [
    Real("hukkin/tomli", "73c3d102eb81fe0d2b87f905df4f740f8878d8da", "python", True),  # 2.2.1
    Real("tkem/cachetools", "c403f9f4185e58090b904c1915345b9ba46d5a08", "python", True),  # v5.5.2
    Real("lukeed/clsx", "a60db12a53aee6a14218a62d8a0624f556b87032", "js", True),  # v2.1.0, uvu
    Real("minimistjs/minimist", "6901ee286bc4c16da6830b48b46ce1574703cea1", "js", True),  # v1.2.8, tape
    Real("jshttp/cookie", "e739f419e56442b754e4fea6dbcf98c1c8d00dda", "js", True),  # v1.0.2, TypeScript, vitest
    Real("google/uuid", "0f11ee6918f41a04c201eceeadf612a377bc7fbc", "go", True),  # v1.6.0
    Real("BurntSushi/toml", "d97def528e83313822a9f98946334ffccd542bdf", "go", True),  # v1.5.0
    Real("spf13/cobra", "7da941c3547e93b8c9f70bbd3befca79c6335388", "go", False),  # v1.10.1, 4 modules
    Real("cuviper/autocfg", "d912169ed67977efe5a465269b0e73cb66060c49", "rust", True),  # 1.5.0
    Real("bluss/scopeguard", "bb988222848d39b0b9037b29da3a3a1eb05ebf4b", "rust", True),  # v1.2.0
    Real("sharkdp/hexyl", "abc20a380c8c2d9d76c1976222725d3211cef809", "rust", False),  # v0.16.0, clap etc.
    Real("jhy/jsoup", "7c56eb26c8cc772c5c3d0e052dc076a128173c85", "java", False),  # 1.18.3, Maven
    Real("apache/commons-cli", "698b238276c0e22e97e4aec703a0b00201d29666", "java", False),  # 1.9.0, Maven
    Real("DaveGamble/cJSON", "acc76239bee01d8e9c858ae2cab296704e52d916", "c", True),  # v1.7.18, CMake
    Real("akheron/jansson", "684e18c927e89615c2d501737e90018f4930d6c5", "c", True),  # v2.14, CMake/autotools
    Real("benhoyt/inih", "26254ee9de7681f8825433415443e7116ff24b98", "c", True),  # r62, Meson
]
"""Java has no dependency-free entry: Maven fetches its plugins (compiler, surefire) from Maven
Central, so even a project with no dependency needs it."""
FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def _layers(out: Path) -> list[dict]:
    path = out / "layers.json"
    return json.loads(path.read_text()) if path.is_file() else []


def _once(real: Real, mirror: Path, out: Path) -> dict:
    """One launch: its wall time, outcome, tests, and the layers it built."""
    start = time.monotonic()
    result: dict = {"outcome": "ok", "tests": 0, "passing": 0, "failing": 0}
    try:
        spec = launch(real.repo, out, commit=real.commit, backend="docker", mirror=mirror)
        result |= {"tests": len(spec.test_status), "language": spec.language, "runtime": spec.runtime_version,
                   "passing": sum(1 for status in spec.test_status.values() if status.counts_as_pass),
                   "failing": sum(1 for status in spec.test_status.values() if status in FAILING)}
    except LaunchError as exc:
        result["outcome"] = f"{exc.stage}: {exc.message.splitlines()[0] if exc.message else ''}"
    result["seconds"] = time.monotonic() - start
    built = [layer for layer in _layers(out) if not layer["cached"]]
    result["runtime_s"] = sum(layer["seconds"] for layer in built if layer["name"] == "runtime")
    result["built"] = [layer["tag"] for layer in built if layer["name"] in ("deps", "repo")]
    return result


def _run(real: Real, mirror: Path, out: Path, keep_images: bool) -> dict:
    work = out / real.repo.replace("/", "+")
    cold = _once(real, mirror, work / "cold")
    warm = _once(real, mirror, work / "warm") if cold["outcome"] == "ok" else None
    if not keep_images:
        for tag in reversed(cold["built"]):  # the repo layer first: it is a child of the deps layer
            try:
                api().remove_image(tag)
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                print(f"could not remove {tag}: {exc}", file=sys.stderr)
    return {**real._asdict(), "cold": cold, "warm": warm}


def _row(record: dict) -> str:
    cold, warm = record["cold"], record["warm"]
    tests = f"{cold['tests']} / {cold['passing']} / {cold['failing']}" if cold["outcome"] == "ok" else "-"
    runtime = f" (+{cold['runtime_s']:.0f} runtime)" if cold["runtime_s"] else ""
    warm_s = f"{warm['seconds']:.1f}" if warm else "-"
    if warm and warm["outcome"] != "ok":
        warm_s += f" ({warm['outcome']})"
    outcome = cold["outcome"].replace("|", "\\|")
    return (f"| {record['repo']} | {record['commit'][:10]} | {record['family']} | {outcome} | {tests} | "
            f"{cold['seconds'] - cold['runtime_s']:.0f}{runtime} | {warm_s} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=os.environ.get("SWEDOJO_LAUNCH_MIRROR"))
    parser.add_argument("--out", type=Path, default=Path("runs") / f"launch-real-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--only", nargs="*", default=[], help="owner/name of the repos to launch (default: all).")
    parser.add_argument("--retry-failed", action="store_true", help="Launch again the repos --out has as failed.")
    parser.add_argument("--keep-images", action="store_true", help="Keep the layers the cold launches built.")
    args = parser.parse_args()
    chosen = [r for r in REPOS if not args.only or r.repo in args.only]
    unknown = sorted(set(args.only) - {r.repo for r in REPOS})
    if unknown:
        parser.error(f"not in the list: {', '.join(unknown)}")
    missing = [r.repo for r in chosen if args.mirror is None or not (args.mirror / r.repo).exists()]
    if missing:
        print(f"no local mirror (MIRROR/<owner>/<name>, --mirror or $SWEDOJO_LAUNCH_MIRROR) of: "
              f"{', '.join(missing)}; launching the rest", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = {r["repo"]: r for r in map(json.loads, results.read_text().splitlines())} if results.is_file() else {}
    if args.retry_failed:
        done = {repo: r for repo, r in done.items() if r["cold"]["outcome"] == "ok"}
    for real in chosen:
        if real.repo in done or real.repo in missing:
            continue
        print(f"launching {real.repo} @ {real.commit[:10]} ({real.family})", file=sys.stderr, flush=True)
        done[real.repo] = _run(real, args.mirror, args.out, args.keep_images)
        with results.open("a") as f:
            f.write(json.dumps(done[real.repo]) + "\n")
    records = [done[r.repo] for r in chosen if r.repo in done]
    print("| repo | commit | language | outcome | tests found / passing / failing | cold s | warm s |")
    print("|---|---|---|---|---|---|---|")
    for record in records:
        print(_row(record))
    launched = [r for r in records if r["cold"]["outcome"] == "ok"]
    free = [r for r in records if r["dependency_free"]]
    free_ok = [r for r in free if r["cold"]["outcome"] == "ok" and r["cold"]["tests"]]
    warm = sorted(r["warm"]["seconds"] for r in launched if r["warm"])
    print(f"RESULT launched={len(launched)} total={len(records)} dependency_free_ok={len(free_ok)} "
          f"dependency_free={len(free)} missing_mirrors={len(missing)} "
          f"families_launched={len({r['family'] for r in launched})} "
          f"tests={sum(r['cold']['tests'] for r in launched)} "
          f"warm_median_s={warm[len(warm) // 2] if warm else 0:.1f}")
    return 0 if len(free_ok) == len(free) else 1


if __name__ == "__main__":
    sys.exit(main())
