"""The browser tiers on the bundled web-demo suite, with chromium running inside local sandboxes:
gold passes every tier, an empty patch fails, and each reward hack loses the tier it targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from swedojo.datasets.registry import load_suite
from swedojo.rewards.score import score
from swedojo.rewards.web.assess import assess
from swedojo.rollout import EnvironmentResolver
from swedojo.sandboxes.browser import CHROMIUM
from swedojo.schema import EvalStatus, ExitStatus, Trajectory
from swedojo.testrun.patches import apply_patch

pytestmark = pytest.mark.slow

SUITE = load_suite("web-demo")
RESOLVER = EnvironmentResolver(backend="local", mirror=SUITE.mirror)
BROWSER_TIERS = ("static", "runtime", "visual")


@pytest.fixture(scope="module", autouse=True)
def chromium():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/system_deps.sh test` installs Debian's chromium", pytrace=False)


def _task(name: str):
    return next(t for t in SUITE.loaded.instances if t.instance_id == f"swedojo-web__{name}-1")


def _scored(instance, patch: str):
    trajectory = Trajectory(instance_id=instance.instance_id, policy="test", patch=patch, exit_status=ExitStatus.SUBMITTED)
    return score(RESOLVER.resolve(instance), instance, trajectory)


@pytest.mark.parametrize("instance", SUITE.loaded.instances, ids=lambda t: t.instance_id)
def test_gold_passes_every_browser_tier(instance):
    report = _scored(instance, instance.patch)
    tiers = {t.name: t for t in report.tiers}
    assert report.status == EvalStatus.RESOLVED and report.reward == 1.0, report.model_dump_json(indent=1)
    for name in BROWSER_TIERS:
        assert tiers[name].scored and tiers[name].passed and tiers[name].score == 1.0, (name, tiers[name].evidence)
    assert not tiers["tests"].scored and not tiers["verification"].scored
    for measures in tiers["visual"].evidence["measures"].values():  # the screenshots are evidence on disk
        assert Path(measures["screenshot"]).stat().st_size > 0
    assert all(Path(m["screenshot"]).is_file() for m in tiers["runtime"].evidence["rendered"].values())


def test_empty_patch_fails():
    report = _scored(_task("deck"), "")
    assert report.status == EvalStatus.EMPTY_PATCH and report.reward == 0.0
    assert not any(t.passed for t in report.tiers if t.name in BROWSER_TIERS)


def test_the_base_pages_fail_their_checks():
    """What the agent starts from is not already a solution: each base page fails some browser tier."""
    for instance in SUITE.loaded.instances:
        with RESOLVER.resolve(instance).open(instance.base_commit) as sandbox:
            found = assess(sandbox, instance.checks, Path(sandbox.workdir) / ".shots")
        assert not found.passed, instance.instance_id


SLIDE_CSS = "style.css"
PROBES = {
    # hack -> (file, text appended or (old, new) replaced, the tier it must lose, the group that says why)
    "text clipped by overflow:hidden": (SLIDE_CSS, ".slide ul { max-height: 60px; overflow: hidden; }\n", "runtime", "text_not_clipped"),
    "text cut by text-overflow": (SLIDE_CSS, ".slide li { width: 180px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }\n",
                                  "runtime", "text_not_clipped"),
    "text hidden by visibility": (SLIDE_CSS, ".slide li:last-child { visibility: hidden; }\n", "runtime", "text_visible"),
    "content pushed off-screen": (SLIDE_CSS, ".slide h2 { position: absolute; left: -9999px; }\n", "runtime", "text_on_screen"),
    "overflowing the slide": (SLIDE_CSS, ".slide li { margin-bottom: 200px; }\n", "runtime", "content_fits"),
    "squeezed lines": (SLIDE_CSS, ".slide ul { line-height: 0.5; }\n", "runtime", "spacing"),
    "overlapping by negative margins": (SLIDE_CSS, ".slide li { margin-bottom: -30px; }\n", "runtime", "spacing"),
    "text the colour of the background": (SLIDE_CSS, ".slide li { color: #f4f4f4; }\n", "visual", "text_contrast"),
    "text rendered as an image": ("index.html", ("""    <ul>
      <li>A reviewer reads the whole diff</li>
      <li>A failure points at one cause</li>
      <li>Rolling back costs minutes, not days</li>
    </ul>""", """    <img src="why.svg" alt="Three reasons">"""), "static", "text_content"),
    "duplicate images": ("index.html", ("<h2>Why small changes</h2>", '<h2>Why small changes</h2>\n    <img src="logo.svg" alt="logo">'),
                         "static", "no_duplicate_images"),
}


@pytest.mark.parametrize("hack", sorted(PROBES))
def test_each_reward_hack_loses_the_tier_it_targets(hack, tmp_path):
    instance = _task("deck")
    name, change, tier, group = PROBES[hack]
    with RESOLVER.resolve(instance).open(instance.base_commit) as sandbox:
        apply_patch(sandbox, instance.patch, "gold")
        text = sandbox.read_file(name).decode()
        changed = text + change if isinstance(change, str) else text.replace(*change)
        assert changed != text
        sandbox.write_file(name, changed.encode())
        sandbox.write_file("why.svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="800" height="300">'
                                      b'<text x="10" y="40" font-size="30">A reviewer reads the whole diff</text></svg>')
        found = assess(sandbox, instance.checks, tmp_path)
    lost = getattr(found, tier)
    assert not lost.passed and lost.score < 1.0, (hack, lost.evidence)
    assert lost.evidence["violations"].get(group), (hack, lost.evidence["violations"])


def test_dojo_eval_on_web_demo_with_gold_and_empty(tmp_path):
    from typer.testing import CliRunner

    from swedojo.cli import app

    for policy, status in (("gold", "resolved"), ("empty", "empty_patch")):
        result = CliRunner().invoke(app, ["eval", "--suite", "web-demo", "--policy", policy, "--instance", "swedojo-web__faq-1",
                                          "--backend", "local", "--out", str(tmp_path / policy)])
        assert result.exit_code == 0, result.output
        line = (tmp_path / policy / "results.jsonl").read_text().splitlines()[0]
        assert f'"status":"{status}"' in line.replace(" ", "")


@pytest.mark.docker
def test_dojo_eval_on_web_demo_on_docker_resolves_gold_and_no_empty(tmp_path):
    """Chromium inside the containers, from the browser image built on first use from the Python image."""
    import json

    from typer.testing import CliRunner

    from swedojo.cli import app

    ids = {t.instance_id for t in SUITE.loaded.instances}
    for policy, status in (("gold", "resolved"), ("empty", "empty_patch")):
        result = CliRunner().invoke(app, ["eval", "--suite", "web-demo", "--policy", policy, "--backend", "docker",
                                          "--out", str(tmp_path / policy)])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in (tmp_path / policy / "results.jsonl").read_text().splitlines()]
        assert {r["instance_id"] for r in rows} == ids
        assert all(r["status"] == status for r in rows), [(r["instance_id"], r["status"], r.get("error")) for r in rows]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_page_redefining_a_built_in_does_not_blind_the_measurement(tmp_path, backend):
    """The measuring script ran in the page's own world: a page whose script made
    `Array.prototype.push` do nothing hid every violation it found (score 0.8 -> 1.0)."""
    instance = _task("deck")
    blind = "<script>Array.prototype.push = function () { return this.length; };</script>\n</head>"
    resolver = RESOLVER if backend == "local" else EnvironmentResolver(backend="docker", mirror=SUITE.mirror)
    with resolver.resolve(instance).open(instance.base_commit) as sandbox:
        apply_patch(sandbox, instance.patch, "gold")
        page = sandbox.read_file("index.html").decode()
        assert "</head>" in page
        sandbox.write_file("index.html", page.replace("</head>", blind, 1).encode())
        css = sandbox.read_file(SLIDE_CSS).decode()
        sandbox.write_file(SLIDE_CSS, (css + ".slide li:last-child { visibility: hidden; }\n").encode())
        found = assess(sandbox, instance.checks, tmp_path)
    assert not found.runtime.passed and found.runtime.score < 1.0, found.runtime.evidence
    assert found.runtime.evidence["violations"].get("text_visible"), found.runtime.evidence["violations"]
