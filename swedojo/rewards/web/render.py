"""Tier runtime of a front-end task: each page rendered at each viewport in Chromium inside the
grading sandbox, measured by `measure.js` in the page, and the task's scripted interactions played.

The measuring scripts run in an isolated world of the page's frame (CDP `Page.createIsolatedWorld`,
as extensions' content scripts do): they share the DOM but not its JavaScript globals, so a page
that redefines a built-in (`Array.prototype.push`, `getComputedStyle`) cannot change what they find.

Full-page screenshots are taken at the same time and kept for tier visual (`visual.py`), with the
text boxes `measure.js` found, so that tier reads the very layout this one judged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swedojo.rewards.web.check import Check, from_groups
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import PageChecks, Scenario, Viewport

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

_HERE = Path(__file__).resolve().parent
MEASURE = (_HERE / "measure.js").read_text(encoding="utf-8")
EXPECT = (_HERE / "expect.js").read_text(encoding="utf-8")
ACTION_TIMEOUT_MS = 3_000
LOAD_TIMEOUT_MS = 15_000


@dataclass
class Shot:
    """One page at one viewport: where its screenshot is and the boxes measured on it."""

    page: str
    viewport: Viewport
    png: Path
    frames: list[dict[str, Any]]
    """Frame boxes in page pixels (the whole page when the task has no frames)."""
    texts: list[dict[str, Any]]
    """Every visible text: its element, boxes in page pixels, font size and weight."""
    framed: bool


@dataclass
class Rendering:
    """What tier runtime found, and the screenshots tier visual measures."""

    runtime: Check
    shots: list[Shot] = field(default_factory=list)


def _open(browser: Browser, url: str, viewport: Viewport) -> tuple[Page, list[str]]:
    """A fresh page (own context) at `url`, with every console error, page error and failed request collected."""
    context = browser.new_context(viewport={"width": viewport.width, "height": viewport.height}, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
    page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
    page.evaluate("document.fonts.ready.then(() => true)")
    return page, errors


def _measure(page: Page, script: str, argument: Any) -> Any:
    """`script` (a function expression) called with `argument` in a world of its own in the page's
    main frame, its result by value. A fresh world each time: nothing a step of the page did to the
    previous one's globals carries over."""
    from playwright.sync_api import Error as PlaywrightError

    cdp = page.context.new_cdp_session(page)
    try:
        frame = cdp.send("Page.getFrameTree")["frameTree"]["frame"]["id"]
        world = cdp.send("Page.createIsolatedWorld", {"frameId": frame, "worldName": "swedojo-measure"})
        found = cdp.send("Runtime.evaluate", {"expression": f"({script})({json.dumps(argument)})",
                                              "contextId": world["executionContextId"], "returnByValue": True,
                                              "awaitPromise": True})
    finally:
        cdp.detach()
    if "exceptionDetails" in found:
        details = found["exceptionDetails"]
        raise PlaywrightError(f"the measuring script threw: {details.get('exception', {}).get('description') or details['text']}")
    return found["result"].get("value")


def _play(page: Page, scenario: Scenario) -> list[str]:
    """Do the scenario's steps, then test its expectations: what went wrong, in words."""
    from playwright.sync_api import Error as PlaywrightError

    for number, step in enumerate(scenario.steps, 1):
        try:
            if step.do == "click":
                page.click(step.selector)
            elif step.do == "fill":
                page.fill(step.selector, step.value)
            elif step.do == "type":
                page.locator(step.selector).first.press_sequentially(step.value)
            elif step.do == "press":
                page.press(step.selector, step.value)
            elif step.do == "drag":
                page.drag_and_drop(step.selector, step.value)
            elif step.do == "check":
                page.check(step.selector)
            else:
                page.select_option(step.selector, step.value)
        except PlaywrightError as exc:
            return [f"step {number} ({step.do} {step.selector}): {str(exc).splitlines()[0]}"]
    failures: list[str] = []
    for expectation in scenario.expect:
        found = _measure(page, EXPECT, expectation.model_dump())
        failures += [f"{expectation.selector}: {f}" for f in found]
    return failures


def render(browser: Browser, sandbox: Sandbox, checks: PageChecks, shots_dir: Path) -> Rendering:
    """Tier runtime for every page at every viewport, and the screenshots (into `shots_dir`)."""
    from playwright.sync_api import Error as PlaywrightError

    runtime = checks.runtime
    options = {"frames": runtime.frames, "aspect": runtime.aspect_ratio, "min_font": runtime.min_font_px,
               "may_hide": runtime.may_hide, "gaps": runtime.min_gap_px, "max_image_area": runtime.max_image_area}
    groups: dict[str, list[str]] = {name: [] for name in (
        "no_console_errors", "no_horizontal_scroll", "content_fits", "text_visible", "text_on_screen",
        "text_not_clipped", "font_size", "spacing", "images")}
    if runtime.frames:
        groups["frames"] = []
    shots: list[Shot] = []
    measured: dict[str, Any] = {}
    shots_dir.mkdir(parents=True, exist_ok=True)
    for page_name in checks.pages:
        url = Path(sandbox.workdir, page_name).as_uri()
        for viewport in runtime.viewports:
            key = f"{page_name}@{viewport.width}x{viewport.height}"
            try:
                page, errors = _open(browser, url, viewport)
                found = _measure(page, MEASURE, options)
                png = shots_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:8]}-{Path(page_name).stem}-{viewport.width}x{viewport.height}.png"
                page.screenshot(path=str(png), full_page=True)
                page.context.close()
            except PlaywrightError as exc:
                groups["no_console_errors"].append(f"{key}: the page did not load: {str(exc).splitlines()[0]}")
                continue
            groups["no_console_errors"] += [f"{key}: {e}" for e in errors]
            for violation in found["violations"]:
                groups[violation["group"]].append(f"{key}: {violation['where']}: {violation['detail']}")
            measured[key] = {"document": found["doc"], "frames": len(found["frames"]), "texts": len(found["texts"]),
                             "screenshot": str(png)}
            shots.append(Shot(page_name, viewport, png, found["frames"], found["texts"], bool(runtime.frames)))
    for scenario in runtime.scenarios:
        name = f"scenario: {scenario.name}"
        viewport = scenario.viewport or runtime.viewports[0]
        try:
            page, errors = _open(browser, Path(sandbox.workdir, scenario.page or checks.pages[0]).as_uri(), viewport)
            failures = _play(page, scenario)
            page.context.close()
        except PlaywrightError as exc:
            failures, errors = [f"the page did not load: {str(exc).splitlines()[0]}"], []
        groups[name] = failures + errors
    return Rendering(from_groups(groups, {"rendered": measured}), shots)
