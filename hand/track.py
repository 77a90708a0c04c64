"""The G20 hand bridge's self-test and streams: :func:`run_track_test` (open, then the track of commands;
every command reached within tolerance), recorded command streams (:func:`parse_command_stream`, JSON lines)
and the state as a JSON line (:func:`state_to_json`). The bridge is :class:`hand.bridge.HandBridge`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from dockbench.hand.records import HandState
from dockbench.sim.errors import HandCommandError

if TYPE_CHECKING:
    from dockbench.hand.bridge import HandBridge


@dataclasses.dataclass(frozen=True)
class TrackTestResult:
    """Outcome of :func:`run_track_test`.

    Attributes:
        passed: ``max_error <= tolerance``.
        max_error: max |q - q_nominal| over the active joints at ``check_step`` [rad].
        goal_error: max |q - goal| over the active joints at ``check_step`` [rad] (information).
        tolerance: pass threshold [rad]. check_step: step at which the error is taken.
        mode: drive mode used.
    """

    passed: bool
    max_error: float
    goal_error: float
    tolerance: float
    check_step: int
    mode: str


def run_track_test(
    bridge: HandBridge,
    *,
    open_steps: int = 200,
    check_step: int = 600,
    tolerance: float = 0.02,
    first: str = "open",
    second: str = "half_fist",
) -> TrackTestResult:
    """The track test (docs/theory/g20_hand.md §5): preset ``first`` for ``open_steps`` steps, then ``second``; at
    ``check_step`` the max |q - q_nominal| over the active joints must be ≤ ``tolerance`` [rad].

    Runs in the calling thread (it steps ``bridge``); starts with ``bridge.reset(first)``.
    """
    bridge.reset(first)
    bridge.command_preset(first)
    for k in range(check_step):
        if k == open_steps:
            res = bridge.command_preset(second)
            if not res.accepted:
                raise HandCommandError(res.reason)
        bridge.step()
    snap = bridge.snapshot()
    a = bridge.active_indices
    err = float(np.max(np.abs(snap.applied[a] - snap.nominal[a])))
    goal_err = float(np.max(np.abs(snap.applied[a] - snap.goal[a])))
    return TrackTestResult(err <= tolerance, err, goal_err, tolerance, check_step, bridge.config.mode.value)


@dataclasses.dataclass(frozen=True)
class TimedCommand:
    """One recorded command: ``time`` [s] on the bridge clock, ``command`` an SDK list or a
    ``{joint: rad}`` mapping (validated only when given to the bridge), ``line`` its line number."""

    time: float
    command: Any
    line: int


def parse_command_stream(lines: Any, source: str = "<stream>") -> tuple[list[TimedCommand], list[str]]:
    """Parse a JSON-lines command stream.

    Each non-blank line (``#`` starts a comment line) is an object with a time ``"t"`` [s] and one of
    ``"sdk"`` (list of ≤ 20 SDK values), ``"joints"`` (``{name: rad}``) or ``"cmd"`` (either). Lines that
    are not valid JSON or lack these keys are skipped and reported; the command contents are checked
    later by the bridge (a bad one is refused there, with the reason logged).

    Returns:
        (commands in file order, error messages ``"<source>:<line>: reason"``).
    """
    commands: list[TimedCommand] = []
    errors: list[str] = []
    for n, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            errors.append(f"{source}:{n}: not JSON ({exc.msg})")
            continue
        except (RecursionError, ValueError) as exc:  # nested too deeply; a number literal too long
            errors.append(f"{source}:{n}: not JSON ({type(exc).__name__})")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{source}:{n}: expected an object with 't' and 'sdk'/'joints'/'cmd'")
            continue
        t = obj.get("t")
        keys = [k for k in ("sdk", "joints", "cmd") if k in obj]
        try:
            t_ok = not isinstance(t, bool) and isinstance(t, (int, float)) and math.isfinite(float(t))
        except OverflowError:  # a JSON integer too large for a float
            t_ok = False
        if not t_ok:
            from dockbench.sim.config import short_repr

            errors.append(f"{source}:{n}: missing or bad time 't': {short_repr(t)}")
            continue
        if len(keys) != 1:
            errors.append(f"{source}:{n}: need exactly one of 'sdk', 'joints', 'cmd'")
            continue
        commands.append(TimedCommand(float(t), obj[keys[0]], n))
    return commands, errors


def state_to_json(state: HandState) -> str:
    """One JSON line for a :class:`HandState`: ``{"t", "step", "name", "position", "velocity"}``
    (positions [rad], velocities [rad/s])."""
    return json.dumps(
        {
            "t": round(state.time, 9),
            "step": state.step,
            "name": list(state.names),
            "position": state.positions.tolist(),
            "velocity": state.velocities.tolist(),
        }
    )
