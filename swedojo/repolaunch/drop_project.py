"""Run by a dependency venv's python as the layer's last step (on the host or in an image build).

Usage: python -I drop_project.py CHECKOUT_URI OUT_JSON. Uninstalls what was installed from the
checkout (the project lives in the repo layer, built per sandbox) and writes
`{"python": version, "resolved": {name: version}, "dropped": [names]}`. Standard library only.
"""

import importlib.metadata
import json
import platform
import subprocess
import sys


def main(checkout_uri: str, out: str) -> None:
    resolved: dict[str, str] = {}
    dropped: list[str] = []
    for dist in importlib.metadata.distributions():
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        name = dist.metadata["Name"]
        if "dir_info" in url and url.get("url") == checkout_uri:
            dropped.append(name)
        else:
            resolved[name] = dist.version
    if dropped:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", *dropped], check=True)
    with open(out, "w") as handle:
        json.dump({"python": platform.python_version(), "resolved": dict(sorted(resolved.items())),
                   "dropped": dropped}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
