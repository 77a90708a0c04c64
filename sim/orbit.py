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
            self._R0f, self._cf, self._omf = tuple(R0.ravel().tolist()), tuple(self._c.tolist()), tuple(o0.tolist())
        self._R_init, self._o_init = R0, o0
        self._Ri = R0.ravel().tolist()
        self._oi = tuple(o0.tolist())

    @property
    def duration(self) -> float:
        return self.inner.duration

    @property
    def segments(self):  # noqa: ANN201 - the inner planner's tuple of Segment
        return self.inner.segments

    def target_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(R_world_target (3, 3), origin o (3,), ȯ (3,), ω (3,)) now, world axes (arrays; for tests and
        tools — :meth:`evaluate` runs the same arithmetic on floats)."""
        R, o, od, w = self._state_floats()
        return np.array(R).reshape(3, 3), np.array(o), np.array(od), np.array(w)

    def _state_floats(self) -> tuple[list[float], tuple, tuple, tuple]:
        """The target's R (row-major, 9 floats), o, ȯ, ω (world axes) on Python floats."""
        q, v = self._qpos, self._qvel
        R9 = self._R9
        _quat2Mat(R9, q[3:7])
        if self.floating:
            r = R9.tolist()
            o0, o1, o2, _, _, _, _ = q.tolist()
            d0, d1, d2, b0, b1, b2 = v.tolist()
            w = (
                r[0] * b0 + r[1] * b1 + r[2] * b2, r[3] * b0 + r[4] * b1 + r[5] * b2, r[6] * b0 + r[7] * b1 + r[8] * b2
            )
            return r, (o0, o1, o2), (d0, d1, d2), w
        # compliant: R = R0 R_b, o = o_model + R0 (s + c − R_b c), ω = R ω_b, ȯ = R0 ṡ − ω × (R c)
        (a00, a01, a02, a10, a11, a12, a20, a21, a22), (c0, c1, c2), (m0, m1, m2) = self._R0f, self._cf, self._omf
        b00, b01, b02, b10, b11, b12, b20, b21, b22 = R9.tolist()
        s0, s1, s2, _, _, _, _ = q.tolist()
        sd0, sd1, sd2, wb0, wb1, wb2 = v.tolist()
        r = [
            a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22,
            a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
            a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22,
        ]
        # y = s + c − R_b c (target axes at rest), o = o_model + R0 y
        y0 = s0 + c0 - (b00 * c0 + b01 * c1 + b02 * c2)
        y1 = s1 + c1 - (b10 * c0 + b11 * c1 + b12 * c2)
        y2 = s2 + c2 - (b20 * c0 + b21 * c1 + b22 * c2)
        o = (
            m0 + a00 * y0 + a01 * y1 + a02 * y2,
            m1 + a10 * y0 + a11 * y1 + a12 * y2,
            m2 + a20 * y0 + a21 * y1 + a22 * y2,
        )
        w0 = r[0] * wb0 + r[1] * wb1 + r[2] * wb2
        w1 = r[3] * wb0 + r[4] * wb1 + r[5] * wb2
        w2 = r[6] * wb0 + r[7] * wb1 + r[8] * wb2
        k0 = r[0] * c0 + r[1] * c1 + r[2] * c2  # R c
        k1 = r[3] * c0 + r[4] * c1 + r[5] * c2
        k2 = r[6] * c0 + r[7] * c1 + r[8] * c2
        od = (
            (a00 * sd0 + a01 * sd1 + a02 * sd2) - (w1 * k2 - w2 * k1),
            (a10 * sd0 + a11 * sd1 + a12 * sd2) - (w2 * k0 - w0 * k2),
            (a20 * sd0 + a21 * sd1 + a22 * sd2) - (w0 * k1 - w1 * k0),
        )
        return r, o, od, (w0, w1, w2)

    def evaluate(self, t: float, out: Reference) -> None:
        """The inner plan at time ``t`` [s], carried by the target's current displacement (3-vector
        algebra on Python floats: a numpy call on a 3-vector costs more than its arithmetic)."""
        self.inner.evaluate(t, out)
        r, (o0, o1, o2), (od0, od1, od2), (w0, w1, w2) = self._state_floats()
        a = self._Ri  # rows of R(0)ᵀ... R_D = R R(0)ᵀ: (R_D)_ij = Σ_k R_ik R0_jk
        D = [
            [r[3 * i] * a[3 * j] + r[3 * i + 1] * a[3 * j + 1] + r[3 * i + 2] * a[3 * j + 2] for j in range(3)]
            for i in range(3)
        ]
        (D00, D01, D02), (D10, D11, D12), (D20, D21, D22) = D
        (p0, p1, p2, v0, v1, v2, c0, c1, c2, R00, R01, R02, R10, R11, R12, R20, R21, R22, m0, m1, m2, e0, e1, e2) = (
            out.flat.tolist()
        )
        i0, i1, i2 = self._oi
        y0, y1, y2 = p0 - i0, p1 - i1, p2 - i2
        x0 = o0 + D00 * y0 + D01 * y1 + D02 * y2  # x = o + R_D (x_p − o(0))
        x1 = o1 + D10 * y0 + D11 * y1 + D12 * y2
        x2 = o2 + D20 * y0 + D21 * y1 + D22 * y2
        q0, q1, q2 = x0 - o0, x1 - o1, x2 - o2  # r = x − o
        u0 = D00 * v0 + D01 * v1 + D02 * v2  # R_D v_p
        u1 = D10 * v0 + D11 * v1 + D12 * v2
        u2 = D20 * v0 + D21 * v1 + D22 * v2
        g0 = D00 * m0 + D01 * m1 + D02 * m2  # R_D ω_p
        g1 = D10 * m0 + D11 * m1 + D12 * m2
        g2 = D20 * m0 + D21 * m1 + D22 * m2
        wr0, wr1, wr2 = w1 * q2 - w2 * q1, w2 * q0 - w0 * q2, w0 * q1 - w1 * q0  # ω × r
        wu0, wu1, wu2 = w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0  # ω × R_D v_p
        ww0, ww1, ww2 = w1 * wr2 - w2 * wr1, w2 * wr0 - w0 * wr2, w0 * wr1 - w1 * wr0  # ω × (ω × r)
        wg0, wg1, wg2 = w1 * g2 - w2 * g1, w2 * g0 - w0 * g2, w0 * g1 - w1 * g0  # ω × R_D ω_p
        out.flat[:] = (
            x0, x1, x2,
            od0 + wr0 + u0, od1 + wr1 + u1, od2 + wr2 + u2,
            (D00 * c0 + D01 * c1 + D02 * c2) + 2.0 * wu0 + ww0,
            (D10 * c0 + D11 * c1 + D12 * c2) + 2.0 * wu1 + ww1,
            (D20 * c0 + D21 * c1 + D22 * c2) + 2.0 * wu2 + ww2,
            D00 * R00 + D01 * R10 + D02 * R20, D00 * R01 + D01 * R11 + D02 * R21, D00 * R02 + D01 * R12 + D02 * R22,
            D10 * R00 + D11 * R10 + D12 * R20, D10 * R01 + D11 * R11 + D12 * R21, D10 * R02 + D11 * R12 + D12 * R22,
            D20 * R00 + D21 * R10 + D22 * R20, D20 * R01 + D21 * R11 + D22 * R21, D20 * R02 + D21 * R12 + D22 * R22,
            w0 + g0, w1 + g1, w2 + g2,
            (D00 * e0 + D01 * e1 + D02 * e2) + wg0,
            (D10 * e0 + D11 * e1 + D12 * e2) + wg1,
            (D20 * e0 + D21 * e1 + D22 * e2) + wg2,
        )


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
