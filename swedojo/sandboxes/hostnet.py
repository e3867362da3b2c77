"""What of the host a local sandbox could reach through its sockets, and what keeps it out of reach.

In any network namespace the read-only root shows the host's files, and a Unix socket bound at a
path is connectable through its file (a read-only mount does not stop a connect): `bound_sockets`
lists those for bubblewrap to cover.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def bound_sockets(uid: int, seen_afresh: list[str]) -> list[str]:
    """The Unix sockets bound at a path in the harness's network namespace now that `uid` could
    connect to (search on each directory above, write on the socket), as the files they are
    (symlinks resolved), but those under `seen_afresh` (places the sandbox does not share with
    the host). Not listed: a socket whose path was relative when bound, and sockets of processes in
    other network namespaces (containers, whose files are their own)."""
    with open("/proc/net/unix") as table:  # Num RefCount Protocol Flags Type St Inode Path
        rows = (line.split(maxsplit=7) for line in table.read().splitlines()[1:])
        named = {fields[7] for fields in rows if len(fields) == 8 and fields[7].startswith("/")}
    found: set[str] = set()
    for name in named:
        path = os.path.realpath(name)
        if any(path == place or path.startswith(place.rstrip("/") + "/") for place in seen_afresh):
            continue
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode) and _connectable(path, uid):
                found.add(path)
        except OSError:
            continue
    return sorted(found)


def _connectable(path: str, uid: int) -> bool:
    """`uid` may connect to the socket at `path` (resolved): as ourselves, what access(2) says; as
    a uid of the sandbox's own (in no group, owning no host file), what the others' bits allow."""
    if uid == os.getuid():
        return os.access(path, os.W_OK)
    parents = Path(path).parents
    return bool(os.stat(path).st_mode & 0o002) and all(os.stat(d).st_mode & 0o001 for d in parents)
