"""Scoring throughput (scores per minute) of RL groups on the demo suite: cold vs from a warm pool, in one run.

`score(...)` (default RewardConfig, every tier) on each demo task's gold patch `--group` times
(the rollouts of one RL group), with the docker backend (image `swedojo/python:bookworm`, `make
docker-up`), in three modes that score the same instances in the same order with the same workers:

- cold: a container is started for each score and removed after it; nothing is kept between
  scores, so each score runs the suite at base, the graded tests and, when some unlisted test
  passed at base, the suite after (2 runs on the demo, whose PASS_TO_PASS is the whole suite);
- pool: containers come from a `SandboxPool` (started ahead by its thread, removed by another,
  never reused);
- warm: the default pool: released containers are reset and reused (checked as fresh, see
  `Container.reset`), pytest is kept imported in each by a fork server that also memoises
  assertion rewriting (`sandboxes/forkserver.py`), and a `BaselineCache` fresh for the round, so
  each group's first score runs the suite at base and the others reuse it (the round pays for
  its misses).

Rounds go cold, pool, warm, warm, pool, cold so that a drift in machine load weighs on all alike.
Each score's wall time is split into: sandbox start (container start or pool acquire, repo
unpack), the test command runs, the compile check, the other execs, and close. With fewer
workers than cores (the default, one) the pool's threads use the spare core and a score's
latency is what counts; with a worker per core the machine is saturated and only work that is
no longer done counts (a container start costs ~0.7 core-seconds wherever it runs). The local
backend's throughput is printed for reference. The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from pydantic import PrivateAttr

from swedojo.datasets.registry import load_suite
from swedojo.rewards import grading
from swedojo.rewards.score import score
from swedojo.rewards.tiers import BaselineCache
from swedojo.rollout import EnvironmentResolver
from swedojo.sandboxes.base import ExecResult, Sandbox
from swedojo.sandboxes.environment import DEFAULT_PYTHON_IMAGE, Environment
from swedojo.sandboxes.pool import SandboxPool
from swedojo.schema import EvalStatus, ExitStatus, RewardReport, TaskInstance, Trajectory

guarded = grading.guardable

PHASES = ("start", "tests", "compile", "other", "close", "rest")


class Phases:
    """Seconds per phase summed over the scores of one mode (thread-safe)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.test_runs = 0
        self._lock = threading.Lock()

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.seconds[phase] += seconds
            self.test_runs += phase == "tests"


class TimedSandbox:
    """A sandbox that books the wall time of each exec and of close to a phase."""

    def __init__(self, sandbox: Sandbox, test_command: str, phases: Phases) -> None:
        self.sandbox, self.test_command, self.phases = sandbox, test_command, phases
        self.workdir = sandbox.workdir

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        start = time.perf_counter()
        result = self.sandbox.exec(command, timeout)
        phase = "tests" if command.startswith(self.test_command) else "compile" if "compile(" in command else "other"
        self.phases.add(phase, time.perf_counter() - start)
        return result

    def read_file(self, path: str) -> bytes:
        return self.sandbox.read_file(path)

    def write_file(self, path: str, data: bytes) -> None:
        self.sandbox.write_file(path, data)

    def diff(self) -> str:
        return self.sandbox.diff()

    def close(self) -> None:
        start = time.perf_counter()
        self.sandbox.close()
        self.phases.add("close", time.perf_counter() - start)


class TimedEnvironment(Environment):
    """The task's environment, with its sandboxes timed into `_phases`."""

    _phases: Phases = PrivateAttr(default_factory=Phases)

    def open(self, commit: str | None = None, prepared: bool = True) -> Sandbox:
        start = time.perf_counter()
        sandbox = super().open(commit, prepared)
        self._phases.add("start", time.perf_counter() - start)
        return TimedSandbox(sandbox, self.spec.test_command, self._phases)


def timed_env(env: Environment, phases: Phases, pool: SandboxPool | None) -> Environment:
    timed = TimedEnvironment.model_validate(env.model_dump())
    timed._phases = phases
    return timed.with_pool(pool)


def cpu_busy_s() -> float:
    """Core-seconds the whole machine has been busy (all processes, other tenants too), from /proc/stat."""
    with open("/proc/stat") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


