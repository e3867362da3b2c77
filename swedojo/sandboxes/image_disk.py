"""Disk use of swedojo's docker images, and `prune_unused`: the layers unused for N days removed.

Last uses come from `image_use` (docker does not record them); an image never stamped counts from
its creation.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker.errors
from pydantic import BaseModel

from swedojo.sandboxes.docker import api
from swedojo.sandboxes.image_use import REPOSITORY_PREFIX, index_path, last_uses, locked

LAYER_REPOSITORIES = ("swedojo/runtime", "swedojo/deps", "swedojo/env")
"""The layers a launch builds (`repolaunch.images`): made again on demand, so `prune_unused` may
remove them. The base and plain Python images (`make docker-up`) are not among them."""


class ImageUse(BaseModel):
    """One swedojo image: its size and when it was last used."""

    tags: list[str]
    """Its swedojo tags."""
    image_id: str
    """Image id."""
    size_mb: float
    """Size with every layer below it."""
    unique_mb: float
    """What removing it alone would free: the layers no other image shares."""
    created: datetime
    """When it was built."""
    last_used: datetime | None
    """The latest use stamped for any of its tags; None: never recorded."""

    @property
    def idle_since(self) -> datetime:
        """Since when it has not been used (its creation when no use was recorded)."""
        return self.last_used or self.created


class DiskUse(BaseModel):
    """What `dojo sandbox images` reports."""

    images: list[ImageUse]
    """swedojo's images, largest first."""
    engine_layers_mb: float
    """Every image layer the engine holds (swedojo's and others'), as `docker system df` counts it."""


def disk_use(index: Path | None = None) -> DiskUse:
    """swedojo's images with their sizes (from the engine's `df`) and last uses (from the index)."""
    df = api().df()
    stamped = last_uses(index)
    images = []
    for info in df.get("Images") or []:
        tags = [t for t in info.get("RepoTags") or [] if t.startswith(REPOSITORY_PREFIX)]
        if not tags:
            continue
        last = max((stamped[t] for t in tags if t in stamped), default=None)
        shared = max(info.get("SharedSize", 0), 0)
        images.append(ImageUse(tags=tags, image_id=info["Id"], size_mb=info["Size"] / 2**20,
                               unique_mb=(info["Size"] - shared) / 2**20,
                               created=datetime.fromtimestamp(info["Created"], UTC), last_used=last))
    images.sort(key=lambda i: i.size_mb, reverse=True)
    return DiskUse(images=images, engine_layers_mb=df.get("LayersSize", 0) / 2**20)


class PruneResult(BaseModel):
    """What `prune_unused` did."""

    removed: list[str]
    """Tags removed."""
    kept: dict[str, str]
    """Tags idle long enough but kept, with why (a container uses it, an image is built on it)."""


def prune_unused(days: float, repositories: tuple[str, ...] = LAYER_REPOSITORIES, index: Path | None = None,
                 now: datetime | None = None) -> PruneResult:
    """Remove the tags of `repositories` idle for `days` days or more (`ImageUse.idle_since`); their
    index entries go too. An image another is built on, or a container uses, stays."""
    index = index or index_path()
    cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
    images = disk_use(index).images
    parents = {i["Id"]: i.get("ParentId", "") for i in api().images(all=True)}
    below: dict[str, str] = {}  # image id -> a tag in use built on it
    for image in images:
        if image.idle_since > cutoff:
            parent = parents.get(image.image_id, "")
            while parent:
                below.setdefault(parent, image.tags[0])
                parent = parents.get(parent, "")
    def depth(image_id: str) -> int:
        count, parent = 0, parents.get(image_id, "")
        while parent:
            count, parent = count + 1, parents.get(parent, "")
        return count

    removed, kept = [], {}
    # an image before the ones it was built on (an env image before its deps layer): by depth, then
    # by age (images built within one second have the same creation time)
    idle = [i for i in images if i.idle_since <= cutoff]
    for image in sorted(idle, key=lambda i: (depth(i.image_id), i.created), reverse=True):
        for tag in (t for t in image.tags if t.rpartition(":")[0] in repositories):
            if image.image_id in below:
                kept[tag] = f"{below[image.image_id]}, in use, is built on it"
                continue
            try:
                api().remove_image(tag)
                removed.append(tag)
            except docker.errors.APIError as exc:
                kept[tag] = str(exc.explanation or exc)
    with locked(index) as uses:
        for tag in removed:
            uses.pop(tag, None)
    return PruneResult(removed=removed, kept=kept)
