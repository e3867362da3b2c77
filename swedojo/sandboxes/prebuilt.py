"""Build outputs carried from an environment's image into its fresh sandboxes.

A docker sandbox mounts a fresh work tree over the image's `/testbed`, so the repo layer (a full
build of a C/C++ project: minutes) ran again in every agent and grader sandbox. The image keeps
what its repo layer built — every untracked file of the tree, as hard links, so no byte more — under
`PREBUILT` (`SAVE`). A fresh sandbox at the same commit, with its tree as checked out, first dates
its tracked files to `SOURCES_TIME` and then copies the outputs in with their own (later) times
(`RESTORE`): the repo layer's build finds them up to date, and a patch applied after is newer than
them, so the incremental build redoes what the patch touches and nothing else. Anything else (another
commit, a changed tree, no image: the local backend) leaves the sandbox to build from scratch.
"""

from __future__ import annotations

PREBUILT = "/opt/swedojo/prebuilt"
"""Where an image keeps its repo layer's outputs (`tree/`) and the commit they were built at (`commit`)."""
SOURCES_TIME = 315619200
"""1980-01-02 UTC: older than any build, and still a time zip files and tar accept."""

SAVE = (f"git rev-parse HEAD > {PREBUILT}/commit && "
        f"git ls-files --others -z | xargs -0 -r cp -al --parents -t {PREBUILT}/tree")
"""The repo layer's last step in an image: its outputs linked beside the tree."""
RESTORE = "\n".join([
    f'if [ -s {PREBUILT}/commit ] && [ "$(cat {PREBUILT}/commit)" = "$(git rev-parse HEAD 2>/dev/null)" ] \\',
    '   && git diff --quiet HEAD -- && [ -z "$(git ls-files --others | head -n 1)" ]; then',
    f"  git ls-files -z | xargs -0 -r touch -c -h -d @{SOURCES_TIME}",
    f"  if cp -a {PREBUILT}/tree/. .; then echo 'swedojo: build outputs restored from the image'",
    "  else git clean -fdxq; echo 'swedojo: build outputs not restored (copy failed): a full build'; fi",
    "fi",
])
"""A fresh sandbox's first step where its recipe builds: the image's outputs where they fit the tree;
a copy that fails half-way is undone (a truncated output newer than its sources would be trusted)."""
