"""Tier static of a front-end task: the page files read without a browser.

HTML is parsed with the standard library's `html.parser` (lenient, so the structure is checked
here: unclosed and stray end tags, duplicate attributes and ids), CSS by a small scanner (balanced
braces, `property: value` declarations). Resources must be local files that exist; an image file
(by content) is used once.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from html.parser import HTMLParser
from typing import Any

from swedojo.rewards.web.check import Check, from_groups
from swedojo.sandboxes.base import Sandbox
from swedojo.schema import PageChecks

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
OPTIONAL_END = {"p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot",
                "colgroup", "rt", "rp", "html", "head", "body"}
"""Elements whose end tag HTML lets an author leave out."""
RESOURCE_ATTRS = {("img", "src"), ("script", "src"), ("link", "href"), ("iframe", "src"), ("source", "src"),
                  ("video", "src"), ("video", "poster"), ("audio", "src"), ("embed", "src"), ("object", "data"),
                  ("track", "src"), ("input", "src")}
"""Attributes whose URL the browser loads by itself (a link's `href` is a navigation, not a load)."""
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.IGNORECASE)
_PROPERTY = re.compile(r"^(--[\w-]+|-?[a-z][a-z0-9-]*)$", re.IGNORECASE)


class _Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text: list[str] = []
        self.open = True


class PageParser(HTMLParser):
    """Elements (with their text), structural errors, inline CSS and the URLs the page loads."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[_Element] = []
        self.errors: list[str] = []
        self.styles: list[str] = []
        self.loads: list[tuple[str, str]] = []
        """(tag, url) of every resource the page loads by itself."""
        self._stack: list[_Element] = []
        self._in_style = False

    def _where(self) -> str:
        return f"line {self.getpos()[0]}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = [name for name, _ in attrs]
        if len(set(names)) != len(names):
            self.errors.append(f"{self._where()}: <{tag}> repeats an attribute")
        element = _Element(tag, {name: value or "" for name, value in attrs})
        self.elements.append(element)
        for name, value in element.attrs.items():
            if (tag, name) in RESOURCE_ATTRS and value and not (tag == "link" and "stylesheet" not in element.attrs.get("rel", "")
                                                                and "icon" not in element.attrs.get("rel", "")):
                self.loads.append((tag, value))
            if name == "srcset":
                self.loads += [(tag, part.split()[0]) for part in value.split(",") if part.strip()]
            if name == "style":
                self.styles.append(f"x{{{value}}}")
        if tag not in VOID:
            self._stack.append(element)
        self._in_style = tag == "style"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self._stack and self._stack[-1].tag == tag:
            self._stack.pop()  # <svg/>-style self-closing (foreign content)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False
        if tag in VOID:
            return
        if not any(e.tag == tag for e in self._stack):
            self.errors.append(f"{self._where()}: </{tag}> closes nothing")
            return
        while self._stack:
            element = self._stack.pop()
            if element.tag == tag:
                return
            if element.tag not in OPTIONAL_END:
                self.errors.append(f"{self._where()}: <{element.tag}> is not closed before </{tag}>")

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        for element in self._stack:
            element.text.append(data)

    def finish(self) -> None:
        self.close()
        self.errors += [f"<{e.tag}> is never closed" for e in self._stack if e.tag not in OPTIONAL_END]


def _simple_selector(selector: str) -> list[tuple[str, str, str | None]]:
    """`tag#id.class[attr=value]` as (kind, name, value) parts; no combinators."""
    parts: list[tuple[str, str, str | None]] = []
    for match in re.finditer(r"^([a-zA-Z][\w-]*)|#([\w-]+)|\.([\w-]+)|\[([\w-]+)(?:=[\"']?([^\]\"']*)[\"']?)?\]", selector):
        tag, ident, cls, attr, value = match.groups()
        parts.append(("tag", tag, None) if tag else ("id", ident, None) if ident else ("class", cls, None) if cls
                     else ("attr", attr, value))
    if "".join(m.group(0) for m in re.finditer(r"^[a-zA-Z][\w-]*|#[\w-]+|\.[\w-]+|\[[^\]]*\]", selector)) != selector.strip():
        raise ValueError(f"not a simple selector: {selector!r}")
    return parts


def matches(element: _Element, selector: str) -> bool:
    for kind, name, value in _simple_selector(selector):
        if kind == "tag" and element.tag != name.lower():
            return False
        if kind == "id" and element.attrs.get("id") != name:
            return False
        if kind == "class" and name not in element.attrs.get("class", "").split():
            return False
        if kind == "attr" and (name not in element.attrs or (value is not None and element.attrs[name] != value)):
            return False
    return True


def css_errors(text: str) -> list[str]:
    """Unbalanced braces and declarations that are not `property: value`, with their line."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    text = re.sub(r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", '""', text)
    errors: list[str] = []
    depth = 0
    declarations = ""
    for line_number, line in enumerate(text.splitlines() or [""], 1):
        for char in line:
            if char == "{":
                depth += 1
                declarations = ""
            elif char == "}":
                if depth == 0:
                    errors.append(f"line {line_number}: '}}' closes nothing")
                    continue
                errors += [f"line {line_number}: {d.strip()!r} is not a declaration" for d in _bad_declarations(declarations)]
                depth -= 1
                declarations = ""
            elif depth:
                declarations += char
        declarations += "\n" if depth else ""
    if depth:
        errors.append(f"{depth} '{{' never closed")
    return errors


