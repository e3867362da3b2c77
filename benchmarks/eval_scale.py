"""Evaluation throughput (instances per minute) by executor: local threads at 1 and 2 workers, and
Ray at 1 and 2 worker nodes, in one run.

The bundled demo suite with the gold policy on the local sandbox backend, every reward tier
scored (`dojo eval`'s default), its tasks repeated `--repeat` times under distinct ids so that a
configuration runs long enough to measure. Each configuration evaluates the same instances into a
fresh run directory and must resolve every one (exit 1 otherwise).

Ray: a cluster started here on loopback (`tests/raycluster.py`): a head with no CPU, which runs
no instance, and worker nodes of one CPU each (one instance at a time each, as one local worker);
the driver is this process. The second node joins after the first configuration. A Ray
configuration's time includes its workers' start (a Python process per node, importing swedojo),
which a run pays once; the cluster's own start is not counted. The machine is shared: the load
average is printed with each figure. The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from raycluster import RayCluster

from swedojo.datasets.registry import load_suite
from swedojo.evaluate import evaluate
from swedojo.settings import RunSettings


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _measure(name: str, suite: RunSettings, root: Path, **executor: Any) -> float:
    """Instances per minute of one `evaluate` of the `suite` settings' instances with `executor`'s settings."""
    started = time.monotonic()
    summary = evaluate(suite.model_copy(update={"out": root / name, **executor}).prepare())
    seconds = time.monotonic() - started
    instances = summary.total
    if summary.resolved != instances:
        sys.exit(f"{name}: gold resolved {summary.resolved}/{instances}: {summary.counts}")
    rate = instances / seconds * 60
    print(f"{name:8} {instances} instances in {seconds:6.1f} s: {rate:6.1f} instances/min  (load {_load()})",
          flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Times each demo task is evaluated (distinct ids).")
    args = parser.parse_args()

    suite = load_suite("demo")
    instances = [task.model_copy(update={"instance_id": f"{task.instance_id}-r{n}"})
                 for n in range(args.repeat) for task in suite.loaded.instances]
    print(f"{len(instances)} instances ({len(suite.loaded.instances)} demo tasks x {args.repeat}), gold policy, local "
          f"backend, every tier; {os.cpu_count()} cores, load {_load()}", flush=True)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as tmp:
        root = Path(tmp)
        (root / "suite.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in instances))
        settings = RunSettings(suite=str(root / "suite.jsonl"), mirror=suite.mirror, launch=False, out=root)
        for workers in (1, 2):
            rates[f"local_{workers}"] = _measure(f"local_{workers}", settings, root, workers=workers)
        with RayCluster(head_cpus=0) as cluster:
            cluster.connect(ray)
            try:
                for nodes in (1, 2):
                    cluster.add_node(f"node{nodes}", cpus=1, ip=f"127.0.0.{nodes + 1}")
                    cluster.wait_for(ray, alive=nodes + 1)
                    rates[f"ray_{nodes}"] = _measure(f"ray_{nodes}", settings, root, executor="ray",
                                                     address=cluster.address)
            finally:
                ray.shutdown()
    figures = " ".join(f"{key}={rate:.1f}" for key, rate in rates.items())
    print(f"RESULT instances={len(instances)} {figures} ray_2_over_1={rates['ray_2'] / rates['ray_1']:.2f} "
          f"local_2_over_1={rates['local_2'] / rates['local_1']:.2f} load1={os.getloadavg()[0]:.2f} cores={os.cpu_count()}")


if __name__ == "__main__":
    main()
