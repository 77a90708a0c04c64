"""Where trials run: in this process, a local process pool (the default: every core), or Ray.

An executor takes :class:`~sim.campaign.trial.TrialTask` records and yields
:class:`~sim.campaign.trial.TrialResult` records as trials finish (in any order: the driver does not
depend on it). At most ``2 × workers`` tasks are in flight, so an interrupted campaign has little work
to throw away and the progress bar's ETA follows the real rate.

Workers run one trial at a time with single-threaded BLAS (``OMP_NUM_THREADS=1`` and friends, set for
the workers only): one trial per core, no oversubscription. The same trial gives the same floats in any
executor (tests/test_campaign.py compares the results tables of the pool and Ray bit for bit).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dockbench.sim.campaign.trial import TrialResult, TrialTask, run_trial, warm_up
from dockbench.sim.errors import DockbenchError

#: what a worker's environment sets (single-threaded linear algebra: one trial per core)
WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity; os.cpu_count() where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def package_root() -> Path:
    """The folder that holds the ``sim`` package this process imported (workers must import the same code)."""
    from dockbench import sim

    return Path(sim.__file__).resolve().parent.parent


@contextmanager
def _worker_environment() -> Iterator[None]:
    """os.environ with :data:`WORKER_ENV` (and this code first on PYTHONPATH) while workers are started."""
    saved = {k: os.environ.get(k) for k in (*WORKER_ENV, "PYTHONPATH")}
    try:
        for k, v in WORKER_ENV.items():
            os.environ.setdefault(k, v)
        root = str(package_root())
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *[p for p in paths if p != root]])
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v




def _in_flight(
    tasks: Iterable[TrialTask], limit: int, submit: Callable[[TrialTask], Any],
    finished: Callable[[list[Any]], tuple[Iterable[Any], list[Any]]], result: Callable[[Any], TrialResult],
    cancel: Callable[[Any], Any],
) -> Iterator[TrialResult]:
    """The trials' results as they finish, with at most ``limit`` tasks in flight (more are submitted as
    results come back): the loop of the process-pool and Ray executors. ``submit(task)`` → a handle,
    ``finished(pending)`` → (finished handles, still pending), ``result(handle)`` → the trial's result;
    handles still pending when the consumer stops are cancelled."""
    it = iter(tasks)
    pending: list[Any] = []
    try:
        while True:
            while len(pending) < limit:
                task = next(it, None)
                if task is None:
                    break
                pending.append(submit(task))
            if not pending:
                return
            done, pending = finished(pending)
            for handle in done:
                yield result(handle)
    finally:
        for handle in pending:
            cancel(handle)

class InlineExecutor:
    """Trials one after the other in this process (``--jobs 1``; debugging, tests)."""

    name = "inline"

    def __init__(self) -> None:
        self.workers = 1

    def run(self, tasks: Iterable[TrialTask], fn: Callable[[TrialTask], TrialResult] = run_trial
            ) -> Iterator[TrialResult]:
        for task in tasks:
            yield fn(task)

    def close(self) -> None:
        pass


class ProcessExecutor:
    """A local pool of ``jobs`` worker processes (spawned: a clean interpreter each, which imports the
    packages once at start-up and keeps them, with its compiled-model cache, for every trial)."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        import multiprocessing

        self.workers = int(jobs) if jobs else available_cores()
        if self.workers < 1:
            raise DockbenchError(f"--jobs must be >= 1, got {jobs}")
        with _worker_environment():
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            # start every worker now (they import while the driver prepares the first tasks)
            self._started = [self._pool.submit(warm_up) for _ in range(self.workers)]

    def run(self, tasks: Iterable[TrialTask], fn: Callable[[TrialTask], TrialResult] = run_trial
            ) -> Iterator[TrialResult]:
        def finished(pending: list[Future]) -> tuple[Iterable[Future], list[Future]]:
            done, rest = wait(pending, return_when=FIRST_COMPLETED)
            return done, list(rest)

        def result(fut: Future) -> TrialResult:
            try:
                return fut.result()
            except BrokenProcessPool as exc:
                raise DockbenchError(
                    f"a worker process died ({exc}); the finished trials are kept: rerun to resume"
                ) from None

        submit = functools.partial(self._pool.submit, fn)
        return _in_flight(tasks, 2 * self.workers, submit, finished, result, Future.cancel)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Trials as Ray tasks (one CPU each): a local Ray instance with ``jobs`` CPUs, or the cluster at
    ``address`` (``auto`` = the one this machine belongs to). Ray reuses its worker processes, so imports
    and the compiled-model cache carry over between trials there too.

    A local instance's workers get this checkout first on PYTHONPATH (they import the same code as the
    driver). A cluster's nodes must have dockbench installed at the same version (e.g. the same image);
    results come back to the driver, which writes every file, so the nodes need no shared disk.
    """

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None):
        from dockbench.sim.extras import require

        ray = require("ray", "ray", "--executor ray")
        self._ray = ray
        env = dict(WORKER_ENV)
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is None:
            paths = [str(package_root()), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
            env["PYTHONPATH"] = os.pathsep.join(paths)
            kwargs["num_cpus"] = int(jobs) if jobs else available_cores()
        else:
            kwargs["address"] = address
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(runtime_env={"env_vars": env}, **kwargs)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = min(int(jobs), cpus) if (jobs and address is not None) else cpus
        self._remote = ray.remote(num_cpus=1, max_retries=0)(run_trial)

    def run(self, tasks: Iterable[TrialTask], fn: Callable[[TrialTask], TrialResult] = run_trial
            ) -> Iterator[TrialResult]:
        ray = self._ray
        remote = self._remote if fn is run_trial else ray.remote(num_cpus=1, max_retries=0)(fn)

        def finished(pending: list[Any]) -> tuple[Iterable[Any], list[Any]]:
            return ray.wait(pending, num_returns=1)

        def result(ref: Any) -> TrialResult:
            try:
                return ray.get(ref)
            except ray.exceptions.RayError as exc:  # a worker or node died (a trial's own failure is a result)
                raise DockbenchError(
                    f"a Ray task failed ({type(exc).__name__}: {exc}); the finished trials are kept: rerun to resume"
                ) from None

        return _in_flight(tasks, 2 * self.workers, remote.remote, finished, result,
                          lambda ref: ray.cancel(ref, force=True))

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(kind: str = "local", jobs: int | None = None, address: str | None = None):
    """``local`` (a process pool; ``jobs`` = 1 runs in this process), ``inline`` or ``ray``.

    Raises:
        DockbenchError: an unknown kind, or Ray not installed (the message gives the install command).
    """
    if kind == "local":
        if jobs is not None and jobs < 1:
            raise DockbenchError(f"--jobs must be >= 1, got {jobs}")
        return InlineExecutor() if jobs == 1 else ProcessExecutor(jobs)
    if kind == "inline":
        return InlineExecutor()
    if kind == "ray":
        return RayExecutor(address, jobs)
    raise DockbenchError(f"unknown executor {kind!r}; known: local, ray")
