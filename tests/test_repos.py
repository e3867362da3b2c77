"""Checkouts: only what the commit reaches, with the nearest tag (version tools read it)."""

from pathlib import Path

import pytest
from taskrepo import git

from swedojo.repos import CommitNotFoundError, checkout


def test_a_checkout_keeps_the_nearest_earlier_tag_and_no_later_one(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n, tag in ((1, "v1.0"), (2, ""), (3, "v2.0")):
        (repo / "f.txt").write_text(str(n))
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{n}")
        if tag:
            git(repo, "tag", "-a", tag, "-m", tag)
    middle = git(repo, "rev-parse", "HEAD~1")
    dest = tmp_path / "out"
    checkout(repo, middle, dest)
    assert git(dest, "rev-parse", "HEAD") == middle
    assert git(dest, "tag", "--list").split() == ["v1.0"]
    assert git(dest, "describe", "--tags").startswith("v1.0-1-g")


def test_a_checkout_is_fetched_once_then_copied_and_the_cache_is_bounded(tmp_path: Path, monkeypatch) -> None:
    """The second checkout of a commit is a copy of the cached one (a file planted in the cache
    shows up); past the size bound the least recently used entries go, never the one in use."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for n in range(3):
        (repo / "a.py").write_text(f"x = {n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{n}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    checkout(repo, shas[0], tmp_path / "one")
    [entry] = [e for e in (tmp_path / "cache" / "checkouts").iterdir() if e.is_dir()]
    (entry / "planted.txt").write_text("from the cache")
    checkout(repo, "HEAD~2", tmp_path / "two")
    assert (tmp_path / "two" / "planted.txt").read_text() == "from the cache"
    assert git(tmp_path / "two", "log", "--format=%H").split() == [shas[0]]
    with pytest.raises(CommitNotFoundError):
        checkout(repo, "HEAD~5", tmp_path / "none")

    monkeypatch.setenv("SWEDOJO_CHECKOUT_CACHE_GB", "0")  # every entry but the one in use is over the bound
    checkout(repo, shas[1], tmp_path / "three")
    checkout(repo, shas[2], tmp_path / "four")
    assert (tmp_path / "four" / "a.py").read_text() == "x = 2\n"
    assert len([e for e in (tmp_path / "cache" / "checkouts").iterdir() if e.is_dir()]) == 1


def test_a_mirror_missing_objects_of_older_history_still_checks_out_the_commit(tmp_path: Path, monkeypatch) -> None:
    """A partial mirror (large old blobs absent) cannot serve the commit's history; its tree is
    still the commit, checked out without the history."""
    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "big.bin").write_text("old data " * 100)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "old")
    lost = git(repo, "rev-parse", "HEAD:big.bin")
    (repo / "big.bin").unlink()
    (repo / "f.txt").write_text("now")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "new")
    head = git(repo, "rev-parse", "HEAD")
    (repo / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    dest = tmp_path / "out"
    checkout(repo, head, dest)
    assert git(dest, "rev-parse", "HEAD") == head
    assert (dest / "f.txt").read_text() == "now"
    assert git(dest, "rev-parse", "--is-shallow-repository") == "true"


def test_submodules_come_from_the_mirror_beside_the_repository_and_a_missing_one_is_named(tmp_path: Path, monkeypatch) -> None:
    from swedojo.repos import resolve_repo

    monkeypatch.setenv("SWEDOJO_CACHE", str(tmp_path / "cache"))
    lib = tmp_path / "elsewhere" / "lib"
    lib.mkdir(parents=True)
    git(lib, "init", "-q", "-b", "main")
    shas = []
    for text in ("int lib(void) { return 1; }\n", "int lib(void) { return 2; }\n"):
        (lib / "lib.c").write_text(text)
        git(lib, "add", "-A")
        git(lib, "commit", "-qm", text[:20])
        shas.append(git(lib, "rev-parse", "HEAD"))
    app = tmp_path / "elsewhere" / "app"
    app.mkdir()
    git(app, "init", "-q", "-b", "main")
    (app / ".gitmodules").write_text(
        '[submodule "lib"]\n\tpath = third_party/lib\n\turl = https://github.com/acme/lib.git\n'
        '[submodule "gone"]\n\tpath = third_party/gone\n\turl = git@github.com:acme/gone.git\n')
    git(app, "update-index", "--add", "--cacheinfo", f"160000,{shas[0]},third_party/lib")
    git(app, "update-index", "--add", "--cacheinfo", f"160000,{shas[1]},third_party/gone")
    git(app, "add", ".gitmodules")
    git(app, "commit", "-qm", "app with two submodules")
    mirror = tmp_path / "mirror"
    (mirror / "acme").mkdir(parents=True)
    (mirror / "acme" / "app").symlink_to(app)  # a mirror of links, as fetched directories are laid out
    git(tmp_path, "clone", "-q", "--bare", str(lib), str(mirror / "acme" / "lib.git"))

    source = resolve_repo("acme/app", mirror)
    assert source == mirror / "acme" / "app"
    dest = tmp_path / "out"
    notes = checkout(source, git(app, "rev-parse", "HEAD"), dest)
    assert notes == [f"submodule third_party/lib: {shas[0][:12]} from {mirror / 'acme' / 'lib.git'}",
                     (f"submodule third_party/gone: no local repository holds {shas[1][:12]} (looked in "
                     f"{app / '.git' / 'modules' / 'gone'}, {mirror / 'acme' / 'gone'}, {mirror / 'acme' / 'gone.git'}); left empty")]
    assert (dest / "third_party" / "lib" / "lib.c").read_text() == "int lib(void) { return 1; }\n"  # the recorded commit
    assert not any((dest / "third_party" / "gone").iterdir())
    assert git(dest, "status", "--porcelain") == ""  # the superproject sees its submodule at the recorded commit
