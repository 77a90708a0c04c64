"""Where trials run: in this process, a local process pool (the default: every core), or Ray.

An executor takes :class:`~sim.campaign.trial.TrialTask` records and yields
:class:`~sim.campaign.trial.TrialResult` records as trials finish (in any order: the driver does not
depend on it). At most ``2 × workers`` tasks are in flight, so an interrupted campaign has little work
to throw away and the progress bar's ETA follows the real rate.

Workers run one trial at a time with single-threaded BLAS (``OMP_NUM_THREADS=1`` and friends, set for
the workers only): one trial per core, no oversubscription. The same trial gives the same floats in any
executor (tests/test_campaign.py compares the results tables of the pool and Ray bit for bit).

Faults (issue 36): a local worker dies with its driver (Linux: ``PR_SET_PDEATHSIG`` = SIGKILL, set in the
worker's initializer; everywhere: a watchdog thread that exits when the worker's parent changes), and the
driver survives a worker's death: the pool is replaced, the trials that were in flight run again one at a
time, and a trial in flight during :data:`MAX_ATTEMPTS` deaths is recorded as an ``error`` (the trial that
kills its worker) — the campaign never hangs. Closing the pool never waits on a broken pool: the workers that are
left are terminated, then killed, after a grace period.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dockbench.sim.campaign.trial import TrialResult, TrialTask, _worker_name, run_trial, warm_up
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


#: a trial in flight when this many workers died is recorded as an error (it is the one killing them)
MAX_ATTEMPTS = 2
#: seconds a closing pool's workers get to finish before they are terminated (then killed)
CLOSE_GRACE_S = 5.0


def _watch_parent(parent: int) -> None:
    """Exit this worker when its parent (the driver) is gone (a portable backstop of PR_SET_PDEATHSIG)."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(70)


