"""In-orbit runs: the reference that rides on a moving target, and the telemetry of floating bodies.

:class:`TargetTracking`
    For a moving target (``target.mount`` floating or compliant with ``track: true``) the planner's plan
    is made in the target's INITIAL frame (as for a fixed target) and carried by the target's rigid
    displacement since t = 0, D(t) = T_world_target(t) T_world_target(0)⁻¹ (rotation R_D, target origin
    o(t), its velocity ȯ and angular velocity ω, world axes). For the planned point x_p, velocity v_p,
    acceleration a_p, orientation R_p, ω_p, α_p (world axes)::

        x = o + R_D (x_p − o(0)),   r = x − o
        v = ȯ + ω × r + R_D v_p
        a = R_D a_p + 2 ω × (R_D v_p) + ω × (ω × r)
        R = R_D R_p,   ω_d = ω + R_D ω_p,   α_d = R_D α_p + ω × (R_D ω_p)

    i.e. the plan seen from the target frame is unchanged. The target's pose and twist come from the
    plant's state (perfect relative navigation, no latency); its own accelerations (α, ö: contact and
    gyroscopic terms a navigation filter would not deliver) are not fed forward.

:class:`OrbitTelemetry`
    Records the base's and the target's joint states and MuJoCo's subtree momentum sensors every control
    step (hidden block columns: no per-step cost beyond the row copy) and derives after the run the
    channels of :data:`CHANNELS`: base and target pose and twist, the total momentum of every body in the
    scene, the momentum of each part, and the centre of mass of the whole system. telemetry/metrics.py turns
    them into the ``orbit.*`` metrics (docs/metrics.md).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from dockbench.planners.base import Planner, Reference
from dockbench.sim import lie

_quat2Mat = mujoco.mju_quat2Mat

#: channel → (per-step shape, unit, meaning); every vector in world axes
CHANNELS: dict[str, tuple[tuple[int, ...], str, str]] = {
    "base_pos": ((3,), "m", "arm base frame origin, world (free-floating base)"),
    "base_quat": ((4,), "", "arm base orientation (w, x, y, z), world"),
    "base_vel": ((6,), "m/s | rad/s", "base twist [v of its origin; ω], world axes"),
    "target_pos": ((3,), "m", "target frame origin (the drogue mouth), world (moving target)"),
    "target_quat": ((4,), "", "target orientation (w, x, y, z), world"),
    "target_vel": ((6,), "m/s | rad/s", "target twist [v of its centre of mass; ω], world axes"),
    "target_qpos": ((7,), "m | —", "the target joints' qpos (free joint, or three slides and a ball), for replay"),
    "momentum": ((6,), "N·s | N·m·s", "total momentum [P; L] of every body, L about the world origin (at momentum_t)"),
    "momentum_target": ((6,), "N·s | N·m·s", "target's momentum [P; L about its own centre of mass] (at momentum_t)"),
    "momentum_abs": ((2,), "N·s | N·m·s", "Σ over the parts (bus, arm, target) of ‖P‖ and of ‖L about the system COM‖"),
    "momentum_t": ((), "s", "time of the state the momentum channels describe (one physics step before t)"),
    "system_com": ((3,), "m", "centre of mass of every body hanging from the world (at momentum_t)"),
}


class TargetTracking(Planner):
    """The plan of ``inner`` carried by the target's displacement (module docstring).

    Args:
        inner: the scenario's planner (its plan in the target's initial frame, world axes).
        data: the run's MjData (read every :meth:`evaluate`: the target's joints' qpos / qvel).
        model: the MjModel (joint layout, the compliant mount's pivot).
        target_body: MuJoCo body id of the target.
        qpos, qvel: slices of the target's joints (a free joint, or three slides and a ball).
        floating: True for the free joint, False for slides + ball (compliant).
    """

    def __init__(self, inner: Planner, data: mujoco.MjData, model: mujoco.MjModel, target_body: int,
                 qpos: slice, qvel: slice, floating: bool):
        self.inner = inner
        self.config = inner.config
        self.ctx = inner.ctx
        self.type_name = getattr(inner, "type_name", type(inner).__name__)
        self._qpos = data.qpos[qpos]  # views: MjData's buffers never move
        self._qvel = data.qvel[qvel]
        self.floating = floating
        self._R9 = np.zeros(9)
        b = target_body
        if floating:
            q = np.array(self._qpos)
            _quat2Mat(self._R9, q[3:7])
            R0, o0 = self._R9.reshape(3, 3).copy(), q[0:3].copy()
        else:
            # slides + ball about the pivot c (target axes): at qpos0 the body sits at its model pose
            j = int(model.body_jntadr[b]) + 3
            self._c = np.array(model.jnt_pos[j], dtype=float)
            R0 = np.array(model.body_quat[b])
            Rm = np.zeros(9)
            _quat2Mat(Rm, R0)
            R0 = Rm.reshape(3, 3).copy()
            o0 = np.array(model.body_pos[b], dtype=float)
            self._R0 = R0
            self._o_model = o0.copy()
        self._R_init, self._o_init = R0, o0

    @property
    def duration(self) -> float:
        return self.inner.duration

    @property
    def segments(self):  # noqa: ANN201 - the inner planner's tuple of Segment
        return self.inner.segments

    def target_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(R_world_target (3, 3), origin o (3,), ȯ (3,), ω (3,)) now, world axes, from the target joints'
        qpos / qvel. The 3×3 products are sim/lie.py's element-wise forms (:func:`~dockbench.sim.lie.mul3`):
        the same floats on every CPU."""
        q, v = self._qpos, self._qvel
        _quat2Mat(self._R9, q[3:7])
        R_b = self._R9.reshape(3, 3)  # the joint's rotation
        if self.floating:  # free joint: qpos = [o; quaternion], qvel = [ȯ; ω_b] (ω_b in body axes)
            return R_b, q[0:3], v[0:3], lie.mul3(R_b, v[3:6])  # ω = R ω_b
        # compliant: slides s and a ball R_b about the pivot c (target axes at rest)
        R0, c, s, s_dot, w_b = self._R0, self._c, q[0:3], v[0:3], v[3:6]
        R = lie.matmul3(R0, R_b)  # R = R0 R_b
        y = s + c - lie.mul3(R_b, c)  # y = s + c − R_b c
        o = lie.add_mul3(self._o_model, R0, y)  # o = o_model + R0 y
        w = lie.mul3(R, w_b)  # ω = R ω_b
        o_dot = lie.mul3(R0, s_dot) - lie.cross3(w, lie.mul3(R, c))  # ȯ = R0 ṡ − ω × (R c)
        return R, o, o_dot, w

    def evaluate(self, t: float, out: Reference) -> None:
        """The inner plan at time ``t`` [s], carried by the target's current displacement (module docstring,
        one statement per equation)."""
        self.inner.evaluate(t, out)
        R, o, o_dot, w = self.target_state()
        R_D = lie.matmul3(R, self._R_init.T)  # R_D = R R(0)ᵀ
        x = lie.add_mul3(o, R_D, out.pos - self._o_init)  # x = o + R_D (x_p − o(0))
        r = x - o  # r = x − o
        Rv = lie.mul3(R_D, out.vel)  # R_D v_p
        Rw = lie.mul3(R_D, out.omega)  # R_D ω_p
        w_r = lie.cross3(w, r)  # ω × r
        # a = R_D a_p + 2 ω × (R_D v_p) + ω × (ω × r)
        acc = lie.mul3(R_D, out.acc) + 2.0 * lie.cross3(w, Rv) + lie.cross3(w, w_r)
        alpha = lie.mul3(R_D, out.alpha) + lie.cross3(w, Rw)  # α_d = R_D α_p + ω × (R_D ω_p)
        out.R[:] = lie.matmul3(R_D, out.R)  # R = R_D R_p
        out.pos[:] = x
        out.vel[:] = o_dot + w_r + Rv  # v = ȯ + ω × r + R_D v_p
        out.acc[:] = acc
        out.omega[:] = w + Rw  # ω_d = ω + R_D ω_p
        out.alpha[:] = alpha


#: sensor name prefixes of the momentum sensors (sim/mounts.py: add_momentum_sensors)
SENSOR_PREFIX = "orbit_"


class OrbitTelemetry:
    """Floating-body telemetry of one run (module docstring).

    The momentum channels come from MuJoCo's subtree sensors (linear velocity, angular momentum about the
    subtree's centre of mass, centre of mass; sim/mounts.py :func:`~sim.mounts.add_momentum_sensors`) of
    each body hanging from the world and of the arm's first body: MuJoCo evaluates them in the forward pass
    at the START of each physics step, so the sensors read at control step i describe the state one
    physics step before t_i (i ≥ 1; row 0 is the initial state). :meth:`derive` stamps them with those
    times (``momentum_t``). Base and target poses and twists come from the recorded joint states at t_i.

    Args:
        model: the MjModel (with the momentum sensors).
        data: the run's MjData.
        base_body: body id of the free-floating base (-1 for a fixed base).
        target_body: body id of a moving target (-1 for a fixed one or none).
        base_qpos, base_qvel: the base free joint's qpos (7) / qvel (6) slices.
        target_qpos, target_qvel: the target joints' slices; target_floating: a free joint (else slides +
            ball, the compliant mount).
        timestep: MuJoCo's step [s] (the sensors' lag).
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, base_body: int, target_body: int,
                 base_qpos: slice, base_qvel: slice, target_qpos: slice, target_qvel: slice,
                 target_floating: bool, timestep: float):
        self.m, self.d = model, data
        self.base_body, self.target_body = base_body, target_body
        self.base_qpos, self.base_qvel = base_qpos, base_qvel
        self.target_qpos, self.target_qvel, self.target_floating = target_qpos, target_qvel, target_floating
        self.timestep = timestep
        names = ["momentum", "momentum_abs", "momentum_t", "system_com"]
        if base_body >= 0:
            names += ["base_pos", "base_quat", "base_vel"]
        if target_body >= 0:
            names += ["target_pos", "target_quat", "target_vel", "momentum_target", "target_qpos"]
        #: name → (shape, unit) for Telemetry(extra_shaped=...)
        self.channels = {n: (CHANNELS[n][0], CHANNELS[n][1]) for n in names}
        # the momentum sensors: (body id, sensordata address of [linvel, angmom, com]) per body
        self.bodies: list[int] = []
        adr = []
        for sid in range(model.nsensor):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, sid) or ""
            if name.startswith(SENSOR_PREFIX + "P_"):
                self.bodies.append(int(model.sensor_objid[sid]))
                adr.append(int(model.sensor_adr[sid]))
        #: mass of every body hanging from the world [kg] (the system whose centre of mass is recorded)
        self.system_mass = float(sum(model.body_subtreemass[b] for b in self.bodies if model.body_parentid[b] == 0))
        lo = min(adr) if adr else 0
        hi = lo + 9 * len(adr)
        self._sensors = data.sensordata[lo:hi]
        self._n_bodies = len(adr)
        #: hidden per-step block columns (Telemetry(raw=...)) and their sources (views of MjData)
        self.raw = {"orbit_sensors": hi - lo}
        self.sources = {"orbit_sensors": self._sensors}
        if base_body >= 0:
            self.raw.update(orbit_base_qpos=7, orbit_base_qvel=6)
            self.sources.update(orbit_base_qpos=data.qpos[base_qpos], orbit_base_qvel=data.qvel[base_qvel])
        if target_body >= 0:
            self.raw.update(orbit_target_qpos=target_qpos.stop - target_qpos.start,
                            orbit_target_qvel=target_qvel.stop - target_qvel.start)
            self.sources.update(orbit_target_qpos=data.qpos[target_qpos], orbit_target_qvel=data.qvel[target_qvel])
        # the arm's first body (a child of the base) splits the chaser's momentum into bus and arm parts
        self._arm_root = -1
        if base_body >= 0:
            arm = [b for b in self.bodies if model.body_parentid[b] == base_body]
            self._arm_root = arm[0] if arm else -1
        if target_body >= 0 and not target_floating:
            j = int(model.body_jntadr[target_body]) + 3  # the ball joint: pivot c in target axes
            self._c = np.array(model.jnt_pos[j], dtype=float)
            self._o_model = np.array(model.body_pos[target_body], dtype=float)
            R0 = np.zeros(9)
            _quat2Mat(R0, np.array(model.body_quat[target_body], dtype=float))
            self._R0 = R0.reshape(3, 3)

    def derive(self, tel: Any, n: int | None = None) -> None:
        """Fill the channels of the first ``n`` rows of the telemetry's block (default ``tel.n``: a run
        held in memory), vectorised, once per block (a long run's block holds steps ``tel.base`` on)."""
        n = tel.n if n is None else n
        if n == 0:
            return
        from dockbench.telemetry.metrics import quat_to_matrix

        m = self.m
        A = tel.arrays
        k = self._n_bodies
        S = tel.raw["orbit_sensors"][:n].reshape(n, k, 9)
        lin, ang, com = S[:, :, 0:3], S[:, :, 3:6], S[:, :, 6:9]
        idx = np.array(self.bodies, dtype=np.intp)
        mass = m.body_subtreemass[idx]
        roots = np.array([m.body_parentid[b] == 0 for b in idx])
        P_b = lin * mass[None, :, None]
        P = P_b[:, roots].sum(axis=1)
        L = (ang[:, roots] + np.cross(com[:, roots], P_b[:, roots])).sum(axis=1)  # about the world origin
        C = (com[:, roots] * mass[None, roots, None]).sum(axis=1) / mass[roots].sum()
        A["momentum"][:n, :3], A["momentum"][:n, 3:] = P, L
        A["system_com"][:n] = C
        t = tel.arrays["t"][:n]
        A["momentum_t"][:n] = np.maximum(t - self.timestep, 0.0)  # the sensors' state (class docstring)
        if getattr(tel, "base", 0) == 0:
            A["momentum_t"][0] = 0.0
        # parts: each body under the world, the free-floating chaser's split into the arm and the bus (+ link 0)
        pos = {int(b): j for j, b in enumerate(idx)}
        parts = []  # (P, L about its own centre of mass, centre of mass)
        for j, b in enumerate(idx):
            if not roots[j]:
                continue
            if b == self.base_body and self._arm_root >= 0:
                ja = pos[self._arm_root]
                ma, mc = mass[ja], mass[j]
                Pa, ca, La = P_b[:, ja], com[:, ja], ang[:, ja]
                Pbus = P_b[:, j] - Pa
                cbus = (mc * com[:, j] - ma * ca) / (mc - ma)
                Lo = ang[:, j] + np.cross(com[:, j], P_b[:, j]) - (La + np.cross(ca, Pa))  # bus about the origin
                parts += [(Pa, La, ca), (Pbus, Lo - np.cross(cbus, Pbus), cbus)]
            else:
                parts.append((P_b[:, j], ang[:, j], com[:, j]))
        A["momentum_abs"][:n, 0] = sum(np.linalg.norm(p, axis=1) for p, _, _ in parts)
        A["momentum_abs"][:n, 1] = sum(np.linalg.norm(l + np.cross(c - C, p), axis=1) for p, l, c in parts)
        if self.base_body >= 0:  # the free joint's state: origin, (w, x, y, z), [ṗ (world); ω (base axes)]
            qb, vb = tel.raw["orbit_base_qpos"][:n], tel.raw["orbit_base_qvel"][:n]
            A["base_pos"][:n] = qb[:, :3]
            A["base_quat"][:n] = qb[:, 3:7]
            R = quat_to_matrix(qb[:, 3:7])
            A["base_vel"][:n, :3] = vb[:, :3]
            A["base_vel"][:n, 3:] = np.einsum("nij,nj->ni", R, vb[:, 3:6])
        if self.target_body >= 0:
            b = self.target_body
            qt, vt = tel.raw["orbit_target_qpos"][:n], tel.raw["orbit_target_qvel"][:n]
            A["target_qpos"][:n] = qt
            c_body = np.array(m.body_ipos[b], dtype=float)  # centre of mass in target axes
            if self.target_floating:
                o, quat = qt[:, :3], qt[:, 3:7]
                R = quat_to_matrix(quat)
                w = np.einsum("nij,nj->ni", R, vt[:, 3:6])
                v_o = vt[:, :3]
            else:  # R = R0 R_b, o = o_model + R0 (s + c − R_b c), ω = R ω_b, ȯ = R0 ṡ − ω × (R c)
                Rb = quat_to_matrix(qt[:, 3:7])
                R = np.einsum("ij,njk->nik", self._R0, Rb)
                c = self._c
                o = self._o_model + (qt[:, :3] + c - Rb @ c) @ self._R0.T
                w = np.einsum("nij,nj->ni", R, vt[:, 3:6])
                v_o = vt[:, :3] @ self._R0.T - np.cross(w, R @ c)
                quat = np.zeros((n, 4))
                for i in range(n):  # MuJoCo's conversion (rare: compliant targets only)
                    mujoco.mju_mat2Quat(quat[i], R[i].ravel())
            A["target_pos"][:n] = o
            A["target_quat"][:n] = quat
            A["target_vel"][:n, 3:] = w
            A["target_vel"][:n, :3] = v_o + np.cross(w, R @ c_body)  # v of the centre of mass
            jt = pos[b]
            A["momentum_target"][:n, :3] = P_b[:, jt]
            A["momentum_target"][:n, 3:] = ang[:, jt]