NOTE = ("diff --git a/SCORING-NOTE.txt b/SCORING-NOTE.txt\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/SCORING-NOTE.txt\n@@ -0,0 +1 @@\n+scored by benchmarks/scoring.py\n")
"""Added to the gold patch: the candidate is then not the reference, so grading reads the test
run's guard verdict (`testrun.guard`) as it does for any rollout."""


def gold(instance: TaskInstance) -> Trajectory:
    return Trajectory(instance_id=instance.instance_id, policy="gold", exit_status=ExitStatus.SUBMITTED,
                      patch=instance.patch + NOTE)


def run_mode(envs: dict[str, Environment], instances: list[TaskInstance], workers: int, group: int,
             phases: Phases, pool: SandboxPool | None = None, baselines: bool = False) -> tuple[float, list[RewardReport]]:
    """Score every instance's gold patch `group` times (an RL group); (wall seconds, reports in order).

    With `baselines`, a fresh BaselineCache serves the round: each group's first score runs the
    suite at base, the others reuse it.
    """
    timed = {i.instance_id: timed_env(envs[i.instance_id], phases, pool) for i in instances}
    cache = BaselineCache() if baselines else None

    def one(instance: TaskInstance) -> RewardReport:
        start = time.perf_counter()
        report = score(timed[instance.instance_id], instance, gold(instance), baselines=cache)
        phases.add("total", time.perf_counter() - start)
        return report

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        reports = list(executor.map(one, [i for i in instances for _ in range(group)]))
    return time.perf_counter() - start, reports


def pytest_split(env: Environment, warm: Environment, reps: int = 3) -> dict[str, float]:
    """Median ms of one test-command run in a sandbox, split: interpreter, pytest import, config + collection,
    tests; and of the same run served by a warm sandbox's fork server."""
    python = env.spec.test_command.split(" -m ")[0]
    commands = {
        "interpreter": f"{python} -c pass",
        "import": f"{python} -c 'import pytest'",
        "collect": f"{env.spec.test_command} --collect-only -q",
        "run": env.spec.test_command,
    }
    ms = {}
    with env.open() as sandbox:
        for name, command in commands.items():
            ms[name] = statistics.median(sandbox.exec(command).duration_s for _ in range(reps)) * 1000
    with warm.open() as sandbox:
        ms["served"] = statistics.median(sandbox.exec(env.spec.test_command).duration_s for _ in range(reps)) * 1000
    return {"interpreter": ms["interpreter"], "pytest import": ms["import"] - ms["interpreter"],
            "config + collection": ms["collect"] - ms["import"], "tests": ms["run"] - ms["collect"],
            "whole run": ms["run"], "served by the fork server": ms["served"]}