def worker_init(parent: int) -> None:
    """A pool worker's initializer: die with the driver ``parent`` (Linux: the kernel sends SIGKILL when the
    parent dies, ``prctl(PR_SET_PDEATHSIG)``; elsewhere, and as a backstop, a thread polls the parent),
    then import what every trial needs."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watchdog remains
            pass
    if os.getppid() != parent:  # the driver died before the line above: nothing will signal us
        os._exit(70)
    threading.Thread(target=_watch_parent, args=(parent,), name="dockbench-parent-watch", daemon=True).start()
    warm_up()


class ProcessExecutor:
    """A local pool of ``jobs`` worker processes (spawned: a clean interpreter each, which imports the
    packages once at start-up and keeps them, with its compiled-model cache, for every trial).

    Workers die with the driver; a worker's death replaces the pool and runs its trials again (module
    docstring). ``restarts`` counts the replaced pools, ``lost`` the trials recorded as errors because a
    worker died under them.
    """

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.workers = int(jobs) if jobs else available_cores()
        if self.workers < 1:
            raise DockbenchError(f"--jobs must be >= 1, got {jobs}")
        self.restarts = 0
        self.lost = 0
        self._pool: ProcessPoolExecutor | None = None
        self._start()

    def _start(self) -> None:
        import multiprocessing

        with _worker_environment():
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=worker_init, initargs=(os.getpid(),))
            # start every worker now (they import while the driver prepares the first tasks)
            self._started = [self._pool.submit(_worker_name) for _ in range(self.workers)]

    def worker_pids(self) -> list[int]:
        """The pool's worker processes now (for fault injection and tests)."""
        procs = getattr(self._pool, "_processes", None) or {}
        return [p.pid for p in list(procs.values()) if p.pid is not None]

    def _discard(self) -> None:
        """Drop the pool without waiting on it: cancel what is queued, terminate and then kill its workers."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        try:
            pool.shutdown(wait=False, cancel_futures=True)
        except Exception:  # noqa: BLE001 - a broken pool may refuse; its workers are ended below
            pass
        _end_processes(procs, grace=0.0)
        thread = getattr(pool, "_executor_manager_thread", None)
        if thread is not None:
            thread.join(timeout=CLOSE_GRACE_S)

    def _restart(self) -> None:
        self._discard()
        self.restarts += 1
        self._start()

    def run(self, tasks: Iterable[TrialTask], fn: Callable[[TrialTask], TrialResult] = run_trial
            ) -> Iterator[TrialResult]:
        """The trials' results as they finish (at most 2 × workers in flight). When a worker dies, every trial
        in flight is lost with the pool; the pool is replaced and those trials run again one at a time
        (alone, a death names its trial): a trial in flight in :data:`MAX_ATTEMPTS` deaths is recorded as an
        error."""
        it = iter(tasks)
        suspects: collections.deque[tuple[TrialTask, int]] = collections.deque()
        pending: dict[Any, tuple[TrialTask, int]] = {}
        limit = 2 * self.workers
        exhausted = False
        try:
            while True:
                if suspects:  # after a death: the trials that were in flight, alone
                    if not pending:
                        task, died = suspects.popleft()
                        pending[self._submit(fn, task)] = (task, died)
                else:
                    while len(pending) < limit and not exhausted:
                        task = next(it, None)
                        if task is None:
                            exhausted = True
                            break
                        pending[self._submit(fn, task)] = (task, 0)
                if not pending:
                    return
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                lost: list[tuple[TrialTask, int]] = []
                for fut in done:
                    task, died = pending.pop(fut)
                    try:
                        res = fut.result()
                    except BrokenProcessPool:
                        lost.append((task, died))
                        continue
                    yield res
                if not lost:
                    continue
                # a worker died: the trials still in flight are lost with the pool too (a broken pool fails
                # them all at once; the wait is bounded in case one is not failed)
                wait(list(pending), timeout=CLOSE_GRACE_S)
                for fut, item in pending.items():
                    fut.cancel()
                    lost.append(item)
                pending.clear()
                for task, died in lost:
                    if died + 1 >= MAX_ATTEMPTS:
                        self.lost += 1
                        yield TrialResult(task.trial_id, "error", "FAIL",
                                          f"the worker process running this trial died {died + 1} times (killed, out "
                                          "of memory or crashed); the other trials went on", worker="")
                    else:
                        suspects.append((task, died + 1))
                self._restart()
        finally:
            for fut in pending:
                fut.cancel()

    def _submit(self, fn: Callable[[TrialTask], TrialResult], task: TrialTask) -> Any:
        try:
            return self._pool.submit(fn, task)
        except (BrokenProcessPool, RuntimeError):  # the pool broke since the last wait
            self._restart()
            return self._pool.submit(fn, task)

    def close(self) -> None:
        """Stop the pool: the queued trials are cancelled, the workers finish the trial they run (up to
        :data:`CLOSE_GRACE_S`) and are then terminated, or killed. Never waits on a broken pool."""
        pool = self._pool
        if pool is None:
            return
        self._pool = None
        procs = list((getattr(pool, "_processes", None) or {}).values())
        broken = bool(getattr(pool, "_broken", False))
        try:
            pool.shutdown(wait=False, cancel_futures=True)
        except Exception:  # noqa: BLE001
            pass
        _end_processes(procs, grace=0.0 if broken else CLOSE_GRACE_S)
        thread = getattr(pool, "_executor_manager_thread", None)
        if thread is not None:
            thread.join(timeout=CLOSE_GRACE_S)


def _end_processes(procs: list[Any], grace: float) -> None:
    """Wait up to ``grace`` s for ``procs`` to exit, then terminate them, then kill them."""
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for action in ("terminate", "kill"):
        alive = [p for p in procs if p.is_alive()]
        if not alive:
            return
        for p in alive:
            try:
                getattr(p, action)()
            except (OSError, ValueError, AttributeError):
                pass
        for p in alive:
            p.join(timeout=1.0)


#: Ray retries a task whose worker or node died this many times (Ray's own default for tasks); a trial still
#: lost after that is recorded as an ``error``, like a local trial in flight in :data:`MAX_ATTEMPTS` deaths
RAY_MAX_RETRIES = 3
#: seconds the driver waits for a cluster's address to answer (a TCP connection, then one request)
RAY_CONNECT_TIMEOUT_S = 3.0
#: where docs/campaigns.md explains joining a cluster (named in the connection errors)
RAY_DOCS = "docs/campaigns.md, 'A Ray cluster'"


def _ray_auth_hint() -> str:
    """What this driver does about Ray's token authentication, for the refusal message."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if (mode or "").lower() != "token":
        shown = "unset" if mode is None else repr(mode)
        return (f"this driver sends no token (RAY_AUTH_MODE is {shown}, not 'token'): set RAY_AUTH_MODE=token "
                "and give the cluster's token by RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
    source = ("RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN") else
              f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}" if os.environ.get("RAY_AUTH_TOKEN_PATH")
              else "~/.ray/auth_token")
    return f"the token this driver sends ({source}) is not the cluster's"


