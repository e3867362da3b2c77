"""Chromium inside a sandbox, driven from the host by playwright over a pipe.

Playwright starts the browser with `--remote-debugging-pipe`, speaking CDP on descriptors 3 and 4.
Its `executable_path` is a launcher the sandbox writes (`Launches.launcher`): a host script that
starts Debian's chromium under the sandbox's own confinement, so the browser runs inside the
sandbox (locally: bubblewrap's namespaces with no network, the seccomp filter, the sandbox's uid,
rlimits and cgroup) and only the two pipes cross. No port is opened, not even on the sandbox's
loopback, so nothing else in the sandbox can reach the browser; and nothing of the harness
(Python, playwright) has to exist inside it: the measuring scripts run in the page.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from swedojo.sandboxes.base import Sandbox, SandboxError

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium, where the sandbox has it (the host's for the local backend)."""
CHROMIUM_ARGS = [
    "--no-sandbox",  # its own sandbox needs user namespaces the sandbox's seccomp filter refuses; the sandbox confines it
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--force-color-profile=srgb",
    "--font-render-hinting=none",
]
"""Flags Chromium needs with no network, no GPU and a small /dev/shm, and for pixels that reproduce."""
LAUNCH_TIMEOUT_MS = 60_000


class BrowserUnavailableError(SandboxError):
    """No browser could be started in the sandbox: an infrastructure failure, never the candidate's."""


@runtime_checkable
class Launches(Protocol):
    """A sandbox that can start a program inside itself for a host process (the browser)."""

    def launcher(self, command: list[str], name: str) -> Path:
        """A host executable running `command` (its arguments appended) in the sandbox, descriptors kept."""
        ...


@contextlib.contextmanager
def sandbox_browser(sandbox: Sandbox) -> Iterator[Browser]:
    """A headless Chromium running inside `sandbox`, closed on exit; keep it open to keep it warm."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    if not isinstance(sandbox, Launches):
        raise BrowserUnavailableError(f"{type(sandbox).__name__} cannot start a browser inside itself")
    executable = sandbox.launcher([CHROMIUM], "chromium")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=str(executable), headless=True, args=CHROMIUM_ARGS,
                                                 timeout=LAUNCH_TIMEOUT_MS)
        except PlaywrightError as exc:
            raise BrowserUnavailableError(f"chromium did not start in the sandbox: {str(exc).splitlines()[0]}") from exc
        try:
            yield browser
        finally:
            with contextlib.suppress(PlaywrightError):
                browser.close()
