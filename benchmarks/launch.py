"""Launch times, cold and warm, and image sizes, for small repositories made here.

Repos: a pure-Python package (pyproject, one test dependency from PyPI), a Node package (one
dependency from the npm registry, `node --test`) and a C project (make, TAP runner). Each gets a
fresh nonce in a dependency file, so its dependency and repo layers are new: "cold" builds them
(the runtime layer, shared by every repo of its language, is reused; when it is missing it is
built first and timed apart as `<lang>_runtime_s`). "warm" launches the same commit again: every
layer and the validated spec are cached. Local mode uses a fresh cache directory.

Targets: warm under 2 s; cold of the small pure-Python repo under 60 s. Needs a Docker Engine and
`swedojo/base:bookworm` (`make docker-up`). The last line is `RESULT key=value ...`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from swedojo.repolaunch.launch import launch
from swedojo.sandboxes.docker import api

DATE = "2024-06-01T12:00:00Z"


def _python(nonce: str) -> dict[str, str]:
    return {
        "pyproject.toml": f"# benchmark {nonce}\n[build-system]\nrequires = [\"setuptools>=61\"]\n"
                          "build-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"calc\"\nversion = \"0.1.0\"\n"
                          "requires-python = \">=3.9\"\n\n[project.optional-dependencies]\ntest = [\"iniconfig\"]\n",
        "src/calc/__init__.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                              "def test_bug():\n    assert add(1, 1) == 3\n",
    }


def _node(nonce: str) -> dict[str, str]:
    return {
        "package.json": json.dumps({"name": f"bench-{nonce}", "version": "1.0.0", "scripts": {"test": "node --test"},
                                    "dependencies": {"is-number": "7.0.0"}}),
        "test/n.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                          "const isNumber = require('is-number');\ntest('number', () => assert.ok(isNumber(1)));\n",
    }


def _c(nonce: str) -> dict[str, str]:
    return {
        "Makefile": f"# benchmark {nonce}\nall: t\nt: t.c\n\t$(CC) -o t t.c\ntest: t\n\t./t\n.PHONY: all test\n",
        "t.c": '#include <stdio.h>\nint main(void) { printf("1..2\\nok 1 - one\\nok 2 - two\\n"); return 0; }\n',
    }


def _repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE, "GIT_AUTHOR_NAME": "b",
           "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=env)
    return root


def _timed(repo: Path, out: Path, backend: str, cache: Path) -> float:
    start = time.monotonic()
    launch(str(repo), out, backend=backend, cache_dir=cache)
    return time.monotonic() - start


def _layers(out: Path) -> dict[str, dict]:
    return {layer["name"]: layer for layer in json.loads((out / "layers.json").read_text())}


def main() -> None:
    nonce = secrets.token_hex(4)
    work = Path(tempfile.mkdtemp(prefix="swedojo-bench-", dir="/var/tmp"))
    work.chmod(0o755)  # local sandboxes run as another uid and must reach the cache
    cache = work / "cache" / "envs"
    results: dict[str, float] = {}
    made: list[str] = []
    print(f"{'repo':8} {'backend':7} {'cold s':>8} {'warm s':>8} {'runtime s':>10} {'image MB':>9} {'deps MB':>8}")
    try:
        for lang, files in (("python", _python), ("node", _node), ("c", _c)):
            repo = _repo(work / lang, files(nonce))
            cold = _timed(repo, work / f"{lang}-docker-1", "docker", cache)
            layers = _layers(work / f"{lang}-docker-1")
            runtime = layers["runtime"]["seconds"]  # 0 when the runtime layer was cached
            warm = _timed(repo, work / f"{lang}-docker-2", "docker", cache)
            assert all(layer["cached"] for layer in _layers(work / f"{lang}-docker-2").values())
            made += [layers["repo"]["tag"], layers["deps"]["tag"]]
            image_mb, deps_mb = layers["repo"]["size_mb"], layers["deps"]["size_mb"] - layers["runtime"]["size_mb"]
            results |= {f"cold_docker_{lang}_s": cold - runtime, f"warm_docker_{lang}_s": warm,
                        f"{lang}_runtime_s": runtime, f"image_{lang}_mb": image_mb}
            print(f"{lang:8} {'docker':7} {cold - runtime:8.1f} {warm:8.2f} {runtime:10.1f} {image_mb:9.0f} {deps_mb:8.1f}")
            cold = _timed(repo, work / f"{lang}-local-1", "local", cache)
            warm = _timed(repo, work / f"{lang}-local-2", "local", cache)
            results |= {f"cold_local_{lang}_s": cold, f"warm_local_{lang}_s": warm}
            print(f"{lang:8} {'local':7} {cold:8.1f} {warm:8.2f}")
    finally:
        for tag in made:
            try:
                api().remove_image(tag)
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                print(f"could not remove {tag}: {exc}")
        shutil.rmtree(work, ignore_errors=True)
    ok = results["warm_docker_python_s"] < 2 and results["warm_local_python_s"] < 2 \
        and results["cold_docker_python_s"] < 60
    print(f"targets (warm < 2 s, cold pure-Python docker < 60 s): {'met' if ok else 'MISSED'}")
    print("RESULT " + f"cold_docker_s={results['cold_docker_python_s']:.1f} warm_docker_s={results['warm_docker_python_s']:.2f} "
          f"cold_local_s={results['cold_local_python_s']:.1f} warm_local_s={results['warm_local_python_s']:.2f} "
          f"image_mb={results['image_python_mb']:.0f} "
          + " ".join(f"{k}={v:.2f}" if k.startswith("warm") else f"{k}={v:.1f}" for k, v in sorted(results.items())
                     if "python" not in k or k == "python_runtime_s"))


if __name__ == "__main__":
    main()
