"""Build outputs carried from an environment's image into its fresh sandboxes.

A docker sandbox mounts a fresh work tree over the image's `/testbed`, so the repo layer (a full
build of a C/C++ project, a JavaScript bundle: minutes) ran again in every agent and grader sandbox.
The image keeps what its repo layer made — every untracked file of the tree, as hard links, so no
byte more, and `.git/info/exclude` — under `PREBUILT` (`SAVE`). A fresh sandbox at the same commit,
with its tree as checked out, first dates its tracked files to `SOURCES_TIME` and then copies the
outputs in with their own (later) times (`RESTORE`). Then either the repo layer runs on them (a
compiled project, `EnvSpec.build_command`: its incremental build finds them up to date, and a patch
applied after is newer than them, so the build redoes what the patch touches and nothing else), or,
where the repo layer writes only the tree (`EnvSpec.repo_layer_in_tree`), the outputs stand in for
it (`TAKE_EXCLUDES`). Anything else (another commit, a changed tree, no image: the local backend)
leaves the sandbox to run the repo layer from scratch.
"""

from __future__ import annotations

from swedojo.schema import EnvSpec

PREBUILT = "/opt/swedojo/prebuilt"
"""Where an image keeps its repo layer's outputs (`tree/`) and the commit they were built at (`commit`)."""
RESTORED = "swedojo: build outputs restored from the image"
"""What `RESTORE` prints when it restored them."""
SOURCES_TIME = 315619200
"""1980-01-02 UTC: older than any build, and still a time zip files and tar accept."""

SAVE = (f"git rev-parse HEAD > {PREBUILT}/commit && (cp .git/info/exclude {PREBUILT}/exclude 2>/dev/null "
        f"|| : > {PREBUILT}/exclude) && "
        f"git ls-files --others -z | xargs -0 -r cp -al --parents -t {PREBUILT}/tree")
"""The repo layer's last step in an image: its outputs linked beside the tree, its exclusions copied."""
RESTORE = "\n".join([
    f'if [ -s {PREBUILT}/commit ] && [ "$(cat {PREBUILT}/commit)" = "$(git rev-parse HEAD 2>/dev/null)" ] \\',
    '   && git diff --quiet HEAD -- && [ -z "$(git ls-files --others | head -n 1)" ]; then',
    f"  git ls-files -z | xargs -0 -r touch -c -h -d @{SOURCES_TIME}",
    f"  if cp -a {PREBUILT}/tree/. .; then echo '{RESTORED}'",
    "  else git clean -fdxq; echo 'swedojo: build outputs not restored (copy failed): a full build'; fi",
    "fi",
])
"""A fresh sandbox's first step where its recipe builds: the image's outputs where they fit the tree;
a copy that fails half-way is undone (a truncated output newer than its sources would be trusted)."""

TAKE_EXCLUDES = f"cp {PREBUILT}/exclude .git/info/exclude"
"""After `RESTORE` where the outputs stand in for the repo layer: its exclusions of them too."""


def kept(spec: EnvSpec) -> bool:
    """Whether the image keeps its repo layer's outputs for fresh sandboxes."""
    return bool(spec.rebuild_commands) and (bool(spec.build_command) or spec.repo_layer_in_tree)
