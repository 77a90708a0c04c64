"""Ctrl-C (SIGINT), SIGTERM and SIGHUP: one path for all three, and the sections a signal may not cut.

:func:`guard` installs one handler for SIGINT, SIGTERM and SIGHUP (the terminal was closed, or an SSH
session dropped: the user did not ask to lose the run; where the platform has it; not when SIGHUP is
ignored on entry, as under ``nohup``, where the run goes on) — main thread only;
elsewhere, and when a guard is already installed, it does nothing. SIGQUIT (Ctrl-\\) is deliberately
left to its default (quit at once, with a core dump where enabled): it is the way out when a handled
signal is held by a section that may not be cut, and a ``.partial`` folder it leaves loads as partial.
SIGKILL cannot be caught; what it leaves loads as partial too (telemetry/run.py). The handler has two
modes:

* **armed** (building, the control loop, the metrics): the signal raises :class:`Interrupted` — a
  :class:`KeyboardInterrupt`, so ``except KeyboardInterrupt`` handles both signals — at once, and
  disarms itself, so a second signal cannot raise inside the code that handles the first;
* **disarmed** (writing the run folder, spilling telemetry to disk): the signal is recorded and raised
  when the code next arms (:func:`arm`), or read with :func:`pending` once the writing is done.

The control loop pays nothing for this: an armed signal interrupts it the way Python's own SIGINT
handler does (between two bytecodes), no per-step flag is polled.

:func:`deferred` is the disarmed section for code that may run armed: it disarms, and on exit re-arms
(raising a signal that came in meanwhile) only if it was armed on entry. Without a guard installed
(a library user who calls :func:`sim.loop.simulate` directly) every function here is a no-op and
Python's default SIGINT handling applies.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: the signals handled (the process's exit code after one is 128 + its number: 130, 143, 129)
SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


class Interrupted(KeyboardInterrupt):
    """The run was interrupted by ``signum`` (SIGINT, SIGTERM or SIGHUP).

    Attributes:
        signum: the signal number. exit_code: the shell convention 128 + signum (130, 143, 129).
    """

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def signum_of(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: its :class:`Interrupted`'s, else SIGINT (a plain Ctrl-C)."""
    return exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)


def interrupt_message(exc: BaseException, steps: int) -> str:
    """How a run that ``exc`` interrupted after ``steps`` recorded steps is reported."""
    name = exc.name if isinstance(exc, Interrupted) else "SIGINT"
    what = {"SIGTERM": "terminated (SIGTERM)", "SIGHUP": "hung up (SIGHUP: the terminal was closed)"}.get(
        name, "interrupted (Ctrl-C)")
    return f"{what} after {steps} recorded steps; the telemetry recorded so far is kept"


class _State:
    def __init__(self) -> None:
        self.depth = 0  # nested guard() calls
        self.armed = False
        self.pending: list[int] = []
        self.previous: dict[int, object] = {}


_state = _State()


def _handler(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal module's signature
    if _state.armed:
        _state.armed = False  # one exception per arming: a second signal becomes pending
        raise Interrupted(signum)
    _state.pending.append(signum)


def _handled() -> tuple[int, ...]:
    """:data:`SIGNALS`, less SIGHUP when it is ignored (``nohup``: the user asked the process to survive
    the terminal's hang-up, and it does)."""
    hup = getattr(signal, "SIGHUP", None)
    return tuple(s for s in SIGNALS if s != hup or signal.getsignal(s) is not signal.SIG_IGN)


def installed() -> bool:
    """True while a :func:`guard` is installed."""
    return _state.depth > 0


def _active() -> bool:
    """A guard is installed and this is the main thread (signal handlers run there only; a run in
    another thread must not arm or disarm the main thread's handler)."""
    return _state.depth > 0 and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def guard(*, restore: bool = True) -> Iterator[None]:
    """Install the handler of :data:`SIGNALS` (armed) for the duration of the block, restoring the
    previous handlers afterwards. Nested calls and calls outside the main thread do nothing.

    ``restore=False`` (a program about to exit, the CLI): afterwards both signals are ignored
    (``SIG_IGN``, which Python's finalisation keeps, unlike a Python handler), so one arriving during
    the interpreter's shutdown cannot kill a process whose work is done (its exit code is the
    program's)."""
    if _state.depth > 0:
        _state.depth += 1
        try:
            yield
        finally:
            _state.depth -= 1
        return
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.previous = {s: signal.getsignal(s) for s in _handled()}
    _state.pending = []
    _state.armed = True
    _state.depth = 1
    for s in _state.previous:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        _state.armed = False
        _state.depth = 0
        for s, h in _state.previous.items():
            signal.signal(s, h if restore else signal.SIG_IGN)  # type: ignore[arg-type]


def arm() -> None:
    """Let the next signal raise :class:`Interrupted` at once; one already pending raises now."""
    if not _active():
        return
    if _state.pending:
        raise Interrupted(_state.pending.pop(0))
    _state.armed = True


def disarm() -> None:
    """Record signals instead of raising them (until :func:`arm`)."""
    if _active():
        _state.armed = False


def is_armed() -> bool:
    return _active() and _state.armed


def pending() -> int | None:
    """The first signal recorded while disarmed (not consumed), or None."""
    return _state.pending[0] if _state.pending else None


def take_pending() -> int | None:
    """The first signal recorded while disarmed, consumed (the rest are dropped), or None."""
    signum = _state.pending[0] if _state.pending else None
    _state.pending.clear()
    return signum


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A section no signal interrupts: disarmed inside; re-armed on exit (a signal that arrived
    meanwhile then raises) only if it was armed on entry."""
    was = is_armed()
    disarm()
    try:
        yield
    finally:
        if was:
            arm()