MODES = {
    "cold": "a container started per score, removed after it; nothing kept between scores",
    "pool": "containers from a SandboxPool started ahead and removed in the background (never reused)",
    "warm": "the default pool: containers reset and reused, pytest kept imported (rewrites memoised), "
            "the group's baseline run reused",
    "unguarded": "warm, with the graded pytest runs unguarded (no `testrun.guard` plugin, no verdict read): "
                 "the guard's cost",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1, help="scores at once (every mode)")
    parser.add_argument("--group", type=int, default=4, help="rollouts scored per task, as an RL group")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes per mode over the suite")
    args = parser.parse_args()
    suite = load_suite("demo")
    instances = suite.loaded.instances
    envs = {}
    for backend in ("docker", "local"):
        resolver = EnvironmentResolver(backend=backend, mirror=suite.mirror)
        envs[backend] = {i.instance_id: resolver.resolve(i) for i in instances}
    # Untimed: each repo's checkout is made (and cached as a tar) once, as a running scorer has it.
    for env in {e.source: e for e in envs["docker"].values()}.values():
        env.open().close()
    runner = envs["docker"][instances[0].instance_id].warm_runner()

    seconds = dict.fromkeys(MODES, 0.0)
    busy = dict.fromkeys(MODES, 0.0)
    phases = {mode: Phases() for mode in MODES}
    reports: dict[str, list[RewardReport]] = {}
    order = ("cold", "pool", "warm", "unguarded", "unguarded", "warm", "pool", "cold") * (args.rounds // 2) \
        + ("cold", "pool", "warm", "unguarded") * (args.rounds % 2)
    with SandboxPool(size=args.workers, runners=False, reuse=False) as plain_pool, SandboxPool(size=args.workers) as warm_pool:
        pools = {"cold": None, "pool": plain_pool, "warm": warm_pool, "unguarded": warm_pool}
        for mode in order:
            if pools[mode] is not None and not pools[mode].wait_ready(DEFAULT_PYTHON_IMAGE, 120, runner):
                raise SystemExit("the pool did not fill within 120 s")
            before = cpu_busy_s()
            grading.guardable = (lambda spec: False) if mode == "unguarded" else guarded
            took, reports[mode] = run_mode(envs["docker"], instances, args.workers, args.group, phases[mode],
                                           pools[mode], baselines=mode in ("warm", "unguarded"))
            grading.guardable = guarded
            busy[mode] += cpu_busy_s() - before
            seconds[mode] += took
            print(f"{mode}: {len(reports[mode])} scores in {took:.1f}s", flush=True)
        first = envs["docker"][instances[0].instance_id]
        split = pytest_split(first.with_pool(plain_pool), first.with_pool(warm_pool))
    local_phases = Phases()
    local_s, reports["local"] = run_mode(envs["local"], instances, args.workers, 1, local_phases)

    for mode, got in reports.items():
        bad = [r.instance_id for r in got if r.status != EvalStatus.RESOLVED or r.reward != 1.0]
        if bad:
            raise SystemExit(f"{mode}: gold patches not scored 1.0: {bad}")
    same = all((c.status, c.tiers, c.reward) == (w.status, w.tiers, w.reward)
               for mode in ("pool", "warm", "unguarded") for c, w in zip(reports["cold"], reports[mode], strict=True))

    scored = len(instances) * args.group * args.rounds
    per_min = {mode: scored / (seconds[mode] / 60) for mode in MODES}
    per_min["local"] = len(instances) / (local_s / 60)
    cores = os.cpu_count() or 1
    print(f"\nmean ms per score ({args.workers} workers, groups of {args.group}; 'rest' = the harness's own Python: "
          "log parsing, tiers; 'cpu' = machine core-ms per score, all processes)")
    print(f"{'mode':<6}" + "".join(f"{p:>9}" for p in (*PHASES, "total")) + f"{'runs':>6}{'cpu':>7}{'per min':>9}")
    for mode, booked, count in [*((m, phases[m], scored) for m in MODES), ("local", local_phases, len(instances))]:
        ms = {p: booked.seconds[p] / count * 1000 for p in (*PHASES[:-1], "total")}
        ms["rest"] = ms["total"] - sum(ms[p] for p in PHASES[:-1])
        cpu = f"{busy[mode] / count * 1000:7.0f}" if mode in busy else f"{'':>7}"
        print(f"{mode:<6}" + "".join(f"{ms[p]:9.0f}" for p in (*PHASES, "total"))
              + f"{booked.test_runs / count:6.1f}{cpu}{per_min[mode]:9.1f}")
    for mode, what in MODES.items():
        print(f"  {mode}: {what}")
    print(f"one test-command run ({instances[0].repo}, median ms): "
          + ", ".join(f"{name} {ms:.0f}" for name, ms in split.items()))
    ratio, pool_ratio = per_min["warm"] / per_min["cold"], per_min["pool"] / per_min["cold"]
    guard_cost = per_min["unguarded"] / per_min["warm"] - 1
    cpu_busy = sum(busy.values()) / (sum(seconds.values()) * cores)
    print(f"machine CPU busy during the docker rounds: {cpu_busy:.0%} of {cores} cores")
    print(f"warm vs cold: {ratio:.2f}x (issue target >= 3x); pool alone: {pool_ratio:.2f}x; reports identical in every mode: {same}")
    print(f"the guard's cost: warm scoring takes {guard_cost:+.1%} longer than unguarded (issue bound: 20%)")
    print(
        f"RESULT warm_per_min={per_min['warm']:.1f} cold_per_min={per_min['cold']:.1f} ratio={ratio:.2f}"
        f" pool_per_min={per_min['pool']:.1f} pool_ratio={pool_ratio:.2f} local_per_min={per_min['local']:.1f}"
        f" instances={len(instances)} group={args.group} rounds={args.rounds} workers={args.workers}"
        f" cold_runs={phases['cold'].test_runs / scored:.2f} warm_runs={phases['warm'].test_runs / scored:.2f}"
        f" cpu_busy={cpu_busy:.2f} identical={same} unguarded_per_min={per_min['unguarded']:.1f} guard_cost={guard_cost:.3f}"
    )


if __name__ == "__main__":
    main()
