"""Run directories: where `dojo eval` and `dojo run` put their files, and the result records in them.

One definition for the stages that write a run (rollout, evaluate) and those that read it back
(export, mismatch, the CLI). It needs only `schema`, so every layer may import it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from swedojo.schema import EvalStatus, ExitStatus, RewardReport, TaskInstance


def file_name(identifier: str) -> str:
    """The one mapping of an id (an instance id, a model name) to a file name: the id itself where it
    is one plain name (`owner__name-123`), else its unsafe characters made `_` and a hash of the id
    appended, so that `../../x` or `a/b` names a file in the directory it is written to and two ids
    never share a file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", identifier)
    if safe == identifier and safe and not safe.startswith("."):
        return safe
    return f"{safe.lstrip('.')}-{hashlib.sha256(identifier.encode()).hexdigest()[:10]}"


def suite_sha256(instances: list[TaskInstance]) -> str:
    """A content hash of the selected instances, in order: the same suite name may hold other tasks."""
    digest = hashlib.sha256()
    for instance in instances:
        digest.update(instance.model_dump_json().encode())
    return digest.hexdigest()


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
    prompt_tokens: int = 0
    """Prompt tokens the policy's model used over the instance (`Trajectory.prompt_tokens`)."""
    completion_tokens: int = 0
    """Completion tokens it sampled."""
    cost_usd: float | None = None
    """What the model cost in US dollars (`Trajectory.cost_usd`); None when unknown or no model ran."""


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
    temperature: float | None = None
    """The model policy's sampling temperature (`--temperature`); None for policies that sample nothing."""
    seed: int | None = None
    """The model policy's sampling seed (`--seed`); None for policies that sample nothing."""
    swedojo_version: str
    """Version of the harness that began the run (recorded, not compared)."""

    def differences(self, other: RunManifest) -> list[str]:
        """The inputs in which `other` differs from this one, as `field: this -> other`."""
        fields = ("suite", "suite_sha256", "policy", "model", "rewards", "temperature", "seed")
        return [f"{f}: {getattr(self, f)!r} -> {getattr(other, f)!r}" for f in fields if getattr(self, f) != getattr(other, f)]


PAUSE_MID_RESULT = "SWEDOJO_PAUSE_MID_RESULT"
"""Fault-injection point for the kill tests: when this variable names a file, appending a result
writes the first half of its line, creates that file and sleeps, so that a test can kill the
process in the middle of a write at a known moment."""


class RunInUseError(Exception):
    """Another live process holds the run directory (a second `dojo eval` on the same --out)."""


def write_atomic(path: Path, text: str) -> None:
    """Write `path` whole or not at all (temp file, fsync, rename): a kill never leaves half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


_held: dict[Path, int] = {}
"""Run directories this process holds the lock of -> the lock file's descriptor."""
_held_lock = threading.Lock()


@dataclass(frozen=True)
class RunDir:
    """A run directory of `dojo eval` (an existing one is resumed) or of `dojo run` (`IssueRunDir`)."""

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
        return self.logs / file_name(instance_id)

    def swebench_report(self, model: str) -> Path:
        """SWE-bench's run report, named as its harness names it: `<model>.<run_id>.json`, the run
        id being the directory's name."""
        return self.root / f"{model.replace('/', '__')}.{self.root.resolve().name}.json"

    def trajectory(self, instance_id: str) -> Path:
        """Where the trajectory of `instance_id` is saved."""
        return self.trajectories / f"{file_name(instance_id)}.json"

    def trajectory_files(self) -> list[Path]:
        """The saved trajectories, by file name."""
        return sorted(self.trajectories.glob("*.json"))

    def export(self, fmt: str) -> Path:
        """Default output of `dojo export --format fmt`."""
        return self.root / f"{fmt}.jsonl"

    @property
    def lock_file(self) -> Path:
        """Held (flock) by the process that runs in the directory; the kernel lets go when it dies."""
        return self.root / ".lock"

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

    def append_result(self, result: InstanceResult) -> None:
        """Add one line to `results.jsonl` with a single write (O_APPEND), flushed to disk: a kill
        leaves the line whole or cut, never two results mixed; `compact_results` drops a cut one."""
        line = (result.model_dump_json() + "\n").encode()
        fd = os.open(self.results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if pause := os.environ.get(PAUSE_MID_RESULT):
                os.write(fd, line[: len(line) // 2])
                os.fsync(fd)
                Path(pause).touch()
                while True:
                    time.sleep(60)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def compact_results(self) -> dict[str, InstanceResult]:
        """Rewrite `results.jsonl` with one line per instance, its last result (a retried
        infra_error's new one), and without a line cut by a kill, which the next append would
        otherwise run into; atomic. Returns those results."""
        results = self.read_results()
        if self.results.is_file():
            write_atomic(self.results, "".join(r.model_dump_json() + "\n" for r in results.values()))
        return results

    def hold(self) -> None:
        """Take the directory's lock for this process (again: a no-op); RunInUseError when another
        live process has it. A process killed with it held lets go, so a rerun can take over."""
        root = self.root.resolve()
        with _held_lock:
            if root in _held:
                return
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip()
                os.close(fd)
                raise RunInUseError(f"{self.root} is in use by another run (pid {holder or 'unknown'}): wait for it "
                                    "to end, or use another --out") from None
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            _held[root] = fd

    def release(self) -> None:
        """Let go of the lock `hold` took (a no-op when this process does not hold it)."""
        with _held_lock:
            fd = _held.pop(self.root.resolve(), None)
        if fd is not None:
            os.close(fd)


@dataclass(frozen=True)
class IssueRunDir(RunDir):
    """What `dojo run` writes for one issue: a run directory of one instance, in the shape `dojo eval`
    writes (run.json, results.jsonl, trajectories/, summary.json), so that `dojo report`, `dojo
    export` and `dojo mismatch` read it as any run; and the patch at its top, for `git apply`."""

    @property
    def patch(self) -> Path:
        """The final diff (the same as `logs/<instance_id>/patch.diff`)."""
        return self.root / "patch.diff"

    def taken(self) -> bool:
        """Whether a run was begun here already: a one-off run is never resumed nor mixed with another."""
        return self.manifest.is_file() or self.results.is_file()

    @property
    def legacy_trajectory(self) -> Path:
        """Where `dojo run` saved its trajectory before it wrote a run directory; still read."""
        return self.root / "trajectory.json"
