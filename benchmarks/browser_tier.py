"""Seconds per scored page of the browser tiers, cold (a new Chromium per assessment) and warm (one
Chromium kept in the sandbox across assessments), per sandbox backend, in one run.

Every `web-demo` task's gold patch is applied in one grading sandbox of its environment (on docker,
the browser image, built first if missing: its build is not timed); then its pages are assessed
`--repeat` times cold (`assess` starting the browser through the sandbox's launcher each time, as
grading does) and `--repeat` times with one browser started before and kept. A scored page is one
page at one viewport rendered, measured and screenshot (the task's scenarios ride along on its
pages). Every assessment must pass every tier (exit 1 otherwise). Docker is left out, and said so,
when no engine answers. The machine is shared: the load average is printed. The last line is
`RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from swedojo.datasets.registry import load_suite
from swedojo.rewards.web.assess import assess
from swedojo.rollout import EnvironmentResolver
from swedojo.sandboxes import docker_available
from swedojo.sandboxes.browser import sandbox_browser
from swedojo.testrun.patches import apply_patch


def measure(backend: str, repeat: int, shots: Path) -> tuple[float, float, int]:
    """(cold, warm) seconds per scored page on `backend`, and the pages scored in each mode."""
    suite = load_suite("web-demo")
    resolver = EnvironmentResolver(backend=backend, mirror=suite.mirror)
    seconds = {"cold": 0.0, "warm": 0.0}
    pages = 0
    for instance in suite.loaded.instances:
        assert instance.checks is not None
        with resolver.resolve(instance).open(instance.base_commit) as sandbox:
            apply_patch(sandbox, instance.patch, "gold")
            per_pass = len(instance.checks.pages) * len(instance.checks.runtime.viewports)
            start = time.perf_counter()
            for _ in range(repeat):
                found = assess(sandbox, instance.checks, shots)
                if not found.passed:
                    sys.exit(f"{backend}: gold failed a browser tier on {instance.instance_id} (cold)")
            seconds["cold"] += time.perf_counter() - start
            start = time.perf_counter()
            with sandbox_browser(sandbox) as browser:
                for _ in range(repeat):
                    if not assess(sandbox, instance.checks, shots, browser).passed:
                        sys.exit(f"{backend}: gold failed a browser tier on {instance.instance_id} (warm)")
            seconds["warm"] += time.perf_counter() - start
            pages += per_pass * repeat
    return seconds["cold"] / pages, seconds["warm"] / pages, pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="assessments of each task per mode")
    args = parser.parse_args()
    backends = ["local"] + (["docker"] if docker_available() else [])
    if "docker" not in backends:
        print("docker: no engine answers, left out (`make docker-up` starts one)")
    result: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="swedojo-bench-shots-") as tmp:
        for backend in backends:
            cold, warm, pages = measure(backend, args.repeat, Path(tmp))
            load = os.getloadavg()[0]
            print(f"{backend}: {cold:.3f} s/page cold, {warm:.3f} s/page warm ({pages} pages each, load {load:.1f})")
            result |= {f"{backend}_cold_s_per_page": f"{cold:.3f}", f"{backend}_warm_s_per_page": f"{warm:.3f}",
                       f"{backend}_warm_speedup": f"{cold / warm:.2f}", f"{backend}_pages": str(pages)}
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
