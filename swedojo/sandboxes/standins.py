"""Local stand-ins for the public services test suites call, served inside a docker sandbox.

HTTP client suites send their requests to httpbin.org; a sandbox has no network, so such tests
fail for every patch, the reference included, and a task whose fix is tested that way cannot be
scored at all. A stand-in is the service's own code (httpbin, from PyPI), installed once per image
into a docker volume by a container of that image (so its interpreter is the image's own),
mounted read-only in the sandbox, with the service's host names resolved to loopback where the
stand-in listens. Grading asks for stand-ins only after a run failed for want of the network
(`SandboxConfig.standins`), and runs the tests again.
"""

from __future__ import annotations

import hashlib
import shlex

from swedojo.repos import cache_root
from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.sandboxes.filelock import file_lock

MOUNT = "/opt/swedojo/standins"
"""Where the stand-ins' volume is mounted in a sandbox."""
REQUIREMENTS = ("httpbin==0.10.4",)
"""What the volume holds (pinned: the same stand-in for every run)."""
HOSTS = ("httpbin.org", "www.httpbin.org")
"""Host names that resolve to the stand-in (loopback) in a sandbox that has them."""
PORT = 80
_SERVE = (f"from httpbin import app; app.run(host='127.0.0.1', port={PORT}, threaded=True)")
_BUILD = (f"set -e; /usr/bin/python3 -m venv {MOUNT}; "
          f"{MOUNT}/bin/python -m pip install -q --no-cache-dir --disable-pip-version-check "
          f"{' '.join(shlex.quote(r) for r in REQUIREMENTS)}; touch {MOUNT}/.complete")
_WAIT = (f"import socket, time\nfor _ in range(60):\n    try:\n        socket.create_connection(('127.0.0.1', {PORT}), 1).close()\n"
         "        break\n    except OSError:\n        time.sleep(0.25)\nelse:\n    raise SystemExit('the stand-in did not start')")


class StandinError(SandboxError):
    """The stand-ins could not be installed or started."""


def volume_for(image: str) -> str:
    """The docker volume holding the stand-ins for `image`, built on first use (needs PyPI)."""
    import docker

    from swedojo.sandboxes.docker import api

    client = api()
    image_id = client.inspect_image(image)["Id"]
    name = "swedojo-standins-" + hashlib.sha256(f"{image_id}\0{REQUIREMENTS}".encode()).hexdigest()[:16]
    markers = cache_root() / "standins"
    with file_lock(markers / f"{name}.lock"):
        if (markers / name).is_file():
            try:
                client.inspect_volume(name)
                return name
            except docker.errors.NotFound:
                pass  # pruned since: made again
        try:
            client.remove_volume(name, force=True)  # half-built by a run that died
        except docker.errors.NotFound:
            pass
        container = client.create_container(
            image, command=["sh", "-c", _BUILD], user="0:0", working_dir="/",
            host_config=client.create_host_config(binds={name: {"bind": MOUNT, "mode": "rw"}}, network_mode="bridge"))
        try:
            client.start(container)
            code = client.wait(container, timeout=600)["StatusCode"]
            output = client.logs(container).decode(errors="replace").strip()
        except docker.errors.DockerException as exc:
            raise StandinError(f"stand-ins for {image}: {exc}") from exc
        finally:
            client.remove_container(container, force=True)
        if code != 0:
            raise StandinError(f"stand-ins for {image}: installing {', '.join(REQUIREMENTS)} exited {code}: "
                               f"{' | '.join(output.splitlines()[-3:])}")
        (markers / name).touch()
        return name


def serve(sandbox: Sandbox) -> None:
    """Start the stand-ins in `sandbox` (made with `standins`) and wait until they answer."""
    python = f"{MOUNT}/bin/python"
    start = (f"[ -f {MOUNT}/.complete ] || {{ echo 'no stand-ins in {MOUNT}'; exit 1; }}; "
             f"(cd / && nohup {python} -I -c {shlex.quote(_SERVE)} >/tmp/.swedojo-standin.log 2>&1 &); "
             f"{python} -I -c {shlex.quote(_WAIT)} || {{ tail -n 5 /tmp/.swedojo-standin.log; exit 1; }}")
    result = sandbox.exec(start, timeout=60)
    if not result.ok:
        raise StandinError(f"the stand-ins did not start: {' | '.join(result.output.strip().splitlines()[-3:])}")
