"""The one exception hierarchy of dockbench.

Every error the framework raises on purpose derives from :class:`DockbenchError`, so a CLI can catch
it, print the message without a traceback and exit 1.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable


class DockbenchError(Exception):
    """Root of every error dockbench raises on purpose."""


class ScenarioError(DockbenchError):
    """Bad scenario input. The message names the file, the key path and the allowed values,
    e.g. ``scenarios/x.yaml: controller.k: must be > 0, got -5``."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        self.detail = message  # the message without the file/key prefix
        prefix = ""
        if file:
            prefix += f"{file}: "
        if key:
            prefix += f"{key}: "
        super().__init__(prefix + message)


class ModelError(DockbenchError):
    """A model could not be built, compiled or is inconsistent (MJCF, Pinocchio, IK)."""


class SolverError(DockbenchError):
    """A numerical solver (QP, IK) failed in a way the caller must handle."""


class HandCommandError(DockbenchError):
    """A G20 hand command was rejected whole (bad length, non-numeric, NaN/Inf, unknown joint).

    ``kind`` is a short reason (``empty``, ``not_finite``, ``unknown_name``, …) for counting
    rejections per reason."""

    def __init__(self, message: str, kind: str = "invalid"):
        super().__init__(message)
        self.kind = kind


class SimulationDiverged(DockbenchError):
    """The state became NaN/Inf; the run stops and the telemetry up to the bad step is kept.

    ``result``: the run's ``sim.loop.RunResult`` (what was recorded and scored) when raised by
    ``sim.loop.run`` (a campaign keeps it as a failed trial), else None.
    """

    def __init__(self, message: str, *, result: object = None):
        super().__init__(message)
        self.result = result


class RunFolderError(DockbenchError):
    """The run folder could not be finished (e.g. the disk is full): what was written stays in the
    ``<stamp>.partial`` folder, which loads as partial. ``result`` is the run's RunResult."""

    def __init__(self, message: str, *, result: object = None):
        super().__init__(message)
        self.result = result


class InternalError(DockbenchError):
    """An unexpected exception inside the control loop or the metrics (a bug): the telemetry recorded
    so far is written, the traceback is in the run folder's error.txt. ``result``: the RunResult."""

    def __init__(self, message: str, *, result: object = None):
        super().__init__(message)
        self.result = result


def reports_errors(main: Callable[..., int]) -> Callable[..., int]:
    """Decorate a command-line ``main(argv) -> int``: a :class:`DockbenchError` is printed as ``error: <message>``
    on stderr and the exit status is 1, without a traceback (the message names the file, key and allowed
    values). Any other exception is a bug and propagates with its traceback."""

    @functools.wraps(main)
    def wrapper(*args: object, **kwargs: object) -> int:
        try:
            return main(*args, **kwargs)
        except DockbenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return wrapper
