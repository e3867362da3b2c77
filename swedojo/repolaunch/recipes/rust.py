"""Rust: crates vendored into the layer (`cargo vendor` into `vendor/`; `cargo/` is `CARGO_HOME`, whose
config points crates.io there); sandboxes build them from there offline, in the work tree."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import ClassVar

from swedojo.repolaunch.analysis import (
    CiFindings,
    PythonPlanning,
    RepoAnalysis,
    read_text,
    read_toml,
    version_key,
)
from swedojo.repolaunch.buildlog import BuildLog
from swedojo.repolaunch.host import Runtime, host_tool, no_host_runtime
from swedojo.repolaunch.recipes.toolchain import DebianToolchainRecipe
from swedojo.repolaunch.registries import Registry

RUST_EDITIONS = {"2018": "1.31", "2021": "1.56", "2024": "1.85"}
"""The first rustc of each edition."""
CARGO_LOCK_VERSIONS = {3: "1.53", 4: "1.78"}
"""The first cargo that reads each Cargo.lock format."""


def _cargo_vendored(root: Path) -> str:
    """The repo's cargo config file when it replaces crates.io with a source in the repo, else ""."""
    for name in (".cargo/config.toml", ".cargo/config"):
        if "replace-with" in str(read_toml(root / name).get("source", {}).get("crates-io", {})):
            return name
    return ""


def _crates(root: Path) -> int:
    """Registry packages in Cargo.lock, else the manifest's direct dependencies from a registry."""
    packages = read_toml(root / "Cargo.lock").get("package", [])
    if isinstance(packages, list) and packages:
        return sum(1 for p in packages if isinstance(p, dict) and str(p.get("source", "")).startswith("registry+"))
    manifest = read_toml(root / "Cargo.toml")
    tables = [manifest.get(key, {}) for key in ("dependencies", "dev-dependencies", "build-dependencies")]
    return sum(1 for table in tables if isinstance(table, dict)
               for spec in table.values() if not (isinstance(spec, dict) and ("path" in spec or "git" in spec)))


class RustRecipe(DebianToolchainRecipe):
    """Cargo.toml."""

    languages = ("rust",)
    family = "rust"
    priority = 40
    registry = Registry("crates.io", ("index.crates.io", "static.crates.io", "github.com"), "the crate's", count=_crates)
    shipped: ClassVar[dict[str, str]] = {"bullseye": "1.48", "bookworm": "1.63", "trixie": "1.85"}
    toolchain_name = "Rust"
    packages = ("rustc", "cargo")  # cargo links with gcc, which rustc brings

    def detect(self, root: Path) -> int | None:
        return self.priority if (root / "Cargo.toml").is_file() else None

    def analyse(self, root: Path, ci: CiFindings, when: datetime | None, planning: PythonPlanning) -> RepoAnalysis:
        """The oldest rustc the crate asks for: the toolchain file, `rust-version`, the edition and the
        lock file's format each set a minimum (a toolchain file's exact pin or channel is read as one)."""
        # Dependencies are vendored into the layer, which the layer's CARGO_HOME config points at:
        # sandboxes build them from there without writing to it (cargo extracts fetched crates into
        # CARGO_HOME, which they cannot write), with the lock file vendoring resolved (git sources need it)
        out = RepoAnalysis(language="rust", build_system="cargo", dependency_files=["Cargo.toml"],
                           install_commands=['cargo vendor "$SWEDOJO_ENV/vendor" > "$SWEDOJO_ENV/vendor.toml"',
                                             ('mkdir -p "$CARGO_HOME" && mv "$SWEDOJO_ENV/vendor.toml" "$CARGO_HOME/config.toml"'
                                              ' && cp Cargo.lock "$SWEDOJO_ENV/"')],
                           rebuild_commands=['[ -f Cargo.lock ] || cp "$SWEDOJO_ENV/Cargo.lock" .', "cargo build --tests"],
                           test_command="cargo test --no-fail-fast", log_parser="cargo")
        minimums: list[str] = []
        manifest = read_toml(root / "Cargo.toml")
        shared = manifest.get("workspace", {}).get("package", {})
        for key in ("rust-version", "edition"):
            said = manifest.get("package", {}).get(key)
            said = said if isinstance(said, str) else shared.get(key)  # `key.workspace = true` inherits
            value = RUST_EDITIONS.get(str(said)) if key == "edition" else said
            if isinstance(value, str):
                minimums.append(value)
                out.note("Cargo.toml", f"{key} {said}: rustc {value} or newer")
        if (root / "Cargo.lock").is_file():
            out.dependency_files.append("Cargo.lock")
            lock = read_toml(root / "Cargo.lock").get("version")
            if lock in CARGO_LOCK_VERSIONS:
                minimums.append(CARGO_LOCK_VERSIONS[lock])
                out.note("Cargo.lock", f"lock file version {lock}: cargo {CARGO_LOCK_VERSIONS[lock]} or newer")
        for file in ("rust-toolchain.toml", "rust-toolchain"):
            path = root / file
            if path.is_file():
                channel = read_toml(path).get("toolchain", {}).get("channel") if file.endswith(".toml") else read_text(path).strip()
                if channel:
                    # "1.75.0": at least that; "stable" or "nightly": the newest Debian has
                    newest = list(self.shipped.values())[-1]
                    minimums.append(str(channel) if version_key(str(channel)) else newest)
                    out.note(file, f"toolchain {channel}")
                break
        if config := _cargo_vendored(root):
            out.install_commands, out.rebuild_commands = [], ["cargo build --tests"]
            out.dependency_files.append(config)
            out.note(config, "crates.io replaced by a source in the repo (vendored): nothing to fetch")
        self.choose_toolchain(out, max(minimums, key=version_key, default=""))
        return out

    def toolchain_env(self, root: str, sandbox: bool) -> dict[str, str]:
        return {"CARGO_HOME": f"{root}/cargo", **({"CARGO_NET_OFFLINE": "true"} if sandbox else {})}

    def host_runtime(self, analysis: RepoAnalysis, log: BuildLog) -> Runtime:
        found = host_tool("cargo", ["--version"], "cargo ")
        if found is None:
            raise no_host_runtime("cargo", log)
        return found
