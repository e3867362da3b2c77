"""What environments cost on disk: the docker engine's swedojo environments, per repository, as layered
images share them, against the same images stored whole (the baseline, measured in the same run).

Reads the engine as it is (whatever launches, evaluations and benchmarks built on this machine):
for each repository with environments, how many it has, what they add over their dependency layers
(unique bytes), and what those dependency layers add over the runtime; the cost of one more
environment of a repository it already has (its unique bytes, plus a dependency layer where its
dependency files differ), and of a new repository (its dependency layer and first environment).
The baseline is every environment image's full size (runtime, dependencies and tree, as an unlayered
image would be). `--min-envs N` keeps the repositories with at least N environments (default 2).
Without a Docker Engine, or with no environment on it, it says so and exits 2. Last line:
`RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from swedojo.sandboxes.docker import docker_available
from swedojo.sandboxes.image_disk import ENV_REPOSITORY, by_repository, disk_use


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-envs", type=int, default=2)
    args = parser.parse_args()
    if not docker_available():
        print("needs a running Docker Engine (make docker-up)", file=sys.stderr)
        return 2
    use = disk_use()
    repositories = [r for r in by_repository(use) if r.environments >= args.min_envs]
    if not repositories:
        print(f"no repository has {args.min_envs} or more environments on this engine: launch some first "
              "(benchmarks/multi_swe_bench.py, benchmarks/swebench.py)", file=sys.stderr)
        return 2
    full = {}  # repository -> the full sizes of its environment images
    for image in use.images:
        for tag in image.tags:
            if tag.rpartition(":")[0] == ENV_REPOSITORY:
                full.setdefault(tag.rpartition(":")[2].rsplit("-", 2)[0], []).append(image.size_mb)
                break
    print(f"{'repository':<28} {'envs':>5} {'deps':>5} {'MB/env':>8} {'MB/deps':>8} {'extra env MB':>12} "
          f"{'new repo MB':>11} {'layered MB':>10} {'whole MB':>9}")
    extra, new_repo, layered_total, whole_total = [], [], 0.0, 0.0
    for repo in repositories:
        per_env = repo.environments_mb / repo.environments
        deps = len(repo.dependency_layers) or 1
        per_deps = repo.dependency_mb / deps
        # one more environment: its own bytes, plus a new dependency layer as often as its commits had one
        one_more = per_env + per_deps * (deps - 1) / max(1, repo.environments - 1)
        layered = repo.environments_mb + repo.dependency_mb
        whole = sum(full.get(repo.repository, []))
        extra.append(one_more)
        new_repo.append(per_deps + per_env)
        layered_total, whole_total = layered_total + layered, whole_total + whole
        print(f"{repo.repository[:28]:<28} {repo.environments:5d} {deps:5d} {per_env:8.1f} {per_deps:8.1f} "
              f"{one_more:12.1f} {per_deps + per_env:11.1f} {layered:10.0f} {whole:9.0f}")
    envs = sum(r.environments for r in repositories)
    print(f"{len(repositories)} repositories, {envs} environments: {layered_total / 1024:.1f} GB as layered here "
          f"(runtimes not counted: shared by every repository of a language), {whole_total / 1024:.1f} GB as whole images")
    print(f"RESULT repos={len(repositories)} envs={envs} extra_env_mb_median={statistics.median(extra):.1f} "
          f"new_repo_mb_median={statistics.median(new_repo):.1f} layered_gb={layered_total / 1024:.2f} "
          f"whole_gb={whole_total / 1024:.2f} saving={whole_total / max(layered_total, 1):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
