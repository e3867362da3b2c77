"""Host mounts coming and going, as other local sandboxes make them: each closing sandbox's work
tree is a tmpfs unmounted lazily and then removed."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def churning_work_trees() -> Iterator[None]:
    """While open, a thread mounts four work-tree tmpfs under /tmp, then unmounts and removes
    them, over and over (needs root)."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            trees = [Path(tempfile.mkdtemp(prefix="swedojo-churn-")) / "repo" for _ in range(4)]
            for tree in trees:
                tree.mkdir()
                subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(tree)], check=True)
            for tree in trees:
                subprocess.run(["umount", "--lazy", str(tree)], check=True)
                shutil.rmtree(tree.parent)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        yield
    finally:
        stop.set()
        churner.join()
