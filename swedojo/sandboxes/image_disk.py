"""Disk use of swedojo's docker images, per image and per repository, and two prunes of the layers:
`prune_unused` (unused for N days) and `prune_to_budget` (least recently used first until the
engine's image layers fit a budget; `$SWEDOJO_DISK_BUDGET_GB` has every launch that builds a layer
apply it).

Last uses come from `image_use` (docker does not record them); an image never stamped counts from
its creation. What a live process holds (`image_use.held_tags`) is never removed by the budget.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker.errors
from pydantic import BaseModel

from swedojo.errors import BadInputError
from swedojo.sandboxes.docker import api
from swedojo.sandboxes.image_use import (
    REPOSITORY_PREFIX,
    held_tags,
    index_path,
    last_uses,
    locked,
)

BUDGET_VAR = "SWEDOJO_DISK_BUDGET_GB"
"""Where set, a launch that builds a layer prunes to this many GB of image layers afterwards."""
ENV_REPOSITORY = "swedojo/env"
LAYER_REPOSITORIES = ("swedojo/runtime", "swedojo/deps", ENV_REPOSITORY)
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


def prune_to_budget(budget_mb: float, repositories: tuple[str, ...] = LAYER_REPOSITORIES,
                    index: Path | None = None) -> PruneResult:
    """Remove tags of `repositories`, least recently used first, until the engine's image layers
    (`DiskUse.engine_layers_mb`) fit `budget_mb`. Only an image nothing is built on can go (its
    parent may go next); one a live process holds (`image_use.held_tags`) or a container uses stays.
    Stops when the layers fit or nothing more may go."""
    index = index or index_path()
    removed: list[str] = []
    kept: dict[str, str] = {}
    while True:
        use = disk_use(index)
        if use.engine_layers_mb <= budget_mb:
            break
        held = held_tags(index)
        listing = api().images(all=True)
        has_child = {i.get("ParentId", "") for i in listing}
        candidates = [(image, tag) for image in sorted(use.images, key=lambda i: i.idle_since)
                      if image.image_id not in has_child
                      for tag in image.tags if tag.rpartition(":")[0] in repositories and tag not in kept]
        for image, tag in candidates:
            if tag in held:
                kept[tag] = f"held by process {held[tag]}"
                continue
            try:
                api().remove_image(tag)
            except docker.errors.APIError as exc:
                kept[tag] = str(exc.explanation or exc)
                continue
            removed.append(tag)
            break
        else:
            break  # nothing more may go
    with locked(index) as uses:
        for tag in removed:
            uses.pop(tag, None)
    return PruneResult(removed=removed, kept=kept)


def budget_mb() -> float | None:
    """`$SWEDOJO_DISK_BUDGET_GB` in MB; None where unset. A value that is not a number is an error."""
    value = os.environ.get(BUDGET_VAR, "").strip()
    if not value:
        return None
    try:
        return float(value) * 1024
    except ValueError:
        raise BadInputError(f"${BUDGET_VAR}={value!r} is not a number of GB") from None


class RepositoryUse(BaseModel):
    """The environments of one repository and what they take on disk."""

    repository: str
    """The name in the environments' tags (`swedojo/env:<name>-<commit>-<hash>`)."""
    environments: int
    """Its environment images (one per commit and spec)."""
    environments_mb: float
    """What its environment images take beyond the layers below them (the sum of their unique sizes)."""
    dependency_layers: list[str]
    """The dependency-layer tags its environments are built on (shared between its commits where the
    dependency files did not change)."""
    dependency_mb: float
    """What those dependency layers add over their runtime."""


def by_repository(use: DiskUse) -> list[RepositoryUse]:
    """The environment images of `use` grouped by repository, largest first."""
    parents = {i["Id"]: i.get("ParentId", "") for i in api().images(all=True)}
    tags_of = {image.image_id: image for image in use.images}
    groups: dict[str, list[ImageUse]] = defaultdict(list)
    for image in use.images:
        for tag in image.tags:
            if tag.rpartition(":")[0] == ENV_REPOSITORY:
                groups[tag.rpartition(":")[2].rsplit("-", 2)[0]].append(image)
                break
    report = []
    for name, envs in groups.items():
        deps: dict[str, ImageUse] = {}
        for env in envs:
            parent = parents.get(env.image_id, "")
            while parent and parent not in tags_of:
                parent = parents.get(parent, "")
            if parent in tags_of:
                deps[parent] = tags_of[parent]
        report.append(RepositoryUse(
            repository=name, environments=len(envs), environments_mb=round(sum(e.unique_mb for e in envs), 1),
            dependency_layers=sorted(t for d in deps.values() for t in d.tags),
            dependency_mb=round(sum(d.size_mb - _runtime_mb(d, parents, tags_of) for d in deps.values()), 1)))
    return sorted(report, key=lambda r: r.environments_mb + r.dependency_mb, reverse=True)


def _runtime_mb(image: ImageUse, parents: dict[str, str], tags_of: dict[str, ImageUse]) -> float:
    """The size of the nearest tagged image under `image` (0 where none)."""
    parent = parents.get(image.image_id, "")
    while parent and parent not in tags_of:
        parent = parents.get(parent, "")
    return tags_of[parent].size_mb if parent in tags_of else 0.0
