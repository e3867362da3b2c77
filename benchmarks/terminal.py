"""Terminal round trip and sandbox start, measured in one run on this machine.

- Round trip of a trivial command (`true`): the local terminal, the docker terminal (one attached
  exec), and a fresh `docker exec` per command (docker SDK `exec_run`) on the same container.
- Sandbox start from a built image: cold (create + start + shell) and from the warm pool; a
  local sandbox's start (checkout, cgroup, work tree, confined shell) and close.

Needs a Docker Engine and the locally made images (`make docker-up`). The last line is
`RESULT key=value ...`.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker

from swedojo.sandboxes import open_sandbox
from swedojo.sandboxes.docker import SANDBOX_USER, DockerSandbox
from swedojo.sandboxes.pool import SandboxPool

IMAGE = "swedojo/python:bookworm"
TERMINAL_RUNS = 500
EXEC_RUN_RUNS = 40
START_RUNS = 8


def timings_ms(fn: Callable[[], object], runs: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return sorted(out)


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def tiny_repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir()
    (repo / "README").write_text("benchmark\n")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return repo, subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source, commit = tiny_repo(Path(tmp))
        with open_sandbox("local", source=source, commit=commit) as local:
            local_ms = timings_ms(lambda: local.exec("true"), TERMINAL_RUNS)
        local_start_ms = timings_ms(lambda: open_sandbox("local", source=source, commit=commit).close(), START_RUNS,
                                    warmup=1)

        with DockerSandbox(IMAGE, source, commit) as sandbox:
            docker_ms = timings_ms(lambda: sandbox.exec("true"), TERMINAL_RUNS)
            container = docker.from_env().containers.get(sandbox.container_id)
            exec_run_ms = timings_ms(
                lambda: container.exec_run(["true"], user=SANDBOX_USER), EXEC_RUN_RUNS
            )

        def cold() -> None:
            DockerSandbox(IMAGE).close()

        cold_ms = timings_ms(cold, START_RUNS, warmup=1)
        with SandboxPool(size=1) as pool:
            warm_ms: list[float] = []
            warm_repo_ms: list[float] = []
            for samples, args in ((warm_ms, ()), (warm_repo_ms, (source, commit))):
                for _ in range(START_RUNS):
                    pool.wait_ready(IMAGE, timeout=120)
                    start = time.perf_counter()
                    sandbox = pool.acquire(IMAGE, *args)
                    samples.append((time.perf_counter() - start) * 1000)
                    pool.release(sandbox)
            warm_ms.sort()
            warm_repo_ms.sort()

    rows = [
        ("local terminal", local_ms),
        ("docker terminal", docker_ms),
        ("docker exec_run per command", exec_run_ms),
        ("local sandbox start + close", local_start_ms),
        ("sandbox start, cold", cold_ms),
        ("sandbox start, warm pool", warm_ms),
        ("sandbox start, warm pool + repo copy", warm_repo_ms),
    ]
    print(f"{'':40} {'p50 ms':>9} {'p99 ms':>9} {'runs':>6}")
    for name, values in rows:
        print(
            f"{name:40} {pct(values, 0.5):9.3f} {pct(values, 0.99):9.3f} {len(values):6}"
        )
    speedup = statistics.median(exec_run_ms) / statistics.median(docker_ms)
    print(
        f"docker terminal vs exec_run per command: {speedup:.0f}x faster (target >= 20x)"
    )
    print(
        "RESULT"
        f" local_p50_ms={pct(local_ms, 0.5):.3f} local_p99_ms={pct(local_ms, 0.99):.3f}"
        f" local_start_ms={pct(local_start_ms, 0.5):.0f}"
        f" docker_p50_ms={pct(docker_ms, 0.5):.3f} docker_p99_ms={pct(docker_ms, 0.99):.3f}"
        f" exec_run_p50_ms={pct(exec_run_ms, 0.5):.1f} docker_speedup={speedup:.1f}"
        f" cold_start_ms={pct(cold_ms, 0.5):.0f} warm_start_ms={pct(warm_ms, 0.5):.1f}"
        f" warm_start_repo_ms={pct(warm_repo_ms, 0.5):.0f}"
    )


if __name__ == "__main__":
    main()
