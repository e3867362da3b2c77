"""Score a trajectory's patch on every tier in one fresh sandbox from the task's environment.

Order inside the sandbox: the whole suite at base + test patch (tier 3's reference; taken from a
`BaselineCache` instead when one holds it, e.g. for the other rollouts of an RL group), then
SWE-bench grading (applies the candidate and the test patch once, runs the listed tests), then
the static checks and, when some unlisted test passed at base, the whole suite on that same
tree. A front-end task instead has the candidate judged in the browser (`rewards.web`). Grading statuses and the F2P/P2P maps are exactly `grading.grade_in_sandbox`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from swedojo.progress import stage
from swedojo.rewards.compose import RewardConfig, compose
from swedojo.rewards.grading import (
    grade_in_sandbox,
    in_fresh_sandbox,
    with_standins_when_offline,
)
from swedojo.rewards.tiers import (
    BaselineCache,
    Judge,
    TierInput,
    run_tiers,
    suite_at_base,
)
from swedojo.rewards.web.assess import grade_web
from swedojo.rewards.web.perceptual import load_scorer
from swedojo.sandboxes.base import Sandbox
from swedojo.sandboxes.environment import Environment
from swedojo.schema import EvalStatus, RewardReport, TaskInstance, TaskKind, Trajectory
from swedojo.testrun.patches import PatchApplyError
from swedojo.testrun.run import SuiteRun, TestRunError


def score_in_sandbox(
    sandbox: Sandbox,
    env: Environment,
    instance: TaskInstance,
    trajectory: Trajectory,
    config: RewardConfig,
    judge: Judge | None = None,
    baselines: BaselineCache | None = None,
    offline_before: Mapping[str, str] | None = None,
) -> RewardReport:
    """Fill tiers and reward for `trajectory.patch` in `sandbox` (fresh, at base_commit);
    `offline_before` as for `grade_in_sandbox`."""
    candidate = trajectory.patch
    if instance.kind == TaskKind.FRONT_END:
        scorer = load_scorer(config.perceptual_model) if config.perceptual_model else None
        report, web = grade_web(sandbox, instance, candidate, scorer)
        skip = "empty patch" if not candidate.strip() else "patch does not apply" if web is None else ""
        report.tiers = run_tiers(TierInput(sandbox, env, instance, trajectory, report, judge=judge, web=web), skip)
        report.reward = compose(report.tiers, report.resolved, config)
        return report
    baseline = None
    if candidate.strip():
        def run() -> SuiteRun:
            stage("baseline suite run for tier 3 (the whole suite at base)")
            return suite_at_base(sandbox, env, instance)

        try:
            baseline = baselines.get_or_run(BaselineCache.key(env, instance), run) if baselines is not None else run()
        except PatchApplyError as exc:
            return RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=f"task is broken: {exc}")
        except TestRunError as exc:
            return RewardReport(instance_id=instance.instance_id, status=EvalStatus.INFRA_ERROR, error=f"suite at base: {exc}")
    stage("grading")
    report = grade_in_sandbox(sandbox, env, instance, candidate, offline_before)
    if report.status in (EvalStatus.INFRA_ERROR, EvalStatus.NOT_SCORABLE):  # no verdict on the patch: no tier either
        report.reward = 0.0
        return report
    skip = "empty patch" if baseline is None else "patch does not apply" if report.status == EvalStatus.PATCH_FAILED else ""
    tiers = run_tiers(TierInput(sandbox, env, instance, trajectory, report, baseline, judge), skip)
    report.tiers = tiers
    report.reward = compose(tiers, report.resolved, config)
    return report


def score(
    env: Environment,
    instance: TaskInstance,
    trajectory: Trajectory,
    config: RewardConfig | None = None,
    judge: Judge | None = None,
    baselines: BaselineCache | None = None,
) -> RewardReport:
    """Score `trajectory` for `instance` in a fresh sandbox; infrastructure failures become a status.

    `baselines`: where the whole-suite run at base is kept between scores of the same task.
    """
    config = config or RewardConfig()
    return with_standins_when_offline(env, lambda served, before: in_fresh_sandbox(served, instance, lambda sandbox: (
        score_in_sandbox(sandbox, served, instance, trajectory, config, judge, baselines, before))))
