"""Checkouts: only what the commit reaches, with the nearest tag (version tools read it)."""

from pathlib import Path

from taskrepo import git

from swedojo.repos import checkout


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
