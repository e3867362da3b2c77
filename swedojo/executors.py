"""Where `dojo eval`'s instances run: threads of this process (`local`) or tasks on a Ray cluster (`ray`).

Either way each instance is one call of the run's `InstanceWork`, and its result comes back to the
caller's `record` once: only the driver writes the run directory, so resume and exactly-once are
the same whatever ran the instance.

Ray: one task per instance rather than an actor per worker. A task lost with its node is retried
by Ray elsewhere (`max_retries`), the cluster balances the tasks over its CPUs, and nodes may come
and go during a run; what an actor would keep between instances (launched environments, the
suite's runs at base) a worker process keeps anyway (see `evaluate.InstanceJob`). Workers read and
write the driver's paths (the suite's repos, the run directory): the cluster shares one filesystem,
and a task on a node that cannot see them ends the run with `SharedFilesystemError`.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from swedojo.errors import BadInputError
from swedojo.rundir import InstanceResult
from swedojo.schema import TaskInstance

if TYPE_CHECKING:
    import ray

    from swedojo.datasets.gen.many import UnitRunner
    from swedojo.repolaunch.many import LaunchRunner

W = TypeVar("W")
R = TypeVar("R")

EXECUTORS = ("local", "ray")

RAY_TASK_RETRIES = 3
"""How often Ray runs an instance again whose worker or node died; after that it is an infra_error."""

RAY_QUEUED_PER_CPU = 1
"""Instances queued on the cluster per CPU beyond those at work, so that a node starts its next
instance as soon as one ends rather than after a round trip to the driver."""

RAY_OBJECT_STORE_BYTES = 100 * 1024**2
"""Object store of a Ray started here: results are small JSON; the default takes 30% of RAM in /dev/shm."""

RAY_CONNECT_TIMEOUT_S = 10.0
"""How long `--address` may take to accept a connection before the run gives up: `ray.init` itself
retries a cluster that does not answer for ever."""

STOP_POLL_S = 0.5
"""How often a `RaySession.call` waiting for its task looks whether its caller stopped it."""


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a `host:port` address; None for other forms (`auto`, `ray://...`)."""
    host, _, port = address.rpartition(":")
    return (host.strip("[]"), int(port)) if host and "://" not in host and port.isdigit() else None


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's first bytes and an empty SETTINGS frame: a gRPC server (Ray's GCS, its client
server) answers with a SETTINGS frame of its own."""


def check_listening(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """RayClusterError unless a gRPC server (as a Ray cluster's GCS or client server is) accepts a TCP
    connection at `address` (`host:port`, or a Ray client's `ray://host:port`) and answers within
    `timeout_s`: `ray.init` waits for ever on an address where nothing, or something else, listens."""
    where = _host_port(address.removeprefix("ray://"))
    if where is None:
        return
    hint = "is `ray start --head` running there, and is this its port?"
    try:
        with socket.create_connection(where, timeout=timeout_s) as connection:
            connection.sendall(_HTTP2_PREFACE)
            answer = connection.recv(9)
    except OSError as exc:
        why = f"nothing answered within {timeout_s:g}s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise RayClusterError(f"no Ray cluster at {address}: {why} ({hint})") from None
    if len(answer) < 4 or answer[3] != 4:  # not a SETTINGS frame: not an HTTP/2 (gRPC) server
        said = answer.decode("latin-1").splitlines()[0][:60] if answer else "it closed the connection"
        raise RayClusterError(f"no Ray cluster at {address}: something listens there but does not speak gRPC as "
                              f"Ray does ({said!r}; {hint})")


def local_ip_towards(address: str) -> str | None:
    """This machine's address on the way to the Ray cluster at `address` (`host:port`), which the
    driver gives as its node's; None for other address forms (Ray then guesses it from a route to
    the internet, which names no node of a cluster on loopback or on a private network, and its
    driver waits for minutes before it settles on one)."""
    where = _host_port(address)
    if where is None:
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(where)  # UDP: no packet is sent, the kernel only picks the route
            return probe.getsockname()[0]
    except OSError:
        return None


class InstanceWork(Protocol):
    """One instance's work, the same for every executor; picklable, for Ray."""

    def __call__(self, instance: TaskInstance, said: Callable[[str], None]) -> InstanceResult:
        """Run `instance` to its result (never raises for the instance's own failures); `said` hears its stages."""

    def lost(self, instance: TaskInstance, error: str) -> InstanceResult:
        """The infra_error result of an instance whose run was lost (a resume tries it again)."""

    def paths(self) -> list[Path]:
        """What a worker must see: the suite's repos and the run directory."""


Record = Callable[[InstanceResult], None]
Staged = Callable[[TaskInstance, str], None]


class Executor(Protocol):
    """Runs the instances and hands each result to `record` (from any of this process's threads), once."""

    def run(self, todo: Iterable[TaskInstance], work: InstanceWork, record: Record, on_stage: Staged,
            stop: threading.Event | None) -> None:
        """Run every instance of `todo` until `stop` is set (then none starts; those running finish).
        A failure of `record` or of the work itself ends the run."""


class ExecutorError(Exception):
    """The executor cannot run the instances at all (base of the causes below)."""


class RayUnavailableError(ExecutorError):
    """`--executor ray` without the `ray` package."""


class RayClusterError(ExecutorError, BadInputError):
    """No Ray cluster answers at `--address`, or one cannot be started here."""


class SharedFilesystemError(ExecutorError):
    """A Ray worker cannot see a path of the run (suite repos, run directory): the cluster shares no filesystem."""


class LocalExecutor:
    """`workers` threads of this process, each taking the next instance when it is done."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)

    def run(self, todo: Iterable[TaskInstance], work: InstanceWork, record: Record, on_stage: Staged,
            stop: threading.Event | None) -> None:
        queue = iter(todo)
        lock = threading.Lock()
        failures: list[Exception] = []

        def take() -> TaskInstance | None:
            with lock:
                stopped = failures or (stop is not None and stop.is_set())
                return None if stopped else next(queue, None)

        def worker() -> None:
            try:
                while (instance := take()) is not None:
                    on_stage(instance, "starting")
                    record(work(instance, lambda what, instance=instance: on_stage(instance, what)))
            except Exception as exc:  # noqa: BLE001 (raised again in the caller's thread)
                with lock:
                    failures.append(exc)

        # Daemon threads, so that a KeyboardInterrupt in the caller's thread can end the process at once
        # (a pool's threads are waited for at exit); the running sandboxes end with the process.
        threads = [threading.Thread(target=worker, name=f"swedojo-eval-{n}", daemon=True) for n in range(self.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]


class StageBoard:
    """A Ray actor on the driver's node: workers post what their instances are doing, the driver drains it."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str, bool]] = []

    def post(self, instance_id: str, what: str, first: bool = False) -> None:
        """`first`: the instance has started (on this attempt)."""
        self.said.append((instance_id, what, first))

    def drain(self) -> list[tuple[str, str, bool]]:
        said, self.said = self.said, []
        return said


_node_names: dict[str, str] = {}


def _node_name() -> str:
    """This worker's node, as `ray start --node-name` named it (default: its IP address)."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    if node_id not in _node_names:
        _node_names.update({n["NodeID"]: n.get("NodeName") or n["NodeManagerAddress"] for n in ray.nodes()})
    return _node_names.get(node_id, node_id[:8])


def run_on_ray_worker(work: InstanceWork, instance: TaskInstance, board: Any) -> InstanceResult:
    """The body of one instance's Ray task: check the run's paths are visible here, then do the work."""
    node = _node_name()
    for path in work.paths():
        if not path.is_dir():
            raise SharedFilesystemError(
                f"Ray node {node} cannot see {path}: --executor ray needs the driver's paths (suite repos, run "
                "directory) on every node, e.g. a shared filesystem mounted at the same place")

    board.post.remote(instance.instance_id, f"starting on {node}", True)
    return work(instance, lambda what: board.post.remote(instance.instance_id, what))


def run_unit_on_ray_worker(fn: Callable[[W], R], item: W, paths: list[Path]) -> R:
    """The body of one `RayExecutor.map` task: check the item's paths are visible here, then run it."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # `ray.cancel` raises KeyboardInterrupt in the task through `_thread.interrupt_main`, which does
        # nothing where SIGINT is ignored, as in every process of a node started by `ray start &` in a
        # non-interactive shell: the task would run on, uncancellable
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for path in paths:
        if not path.is_dir():
            raise SharedFilesystemError(
                f"Ray node {_node_name()} cannot see {path}: --executor ray needs the driver's paths (repositories, "
                "--out) on every node, e.g. a shared filesystem mounted at the same place")
    return fn(item)


_SINGLE_HOST = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextmanager
def _loopback_only(ray: Any) -> Iterator[None]:
    """A Ray started for one run serves this machine only: its servers listen on loopback, not on
    every interface. Ray binds its node's address, which on Linux it never lets be loopback unless
    multi-node clusters are off (this variable, read when ray is imported: set for the processes
    the start spawns, and in the value this process read), so both are set while it starts."""
    constants = ray._private.ray_constants
    before, enabled = os.environ.get(_SINGLE_HOST), constants.ENABLE_RAY_CLUSTER
    os.environ[_SINGLE_HOST], constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = enabled
        if before is None:
            os.environ.pop(_SINGLE_HOST, None)
        else:
            os.environ[_SINGLE_HOST] = before


class RayExecutor:
    """One Ray task per instance, as many at work as the cluster has CPUs and as many queued;
    results are collected here as they finish. Without `address` a Ray of `workers` CPUs is started in this
    process (and stopped after the run); with one, that cluster is joined (and left)."""

    def __init__(self, address: str | None = None, workers: int = 1,
                 connect_timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
        self.address = address
        self.workers = max(1, workers)
        self.connect_timeout_s = connect_timeout_s

    def run(self, todo: Iterable[TaskInstance], work: InstanceWork, record: Record, on_stage: Staged,
            stop: threading.Event | None) -> None:
        ray = _import_ray()
        started = self._connect(ray)
        try:
            self._run(ray, iter(todo), work, record, on_stage, stop)
        finally:
            if started:
                ray.shutdown()  # the driver's tasks still running are ended with it

    def _connect(self, ray: Any) -> bool:
        """Join or start Ray; False when this process was connected already (it stays so)."""
        if ray.is_initialized():
            return False
        quiet = {"log_to_driver": False, "logging_level": "WARNING", "configure_logging": True}
        if self.address:
            check_listening(self.address, self.connect_timeout_s)
        try:
            if self.address:
                ray.init(address=self.address, _node_ip_address=local_ip_towards(self.address), **quiet)
            else:
                with _loopback_only(ray):
                    ray.init(num_cpus=self.workers, include_dashboard=False,
                             object_store_memory=RAY_OBJECT_STORE_BYTES, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"at {self.address}" if self.address else "here"
            raise RayClusterError(f"no Ray cluster {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
                from exc
        return True

    def map(self, fn: Callable[[W], R], items: list[W], paths: Callable[[W], list[Path]],
            lost: Callable[[W, str], R]) -> Iterator[R]:
        """`fn(item)` as one Ray task per item (a repository's `dojo gen` unit: coarse work, so all are
        submitted at once and Ray queues them on the cluster's CPUs), results yielded as they end. A
        task lost with its node is run again elsewhere (`max_retries`): `fn` must resume what its lost
        attempt did (a unit replays its journal). One Ray gave up on is `lost(item, why)`."""
        ray = _import_ray()
        started = self._connect(ray)
        running: dict[Any, W] = {}
        try:
            task = ray.remote(num_cpus=1, max_retries=RAY_TASK_RETRIES)(run_unit_on_ray_worker)
            running = {task.remote(fn, item, paths(item)): item for item in items}
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    item = running.pop(ref)
                    yield _mapped(ray, ref, item, lost)
        finally:
            for ref in running:  # a driver that stays connected leaves no work behind
                ray.cancel(ref)
            if started:
                ray.shutdown()

    def _run(self, ray: Any, queue: Iterator[TaskInstance], work: InstanceWork, record: Record, on_stage: Staged,
             stop: threading.Event | None) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        board = ray.remote(num_cpus=0)(StageBoard).options(scheduling_strategy=here).remote()
        task = ray.remote(num_cpus=1, max_retries=RAY_TASK_RETRIES)(run_on_ray_worker)
        shipped = ray.put(work)  # once, not with every task
        running: dict[ray.ObjectRef, TaskInstance] = {}
        by_id: dict[str, TaskInstance] = {}
        started: set[str] = set()
        cancelled: set[ray.ObjectRef] = set()

        def drain() -> None:
            for instance_id, what, first in ray.get(board.drain.remote()):
                if instance_id in by_id:  # a stage may arrive after its result
                    started.update([instance_id] if first else [])
                    on_stage(by_id[instance_id], what)

        try:
            while True:
                stopped = stop is not None and stop.is_set()
                while not stopped and len(running) < (1 + RAY_QUEUED_PER_CPU) * _cluster_cpus(ray):
                    instance = next(queue, None)
                    if instance is None:
                        break
                    by_id[instance.instance_id] = instance
                    on_stage(instance, "queued on Ray")
                    running[task.remote(shipped, instance, board)] = instance
                if not running:
                    break
                done, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
                drain()
                for ref in done:
                    instance = running.pop(ref)
                    del by_id[instance.instance_id]
                    if (result := _result(ray, ref, instance, work)) is not None:
                        record(result)
                if stopped:  # those still queued do not start (a resume runs them); those at work finish
                    for ref in set(running) - cancelled:
                        if running[ref].instance_id not in started:
                            ray.cancel(ref)
                            cancelled.add(ref)
        except BaseException:
            for ref in running:  # a driver that stays connected leaves no work behind
                ray.cancel(ref)
            raise


class RaySession:
    """Ray for a long-lived caller (`dojo serve`): joined (or started) once, each `call` one task that
    the calling thread waits for, left at `close`. Many threads may call at once: each call is a
    task of its own, queued by Ray on the cluster's CPUs."""

    def __init__(self, address: str | None = None, workers: int = 1) -> None:
        self._ray = _import_ray()
        self._started = RayExecutor(address, workers)._connect(self._ray)
        self._task = self._ray.remote(num_cpus=1, max_retries=RAY_TASK_RETRIES)(run_unit_on_ray_worker)

    def call(self, fn: Callable[[W], R], item: W, paths: list[Path], lost: Callable[[W, str], R],
             stopped: Callable[[], bool] = lambda: False) -> R:
        """`fn(item)` on a node that sees `paths`; a task Ray gave up on (its node lost, retries spent)
        is `lost(item, why)`. Once `stopped()` holds, the task is cancelled where it runs (`ray.cancel`:
        a KeyboardInterrupt in it, on which `serve.service.run_sample` closes its sandboxes) and the call
        returns `lost` at once."""
        ref = self._task.remote(fn, item, paths)
        while not self._ray.wait([ref], timeout=STOP_POLL_S)[0]:
            if stopped():
                self._ray.cancel(ref)
                return lost(item, "stopped: its task was cancelled")
        return _mapped(self._ray, ref, item, lost)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def _result(ray: Any, ref: ray.ObjectRef, instance: TaskInstance, work: InstanceWork) -> InstanceResult | None:
    """The task's result; a task Ray gave up on (its retries spent) is the instance's infra_error;
    None for one cancelled at a stop (it has no result)."""
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    try:
        return ray.get(ref)
    except TaskCancelledError:
        return None
    except RayTaskError as exc:
        if isinstance(exc.cause, SharedFilesystemError):
            raise exc.cause from None
        raise  # the work itself failed: a bug, ends the run as with the local executor
    except RayError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return work.lost(instance, f"ray: {type(exc).__name__} after {RAY_TASK_RETRIES} retries: {first}")


def _mapped(ray: Any, ref: ray.ObjectRef, item: W, lost: Callable[[W, str], R]) -> R:
    """A `map` task's result; one Ray gave up on (its retries spent) is `lost(item, why)`."""
    from ray.exceptions import RayError, RayTaskError

    try:
        return ray.get(ref)
    except RayTaskError as exc:
        if isinstance(exc.cause, SharedFilesystemError):
            raise exc.cause from None
        raise  # the work itself failed: a bug, ends the run
    except RayError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return lost(item, f"ray: {type(exc).__name__} after {RAY_TASK_RETRIES} retries: {first}")


def _cluster_cpus(ray: Any) -> int:
    """The CPUs of the cluster's live nodes now (at least 1: with none, tasks wait for a node)."""
    return max(1, int(ray.cluster_resources().get("CPU", 0)))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailableError("--executor ray needs the ray package: pip install 'swedojo[ray]'") from None
    return ray


def executor(name: str, workers: int = 1, address: str | None = None) -> Executor:
    """The executor called `name` (one of `EXECUTORS`); a Ray `address` where nothing accepts a
    connection raises RayClusterError here, before the caller sets a run up for it."""
    if name == "local":
        if address:
            raise ValueError("--address is for --executor ray")
        return LocalExecutor(workers)
    if name == "ray":
        if address:
            check_listening(address)
        return RayExecutor(address, workers)
    raise ValueError(f"unknown --executor {name!r}; choose {' or '.join(EXECUTORS)}")


def unit_runner(name: str, address: str | None, workers: int, run: Callable[[W], R],
                paths: Callable[[W], list[Path]], lost: Callable[[W, str], R]) -> Callable[[list[W]], Iterable[R]]:
    """Where coarse units of work (a repository's generation, a launch) run: one after another here
    (`local`), or a Ray task each (`ray`: on the cluster at `address`, or on a Ray of `workers` CPUs
    started here), `paths(unit)` being what every node must see and `lost(unit, why)` the state of
    one Ray gave up on. A Ray `address` where nothing accepts a connection raises RayClusterError
    here, before any work."""
    if name == "local":
        if address:
            raise ValueError("--address is for --executor ray")
        return lambda units: map(run, units)
    if name != "ray":
        raise ValueError(f"unknown --executor {name!r}; choose {' or '.join(EXECUTORS)}")
    if address:
        check_listening(address)
    on_ray = RayExecutor(address, workers)
    return lambda units: on_ray.map(run, units, paths, lost)


class _RepositoryUnit(Protocol):
    repo: str
    mirror: Path | None

    @property
    def out(self) -> Path: ...


def _unit_paths(unit: _RepositoryUnit) -> list[Path]:
    """What a node must see to run a repository's unit: the run's directory, the repository where it
    is a path, and the mirror."""
    repo = Path(unit.repo)
    return [unit.out.parent] + ([repo] if repo.is_absolute() else []) + ([unit.mirror] if unit.mirror else [])


def gen_unit_runner(name: str, address: str | None = None, workers: int = 1) -> UnitRunner:
    """Where `dojo gen`'s units (one per repository) run (`unit_runner`)."""
    from swedojo.datasets.gen.many import GenUnit, UnitState, run_unit

    def lost(unit: GenUnit, why: str) -> UnitState:  # not done: a rerun resumes it from its journal
        return UnitState(repo=unit.repo, name=unit.name, mode=unit.mode, error=why)

    return unit_runner(name, address, workers, run_unit, _unit_paths, lost)


def launch_unit_runner(name: str, address: str | None = None, workers: int = 1) -> LaunchRunner:
    """Where `dojo launch --repos`'s units (one per repository and commit) run (`unit_runner`)."""
    from swedojo.repolaunch.many import LaunchState, LaunchUnit, run_launch

    def lost(unit: LaunchUnit, why: str) -> LaunchState:  # not done: a rerun launches it again
        return LaunchState(repo=unit.repo, commit=unit.commit, unit=unit.out.name, error=why)

    return unit_runner(name, address, workers, run_launch, _unit_paths, lost)