def _bad_declarations(block: str) -> list[str]:
    bad = []
    for declaration in block.split(";"):
        if not declaration.strip() or "{" in declaration:
            continue
        name, colon, value = declaration.partition(":")
        if not colon or not _PROPERTY.match(name.strip()) or not value.strip():
            bad.append(declaration)
    return bad


def _local(url: str) -> str | None:
    """The path part of a relative URL, or None for data: and fragment URLs."""
    if url.startswith(("data:", "#", "about:", "javascript:")):
        return None
    return url.split("#")[0].split("?")[0]


def static_check(sandbox: Sandbox, checks: PageChecks) -> Check:
    """Parse every page and the stylesheets it links; check the required elements, images' `alt`,
    text content, that nothing is loaded from the network and that image assets exist once each."""
    groups: dict[str, list[str]] = {"html_parses": [], "css_parses": [], "required_elements": [], "image_alt": [],
                                    "text_content": [], "no_network_resources": [], "assets_exist": [],
                                    "no_duplicate_images": []}
    evidence: dict[str, Any] = {"pages": checks.pages, "stylesheets": [], "images": []}
    image_hashes: dict[str, str] = {}
    for page in checks.pages:
        try:
            html = sandbox.read_file(page).decode("utf-8", errors="replace")
        except OSError as exc:
            groups["html_parses"].append(f"{page}: {exc.strerror or exc}")
            continue
        parser = PageParser()
        parser.feed(html)
        parser.finish()
        if not re.match(r"\s*<!doctype html>", html, re.IGNORECASE):
            parser.errors.insert(0, "no <!doctype html>")
        ids = [e.attrs["id"] for e in parser.elements if e.attrs.get("id")]
        parser.errors += [f"id {i!r} used {ids.count(i)} times" for i in sorted(set(ids)) if ids.count(i) > 1]
        groups["html_parses"] += [f"{page}: {e}" for e in parser.errors]
        base = posixpath.dirname(page)
        sheets = [(f"{page} <style>", s) for s in parser.styles]
        loads = list(parser.loads)
        for tag, url in parser.loads:
            path = _local(url)
            if tag == "link" and path and path.endswith(".css") and not _REMOTE.match(url):
                name = posixpath.normpath(posixpath.join(base, path))
                try:
                    sheet = sandbox.read_file(name).decode("utf-8", errors="replace")
                except OSError:
                    continue  # reported as a missing asset below
                evidence["stylesheets"].append(name)
                sheets.append((name, sheet))
                loads += [("css", posixpath.join(posixpath.dirname(path), m.group(2) or m.group(4)))
                          for m in _URL.finditer(sheet)]
        for name, sheet in sheets:
            groups["css_parses"] += [f"{name}: {e}" for e in css_errors(sheet)]
            if name.endswith("<style>"):
                loads += [("css", m.group(2) or m.group(4)) for m in _URL.finditer(sheet)]
        for requirement in checks.static.required:
            found = sum(matches(e, requirement.selector) for e in parser.elements)
            if found < requirement.min or (requirement.max is not None and found > requirement.max):
                bound = f"{requirement.min}" if requirement.max is None else f"{requirement.min}..{requirement.max}"
                groups["required_elements"].append(f"{page}: {requirement.selector}: {found} found, {bound} required")
        for selector, least in checks.static.min_text_chars.items():
            for element in (e for e in parser.elements if matches(e, selector)):
                chars = len(re.sub(r"\s+", " ", "".join(element.text)).strip())
                if chars < least:
                    groups["text_content"].append(f"{page}: a {selector} holds {chars} characters of text, {least} required")
        groups["image_alt"] += [f"{page}: <img src={e.attrs.get('src', '')!r}> has no alt text" for e in parser.elements
                                if e.tag == "img" and not e.attrs.get("alt", "").strip()]
        img_sources = [e.attrs.get("src", "") for e in parser.elements if e.tag == "img"]
        groups["no_duplicate_images"] += [f"{page}: {s!r} shown {img_sources.count(s)} times" for s in sorted(set(img_sources))
                                          if s and img_sources.count(s) > 1]
        for tag, url in loads:
            if _REMOTE.match(url):
                groups["no_network_resources"].append(f"{page}: <{tag}> loads {url}")
                continue
            path = _local(url)
            if path is None:
                continue
            name = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
            try:
                data = sandbox.read_file(name)
            except OSError:
                groups["assets_exist"].append(f"{page}: <{tag}> loads {url}, which does not exist")
                continue
            if tag in ("img", "css") and not name.endswith(".css"):
                digest = hashlib.sha256(data).hexdigest()
                if (other := image_hashes.setdefault(digest, name)) != name:
                    groups["no_duplicate_images"].append(f"{name} and {other} are the same image")
                if name not in evidence["images"]:
                    evidence["images"].append(name)
    return from_groups(groups, evidence)
