"""When each swedojo image was last used, which docker does not record, and which running jobs hold it.

Every container the docker backend starts, and every layer a launch builds or finds cached,
stamps its tag in a small JSON index (`index_path`); `image_disk.prune_unused` removes the layer
images that no use stamped for N days. The same call marks the tag as held by this process
(`holds_dir`, one file per process): a job that used an environment may open another sandbox of it
at any moment, so `image_disk.prune_to_budget` never removes what a live process holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from swedojo.sandboxes.filelock import file_lock

REPOSITORY_PREFIX = "swedojo/"
"""Every image swedojo makes is in a repository under it."""


def index_path() -> Path:
    """`$SWEDOJO_CACHE/image-use.json`, else under ~/.cache/swedojo."""
    root = Path(os.environ["SWEDOJO_CACHE"]) if "SWEDOJO_CACHE" in os.environ else Path.home() / ".cache" / "swedojo"
    return root / "image-use.json"


@contextlib.contextmanager
def locked(index: Path) -> Iterator[dict[str, str]]:
    """The index (tag -> ISO time of last use) under an exclusive lock; what the block leaves in it is written back."""
    with file_lock(index.with_name(index.name + ".lock")):
        try:
            uses = json.loads(index.read_text()) if index.is_file() else {}
        except (OSError, ValueError):
            uses = {}  # a damaged index: the uses start over, images count from their creation
        before = dict(uses)
        yield uses
        if uses != before:
            tmp = index.with_name(f".{index.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(uses, indent=1, sort_keys=True))
            os.replace(tmp, index)


_stamped: set[tuple[Path, str]] = set()
_stamped_lock = threading.Lock()


def record_use(tag: str, index: Path | None = None) -> None:
    """Stamp `tag` as used now (once per process and tag: a run's many containers write once).
    A swedojo tag only; a failure to write is no reason to stop a run."""
    index = index or index_path()
    if not tag.startswith(REPOSITORY_PREFIX):
        return
    with _stamped_lock:
        if (index, tag) in _stamped:
            return
        _stamped.add((index, tag))
    with contextlib.suppress(OSError), locked(index) as uses:
        uses[tag] = datetime.now(UTC).isoformat()
    with contextlib.suppress(OSError), _stamped_lock:
        held = sorted(t for i, t in _stamped if i == index)
        mine = holds_dir(index) / f"{_process_key(os.getpid())}.json"
        mine.parent.mkdir(parents=True, exist_ok=True)
        tmp = mine.with_suffix(".tmp")
        tmp.write_text(json.dumps(held))
        os.replace(tmp, mine)


def holds_dir(index: Path | None = None) -> Path:
    """Beside the index: `<pid>-<start time>.json`, the tags each process has used."""
    return (index or index_path()).with_name("image-holds")


def _process_key(pid: int) -> str | None:
    """`pid-starttime`, which a reused pid does not repeat; None for a process that is gone."""
    try:
        return f"{pid}-{Path(f'/proc/{pid}/stat').read_text().rpartition(')')[2].split()[19]}"
    except (OSError, IndexError):
        return None


def held_tags(index: Path | None = None) -> dict[str, int]:
    """Tag -> a live process that holds it. A gone process's file is removed."""
    held: dict[str, int] = {}
    folder = holds_dir(index)
    for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        pid = int(file.stem.split("-")[0]) if file.stem.split("-")[0].isdigit() else -1
        if _process_key(pid) != file.stem:
            with contextlib.suppress(OSError):
                file.unlink()
            continue
        with contextlib.suppress(OSError, ValueError):
            held.update({tag: pid for tag in json.loads(file.read_text())})
    return held




def last_uses(index: Path | None = None) -> dict[str, datetime]:
    """Tag -> when it was last used, as stamped."""
    with locked(index or index_path()) as uses:
        return {tag: datetime.fromisoformat(when) for tag, when in uses.items()}
