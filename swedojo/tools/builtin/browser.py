"""`browser`: the agent's own look at its pages, in Chromium running inside its sandbox.

The browser is started on the first call through the sandbox's launcher (`sandboxes.browser`) and
kept for the run (`ToolContext.resources`), with one page open at a time. Screenshots are saved as
files next to the trajectory and named in the observation (`ToolResult.files`).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from swedojo.sandboxes.base import Sandbox, SandboxError
from swedojo.sandboxes.browser import sandbox_browser
from swedojo.tools.base import Tool, ToolContext, ToolParams, ToolResult, error

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ACTION_TIMEOUT_MS = 3_000
LOAD_TIMEOUT_MS = 15_000
MAX_ELEMENTS = 20
"""Elements a query describes (the count is always given)."""
MAX_TEXT = 200
"""Characters of an element's text a query shows."""
_DESCRIBE = """(elements, limit) => elements.slice(0, limit).map(e => {
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), text: (e.innerText ?? e.textContent ?? '').trim(),
          value: 'value' in e ? String(e.value) : undefined,
          attributes: Object.fromEntries([...e.attributes].map(a => [a.name, a.value])),
          box: {x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height)},
          visible: r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'};
})"""
"""Runs in the page: what a query reports of each element."""


class BrowserParams(ToolParams):
    action: Literal["open", "screenshot", "query", "click", "type"]
    """open: load a page of the work tree; screenshot: save an image of the open page; query: describe the
    elements a CSS selector matches (text, attributes, box); click: click the first match; type: type text into it."""
    path: str = ""
    """open: the page, relative to the work tree (e.g. `index.html`)."""
    selector: str = ""
    """query, click, type: a CSS selector."""
    text: str = ""
    """type: the text to type, key by key."""
    width: int = Field(default=1280, ge=200, le=3840)
    """open: the viewport's width in CSS pixels."""
    height: int = Field(default=720, ge=200, le=2160)
    """open: the viewport's height in CSS pixels."""
    full_page: bool = False
    """screenshot: the whole page rather than the viewport."""

    @model_validator(mode="after")
    def _needed(self) -> BrowserParams:
        if self.action == "open" and not self.path:
            raise ValueError("action 'open' needs 'path'")
        if self.action in ("query", "click", "type") and not self.selector:
            raise ValueError(f"action {self.action!r} needs 'selector'")
        if self.action == "type" and not self.text:
            raise ValueError("action 'type' needs 'text'")
        return self


class _Session:
    """The run's browser, its open page and what the page reported since the last call."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.page: Page | None = None
        self.errors: list[str] = []
        self.shots = 0

    def open(self, url: str, width: int, height: int) -> Page:
        if self.page is not None:
            self.page.context.close()
        page = self.browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1).new_page()
        page.set_default_timeout(ACTION_TIMEOUT_MS)
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "assert") else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url} ({r.failure})"))
        self.page = page
        page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
        return page

    def reported(self) -> list[str]:
        said, self.errors = self.errors, []
        return said


class BrowserTool(Tool[BrowserParams]):
    """Look at the pages of the work tree in a real browser (headless Chromium, no network): open a page,
    take a screenshot, query the DOM with a CSS selector, click, type. The page stays open between calls."""

    name = "browser"
    returns = ("What the action did: the page's title and size, each matched element's text, attributes and box, "
               "or where the screenshot was saved; then the console errors the page reported since the last call.")
    params = BrowserParams

    def run(self, sandbox: Sandbox, params: BrowserParams, ctx: ToolContext) -> ToolResult:
        from playwright.sync_api import Error as PlaywrightError

        session = ctx.state.get(self.name)
        if session is None:
            try:
                session = ctx.state[self.name] = _Session(ctx.resources.enter_context(sandbox_browser(sandbox)))
            except SandboxError as exc:
                return error(f"No browser could be started: {exc}")
        if params.action != "open" and session.page is None:
            return error("No page is open: call the browser with action 'open' and a path first.")
        try:
            result = self._act(sandbox, params, ctx, session)
        except PlaywrightError as exc:
            result = error(f"{params.action} failed: {str(exc).splitlines()[0]}")
        errors = session.reported()
        if errors:
            result.output += "\nThe page reported:\n" + "\n".join(f"- {e}" for e in errors[:MAX_ELEMENTS])
        return result

    def _act(self, sandbox: Sandbox, params: BrowserParams, ctx: ToolContext, session: _Session) -> ToolResult:
        if params.action == "open":
            page_path = PurePosixPath(params.path)
            if page_path.is_absolute() or ".." in page_path.parts:
                return error(f"{params.path!r}: give a path inside the work tree, relative to it")
            page = session.open(Path(sandbox.workdir, page_path).as_uri(), params.width, params.height)
            size = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            return ToolResult(output=f"Opened {params.path} at {params.width}x{params.height}: title {page.title()!r}, "
                                     f"page size {size[0]}x{size[1]}.")
        page = session.page
        assert page is not None
        if params.action == "screenshot":
            if ctx.files_dir is None:
                return error("This run keeps no files, so no screenshot can be saved; use query to read the page.")
            session.shots += 1
            ctx.files_dir.mkdir(parents=True, exist_ok=True)
            png = ctx.files_dir / f"screenshot-{session.shots:03d}.png"
            page.screenshot(path=str(png), full_page=params.full_page)
            name = f"{ctx.files_dir.name}/{png.name}"
            return ToolResult(output=f"Screenshot of {'the whole page' if params.full_page else 'the viewport'} "
                                     f"saved as {name}.", files=[name], images=[str(png)])
        if params.action == "query":
            found = page.locator(params.selector)
            count = found.count()
            described: list[dict[str, Any]] = found.evaluate_all(_DESCRIBE, MAX_ELEMENTS)
            lines = [f"{count} element(s) match {params.selector!r}" + (f"; the first {MAX_ELEMENTS}:" if count > MAX_ELEMENTS else ":" if count else ".")]
            for number, element in enumerate(described, 1):
                text = element["text"] if len(element["text"]) <= MAX_TEXT else element["text"][:MAX_TEXT] + "…"
                element["text"] = text
                lines.append(f"{number}. {json.dumps({k: v for k, v in element.items() if v is not None}, ensure_ascii=False)}")
            return ToolResult(output="\n".join(lines))
        target = page.locator(params.selector).first
        if params.action == "click":
            target.click()
            return ToolResult(output=f"Clicked {params.selector!r}.")
        target.press_sequentially(params.text)
        return ToolResult(output=f"Typed {len(params.text)} character(s) into {params.selector!r}.")
