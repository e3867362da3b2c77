"""`dojo eval`: run a policy over a suite into a run directory, resumable and error-isolated.

Outputs (see `RunDir`): `results.jsonl` (one `InstanceResult` per line, appended as each finishes,
so a killed run resumes where it stopped), `summary.json`, `preds.json` (sb-cli format), `trajectories/`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from pydantic import BaseModel

from swedojo.agent.base import Policy
from swedojo.datasets.io import RecordError
from swedojo.rewards.compose import RewardConfig
from swedojo.rewards.tiers import BaselineCache
from swedojo.rollout import EnvironmentResolver, run_instance
from swedojo.rundir import InstanceResult, RunDir
from swedojo.schema import EvalStatus, TaskInstance


class Summary(BaseModel):
    """`summary.json`."""

    suite: str
    """Suite name or path."""
    policy: str
    """Policy name."""
    total: int
    """Instances in the suite that loaded."""
    resolved: int
    """Instances resolved."""
    resolved_rate: float
    """resolved / total."""
    counts: dict[str, int]
    """Instances per EvalStatus."""
    record_errors: list[str] = []
    """Suite records that could not be loaded, one line each."""


def evaluate(
    instances: list[TaskInstance],
    policy_factory: Callable[[], Policy],
    resolver: EnvironmentResolver,
    out: Path,
    suite_name: str,
    record_errors: list[RecordError] | None = None,
    workers: int = 1,
    on_result: Callable[[InstanceResult], None] | None = None,
    rewards: RewardConfig | None = None,
) -> Summary:
    """Evaluate every instance not already in `out/results.jsonl` and write the run's files.

    With `rewards`, every instance is also scored on the reward tiers (three test runs instead of one;
    the suite's run at base is kept in `out/baselines`, so a resumed run does not repeat it).
    """
    out.mkdir(parents=True, exist_ok=True)
    run_dir = RunDir(out)
    done = run_dir.read_results()
    todo = [i for i in instances if i.instance_id not in done]
    lock = threading.Lock()
    policy_name = policy_factory().name
    baselines = BaselineCache(run_dir.baselines) if rewards else None

    def work(instance: TaskInstance) -> None:
        result = run_instance(instance, resolver, policy_factory(), run_dir.trajectory(instance.instance_id), rewards, baselines)
        with lock:
            with run_dir.results.open("a", encoding="utf-8") as fh:
                fh.write(result.model_dump_json() + "\n")
            done[result.instance_id] = result
            if on_result:
                on_result(result)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(work, todo))

    ordered = [done[i.instance_id] for i in instances if i.instance_id in done]
    counts = Counter(r.status.value for r in ordered)
    resolved = sum(r.resolved for r in ordered)
    summary = Summary(
        suite=suite_name, policy=policy_name, total=len(instances), resolved=resolved,
        resolved_rate=resolved / len(instances) if instances else 0.0,
        counts={s.value: counts.get(s.value, 0) for s in EvalStatus},
        record_errors=[str(e) for e in record_errors or []],
    )
    run_dir.summary.write_text(summary.model_dump_json(indent=2))
    preds = [{"instance_id": r.instance_id, "model_name_or_path": policy_name, "model_patch": r.patch} for r in ordered]
    run_dir.preds.write_text(json.dumps(preds, indent=1))
    return summary
