"""pip's date bound dropped where the index gives no upload times: a local index (PyPI's wheels,
downloaded in the test, served as plain directory listings, as a mirror without the JSON API
would) cannot answer `--uploaded-prior-to`; the launch installs again without the bound and
records it. npm's counterpart is in test_repolaunch_js (a project older than its runner)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from launch_helpers import DATE

from swedojo.repolaunch.launch import launch
from swedojo.schema import TestStatus


@pytest.fixture
def index_without_upload_times(tmp_path: Path) -> Iterator[str]:
    """A simple index at http://127.0.0.1:PORT/simple/ holding pytest, iniconfig, pip and their needs."""
    wheels = tmp_path / "wheels"
    for version in ("3.9", "3.12"):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version",
                        version, "-d", str(wheels), "pytest", "iniconfig", "pip"], check=True, timeout=300)
    for wheel in wheels.glob("*.whl"):
        project = tmp_path / "index" / "simple" / wheel.name.split("-")[0].lower().replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        wheel.rename(project / wheel.name)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(tmp_path / "index")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/simple/"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_an_index_without_upload_times_drops_the_date_bound(make_repo, tmp_path: Path, env_cache: Path,
                                                            index_without_upload_times: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", index_without_upload_times)
    repo = make_repo("plain", {"requirements.txt": "iniconfig\n",
                               "test_x.py": "import iniconfig\n\n\ndef test_ok():\n    assert iniconfig\n"}, DATE)
    spec = launch(str(repo), tmp_path / "out", backend="local", cache_dir=env_cache / "envs")
    assert spec.test_status == {"test_x.py::test_ok": TestStatus.PASSED}
    assert spec.resolution_date == "" and not any("--uploaded-prior-to" in c for c in spec.install_commands)
    assert len(spec.pins_dropped) == 1 and "does not provide upload-time metadata" in spec.pins_dropped[0]
    assert spec.pins_dropped[0].startswith(f"requirements: {DATE}: ")
    assert "the date bound is dropped" in (tmp_path / "out" / "build.log").read_text()
