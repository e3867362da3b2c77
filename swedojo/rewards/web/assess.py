"""Grading of a front-end task: the candidate applied in the fresh grading sandbox, then the three
browser tiers. A front-end task has no tests; it is resolved when every browser tier passes."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swedojo.progress import stage
from swedojo.rewards.web.check import Check
from swedojo.rewards.web.render import render
from swedojo.rewards.web.static import static_check
from swedojo.rewards.web.visual import visual_check
from swedojo.rundir import file_name
from swedojo.sandboxes.base import Sandbox
from swedojo.sandboxes.browser import sandbox_browser
from swedojo.schema import EvalStatus, PageChecks, RewardReport, TaskInstance, TaskKind
from swedojo.testrun.patches import PatchApplyError, apply_patch

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    from swedojo.rewards.web.perceptual import PerceptualScorer

BROWSER_TIERS = ("static", "runtime", "visual")


@dataclass(frozen=True)
class WebAssessment:
    """Each browser tier's check of one candidate."""

    static: Check
    runtime: Check
    visual: Check

    @property
    def passed(self) -> bool:
        return self.static.passed and self.runtime.passed and self.visual.passed


def shots_dir(instance: TaskInstance, candidate: str) -> Path:
    """Where the screenshots of `candidate` for `instance` go: named by content, so a rerun reuses the place."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    digest = hashlib.sha256(candidate.encode()).hexdigest()[:12]
    return Path(base) / "swedojo" / "screenshots" / file_name(instance.instance_id) / digest


def assess(sandbox: Sandbox, checks: PageChecks, shots: Path, browser: Browser | None = None,
           scorer: PerceptualScorer | None = None) -> WebAssessment:
    """The three browser tiers on the work tree as it is, the browser inside `sandbox`: `browser`
    when one is kept warm there, else one started for this call. `scorer`: tier visual's perceptual model."""
    stage("static checks of the pages")
    static = static_check(sandbox, checks)
    stage("rendering the pages in chromium inside the sandbox")
    if browser is not None:
        rendering = render(browser, sandbox, checks, shots)
    else:
        with sandbox_browser(sandbox) as started:
            rendering = render(started, sandbox, checks, shots)
    stage("measuring the screenshots")
    return WebAssessment(static, rendering.runtime, visual_check(rendering.shots, checks.visual, scorer))


def grade_web(sandbox: Sandbox, instance: TaskInstance, candidate: str,
              scorer: PerceptualScorer | None = None) -> tuple[RewardReport, WebAssessment | None]:
    """Apply `candidate` in `sandbox` (fresh, at base_commit) and judge it in the browser; resolved
    when every browser tier passes (tier visual rating frames with `scorer` when given). No
    assessment for an empty patch or one that does not apply."""
    assert instance.kind == TaskKind.FRONT_END
    report = RewardReport(instance_id=instance.instance_id, status=EvalStatus.UNRESOLVED)
    if not candidate.strip():
        report.status = EvalStatus.EMPTY_PATCH
        return report, None
    try:
        apply_patch(sandbox, candidate, "candidate patch")
    except PatchApplyError as exc:
        report.status, report.error = EvalStatus.PATCH_FAILED, str(exc)
        return report, None
    found = assess(sandbox, instance.checks, shots_dir(instance, candidate), scorer=scorer)
    report.resolved = found.passed
    report.status = EvalStatus.RESOLVED if found.passed else EvalStatus.UNRESOLVED
    report.reward = 1.0 if found.passed else 0.0
    return report, found
