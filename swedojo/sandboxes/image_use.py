"""When each swedojo image was last used, which docker does not record.

Every container the docker backend starts, and every layer a launch builds or finds cached,
stamps its tag in a small JSON index (`index_path`); `image_disk.prune_unused` removes the layer
images that no use stamped for N days.
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




def last_uses(index: Path | None = None) -> dict[str, datetime]:
    """Tag -> when it was last used, as stamped."""
    with locked(index or index_path()) as uses:
        return {tag: datetime.fromisoformat(when) for tag, when in uses.items()}
