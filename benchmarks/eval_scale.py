"""Throughput by executor, one machine against a Ray cluster of one and two nodes, in one run: the
evaluation (instances per minute), generation over several real repositories (tasks per minute),
launches of a list (launches per minute) and the rollout service (samples per minute).

- eval: the bundled demo suite with the gold policy on the local sandbox backend, every reward tier
  scored (`dojo eval`'s default), its tasks repeated `--repeat` times under distinct ids; local
  threads at 1 and 2 workers, then Ray. Every instance must resolve (exit 1 otherwise).
- gen: `dojo gen --from mutations` over `--gen-repos` (small real repositories, mirrored under
  `--mirror` as owner/name; without them this part is not measured and says so), one unit per
  repository, each evaluating `--candidates` candidates one at a time on the local backend. Units
  run one after another here (`local`), or a Ray task each. An untimed first pass launches their
  environments (cached by their layers), so every timed pass pays the same launch: its validation
  run. The same seed must give the same suite in every configuration (exit 1 otherwise).
- launch: `dojo launch --repos` of the same repositories at HEAD (environments cached: each
  launch's time is its validation), one after another here or a Ray task each.
- service: a rollout service (`RolloutService`, as `dojo serve` runs it) rolling out groups of
  `--group-size` samples of every demo task, with a scripted policy that runs the task's tests
  (`run_tests`), adds a file and submits, graded on every reward tier: an RL sample's sandbox work
  without a model's (the model is the trainer's engine, elsewhere); up to four in flight. Its samples run in
  this process (`local`), or as Ray tasks on the cluster's nodes (`dojo serve --executor ray`).
  Every sample must be graded (no infrastructure failure, no group dropped). A service runs for
  hours, so its figure is its steady state: each configuration rolls out one untimed batch first
  (its workers' imports and first sandboxes), then the timed one.

Ray: a cluster started here on loopback (`tests/raycluster.py`): a head with no CPU, which runs no
work, and worker nodes of one CPU each (one unit of work at a time each, as one local worker),
each pinned to a core of its own with all its processes (raylet, workers, their sandboxes), as a
machine of one core would be: unpinned, the one node's sandboxes would already spread over the
cores the second node is counted as adding. The driver (this process, and the service) is not
pinned: with two nodes on a two-core machine it takes its share from theirs. The second node joins
after every part has run on the first. A Ray configuration's time includes its workers' start
(the service's aside, above), which a run pays once; the cluster's own start is not counted. The
load average is printed with each figure. The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from raycluster import RayCluster

from swedojo.datasets.gen.many import GenUnit, ManyResult, generate_many, plan_units
from swedojo.datasets.gen.settings import GenSettings
from swedojo.datasets.registry import load_suite
from swedojo.evaluate import evaluate
from swedojo.executors import RaySession, gen_unit_runner, launch_unit_runner
from swedojo.repolaunch.many import launch_many, plan_launches
from swedojo.schema import ToolCall
from swedojo.serve.api import BatchRequest, BatchState
from swedojo.serve.service import RolloutService
from swedojo.settings import RunSettings
from swedojo.tools.formats import get_format

WARMED_PARTS = frozenset({"service"})
"""Parts measured in their steady state: one untimed pass in each configuration before the timed one."""
GEN_REPOS = "kjd/idna,pytest-dev/pluggy,PyCQA/pyflakes,Python-Markdown/markdown"
"""Small real repositories with quick suites, none of them in the realrepos held-out third."""


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(part: str, name: str, unit: str, run: Callable[..., int], *args: Any, **kwargs: Any) -> float:
    """Per-minute rate of `run(name, *args, **kwargs)`, which returns how many `unit`s it made (after
    an untimed `run(name-warm, ...)` for a part in `WARMED_PARTS`)."""
    if part in WARMED_PARTS:
        run(f"{name}-warm", *args, **kwargs)
    started = time.monotonic()
    count = run(name, *args, **kwargs)
    seconds = time.monotonic() - started
    rate = count / seconds * 60
    print(f"{part:8} {name:8} {count:3} {unit} in {seconds:6.1f} s: {rate:6.1f} {unit}/min  (load {_load()})", flush=True)
    return rate


class Parts:
    """Each part's work, run at any executor into a directory of its own."""

    def __init__(self, root: Path, repeat: int, mirror: Path | None, gen_repos: list[str], candidates: int,
                 group_size: int) -> None:
        self.root = root
        suite = load_suite("demo")
        instances = [task.model_copy(update={"instance_id": f"{task.instance_id}-r{n}"})
                     for n in range(repeat) for task in suite.loaded.instances]
        (root / "suite.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in instances))
        self.eval_settings = RunSettings(suite=str(root / "suite.jsonl"), mirror=suite.mirror, launch=False, out=root)
        self.mirror = mirror
        self.gen_repos = gen_repos
        self.gen_settings = GenSettings(out=root, seed=0, max_tasks=candidates, max_candidates=candidates, workers=1,
                                        backend="local", pool=0)
        self.first_suite: list[str] | None = None
        """The instance ids of the first gen configuration's suite; every later one must be the same."""
        self.group_size = group_size
        glm = get_format("glm")
        turns = [ToolCall(name="run_tests", arguments={}),
                 ToolCall(name="bash", arguments={"command": "echo 'a note' > NOTES.md"}),
                 ToolCall(name="submit", arguments={})]
        (root / "sample.json").write_text(json.dumps([{"content": glm.render_calls([turn])} for turn in turns]))

    def eval(self, name: str, address: str | None = None, workers: int = 1) -> int:
        executor = {"executor": "ray", "address": address} if address else {"workers": workers}
        summary = evaluate(self.eval_settings.model_copy(update={"out": self.root / f"eval-{name}", **executor}).prepare())
        if summary.resolved != summary.total:
            sys.exit(f"eval {name}: gold resolved {summary.resolved}/{summary.total}: {summary.counts}")
        return summary.total

    def prime(self) -> None:
        """Launch the gen repositories' environments, untimed: every later pass finds them cached."""
        out = self.root / "gen-prime"
        settings = self.gen_settings.model_copy(update={"out": out, "max_candidates": 1})
        self._gen_units("prime", plan_units(self.gen_repos, "mutations", settings, self.mirror), out, None)

    def gen(self, name: str, address: str | None = None) -> int:
        """Ray at `address`, else here."""
        out = self.root / f"gen-{name}"
        units = plan_units(self.gen_repos, "mutations", self.gen_settings.model_copy(update={"out": out}), self.mirror)
        result = self._gen_units(name, units, out, address)
        suite = sorted(t.instance_id for t in result.instances)
        self.first_suite = self.first_suite or suite
        if suite != self.first_suite:
            sys.exit(f"gen {name}: another suite than the first configuration's, from the same seed")
        return len(result.instances)

    def _gen_units(self, name: str, units: list[GenUnit], out: Path, address: str | None) -> ManyResult:
        result = generate_many(units, out, gen_unit_runner("ray" if address else "local", address))
        print(f"  {name} units: " + ", ".join(f"{u.name} {u.seconds:.0f} s" for u in result.units), flush=True)
        failed = [f"{u.name}: {u.error}" for u in result.units if u.error]
        if failed:
            sys.exit(f"gen {name}: units failed: {'; '.join(failed)}")
        return result

    def launch(self, name: str, address: str | None = None) -> int:
        out = self.root / f"launch-{name}"
        units = plan_launches([(repo, "") for repo in self.gen_repos], out, "local", self.mirror)
        report = launch_many(units, out, launch_unit_runner("ray" if address else "local", address))
        failed = [f"{u.unit}: {u.error}" for u in report.units if not u.done]
        if failed:
            sys.exit(f"launch {name}: launches failed: {'; '.join(failed)}")
        return len(report.units)

    def service(self, name: str, address: str | None = None) -> int:
        session = RaySession(address) if address else None
        service = RolloutService(self.root / f"service-{name}", max_concurrent=4, ray=session)
        try:
            batch = service.submit(BatchRequest(suite="demo", group_size=self.group_size,
                                                model=f"scripted:{self.root / 'sample.json'}"))
            while (report := service.report(batch.batch_id)).state == BatchState.RUNNING:
                time.sleep(0.1)
            samples = [s for g in service.groups(batch.batch_id).groups for s in g.samples]  # done: one page holds all
        finally:
            service.close()
            if session:
                session.close()
        if report.state != BatchState.FINISHED or report.infra_failures or report.dropped or \
                len(samples) != report.groups_total * self.group_size:
            sys.exit(f"service {name}: {report.state}, {len(samples)} samples graded, {report.infra_failures} infra "
                     f"failures, dropped: {report.dropped}")
        return len(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Times each demo task is evaluated (distinct ids).")
    parser.add_argument("--mirror", type=Path, default=os.environ.get("SWEDOJO_MIRROR"),
                        help="Local repositories as owner/name, for gen and launch (default: $SWEDOJO_MIRROR).")
    parser.add_argument("--gen-repos", default=GEN_REPOS, help="Repositories for gen and launch (owner/name, comma-separated).")
    parser.add_argument("--candidates", type=int, default=6, help="Candidates each gen unit evaluates.")
    parser.add_argument("--group-size", type=int, default=2, help="Samples the service rolls out of each demo task.")
    parser.add_argument("--parts", default="eval,gen,launch,service", help="The parts to measure (comma-separated).")
    args = parser.parse_args()

    repos = args.gen_repos.split(",")
    missing = [r for r in repos if args.mirror is None or not (args.mirror / r).is_dir()]
    if missing:
        print(f"gen and launch not measured: no local mirror of {', '.join(missing)} (--mirror DIR with DIR/owner/name)")
    print(f"{os.cpu_count()} cores, load {_load()}", flush=True)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as tmp:
        parts = Parts(Path(tmp), args.repeat, args.mirror, repos, args.candidates, args.group_size)
        measured = [p for p in ["eval", "service", "gen", "launch"]
                    if p in args.parts.split(",") and not (missing and p in ("gen", "launch"))]
        units = {"eval": "instances", "gen": "tasks", "launch": "launches", "service": "samples"}
        if "gen" in measured:
            parts.prime()
        for workers in (1, 2) if "eval" in measured else ():
            rates[f"eval_local_{workers}"] = _timed("eval", f"local_{workers}", "instances", parts.eval, workers=workers)
        for part in (p for p in measured if p != "eval"):
            rates[f"{part}_local"] = _timed(part, "local", units[part], getattr(parts, part))
        with RayCluster(head_cpus=0) as cluster:
            cluster.connect(ray)
            try:
                for nodes in (1, 2):
                    cluster.add_node(f"node{nodes}", cpus=1, ip=f"127.0.0.{nodes + 1}",
                                     cores={(nodes - 1) % (os.cpu_count() or 1)})
                    cluster.wait_for(ray, alive=nodes + 1)
                    name = f"ray_{nodes}"
                    for part in measured:
                        rates[f"{part}_{name}"] = _timed(part, name, units[part], getattr(parts, part), cluster.address)
            finally:
                ray.shutdown()
    ratios = {f"{part}_ray_2_over_1": rates[f"{part}_ray_2"] / rates[f"{part}_ray_1"] for part in measured}
    figures = " ".join(f"{key}={value:.2f}" for key, value in {**rates, **ratios}.items())
    local = f" eval_local_2_over_1={rates['eval_local_2'] / rates['eval_local_1']:.2f}" if "eval" in measured else ""
    print(f"RESULT {figures}{local} gen={'measured' if 'gen' in measured else 'not_measured'} "
          f"load1={os.getloadavg()[0]:.2f} cores={os.cpu_count()}")


if __name__ == "__main__":
    main()