def check_ray_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> str:
    """The cluster address ``ray.init`` will use (Ray's own reading of ``address``: ``auto``, and
    ``localhost``/``127.0.0.1`` rewritten to this machine's network address), after checking within
    ``timeout`` s that something listens there and that the cluster accepts this driver's token.

    ``ray.init`` itself retries an unreachable address for minutes and a refused token for 20 s, printing
    warnings; this check turns both into one line.

    Raises:
        DockbenchError: the address is malformed, nothing answers there, or the cluster refuses the token.
    """
    import socket

    from ray._private import services

    if address == "auto":  # what ray.init does for 'auto' (Ray >= 2.52): token mode when a token is found
        try:
            import logging

            from ray._private.authentication.authentication_token_setup import (
                maybe_enable_token_auth_if_token_available,
            )

            quiet = logging.getLogger(maybe_enable_token_auth_if_token_available.__module__)
            level = quiet.level
            quiet.setLevel(logging.ERROR)  # its "token authentication is enabled" warning
            try:
                maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
            finally:
                quiet.setLevel(level)
        except ImportError:  # pragma: no cover - a Ray without token authentication
            pass

    try:
        resolved = services.canonicalize_bootstrap_address(address)
    except Exception as exc:  # noqa: BLE001 - Ray's ValueError / ConnectionError for 'auto' without a cluster
        raise DockbenchError(f"--address {address}: {str(exc).splitlines()[0]} ({RAY_DOCS})") from None
    if resolved is None:
        raise DockbenchError(f"--address {address}: no Ray cluster found on this machine ({RAY_DOCS})")
    host, _, port = resolved.rpartition(":")
    host = host.strip("[]")
    shown = address if resolved == address else f"{address} (= {resolved} for Ray)"
    if not (port.isdigit() and 1 <= int(port) <= 65535) or not host:
        raise DockbenchError(f"--address {shown}: give HOST:PORT with a port 1–65535 ({RAY_DOCS})")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None) or str(exc)).lower()
        raise DockbenchError(f"--address {shown}: no Ray cluster answers there ({why} within {timeout:g} s); "
                             f"start one with `ray start --head` or give its address ({RAY_DOCS})") from None
    # one request with a made-up cluster id: the cluster checks the token first, then refuses the id, both at
    # once (Ray >= 2.52; a GcsClient without an id would retry a refused token for 20 s)
    import ray

    try:
        from ray._raylet import GcsClient
    except ImportError:  # pragma: no cover - a Ray without it: ray.init's own checks remain
        return resolved
    try:
        GcsClient(address=resolved, cluster_id="00" * 28).internal_kv_get(b"dockbench", None, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - Ray's exception classes differ between versions
        if not isinstance(exc, ray.exceptions.RayError):  # pragma: no cover - another Ray's private API
            return resolved  # the probe does not apply: ray.init's own checks remain
        text = str(exc)
        if "InvalidAuthToken" in text or "UNAUTHENTICATED" in text.upper():
            raise DockbenchError(f"--address {shown}: the Ray cluster refused this driver: {_ray_auth_hint()} "
                                 f"({RAY_DOCS})") from None
        if "WrongClusterID" not in text:  # the expected answer: the token was accepted, the made-up id refused
            first = text.splitlines()[0] if text else type(exc).__name__
            raise DockbenchError(f"--address {shown}: something answers there, but not as a Ray cluster that "
                                 f"accepts this driver ({first[:120]}) ({RAY_DOCS})") from None
    return resolved


class RayExecutor:
    """Trials as Ray tasks (one CPU each): a local Ray instance with ``jobs`` CPUs, or the cluster at
    ``address`` (``auto`` = the one this machine belongs to). Ray reuses its worker processes, so imports
    and the compiled-model cache carry over between trials there too.

    A local instance's workers get this checkout first on PYTHONPATH (they import the same code as the
    driver). A cluster's nodes must have dockbench installed at the same version (e.g. the same image);
    results come back to the driver, which writes every file, so the nodes need no shared disk. The
    driver's plugin opt-in (``DOCKBENCH_ALLOW_PLUGINS``, ``1`` or ``0``) goes to every worker with the job's
    runtime environment (a node's processes have the environment of its ``ray start``, not the driver's).

    A task whose worker or node died is retried by Ray (:data:`RAY_MAX_RETRIES` times, on any node with a
    free CPU); a trial lost after that is recorded as an ``error`` (``lost`` counts them) and the campaign
    goes on. Joining a cluster first checks its address (:func:`check_ray_address`): an unreachable address
    or a refused token is one line within seconds.
    """

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None):
        from dockbench.sim.extras import require
        from dockbench.sim.plugins import ALLOW_ENV, plugins_allowed

        ray = require("ray", "ray", "--executor ray")
        self._ray = ray
        self.lost = 0
        env = dict(WORKER_ENV)
        env[ALLOW_ENV] = "1" if plugins_allowed() else "0"  # the workers' opt-in is the driver's, not the node's
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is None:
            paths = [str(package_root()), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
            env["PYTHONPATH"] = os.pathsep.join(paths)
            kwargs["num_cpus"] = int(jobs) if jobs else available_cores()
        else:
            kwargs["address"] = address
        self._owns = not ray.is_initialized()
        if self._owns:
            if address is not None:
                check_ray_address(address)
            try:
                ray.init(runtime_env={"env_vars": env}, **kwargs)
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
                where = f"--address {address}" if address is not None else "a local Ray instance"
                raise DockbenchError(f"{where}: Ray did not start or connect ({type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else ''}) ({RAY_DOCS})") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = min(int(jobs), cpus) if (jobs and address is not None) else cpus
        self._remote = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(run_trial)

    def run(self, tasks: Iterable[TrialTask], fn: Callable[[TrialTask], TrialResult] = run_trial
            ) -> Iterator[TrialResult]:
        ray = self._ray
        remote = self._remote if fn is run_trial else ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(fn)
        submitted: dict[Any, TrialTask] = {}
        lost_errors = tuple(getattr(ray.exceptions, n) for n in ("WorkerCrashedError", "NodeDiedError",
                                                                  "ObjectLostError") if hasattr(ray.exceptions, n))

        def submit(task: TrialTask) -> Any:
            ref = remote.remote(task)
            submitted[ref] = task
            return ref

        def finished(pending: list[Any]) -> tuple[Iterable[Any], list[Any]]:
            return ray.wait(pending, num_returns=1)

        def result(ref: Any) -> TrialResult:
            task = submitted.pop(ref)
            try:
                return ray.get(ref)
            except lost_errors as exc:  # lost after Ray's retries (a trial's own failure is a result)
                self.lost += 1
                return TrialResult(task.trial_id, "error", "FAIL",
                                   f"the Ray worker or node running this trial died {RAY_MAX_RETRIES + 1} times "
                                   f"({type(exc).__name__}); the other trials went on", worker="")
            except ray.exceptions.RayError as exc:
                raise DockbenchError(
                    f"a Ray task failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                    "the finished trials are kept: rerun to resume"
                ) from None

        return _in_flight(tasks, 2 * self.workers, submit, finished, result,
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
