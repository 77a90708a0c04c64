"""Preallocated telemetry channels, written in place every control step and saved atomically.

Every channel is one numpy array with the step index as its first axis. Names carry the frame and,
for wrenches, the sign convention (``ext`` = environment on tool):

=========================  ========  ==========  ===================================================
channel                    shape     unit        meaning
=========================  ========  ==========  ===================================================
t                          (N,)      s           control-step time
q, v                       (N, nv)   rad, rad/s  arm joint positions / velocities
tau_cmd                    (N, nv)   N·m         controller torque before clipping
tau_applied                (N, nv)   N·m         torque sent to MuJoCo (clipped to limits)
saturated                  (N,)      bool        any joint clipped this step
ee_pos                     (N, 3)    m           EE (tool tip) origin, world
ee_quat                    (N, 4)    —           EE orientation, world, (w, x, y, z)
ee_vel                     (N, 6)    m/s, rad/s  EE twist [v; ω], world axes at the EE origin
ee_pos_des, ee_vel_des     (N, 3)    m, m/s      planner reference, world
ee_acc_des                 (N, 3)    m/s²        planner reference acceleration, world
ee_quat_des                (N, 4)    —           desired orientation, world, (w, x, y, z)
ee_omega_des               (N, 3)    rad/s       desired angular velocity, world
wrench_ext_world           (N, 6)    N, N·m      F/T: env-on-tool [f; n], world axes, about sensor S
wrench_ext_body            (N, 6)    N, N·m      F/T: env-on-tool, EE axes, about the EE origin
wrench_truth_world         (N, 6)    N, N·m      contact truth, same frame as wrench_ext_world
wrench_truth_body          (N, 6)    N, N·m      contact truth, same frame as wrench_ext_body
wrench_used_world          (N, 6)    N, N·m      the wrench the controller used (sensor/truth/observer)
contact_count              (N,)      —           contacts involving the tool
contact_count_all          (N,)      —           all active contacts in the scene
contact_force_peak         (N,)      N           max ‖f‖ of the contact truth over the MuJoCo substeps of
                                                 the control period ending at t (sim.wrench.SubstepContact)
contact_axial_force_peak   (N,)      N           max |fᵀa| over those substeps (a: the mating axis)
contact_count_peak         (N,)      —           max number of tool contacts over those substeps
manipulability             (N,)      —           sqrt(det(J Jᵀ)) of the EE Jacobian
ctrl_<name>                (N,)      varies      controller diagnostics (see the controller's docs)
=========================  ========  ==========  ===================================================
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

#: name → (per-step shape using "nv" for the arm dof count, dtype, unit, doc)
CHANNELS: dict[str, tuple[tuple, str, str, str]] = {
    "t": ((), "f8", "s", "control-step time"),
    "q": (("nv",), "f8", "rad", "arm joint positions"),
    "v": (("nv",), "f8", "rad/s", "arm joint velocities"),
    "tau_cmd": (("nv",), "f8", "N·m", "controller torque before clipping"),
    "tau_applied": (("nv",), "f8", "N·m", "torque applied (clipped)"),
    "saturated": ((), "?", "", "any joint torque clipped"),
    "ee_pos": ((3,), "f8", "m", "EE origin, world"),
    "ee_quat": ((4,), "f8", "", "EE orientation (w,x,y,z), world"),
    "ee_vel": ((6,), "f8", "m/s|rad/s", "EE twist [v; w], world axes"),
    "ee_pos_des": ((3,), "f8", "m", "desired EE position, world"),
    "ee_vel_des": ((3,), "f8", "m/s", "desired EE velocity, world"),
    "ee_acc_des": ((3,), "f8", "m/s^2", "desired EE acceleration, world"),
    "ee_quat_des": ((4,), "f8", "", "desired EE orientation (w,x,y,z), world"),
    "ee_omega_des": ((3,), "f8", "rad/s", "desired EE angular velocity, world"),
    "wrench_ext_world": ((6,), "f8", "N|N·m", "F/T env-on-tool [f;n], world axes, about the sensor"),
    "wrench_ext_body": ((6,), "f8", "N|N·m", "F/T env-on-tool [f;n], EE axes, about the EE origin"),
    "wrench_truth_world": ((6,), "f8", "N|N·m", "contact truth, world axes, about the sensor"),
    "wrench_truth_body": ((6,), "f8", "N|N·m", "contact truth, EE axes, about the EE origin"),
    "wrench_used_world": ((6,), "f8", "N|N·m", "wrench fed to the controller, world axes"),
    "contact_count": ((), "i4", "", "contacts involving the tool"),
    "contact_count_all": ((), "i4", "", "all contacts in the scene"),
    "contact_force_peak": ((), "f8", "N", "max |f| of the contact truth over the substeps of the period ending at t"),
    "contact_axial_force_peak": ((), "f8", "N", "max |f.a| (a: mating axis) over the substeps of the period"),
    "contact_count_peak": ((), "i4", "", "max tool contacts over the substeps of the period"),
    "manipulability": ((), "f8", "", "sqrt(det(J J^T))"),
}


class Telemetry:
    """Preallocated arrays for ``n_steps`` control steps (see :data:`CHANNELS`).

    The per-step channels of :data:`CHANNELS` and the scalar ``extra`` channels live side by side in
    ONE float64 block of shape (n_steps, W); each channel is a column view of it (in the order
    :attr:`row_channels`), so the loop records a whole step with a single
    ``np.concatenate(sources, out=block[i])``. Boolean and integer channels are stored as floats and
    converted back by :meth:`channels`. ``extra_shaped`` channels (e.g. the hand's) are separate
    arrays written by their owner.

    Args:
        n_steps: capacity.
        nv: arm dof count.
        extra: additional scalar channels (e.g. ``ctrl_qp_solve_time``) → unit.
        extra_shaped: additional channels with a per-step shape → (shape, unit) (e.g. hand joints).
        raw: hidden per-step block columns (name → width) that the recorder copies each step and
            turns into ``derived`` channels afterwards (:attr:`raw` holds their column views; they
            are not channels and are not saved).
        derived: channels of :data:`CHANNELS` that are not copied per step but computed from the
            ``raw`` columns once the run ends (e.g. quaternions from rotation matrices); they are
            separate arrays of the same shape.
    """

    def __init__(
        self,
        n_steps: int,
        nv: int,
        extra: dict[str, str] | None = None,
        extra_shaped: dict[str, tuple[tuple[int, ...], str]] | None = None,
        raw: dict[str, int] | None = None,
        derived: tuple[str, ...] = (),
    ):
        self.capacity = n_steps
        self.n = 0
        self.units: dict[str, str] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self._dtypes: dict[str, str] = {}
        widths: dict[str, int] = {}
        for name, (shape, dtype, unit, _doc) in CHANNELS.items():
            dims = tuple(nv if s == "nv" else s for s in shape)
            widths[name] = int(np.prod(dims)) if dims else 0  # 0 = scalar channel
            self._dtypes[name] = dtype
            self.units[name] = unit
        for name, unit in (extra or {}).items():
            widths[name] = 0
            self._dtypes[name] = "f8"
            self.units[name] = unit
        unknown = [name for name in derived if name not in CHANNELS]
        if unknown:
            raise ValueError(f"derived channels must be standard channels, got {unknown}")
        derived_widths = {name: widths.pop(name) for name in derived}
        raw = dict(raw or {})
        #: block column order of the per-step row: row channels, then the raw columns
        self.row_channels: tuple[str, ...] = tuple(widths) + tuple(raw)
        total = sum(max(w, 1) for w in widths.values()) + sum(raw.values())
        self.block = np.zeros((n_steps, total))
        #: hidden raw columns (name → (n_steps, width) view of the block)
        self.raw: dict[str, np.ndarray] = {}
        col = 0
        for name, w in widths.items():
            if w == 0:
                self.arrays[name] = self.block[:, col]
                col += 1
            else:
                self.arrays[name] = self.block[:, col : col + w]
                col += w
        for name, w in raw.items():
            self.raw[name] = self.block[:, col : col + w]
            col += w
        for name, w in derived_widths.items():
            self.arrays[name] = np.zeros(n_steps) if w == 0 else np.zeros((n_steps, w))
        for name, (shape, unit) in (extra_shaped or {}).items():
            self.arrays[name] = np.zeros((n_steps,) + tuple(shape))
            self.units[name] = unit
        # direct attribute access (tests, tools)
        for name, arr in self.arrays.items():
            setattr(self, name, arr)

    def channels(self) -> dict[str, np.ndarray]:
        """The recorded part (first ``n`` steps) of every channel: float channels as views, bool and
        integer channels converted to their dtype."""
        out = {}
        for k, v in self.arrays.items():
            dtype = self._dtypes.get(k, "f8")
            out[k] = v[: self.n] if dtype == "f8" else v[: self.n].astype(dtype)
        return out

    def save(self, path: str | Path) -> None:
        """Write the recorded steps to ``path`` (.npz) atomically (temp file + rename)."""
        atomic_save_npz(path, self.channels())


def atomic_save_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
