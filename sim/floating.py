"""The free-floating base: the arm's snapshot with the base momentum eliminated.

An arm on a free-floating spacecraft (``robot.base: {type: free_floating}``, sim/mounts.py) has the
generalised velocity ν = [ν_b; q̇] (ν_b the base twist in base axes, Pinocchio's free-flyer) and

    [[H_b,   H_bm], [H_bmᵀ, H_m]] [ν̇_b; q̈] + [c_b; c_m] = [0; τ] + [J_bᵀ; J_mᵀ] F_ext,

no actuator on the base. Eliminating ν̇_b with the base's six rows gives the reduced arm dynamics
(Umetani & Yoshida's generalized Jacobian J*, the reduced inertia H* and bias c*), which
:class:`FloatingBaseDynamics` writes into the fields of :class:`sim.dynamics.Snapshot` the controllers
already read, so the Khatib, SE(3) and HQP laws run on it unchanged. docs/theory/floating_base.md
derives every quantity; tests/paper/test_floating_base.py checks them numerically and
tests/test_floating_consistency.py against MuJoCo.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin
from dockbench.sim import kernels
from dockbench.sim.dynamics import Dynamics, Snapshot, manipulability
from dockbench.sim.errors import ModelError
from scipy.linalg.lapack import dposv as _dposv

_negQuat = mujoco.mju_negQuat
_rotVecQuat = mujoco.mju_rotVecQuat


class FloatingSnapshot(Snapshot):
    """The snapshot of an arm on a free-floating base (docs/theory/floating_base.md).

    The fields of :class:`Snapshot` keep their names, shapes (arm size n) and frames, and hold the
    quantities of the arm's motion with the base's momentum eliminated (Umetani & Yoshida's generalized
    Jacobian and the reduced dynamics). With the base twist ν_b (base axes), the arm rates q̇, the full
    mass matrix [[H_b, H_bm], [H_bmᵀ, H_m]], bias [c_b; c_m] and EE Jacobian [J_b, J_m]:

    * ``J_ee_lwa``, ``J_ee_body``: J* = J_m − J_b H_b⁻¹ H_bm (LOCAL_WORLD_ALIGNED / LOCAL at the EE);
    * ``M``: H* = H_m − H_bmᵀ H_b⁻¹ H_bm;  ``Minv``: H*⁻¹;
    * ``h``: c* = c_m − H_bmᵀ H_b⁻¹ c_b;  ``g``: its gravity part g* (zero for a uniform field);
    * ``dJdq_ee_lwa`` / ``dJdq_ee_body``: a* = J̇ν − J_b H_b⁻¹ c_b, the EE acceleration at q̈ = 0 with no
      external wrench, after :meth:`FloatingBaseDynamics.update`; :meth:`FloatingBaseDynamics.apply_wrench`
      then adds the base's own response Λ_b⁻¹ F_ext to the measured contact wrench (the control loop does,
      every step), so that the EE acceleration is J* q̈ + dJdq while the arm obeys
      H* q̈ + c* = τ + J*ᵀ F_ext (docs/theory/floating_base.md);
    * ``twist_ee_lwa`` / ``twist_ee_body``, ``T_world_ee``, ``T_world_sensor``: the ACTUAL EE motion and
      poses, base motion included (= J* q̇ only at zero chaser momentum);
    * ``manipulability``: sqrt(det(J* J*ᵀ)).

    Only here (floating bases):

    * ``q_full`` (n + 7,), ``v_full`` (n + 6,): Pinocchio's free-flyer state [p, quat (x, y, z, w), q] and
      [v_b; ω_b (base axes); q̇], v_b = Rᵀ ṗ;
    * ``T_world_base`` (4, 4): the base frame B;
    * ``J_ee_lwa_full``, ``J_ee_body_full`` (6, n + 6): the EE Jacobians over the full velocity (base
      columns first); ``M_full``, ``h_full``: the full mass matrix and bias (Pinocchio's buffers; the
      chaser's momentum in base axes is ``M_full[:6] @ v_full``);
    * ``Lambda_b_inv_lwa``, ``Lambda_b_inv_body`` (6, 6): the base's own mobility at the EE,
      Λ_b⁻¹ = J_b H_b⁻¹ J_bᵀ (LOCAL_WORLD_ALIGNED / LOCAL): the EE acceleration a wrench F causes through
      the base alone.
    """

    floating = True

    def __init__(self, nv: int):
        super().__init__(nv)
        nf = nv + 6
        self.q_full = np.zeros(nv + 7)
        self.q_full[6] = 1.0
        #: rows 0–5 J_ee_body_full, rows 6–11 J_ee_lwa_full, row 12 v_full, row 13 spare: [J_body; J_lwa]
        #: is one (12, nf) block (one product eliminates the base from both), rows 6–13 the kinematics
        #: kernel's J_v_h
        self.J_full = np.zeros((14, nf))
        self.J_ee_body_full = self.J_full[0:6]
        self.J_ee_lwa_full = self.J_full[6:12]
        self.v_full = self.J_full[12]
        self.T_world_base = np.eye(4)
        self.M_full = np.zeros((nf, nf))
        self.h_full = np.zeros(nf)
        self.Lambda_b_inv_lwa = np.zeros((6, 6))
        self.Lambda_b_inv_body = np.zeros((6, 6))


class _FullKinematics:
    """The full-state kinematic outputs of a floating base (what :meth:`Dynamics._kinematics_python` and the
    compiled kinematics kernel fill): Jacobians over the full velocity, the actual twists and the poses
    (the last two shared with the reduced snapshot)."""

    def __init__(self, snap: FloatingSnapshot):
        self.J_v_h = snap.J_full[6:14]
        self.J_ee_lwa = snap.J_ee_lwa_full
        self.J_ee_body = snap.J_ee_body_full
        self.v = snap.v_full
        self.T_world_ee, self.p_ee_in_world = snap.T_world_ee, snap.p_ee_in_world
        self.T_world_sensor = snap.T_world_sensor
        self.twist_ee_lwa, self.twist_ee_body = snap.twist_ee_lwa, snap.twist_ee_body
        self.manipulability = 0.0


class FloatingBaseDynamics(Dynamics):
    """One Pinocchio pass per control step on the free-flyer model → :class:`FloatingSnapshot` (the arm's
    quantities with the base momentum eliminated; docs/theory/floating_base.md).

    Args:
        model: the arm on a free-flyer root (:func:`sim.dynamics.pinocchio_model_from_mujoco` with
            ``floating_base``).
        ee_frame, sensor_frame, body_frame, sensor_pose, world_drift: as :class:`Dynamics`.

    The base state is MuJoCo's free-joint state (qpos [p; quat (w, x, y, z)], qvel [ṗ (world); ω (base
    axes)]): :meth:`bind_base` binds views of ``MjData.qpos`` / ``qvel`` once (the control loop), or pass it
    to :meth:`update`. Pinocchio's free-flyer velocity is [Rᵀ ṗ; ω].

    Per step: :meth:`_prepare_python` (the free-flyer state), Pinocchio's kinematics, the kinematic part of
    :class:`Dynamics` on the full state (its compiled kernel is generic in the dof count and runs here
    bound to the n + 6 column Jacobians; Pinocchio's ``computeAllTerms`` gives M, h and g in the same pass),
    the frame drifts and :meth:`_reduce_python` (the elimination). Both Python steps have a compiled kernel
    (``sim/_floating_kernel.c``); the kernel guard compares each kernel with its Python reference.
    """

    def __init__(self, model: pin.Model, ee_frame: int, sensor_frame: int, **flags: bool):
        """Arguments as :class:`sim.dynamics.Dynamics` (``body_frame``, ``sensor_pose``, ``world_drift``)."""
        if model.njoints < 2 or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ModelError("FloatingBaseDynamics needs a model whose first joint is a free flyer")
        options = {"body_frame": True, "sensor_pose": True, "world_drift": True, **flags}
        self._set_frames(model, ee_frame, sensor_frame, **options)
        data = self.data
        nf = model.nv
        n = nf - 6
        self.n = n
        self.snap = s = FloatingSnapshot(n)
        self._kin = _FullKinematics(s)
        self._manip_in_kinematics = False
        self.gravity = bool(np.any(np.asarray(model.gravity.linear) != 0.0))
        self._JJt = np.zeros((6, 6))
        q0 = pin.neutral(model)
        pin.computeAllTerms(model, data, q0, np.zeros(nf))
        M0 = np.array(data.M)
        self._minverse()
        Mi0 = np.array(data.Minv)
        #: Pinocchio versions that fill only the upper triangle of M: symmetrised copies, Python path
        self._symmetrize = not (np.array_equal(M0, M0.T) and np.array_equal(Mi0, Mi0.T))
        self._ilf = np.tril_indices(nf, -1)
        if not self._symmetrize:
            s.M_full = data.M  # Pinocchio's buffers (views every crba / nonLinearEffects overwrites)
        s.h_full = data.nle
        self._R_ee, self._p_ee = data.oMf[ee_frame].rotation, data.oMf[ee_frame].translation
        self._R_s, self._p_s = data.oMf[sensor_frame].rotation, data.oMf[sensor_frame].translation
        self._R_b, self._p_b = data.oMi[1].rotation, data.oMi[1].translation
        #: the full-state EE drifts [p̈; ω̇] (LWA, classical) and the LOCAL spatial acceleration at q̈ = 0
        self._a_lwa = np.zeros(6)
        self._a_body = np.zeros(6)
        self._g_full = np.zeros(nf)
        self._B = np.zeros((6, n + 1))
        self._P = np.zeros((12, n + 1))
        self._Q = np.zeros((n, n + 1))
        self._Hb = np.zeros((6, 6))
        self._Jbt = np.zeros((6, 12))  # [J_b,bodyᵀ | J_b,lwaᵀ]
        self._mob = np.zeros(6)
        self._qc = np.zeros(4)
        self._qb: np.ndarray | None = None
        self._vb: np.ndarray | None = None
        self._fk = None  # the reduction kernel, bound in bind_base (it reads the base views)
        self._fkmod = kernels.load("sim._floating_kernel") if not self._symmetrize else None
        kmod = kernels.load("sim._dynamics_kernel")
        self._kernel = None
        if kmod is not None:
            k = self._kin
            self._kernel = kmod.DynamicsKernel(
                J_world=data.J, R_ee=self._R_ee, p_ee=self._p_ee, R_sensor=self._R_s, p_sensor=self._p_s,
                J_v_h=k.J_v_h, J_ee_body=k.J_ee_body, twist_ee_lwa=k.twist_ee_lwa, twist_ee_body=k.twist_ee_body,
                T_world_ee=k.T_world_ee, T_world_sensor=k.T_world_sensor, body_frame=self.body_frame,
                sensor_pose=self.sensor_pose,
            )
        self._set_kernel_label()

    def _set_kernel_label(self) -> None:
        bound = self._kernel is not None or self._fk is not None or self._fkmod is not None
        self.kernel = "compiled" if bound else "python"

    def bind_base(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Read the base state from these (7,) / (6,) views of MuJoCo's free-joint qpos / qvel every
        :meth:`update` (they must stay valid: views of MjData, whose buffers never move); binds the
        reduction kernel to them."""
        self._qb, self._vb = qpos, qvel
        if self._fkmod is not None:
            s, data = self.snap, self.data
            self._fk = self._fkmod.FloatingKernel(
                base_qpos=qpos, base_qvel=qvel, q=s.q, v=s.v, q_full=s.q_full, v_full=s.v_full,
                M_full=data.M, h_full=data.nle, g_full=self._g_full, J_full=s.J_full, R_base=self._R_b,
                p_base=self._p_b, a_lwa=self._a_lwa, a_body=self._a_body, J_v_h=s.J_v_h, J_ee_body=s.J_ee_body,
                M=s.M, Minv=s.Minv, g=s.g, dJdq_ee_lwa=s.dJdq_ee_lwa, dJdq_ee_body=s.dJdq_ee_body,
                T_world_base=s.T_world_base, Lambda_b_inv_lwa=s.Lambda_b_inv_lwa,
                Lambda_b_inv_body=s.Lambda_b_inv_body, body_frame=self.body_frame, world_drift=self.world_drift,
                gravity=self.gravity,
            )
        self._set_kernel_label()

    def update(
        self,
        q: np.ndarray,
        v: np.ndarray,
        t: float = 0.0,
        base_qpos: np.ndarray | None = None,
        base_qvel: np.ndarray | None = None,
    ) -> FloatingSnapshot:
        """The snapshot at arm positions ``q`` [rad], rates ``v`` [rad/s] and the base state (MuJoCo
        free-joint qpos (7,) / qvel (6,); default: the views of :meth:`bind_base`)."""
        data, s = self.data, self.snap
        explicit = base_qpos is not None or base_qvel is not None
        qb = self._qb if base_qpos is None else base_qpos
        vb = self._vb if base_qvel is None else base_qvel
        if qb is None or vb is None:
            raise ModelError(
                "FloatingBaseDynamics.update: no base state (call bind_base or pass base_qpos and base_qvel)"
            )
        s.t = t
        s.q[:] = q
        s.v[:] = v
        fk = None if explicit else self._fk
        if fk is not None:
            fk.prepare()
        else:
            self._prepare_python(qb, vb)
        qf, vf = s.q_full, s.v_full
        # full-state J, twists, poses and the drifts (the kernel's manipulability is of the full J: unused)
        # (computeAllTerms: M into data.M = s.M_full, h into data.nle = s.h_full, g into data.g)
        self._pinocchio_pass(qf, vf, self._a_body, self._a_lwa)
        if self.gravity:
            self._g_full[:] = data.g
        if fk is not None:
            w = fk.reduce()
            if w >= 0.0:
                s.manipulability = w
                return s
        self._minverse()
        self._reduce_python()
        return s

    def _prepare_python(self, qb: np.ndarray, vb: np.ndarray) -> None:
        """q_full = [p; (x, y, z, w); q], v_full = [Rᵀ ṗ; ω; q̇] from MuJoCo's free-joint state (qb, vb)
        and the snapshot's q, v (the reference of the kernel's ``prepare``)."""
        s = self.snap
        qf, vf = s.q_full, s.v_full
        qf[0:3] = qb[0:3]
        qf[3:6] = qb[4:7]  # (w, x, y, z) → (x, y, z, w)
        qf[6] = qb[3]
        qf[7:] = s.q
        _negQuat(self._qc, qb[3:7])
        _rotVecQuat(vf[0:3], vb[0:3], self._qc)  # base-axes linear velocity Rᵀ ṗ
        vf[3:6] = vb[3:6]
        vf[6:] = s.v

    def _reduce_python(self) -> None:
        """Eliminate the base (docs/theory/floating_base.md): X = H_b⁻¹ [H_bm | c_b], then J*, H*, c*, the
        drifts, H*⁻¹ (the arm block of the full M⁻¹: :meth:`_minverse` must have run on this state), g*,
        T_world_base and w(J*) (the reference of the kernel's ``reduce``)."""
        s, n, data = self.snap, self.n, self.data
        if self._symmetrize:
            s.M_full[:] = data.M
            s.M_full[self._ilf] = s.M_full.T[self._ilf]
            Minv = np.array(data.Minv)
            Minv[self._ilf] = Minv.T[self._ilf]
        else:
            Minv = data.Minv
        M, h = s.M_full, s.h_full
        Hbm = M[:6, 6:]
        B = self._B
        B[:, :n] = Hbm
        B[:, n] = h[:6]
        self._Hb[:] = M[:6, :6]
        _, X, info = _dposv(self._Hb, B)  # H_b is SPD: the composite inertia of the whole chaser
        if info != 0:
            raise ModelError(f"the base's composite inertia H_b is not positive definite (LAPACK dposv info {info})")
        J12 = s.J_full[0:12]  # [J_body_full; J_lwa_full]
        P = self._P
        J12[:, :6].dot(X, out=P)
        np.subtract(J12[6:12, 6:], P[6:12, :n], out=s.J_ee_lwa)
        if self.body_frame:
            np.subtract(J12[0:6, 6:], P[0:6, :n], out=s.J_ee_body)
            np.subtract(self._a_body, P[0:6, n], out=s.dJdq_ee_body)
        if self.world_drift:
            np.subtract(self._a_lwa, P[6:12, n], out=s.dJdq_ee_lwa)
        Q = self._Q
        Hbm.T.dot(X, out=Q)
        np.subtract(M[6:, 6:], Q[:, :n], out=s.M)
        s.M += s.M.T  # symmetric to the last bit: ½ (H* + H*ᵀ)
        s.M *= 0.5
        np.subtract(h[6:], Q[:, n], out=s.h)
        s.Minv[:] = Minv[6:, 6:]
        if self.gravity:
            g = self._g_full
            _, y, _ = _dposv(self._Hb, g[:6])
            np.subtract(g[6:], Hbm.T @ y, out=s.g)
        # the base's own mobility at the EE, Λ_b⁻¹ = J_b H_b⁻¹ J_bᵀ, both frames
        Jbt = self._Jbt
        Jbt[:] = J12[:, :6].T
        _, Z, _ = _dposv(self._Hb, Jbt)
        J12[6:12, :6].dot(Z[:, 6:12], out=s.Lambda_b_inv_lwa)
        J12[0:6, :6].dot(Z[:, 0:6], out=s.Lambda_b_inv_body)
        Tb = s.T_world_base
        Tb[:3, :3] = self._R_b
        Tb[:3, 3] = self._p_b
        s.manipulability = manipulability(s.J_ee_lwa, self._JJt)

    def apply_wrench(self, F_body: np.ndarray) -> None:
        """Add the base's response to the measured contact wrench to the snapshot's drifts:
        dJdq_ee_body += Λ_b⁻¹_body F_body, dJdq_ee_lwa += Λ_b⁻¹_lwa [R f; R n] (``F_body`` (6,): the
        environment-on-tool wrench in EE axes about the EE origin, ``WrenchState.ext_body``). Then
        J* q̈ + dJdq is the EE acceleration in contact too, and each law's task acceleration holds there
        as it does in free space (docs/theory/floating_base.md). Call once after each :meth:`update`."""
        s = self.snap
        if self.body_frame:
            s.Lambda_b_inv_body.dot(F_body, out=self._mob)
            s.dJdq_ee_body += self._mob
        if self.world_drift:
            f0, f1, f2, n0, n1, n2 = F_body.tolist()
            (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = s.R_world_ee.tolist()
            self._mob[:] = (
                r00 * f0 + r01 * f1 + r02 * f2, r10 * f0 + r11 * f1 + r12 * f2, r20 * f0 + r21 * f1 + r22 * f2,
                r00 * n0 + r01 * n1 + r02 * n2, r10 * n0 + r11 * n1 + r12 * n2, r20 * n0 + r21 * n1 + r22 * n2,
            )
            s.dJdq_ee_lwa += s.Lambda_b_inv_lwa.dot(self._mob)

    def _after_kinematics_replaced(self) -> None:
        """The guard replaced the kernel's full-state kinematics by Python's: eliminate the base again from
        them (Python path: every kernel is dropped with :meth:`use_python`)."""
        self._minverse()
        self._reduce_python()

    def use_python(self) -> None:
        """Run the Python references from now on (the guard calls this on a mismatch)."""
        self._kernel = None
        self._fk = None
        self._fkmod = None
        self.kernel = "python"

    # ----------------------------------------------------------------------------------- the guard
    def _reduce_guard_values(self) -> kernels.Values:
        """The outputs of :meth:`_prepare_python` and :meth:`_reduce_python` the guard compares (copies)."""
        s = self.snap
        out = [
            ("q_full", s.q_full.copy()), ("v_full", s.v_full.copy()), ("J*_lwa", s.J_ee_lwa.copy()),
            ("H*", s.M.copy()), ("c*", s.h.copy()), ("H*^-1", s.Minv.copy()),
            ("T_world_base", s.T_world_base.copy()), ("manipulability", np.array([s.manipulability])),
            ("Lambda_b^-1_lwa", s.Lambda_b_inv_lwa.copy()), ("Lambda_b^-1_body", s.Lambda_b_inv_body.copy()),
        ]
        if self.body_frame:
            out += [("J*_body", s.J_ee_body.copy()), ("dJdq*_body", s.dJdq_ee_body.copy())]
        if self.world_drift:
            out.append(("dJdq*_lwa", s.dJdq_ee_lwa.copy()))
        if self.gravity:
            out.append(("g*", s.g.copy()))
        return out

    def _reduce_guard_bounds(self) -> kernels.Bounds:
        """S and κ of each of :meth:`_reduce_guard_values` (sim/kernels.py).

        q_full is a copy (S = 1 + max |q|). v_full's first three entries are ṗ rotated by the base quaternion
        (MuJoCo's mju_rotVecQuat in Python, the same formula in another order in C): S = 1 + max |v|.
        Everything the elimination writes passes through the solve X = H_b⁻¹ [H_bm | c_b | g_b] (κ = κ(H_b))
        and a six-term product with it: S = max |A_m| + 6 max |A_b| max |X| for A = J (both frames), H
        (H_bm for A_b), the bias and the drifts; the base mobility likewise through Z = H_b⁻¹ J_bᵀ,
        S = 6 max |J_b| max |Z|. H*⁻¹ passes through a second solve (κ(H*)) of an H* that carries the first
        solve's error: S = max |H*⁻¹| κ(H_b) S_H / max |H*|, κ = κ(H*). w = sqrt(det(J* J*ᵀ)) is a product of
        Cholesky pivots of J* J*ᵀ: S = w κ(H_b) S_J / max |J*|, κ = κ(J* J*ᵀ)."""
        s, n = self.snap, self.n
        mag, cond = kernels.magnitude, kernels.condition
        M, h = s.M_full, s.h_full
        X = np.linalg.solve(M[:6, :6], np.column_stack([M[:6, 6:], h[:6], self._g_full[:6]]))
        xm, xc, xg = mag(X[:, :n]), mag(X[:, n]), mag(X[:, n + 1])
        k_b = cond(M[:6, :6])
        Jf = s.J_full[0:12]
        sJ = mag(Jf[:, 6:]) + 6.0 * mag(Jf[:, :6]) * xm
        sH = mag(M[6:, 6:]) + 6.0 * mag(M[:6, 6:]) * xm
        sc = mag(h[6:]) + 6.0 * mag(M[:6, 6:]) * xc
        k_h = cond(s.M)
        out = [
            (1.0 + mag(s.q_full), 1.0), (1.0 + mag(s.v_full), 1.0), (sJ, k_b), (sH, k_b), (sc, k_b),
            (mag(s.Minv) * k_b * sH / mag(s.M), k_h), (1.0 + mag(s.T_world_base), 1.0),
            (max(s.manipulability, 1e-300) * k_b * sJ / mag(s.J_ee_lwa), cond(s.J_ee_lwa @ s.J_ee_lwa.T)),
            (6.0 * mag(Jf[6:, :6]) * mag(np.linalg.solve(M[:6, :6], Jf[6:, :6].T)), k_b),
            (6.0 * mag(Jf[:6, :6]) * mag(np.linalg.solve(M[:6, :6], Jf[:6, :6].T)), k_b),
        ]
        if self.body_frame:
            out += [(sJ, k_b), (mag(self._a_body) + 6.0 * mag(Jf[:6, :6]) * xc, k_b)]
        if self.world_drift:
            out.append((mag(self._a_lwa) + 6.0 * mag(Jf[6:, :6]) * xc, k_b))
        if self.gravity:
            out.append((mag(self._g_full[6:]) + 6.0 * mag(M[:6, 6:]) * xg, k_b))
        return out

    def check_kernel(self) -> tuple[float, kernels.KernelMismatch | None]:
        """The kernel guard for the last :meth:`update`: the full-state kinematics (the compiled kinematics
        kernel against :meth:`Dynamics._kinematics_python`, :meth:`Dynamics.check_kernel`), then the base
        elimination (the reduction kernel against :meth:`_prepare_python` + :meth:`_reduce_python` on the
        same Pinocchio data). Agreement keeps the kernels' outputs; a mismatch keeps the Python outputs
        and runs Python from then on. Returns (largest |Δ|/bound, first mismatch or None)."""
        ratio, bad = super().check_kernel() if self._kernel is not None else (0.0, None)
        if bad is not None or self._fk is None:
            return ratio, bad
        s = self.snap
        arrays = (s.q_full, s.v_full, s.J_v_h, s.J_ee_body, s.M, s.Minv, s.g, s.dJdq_ee_lwa, s.dJdq_ee_body,
                  s.T_world_base, s.Lambda_b_inv_lwa, s.Lambda_b_inv_body)

        def reference() -> None:
            self._prepare_python(self._qb, self._vb)
            self._minverse()
            self._reduce_python()

        # the bounds are evaluated only when a difference exceeds the values' own round-off
        r2, bad = self._compare_reference(
            "sim._floating_kernel", s, arrays, self._reduce_guard_values, reference, self._reduce_guard_bounds
        )
        return max(ratio, r2), bad

    def chaser_momentum(self) -> np.ndarray:
        """(6,) spatial momentum [linear; angular] of the whole chaser (base + arm + tool) in base axes,
        angular about the base origin: the first six rows of M ν (Pinocchio's free-flyer convention)."""
        s = self.snap
        return s.M_full[:6] @ s.v_full
