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

`--breadth LIST` measures generality instead, on the corpus a README lists (`../shared/realrepos/
README.md`: families headed `Python:`, `Go (...):`, entries `owner/name`): each repository at HEAD
and at its old commit (the last first-parent commit at least three years before HEAD, else the
first commit), once each, on `--backend`. Success: an `EnvSpec` whose baseline has at least five
passing tests and whose statuses agree between its two validation runs (no flaky test). A third of
each family is held out (`held_out`: seeded, chosen once): rules are developed on the rest, and
the rates are reported for both, `--part` picking one. Results go to `OUT/breadth.jsonl`
(resumable); ends with `RESULT head_rate=... old_rate=... held_out_head_rate=... ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
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


FLAKY = "statuses differ between validation runs"
"""The outcome of an environment that launched with flaky tests (named in its EnvSpec): the strict
rate counts it failed, the `_with_flaky` rates launched."""
BREADTH_SEED = 30
"""Seed of the held-out choice; changing it spends the held-out third (its repos have been seen)."""
OLD_YEARS = 3


def corpus(readme: Path) -> dict[str, list[str]]:
    """Family -> `owner/name` entries of a corpus README: a line ending in ':' heads a family (its
    first word, lower case), the lines under it list repositories."""
    families: dict[str, list[str]] = {}
    family = ""
    for line in readme.read_text().splitlines():
        if re.match(r"^[A-Z][^:]*:\s*$", line) or re.match(r"^[A-Z][\w /+]*\(.*\):\s*$", line):
            family = line.split()[0].rstrip(":").lower()
            families[family] = []
        elif family and line.strip():
            families[family] += re.findall(r"\b([\w.-]+/[\w.-]+)\b", line)
        elif family and not line.strip() and families[family]:
            family = ""
    return {f: repos for f, repos in families.items() if repos}


def held_out(families: dict[str, list[str]]) -> set[str]:
    """A third of each family (rounded), drawn with `BREADTH_SEED` from its sorted entries."""
    rng = random.Random(BREADTH_SEED)
    return {repo for repos in families.values() for repo in rng.sample(sorted(repos), round(len(repos) / 3))}


def _git(source: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, check=True).stdout.strip()


def _code() -> str:
    """The swedojo this run imports and its commit: an editable install shared by several checkouts
    (git worktrees on one venv) imports the one it was installed from, not the one the script is in."""
    import swedojo

    root = Path(swedojo.__file__).resolve().parent.parent
    try:
        commit = _git(root, "rev-parse", "--short", "HEAD")
        dirty = "+changes" if _git(root, "status", "--porcelain", "--untracked-files=no", "swedojo") else ""
    except (subprocess.CalledProcessError, FileNotFoundError):
        commit, dirty = "not a git checkout", ""
    return f"swedojo from {root} at {commit}{dirty}"


def old_commit(source: Path) -> str:
    """The last first-parent commit at least `OLD_YEARS` years before HEAD's, else the first commit."""
    head = int(_git(source, "log", "-1", "--format=%ct", "HEAD"))
    before = head - OLD_YEARS * 365 * 86400
    return _git(source, "rev-list", "-1", "--first-parent", f"--before={before}", "HEAD") \
        or _git(source, "rev-list", "--max-parents=0", "HEAD").splitlines()[-1]


def _breadth_once(repo: str, commit: str, mirror: Path, out: Path, backend: str) -> dict:
    start = time.monotonic()
    result: dict = {"outcome": "ok", "passing": 0, "flaky": 0, "tests": 0}
    try:
        spec = launch(repo, out, commit=commit, backend=backend, mirror=mirror)
        result |= {"tests": len(spec.test_status), "flaky": len(spec.flaky_tests),
                   "passing": sum(1 for status in spec.test_status.values() if status.counts_as_pass),
                   "runtime": f"{spec.language} {spec.runtime_version}",
                   "skipped_for_modules": sorted(spec.skipped_for_modules)}
        if result["passing"] < 5:
            result["outcome"] = f"too few passing tests ({result['passing']})"
        elif result["flaky"]:
            result["outcome"] = f"{FLAKY} ({result['flaky']} tests)"
    except LaunchError as exc:
        result["outcome"] = f"{exc.stage}: {exc.message.splitlines()[0][:300] if exc.message else ''}"
    except Exception as exc:  # noqa: BLE001 - a crash is a result here, named
        result["outcome"] = f"crash: {type(exc).__name__}: {str(exc)[:300]}"
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


def breadth(args: argparse.Namespace) -> int:
    families = corpus(args.breadth)
    hidden = held_out(families)
    chosen = [(family, repo) for family, repos in families.items() for repo in repos
              if (not args.family or family in args.family) and (not args.only or repo in args.only)
              and (args.part == "all" or (repo in hidden) == (args.part == "held-out"))]
    missing = [repo for _, repo in chosen if args.mirror is None or not (args.mirror / repo).exists()]
    if missing:
        print(f"no local mirror (MIRROR/<owner>/<name>) of: {', '.join(missing)}; launching the rest", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "breadth.jsonl"
    done = {(r["repo"], r["which"]): r for r in map(json.loads, results.read_text().splitlines())} \
        if results.is_file() else {}
    if args.retry_failed:
        done = {key: r for key, r in done.items() if r["outcome"] == "ok"}
    for family, repo in chosen:
        if repo in missing:
            continue
        source = args.mirror / repo
        for which, commit in (("head", _git(source, "rev-parse", "HEAD")), ("old", old_commit(source))):
            if (repo, which) in done:
                continue
            print(f"launching {repo} @ {which} {commit[:10]} ({family})", file=sys.stderr, flush=True)
            record = {"repo": repo, "family": family, "which": which, "commit": commit, "held_out": repo in hidden,
                      **_breadth_once(repo, commit, args.mirror, args.out / repo.replace("/", "+") / which, args.backend)}
            done[(repo, which)] = record
            with results.open("a") as f:
                f.write(json.dumps(record) + "\n")
    records = [done[(repo, which)] for _, repo in chosen for which in ("head", "old") if (repo, which) in done]
    print(f"held out (seed {BREADTH_SEED}): {', '.join(sorted(hidden))}")
    print("| repo | family | part | commit | outcome | tests / passing | s |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        outcome = r["outcome"].replace("|", "\\|")
        print(f"| {r['repo']} | {r['family']} | {'held out' if r['held_out'] else 'developed'} | {r['which']} "
              f"{r['commit'][:10]} | {outcome} | {r['tests']} / {r['passing']} | {r['seconds']:.0f} |")

    def rate(held: bool, which: str, flaky_ok: bool = False) -> str:
        some = [r for r in records if r["held_out"] == held and r["which"] == which]
        good = sum(r["outcome"] == "ok" or (flaky_ok and r["outcome"].startswith(FLAKY)) for r in some)
        return f"{good}/{len(some)}"

    print(f"RESULT backend={args.backend} head={rate(False, 'head')} old={rate(False, 'old')} "
          f"held_out_head={rate(True, 'head')} held_out_old={rate(True, 'old')} "
          f"head_with_flaky={rate(False, 'head', True)} old_with_flaky={rate(False, 'old', True)} "
          f"held_out_head_with_flaky={rate(True, 'head', True)} held_out_old_with_flaky={rate(True, 'old', True)} "
          f"missing_mirrors={len(missing)}")
    return 0


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
    parser.add_argument("--breadth", type=Path, help="A corpus README (../shared/realrepos/README.md): launch each "
                                                     "repository at HEAD and at an old commit.")
    parser.add_argument("--part", choices=("all", "developed", "held-out"), default="all",
                        help="--breadth: the repositories to launch (the held-out third last, when the work is done).")
    parser.add_argument("--family", nargs="*", default=[], help="--breadth: only these families (python, go, ...).")
    parser.add_argument("--backend", default="docker", choices=("docker", "local"), help="--breadth: the backend.")
    args = parser.parse_args()
    print(f"measuring {_code()}", file=sys.stderr, flush=True)
    if args.breadth:
        return breadth(args)
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
