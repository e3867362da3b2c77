"""Run directories: where `dojo eval` and `dojo run` put their files, and the result records in them.

One definition for the stages that write a run (rollout, evaluate) and those that read it back
(export, mismatch, the CLI). It needs only `schema`, so every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from swedojo.schema import EvalStatus, ExitStatus, RewardReport


class InstanceResult(BaseModel):
    """One line of `results.jsonl`."""

    instance_id: str
    """Task id."""
    repo: str = ""
    """The task's repository (`owner/name`, URL or path); empty in results written before it was recorded."""
    policy: str
    """Policy that produced the patch."""
    status: EvalStatus
    """Grading outcome; infra_error is never the agent's fault."""
    resolved: bool
    """Resolved per SWE-bench."""
    exit_status: ExitStatus
    """Why the agent stopped."""
    error: str = ""
    """One-line reason for a non-resolved status, if there is one."""
    patch: str = ""
    """The submitted patch."""
    report: RewardReport
    """Full grading report."""
    duration_s: float = 0.0
    """Wall time for agent plus grading."""


class RunManifest(BaseModel):
    """`run.json`: what produced a run directory, so a resume with other inputs is refused, not mixed in."""

    suite: str
    """Suite name or path, as given."""
    suite_sha256: str
    """Hash of the selected instances' records (ids, patches, tests): the same name may hold other tasks."""
    policy: str
    """Policy name."""
    model: str = ""
    """Model spec (`--model`), when the policy has one."""
    rewards: str
    """Reward settings: `resolved`, or the tier configuration as JSON."""
    swedojo_version: str
    """Version of the harness that began the run (recorded, not compared)."""

    def differences(self, other: RunManifest) -> list[str]:
        """The inputs in which `other` differs from this one, as `field: this -> other`."""
        fields = ("suite", "suite_sha256", "policy", "model", "rewards")
        return [f"{f}: {getattr(self, f)!r} -> {getattr(other, f)!r}" for f in fields if getattr(self, f) != getattr(other, f)]


@dataclass(frozen=True)
class RunDir:
    """A `dojo eval` run directory; an existing one is resumed."""

    root: Path

    @property
    def manifest(self) -> Path:
        """What produced the run (`RunManifest`)."""
        return self.root / "run.json"

    @property
    def results(self) -> Path:
        """One InstanceResult per line, appended as each instance finishes, so a killed run resumes."""
        return self.root / "results.jsonl"

    @property
    def summary(self) -> Path:
        """The run's totals (`evaluate.Summary`)."""
        return self.root / "summary.json"

    @property
    def preds(self) -> Path:
        """The patches in sb-cli's predictions format."""
        return self.root / "preds.json"

    @property
    def trajectories(self) -> Path:
        """One Trajectory per instance, saved after every step."""
        return self.root / "trajectories"

    @property
    def baselines(self) -> Path:
        """The suite's test runs at base, kept so the other rollouts and a resumed run reuse them."""
        return self.root / "baselines"

    @property
    def environments(self) -> Path:
        """Environments launched for the run: an EnvSpec and a build log per (repo, setup commit)."""
        return self.root / "environments"

    @property
    def logs(self) -> Path:
        """SWE-bench's per-instance files, `logs/<instance_id>/` (`rewards.swebench_reports`)."""
        return self.root / "logs"

    def instance_logs(self, instance_id: str) -> Path:
        """SWE-bench's files for one instance: report.json, test_output.txt, patch.diff."""
        return self.logs / instance_id

    def swebench_report(self, model: str) -> Path:
        """SWE-bench's run report, named as its harness names it: `<model>.<run_id>.json`, the run
        id being the directory's name."""
        return self.root / f"{model.replace('/', '__')}.{self.root.resolve().name}.json"

    def trajectory(self, instance_id: str) -> Path:
        """Where the trajectory of `instance_id` is saved."""
        return self.trajectories / f"{instance_id}.json"

    def trajectory_files(self) -> list[Path]:
        """The saved trajectories, by file name."""
        return sorted(self.trajectories.glob("*.json"))

    def export(self, fmt: str) -> Path:
        """Default output of `dojo export --format fmt`."""
        return self.root / f"{fmt}.jsonl"

    def read_results(self) -> dict[str, InstanceResult]:
        """The last result per instance, as a resumed run sees them; a line cut by a kill is ignored."""
        results: dict[str, InstanceResult] = {}
        if not self.results.is_file():
            return results
        for line in self.results.read_text(encoding="utf-8").splitlines():
            try:
                result = InstanceResult.model_validate_json(line)
            except ValidationError:
                continue
            results[result.instance_id] = result
        return results


@dataclass(frozen=True)
class IssueRunDir:
    """What `dojo run` writes for one issue."""

    root: Path

    @property
    def trajectory(self) -> Path:
        """The agent's Trajectory, saved after every step."""
        return self.root / "trajectory.json"

    @property
    def patch(self) -> Path:
        """The final diff."""
        return self.root / "patch.diff"

    @property
    def report(self) -> Path:
        """The RewardReport of the format and static tiers."""
        return self.root / "report.json"
