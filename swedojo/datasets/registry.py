"""Named suites: `dojo eval --suite NAME` resolves here; anything else is taken as a file path."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from pydantic import BaseModel

from swedojo.datasets.io import LoadedSuite, load_suite_file


class Suite(BaseModel):
    """A loaded suite and where its repositories live."""

    name: str
    """Registry name or file path."""
    loaded: LoadedSuite
    """Instances and record errors."""
    mirror: Path | None = None
    """Directory holding the repos as `owner/name` (None: repos are URLs or paths)."""


def _demo() -> Suite:
    from swedojo.datasets.demo import load_demo_tasks, materialise_demo

    return Suite(name="demo", loaded=LoadedSuite(instances=load_demo_tasks()), mirror=materialise_demo())


def _web_demo() -> Suite:
    from swedojo.datasets.demo import WEB_DEMO, load_demo_tasks, materialise_demo

    return Suite(name="web-demo", loaded=LoadedSuite(instances=load_demo_tasks(WEB_DEMO)),
                 mirror=materialise_demo(bundle=WEB_DEMO))


SUITES: dict[str, Callable[[], Suite]] = {"demo": _demo, "web-demo": _web_demo}


def load_suite(name_or_path: str, mirror: Path | None = None) -> Suite:
    """Load a registered suite by name, or a suite file by path; `mirror` overrides where repos live.

    Without `mirror`, a `repos/` directory next to a suite file is where its repos are.
    """
    if name_or_path in SUITES:
        suite = SUITES[name_or_path]()
        return suite if mirror is None else suite.model_copy(update={"mirror": mirror})
    path = Path(name_or_path)
    if mirror is None and (path.parent / "repos").is_dir():
        mirror = path.parent / "repos"  # `dojo gen --out DIR` writes DIR/suite.jsonl next to DIR/repos
    return Suite(name=name_or_path, loaded=load_suite_file(path), mirror=mirror)
