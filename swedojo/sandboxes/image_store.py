"""Environments shared between machines through a directory they all mount: a layer store.

A Ray cluster's nodes each have their own Docker Engine; a node that needs an environment another
node built should get it without building it again. Where `$SWEDOJO_IMAGE_STORE` names a directory
every node mounts at the same place (the shared filesystem a cluster run needs anyway), each layer
image a launch builds is saved there, and a launch that lacks a layer image loads it from there
before building it.

Why a directory and not a registry: a registry needs a server running somewhere, TLS or every
engine's `insecure-registries` set for it, and its address in every node's settings; the shared
directory is already there and needs nothing. It keeps what a registry would: each layer once.
`docker save` writes an image's whole chain of layers; the store keeps each layer's tar once under
its content's digest (`blobs/<sha256>`), and per tag only the small files that name them
(`images/<tag>.json`), so the ten environments of one repository store their shared runtime and
dependency layers once (`SaveResult.new_bytes` says what a save added). Writes are atomic
(a temporary name, then a rename), so two nodes saving the same layer at once only duplicate work.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from swedojo.sandboxes.base import SandboxError
from swedojo.sandboxes.docker import api

STORE_VAR = "SWEDOJO_IMAGE_STORE"
"""The shared directory; unset: environments are not shared."""


def store_dir() -> Path | None:
    """`$SWEDOJO_IMAGE_STORE`, or None."""
    value = os.environ.get(STORE_VAR, "").strip()
    return Path(value) if value else None


class _Layer(BaseModel):
    """One layer of a saved image, as `docker save` names it."""

    dir: str
    """Its directory in the saved tar (a v1 id)."""
    version: str
    """The directory's VERSION file."""
    json_text: str
    """The directory's `json` file."""
    blob: str
    """The digest of its `layer.tar` in `blobs/`."""


class _Record(BaseModel):
    """`images/<tag>.json`: what loads the tag back."""

    tag: str
    """The image's tag."""
    config_name: str
    """The config's file name in the saved tar (`<image id>.json`)."""
    config: str
    """The image's config."""
    layers: list[_Layer]
    """In the order of the saved manifest (the base first)."""


class SaveResult(BaseModel):
    """What a save added to the store."""

    tag: str
    """The image saved."""
    layers: int
    """Its layers."""
    new_layers: int
    """Of them, those the store did not hold yet."""
    new_bytes: int
    """The bytes they added."""


def _record_path(store: Path, tag: str) -> Path:
    return store / "images" / f"{tag.replace('/', '__').replace(':', '@')}.json"


def has(tag: str, store: Path) -> bool:
    """Whether the store holds `tag`."""
    return _record_path(store, tag).is_file()


class ImageStoreError(SandboxError):
    """The engine refused to load an image from the store."""


class _Chunks(io.RawIOBase):
    """The engine's stream of chunks as a raw file, for `tarfile`'s stream mode (without copying
    what is left of a chunk at every read)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._pending = chunks, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _put_blob(data: IO[bytes], store: Path) -> tuple[str, int]:
    """Copy a layer's tar into a local temporary file while hashing it, then into `blobs/` unless the
    store holds it: the shared directory only ever receives new bytes. Returns (digest, bytes added)."""
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(prefix="swedojo-layer-", delete=False) as tmp:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
            tmp.write(chunk)
    name = digest.hexdigest()
    target = store / "blobs" / name
    try:
        if target.is_file():
            return name, 0
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{name}.{os.getpid()}.tmp")
        shutil.copyfile(tmp.name, partial)
        partial.replace(target)
        return name, target.stat().st_size
    finally:
        os.unlink(tmp.name)


def save(tag: str, store: Path) -> SaveResult:
    """Save image `tag` into the store, each of its layers once."""
    layers: dict[str, dict[str, str]] = {}
    links: dict[str, str] = {}  # a layer.tar written as a link to another's
    configs: dict[str, str] = {}
    manifest: list[dict] = []
    added = new = 0
    stream = io.BufferedReader(_Chunks(iter(api().get_image(tag))), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            top, _, leaf = member.name.partition("/")
            if member.issym() or member.islnk():
                links[top] = os.path.normpath(os.path.join(top, member.linkname)).split("/")[0]
            elif not member.isfile():
                continue
            elif leaf == "layer.tar":
                blob, size = _put_blob(saved.extractfile(member), store)  # type: ignore[arg-type]
                layers.setdefault(top, {})["blob"] = blob
                added, new = added + size, new + (size > 0)
            elif leaf in ("json", "VERSION"):
                layers.setdefault(top, {})[leaf] = saved.extractfile(member).read().decode()  # type: ignore[union-attr]
            elif member.name == "manifest.json":
                manifest = json.loads(saved.extractfile(member).read())  # type: ignore[union-attr]
            elif not leaf and member.name.endswith(".json"):
                configs[member.name] = saved.extractfile(member).read().decode()  # type: ignore[union-attr]
    [entry] = manifest
    order = [path.split("/")[0] for path in entry["Layers"]]
    for top, target in links.items():
        layers.setdefault(top, {})["blob"] = layers[target]["blob"]
    record = _Record(tag=tag, config_name=entry["Config"], config=configs[entry["Config"]], layers=[
        _Layer(dir=top, version=layers[top].get("VERSION", "1.0"), json_text=layers[top].get("json", "{}"),
               blob=layers[top]["blob"]) for top in order])
    path = _record_path(store, tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(record.model_dump_json(indent=1))
    partial.replace(path)
    return SaveResult(tag=tag, layers=len(order), new_layers=new, new_bytes=added)


def add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    """A file of `text` in `tar`, dated 0 (the same bytes make the same archive)."""
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def load(tag: str, store: Path) -> bool:
    """Load `tag` from the store into this engine; False where the store does not hold it (or a
    blob it names is missing: a store being written by another node)."""
    if not has(tag, store):
        return False
    record = _Record.model_validate_json(_record_path(store, tag).read_text())
    blobs = [store / "blobs" / layer.blob for layer in record.layers]
    if not all(blob.is_file() for blob in blobs):
        return False
    with tempfile.TemporaryFile(prefix="swedojo-load-") as tmp:
        with tarfile.open(fileobj=tmp, mode="w") as tar:
            for layer, blob in zip(record.layers, blobs, strict=True):
                add_text(tar, f"{layer.dir}/VERSION", layer.version)
                add_text(tar, f"{layer.dir}/json", layer.json_text)
                tar.add(blob, arcname=f"{layer.dir}/layer.tar")
            add_text(tar, record.config_name, record.config)
            add_text(tar, "manifest.json", json.dumps([{"Config": record.config_name, "RepoTags": [tag],
                                                         "Layers": [f"{layer.dir}/layer.tar" for layer in record.layers]}]))
        tmp.seek(0)
        for said in api().load_image(tmp):
            if "error" in said:
                raise ImageStoreError(f"loading {tag} from the image store {store}: {said['error']}")
    return True
