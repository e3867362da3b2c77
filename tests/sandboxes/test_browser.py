"""Chromium inside a sandbox, driven from the host by playwright over the launcher's pipes: it reads the
work tree, runs as the sandbox user inside the sandbox's confinement, and reaches no network. On
docker, in the browser image built from the sandbox's image on first use."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, DOCKER_IMAGE, make_repo

from swedojo.sandboxes.base import SandboxConfig
from swedojo.sandboxes.browser import CHROMIUM, sandbox_browser
from swedojo.sandboxes.registry import backend
from swedojo.schema import EnvSpec

pytestmark = pytest.mark.slow

PAGE = """<!doctype html><html><body><h1 id="hello">Hello from the work tree</h1>
<script>
fetch("http://example.com/").then(() => { document.title = "reached"; }, () => { document.title = "no network"; });
</script></body></html>
"""


@pytest.mark.parametrize("name", BACKENDS)
def test_the_browser_runs_inside_the_sandbox_without_network(name, tmp_path):
    spec = backend(name).with_browser(EnvSpec(repo="t/page", commit="HEAD", backend=name, image=DOCKER_IMAGE))
    repo = make_repo(tmp_path / "repo", {"index.html": PAGE})
    sandbox = backend(name).create(image=spec.image, source=repo, commit="HEAD", config=SandboxConfig(), workdir="/testbed")
    with sandbox, sandbox_browser(sandbox) as browser:
        page = browser.new_page()
        page.goto(Path(sandbox.workdir, "index.html").as_uri())
        page.wait_for_function("document.title !== ''")
        assert page.inner_text("#hello") == "Hello from the work tree"
        assert page.title() == "no network"


@pytest.mark.docker
def test_the_docker_browser_image_is_built_once_from_the_sandbox_image():
    from swedojo.sandboxes.browser_image import browser_tag, ensure_browser_image
    from swedojo.sandboxes.docker import DockerSandbox

    tag = ensure_browser_image(DOCKER_IMAGE)
    assert tag == browser_tag(DOCKER_IMAGE) == ensure_browser_image(DOCKER_IMAGE)
    with DockerSandbox(tag) as sandbox:
        assert sandbox.exec(f"test -x {CHROMIUM} && python3 -c 'print(1)'").ok  # the parent's Python kept
        assert "DejaVu Sans" in sandbox.exec("fc-list").output
        with sandbox_browser(sandbox):  # seen from the sandbox's own shell: the browser is in the container, as its user
            owners = sandbox.exec("ps -o uid= -C chromium | sort -u").output.split()
        assert owners == [sandbox.exec("id -u").output.strip()] == ["1000"], owners
    with DockerSandbox(DOCKER_IMAGE) as plain:
        assert not plain.exec(f"test -e {CHROMIUM}").ok
