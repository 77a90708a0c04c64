"""Arm dynamics: the Pinocchio model built from the assembled MjModel, and the per-step snapshot.

Source of truth: the compiled :class:`mujoco.MjModel`. :func:`pinocchio_model_from_mujoco` walks its
body tree and builds a :class:`pinocchio.Model` with the same joint placements, axes, inertias,
armature and gravity, so MuJoCo and Pinocchio describe one plant (tested to 1e-9 in
``tests/test_dynamics_consistency.py``). Bodies rigidly attached to the arm (tool, sensor, hand
links held kinematically) are lumped into the arm link that carries them, at the pose they have in a
reference ``qpos`` (which is exact for welded bodies).

One :meth:`Dynamics.update` per control step fills a preallocated :class:`Snapshot`:

* ``M`` (nv, nv) joint-space inertia incl. armature, ``Minv`` its inverse (by Pinocchio's Cholesky of that M),
  ``h = C q̇ + g`` (nle);
* ``g`` (nv,): the gravity torque g(q) alone (Pinocchio's ``data.g`` of the same ``computeAllTerms`` pass;
  zero, and not copied, when the model's gravity is zero), for the friction feedforward's key;
* ``J_ee_lwa`` (6, nv): EE Jacobian, LOCAL_WORLD_ALIGNED (origin at the EE, world axes), [v; ω];
* ``J_ee_body`` (6, nv): EE Jacobian, LOCAL (body) frame, [v; ω];
* ``dJdq_ee_lwa`` (6,): classical acceleration drift [p̈; ω̇] at q̈ = 0 (world axes; unless ``world_drift`` is off);
* ``dJdq_ee_body`` (6,): body-twist derivative at q̈ = 0 (J̇_b q̇);
* ``T_world_ee`` (4, 4), ``p_ee_in_world`` (3,), ``R_world_ee`` (3, 3);
* ``twist_ee_lwa`` (6,) = J_ee_lwa q̇, ``twist_ee_body`` (6,) = J_ee_body q̇;
* ``T_world_sensor`` (4, 4): pose of the F/T sensor site (filled when ``sensor_pose``, see :class:`Dynamics`);
* ``manipulability`` w = sqrt(det(J Jᵀ)) of the LWA Jacobian.

Controllers read the snapshot and never call Pinocchio or MuJoCo themselves.

Compiled kernel: when ``sim._dynamics_kernel`` is built (sim/kernels.py), the poses, the EE
Jacobians (from Pinocchio's ``data.J``), the twists and the manipulability are filled by one C call
bound to Pinocchio's buffers and the snapshot; the Python code below stays the reference
(tests/test_kernels.py: J_ee_lwa and the poses equal bit for bit, the rest to round-off).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import mujoco
import numpy as np
import pinocchio as pin
from dockbench.sim import kernels
from dockbench.sim.errors import ModelError

_chol_decompose = pin.cholesky.decompose
_chol_minv = pin.cholesky.computeMinv
_mulMatMatT = mujoco.mju_mulMatMatT
_cholFactor = mujoco.mju_cholFactor

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
LOCAL = pin.ReferenceFrame.LOCAL


def _se3(R: np.ndarray, p: np.ndarray) -> pin.SE3:
    return pin.SE3(np.array(R, dtype=float), np.array(p, dtype=float))


def _quat_to_R(q: np.ndarray) -> np.ndarray:
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, np.asarray(q, dtype=float))
    return R.reshape(3, 3)


def _body_inertia(m: mujoco.MjModel, b: int) -> pin.Inertia:
    """Inertia of MuJoCo body ``b`` expressed in its body frame (COM offset + rotated tensor)."""
    R = _quat_to_R(m.body_iquat[b])
    I_com = R @ np.diag(m.body_inertia[b]) @ R.T
    return pin.Inertia(float(m.body_mass[b]), np.array(m.body_ipos[b]), I_com)


def pinocchio_model_from_mujoco(
    m: mujoco.MjModel,
    arm_joints: Sequence[str],
    frame_sites: Sequence[str],
    qpos_ref: np.ndarray | None = None,
    floating_base: bool = False,
) -> tuple[pin.Model, dict[str, int]]:
    """Build the arm's Pinocchio model from a compiled MjModel.

    Args:
        m: the assembled model.
        arm_joints: names of the hinge joints the controller actuates, base to tip (each on its own
            body, joint origin at the body origin).
        frame_sites: MuJoCo site names to add as Pinocchio operational frames (same names).
        qpos_ref: configuration used to place bodies whose joints are NOT arm joints (e.g. hand
            fingers held kinematically) and, for a fixed base, the base itself; default ``m.qpos0``.
        floating_base: the arm's root body has a MuJoCo free joint (a free-floating base,
            sim/mounts.py): give the model a free-flyer root there (joint ``base_free``, Pinocchio
            q = [p, quat (x, y, z, w)], v = [v; ω] in base axes), carrying the root body and every body
            rigidly attached to it (the spacecraft bus). Without it, every ancestor of the first arm
            body is held fixed at its pose in ``qpos_ref`` (a free joint there included).

    Returns:
        (model, frame ids by site name).

    Raises:
        ModelError: unknown joint/site, non-hinge arm joint, joint not at the body origin; with
            ``floating_base``, a root body without a free joint or a joint between it and the arm.
    """
    jids = []
    for name in arm_joints:
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            raise ModelError(f"arm joint {name!r} not in the assembled model")
        if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            raise ModelError(f"arm joint {name!r} must be a hinge")
        if np.any(np.abs(m.jnt_pos[j]) > 0):
            raise ModelError(f"arm joint {name!r} must sit at its body origin (jnt_pos = 0)")
        jids.append(j)
    arm_body_of_joint = {int(m.jnt_bodyid[j]): j for j in jids}

    # Poses of every body at the reference configuration (for lumping non-arm bodies).
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 if qpos_ref is None else qpos_ref
    mujoco.mj_kinematics(m, d)

    model = pin.Model()
    model.name = "dockbench_arm"
    model.gravity.linear = np.array(m.opt.gravity, dtype=float)
    # carrier[b] = (pin joint id, placement of body b in that joint's frame) for bodies on the arm.
    carrier: dict[int, tuple[int, pin.SE3]] = {}
    first_arm_body = int(m.jnt_bodyid[jids[0]])
    # The arm base: every ancestor of the first arm body is fixed to the world.
    b = first_arm_body
    chain = []
    while b != 0:
        chain.append(b)
        b = int(m.body_parentid[b])
    if floating_base:
        # chain[-1] is the root body (child of the world): the free-flyer joint sits at its frame (a
        # MuJoCo free joint has no offset); the bodies between it and the first arm body ride on it rigidly
        root = chain[-1]
        if len(chain) < 2 or m.body_jntnum[root] != 1 or m.jnt_type[m.body_jntadr[root]] != mujoco.mjtJoint.mjJNT_FREE:
            raise ModelError("floating_base: the arm's root body must carry one free joint (sim/mounts.py)")
        ff = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base_free")
        model.appendBodyToJoint(ff, _body_inertia(m, root), pin.SE3.Identity())
        carrier[root] = (ff, pin.SE3.Identity())
        for b in reversed(chain[1:-1]):
            if m.body_jntnum[b] > 0:
                raise ModelError(f"floating_base: body {b} between the base and the arm has a joint")
            placement = carrier[int(m.body_parentid[b])][1] * _se3(_quat_to_R(m.body_quat[b]), m.body_pos[b])
            model.appendBodyToJoint(ff, _body_inertia(m, b), placement)
            carrier[b] = (ff, placement)
    else:
        for b in reversed(chain[1:]):
            carrier[b] = (0, _se3(d.xmat[b].reshape(3, 3), d.xpos[b]))

    for b in range(1, m.nbody):
        parent = int(m.body_parentid[b])
        if b in carrier:
            continue
        if parent not in carrier and b != first_arm_body:
            continue  # not part of the arm (target, world clutter)
        if b == first_arm_body and not floating_base:
            parent_joint, T_parent = 0, _se3(d.xmat[parent].reshape(3, 3), d.xpos[parent])
            if parent == 0:
                T_parent = pin.SE3.Identity()
        else:
            parent_joint, T_parent = carrier[parent]
        if b in arm_body_of_joint:
            j = arm_body_of_joint[b]
            placement = T_parent * _se3(_quat_to_R(m.body_quat[b]), m.body_pos[b])
            axis = np.array(m.jnt_axis[j], dtype=float)
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
            if np.allclose(axis, [0, 0, 1]):
                jm = pin.JointModelRZ()
            elif np.allclose(axis, [1, 0, 0]):
                jm = pin.JointModelRX()
            elif np.allclose(axis, [0, 1, 0]):
                jm = pin.JointModelRY()
            else:
                jm = pin.JointModelRevoluteUnaligned(axis / np.linalg.norm(axis))
            jid = model.addJoint(parent_joint, jm, placement, name)
            iq = model.joints[jid].idx_q
            model.lowerPositionLimit[iq] = m.jnt_range[j, 0]
            model.upperPositionLimit[iq] = m.jnt_range[j, 1]
            model.armature[model.joints[jid].idx_v] = float(m.dof_armature[m.jnt_dofadr[j]])
            model.appendBodyToJoint(jid, _body_inertia(m, b), pin.SE3.Identity())
            carrier[b] = (jid, pin.SE3.Identity())
        else:
            if m.body_jntnum[b] > 0 and m.body_dofnum[b] > 0:
                # A non-arm joint (e.g. a hand finger): lump at its pose in qpos_ref.
                T_rel = _se3(d.xmat[parent].reshape(3, 3), d.xpos[parent]).actInv(
                    _se3(d.xmat[b].reshape(3, 3), d.xpos[b])
                )
            else:
                T_rel = _se3(_quat_to_R(m.body_quat[b]), m.body_pos[b])
            placement = T_parent * T_rel
            model.appendBodyToJoint(parent_joint, _body_inertia(m, b), placement)
            carrier[b] = (parent_joint, placement)

    frame_ids: dict[str, int] = {}
    for site in frame_sites:
        s = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, site)
        if s < 0:
            raise ModelError(f"site {site!r} not in the assembled model")
        b = int(m.site_bodyid[s])
        if b not in carrier:
            raise ModelError(f"site {site!r} is not on the arm")
        jid, T_body = carrier[b]
        placement = T_body * _se3(_quat_to_R(m.site_quat[s]), m.site_pos[s])
        frame = pin.Frame(site, jid, placement, pin.FrameType.OP_FRAME)
        frame_ids[site] = model.addFrame(frame)
    expected = len(arm_joints) + (6 if floating_base else 0)
    if model.nv != expected:
        raise ModelError(f"Pinocchio model has nv={model.nv}, expected {expected}")
    return model, frame_ids


class LumpedInertia:
    """Keeps the Pinocchio model's lumped link inertias equal to the plant's at the current pose of the
    bodies they lump (e.g. the G20 hand's fingers, which move between control steps).

    :func:`pinocchio_model_from_mujoco` lumps every body rigidly carried by an arm joint (tool, sensor,
    hand links) into that joint's inertia at ``qpos_ref``. Where a carried body hangs on non-arm joints
    (a finger), that inertia is right only at that pose. :meth:`update` recomputes it at the plant's
    current ``qpos``: for the arm body B of joint j and each body b it carries (mass m_b, centre of mass
    c_b, principal inertia I_b with axes R_b, all from the MjModel at the pose), in B's frame::

        m = Σ m_b,  c = Σ m_b c_b / m,  I_c = Σ R_b I_b R_bᵀ + m_b (‖c_b − c‖² 1 − (c_b − c)(c_b − c)ᵀ)

    and writes ``model.inertias[j] = Inertia(m, c, I_c)``. The arm block of MuJoCo's M is the composite
    inertia with the carried joints held (their armature sits on their own diagonal), so M(q) and h(q, v)
    then equal MuJoCo's at any pose of those joints (tests/test_hand_effector.py, 1e-9 relative).
    Nothing in Pinocchio's ``Data`` caches inertias: the next ``crba`` / ``nonLinearEffects`` use it.

    Only joints that carry articulated bodies are updated (none for a rigid tool: :attr:`active` False).

    Args:
        m: the assembled MjModel.
        model: the arm's Pinocchio model built from it.
        arm_joints: the arm joint names, base to tip (the Pinocchio joint names).
    """

    def __init__(self, m: mujoco.MjModel, model: pin.Model, arm_joints: Sequence[str]):
        self.m = m
        self.model = model
        arm_body = {}
        for k, name in enumerate(arm_joints):
            j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            arm_body[int(m.jnt_bodyid[j])] = k + 1  # Pinocchio joint id
        # carrier of every body below the first arm body: its nearest arm body ancestor (or itself)
        owner: dict[int, int] = {}
        articulated: set[int] = set()
        for b in range(1, m.nbody):
            if b in arm_body:
                owner[b] = b
            elif int(m.body_parentid[b]) in owner:
                owner[b] = owner[int(m.body_parentid[b])]
                if m.body_dofnum[b] > 0:
                    articulated.add(owner[b])
        #: (Pinocchio joint id, arm body, carried bodies incl. the arm body) for each articulated carrier
        self.groups = [
            (arm_body[B], B, np.array(sorted(b for b, o in owner.items() if o == B)))
            for B in sorted(articulated)
        ]
        self.active = bool(self.groups)
        self._d = mujoco.MjData(m)

    def update(self, qpos: np.ndarray) -> None:
        """Re-lump at the plant configuration ``qpos`` (m.nq,): only the carried bodies' relative poses
        matter, so the arm part of ``qpos`` may be anything."""
        if not self.active:
            return
        m, d = self.m, self._d
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        for jid, B, bodies in self.groups:
            R_B, p_B = d.xmat[B].reshape(3, 3), d.xpos[B]
            mass = m.body_mass[bodies]
            n = len(bodies)
            c_b = (d.xipos[bodies] - p_B) @ R_B  # rows: R_Bᵀ (c_b − p_B)
            M = float(mass.sum())
            c = (mass @ c_b) / M
            r = c_b - c
            # Σ R_b diag(I_b) R_bᵀ in B's axes = A Aᵀ with A = [R_Bᵀ R_b diag(√I_b)] side by side (3, 3n)
            A = np.matmul(R_B.T, d.ximat[bodies].reshape(n, 3, 3) * np.sqrt(m.body_inertia[bodies])[:, None, :])
            A = A.transpose(1, 0, 2).reshape(3, 3 * n)
            mr = r * mass[:, None]
            I_c = A @ A.T - mr.T @ r  # parallel axis: Σ m_b (‖r‖² 1 − r rᵀ)
            I_c[np.diag_indices(3)] += float(np.einsum("ij,ij->", mr, r))
            self.model.inertias[jid] = pin.Inertia(M, c, 0.5 * (I_c + I_c.T))


def manipulability(J: np.ndarray, JJt: np.ndarray) -> float:
    """w = sqrt(det(J Jᵀ)) of a (6, n) Jacobian, as the product of the Cholesky diagonal of J Jᵀ (MuJoCo's
    mju_* routines: less binding overhead than numpy/LAPACK at 6×7); a zero pivot (rank < 6) means w = 0,
    and so does a NaN Jacobian. ``JJt`` is a (6, 6) work array."""
    _mulMatMatT(JJt, J, J)
    w = math.prod(JJt.diagonal().tolist()) if _cholFactor(JJt, 1e-300) == 6 else 0.0
    return w if w == w else 0.0  # a NaN Jacobian: 0, as the kernels' pivot rule (NaN fails)


class Snapshot:
    """Everything a control step needs, computed once (see module docstring for frames/units).

    Arrays are preallocated and overwritten in place by :meth:`Dynamics.update`; copy them before
    storing.
    """

    def __init__(self, nv: int):
        self.nv = nv
        self.t = 0.0
        self.q = np.zeros(nv)
        #: rows 0–5 ``J_ee_lwa``, row 6 ``v``, row 7 ``h`` (those three are views of it): one BLAS
        #: call then gives J x, q̇ᵀx and hᵀx together (Khatib: Λ⁻¹ and J M⁻¹ q̇ in one product,
        #: τ = Jᵀ y − d q̇ + h as one matrix–vector product)
        self.J_v_h = np.zeros((8, nv))
        self.J_v = self.J_v_h[:7]  # [J_ee_lwa; q̇ᵀ]
        self.J_ee_lwa = self.J_v_h[:6]
        self.v = self.J_v_h[6]
        self.h = self.J_v_h[7]
        self.g = np.zeros(nv)
        self.M = np.zeros((nv, nv))
        self.Minv = np.zeros((nv, nv))
        self.J_ee_body = np.zeros((6, nv))
        self.dJdq_ee_lwa = np.zeros(6)
        self.dJdq_ee_body = np.zeros(6)
        self.T_world_ee = np.eye(4)
        self.p_ee_in_world = self.T_world_ee[:3, 3]
        self.R_world_ee = self.T_world_ee[:3, :3]
        self.twist_ee_lwa = np.zeros(6)
        self.twist_ee_body = np.zeros(6)
        self.T_world_sensor = np.eye(4)
        self.manipulability = 0.0

    #: True for the snapshot of a free-floating base (:class:`FloatingSnapshot`): the fields above then
    #: hold the base-eliminated quantities of docs/theory/floating_base.md
    floating = False


class Dynamics:
    """One Pinocchio pass per control step → :class:`Snapshot`.

    Args:
        model: the arm model (from :func:`pinocchio_model_from_mujoco`).
        ee_frame: frame id of the EE (tool tip) site.
        sensor_frame: frame id of the F/T sensor site.
        body_frame: also fill the LOCAL (body) quantities ``J_ee_body``, ``dJdq_ee_body`` and
            ``twist_ee_body``; the loop turns this off for controllers that declare they do not use
            them (``Controller.needs_body_frame``), saving ≈ 2 µs per step.
        sensor_pose: also fill ``T_world_sensor`` (for controllers that declare
            ``Controller.needs_sensor_pose`` and for the momentum observer); otherwise it stays the
            identity.
        world_drift: fill ``dJdq_ee_lwa`` (``Controller.needs_world_drift``, true unless a body-frame
            controller opts out); otherwise it stays zero.
    """

    def __init__(
        self,
        model: pin.Model,
        ee_frame: int,
        sensor_frame: int,
        body_frame: bool = True,
        sensor_pose: bool = True,
        world_drift: bool = True,
    ):
        self._set_frames(model, ee_frame, sensor_frame, body_frame, sensor_pose, world_drift)
        self.snap = Snapshot(model.nv)
        #: the snapshot the kinematic part (kernel or Python) fills; the floating base fills a full-state one
        self._kin = self.snap
        #: the kinematic part also computes the manipulability (the floating base computes it after its reduction)
        self._manip_in_kinematics = True
        #: the model has gravity: fill Snapshot.g every step (it stays zero otherwise)
        self.gravity = bool(np.any(np.asarray(model.gravity.linear) != 0.0))
        self._JJt = np.zeros((6, 6))
        self._il = np.tril_indices(model.nv, -1)
        q0 = pin.neutral(model)
        pin.computeAllTerms(model, self.data, q0, np.zeros(model.nv))
        M0 = np.array(self.data.M)
        self._minverse()
        Mi0 = np.array(self.data.Minv)
        self._symmetrize = not (np.array_equal(M0, M0.T) and np.array_equal(Mi0, Mi0.T))
        if not self._symmetrize:
            # M, M⁻¹ and h are Pinocchio's own buffers (eigenpy hands out views that every computeAllTerms /
            # cholesky.computeMinv call overwrites in place): no copy per step. The
            # snapshot keeps its in-place contract, and nothing else runs Pinocchio on self.data.
            s = self.snap
            s.M, s.Minv = self.data.M, self.data.Minv
        # views of the two frame placements (rotation and translation of data.oMf[i] are views)
        self._R_ee, self._p_ee = self.data.oMf[ee_frame].rotation, self.data.oMf[ee_frame].translation
        self._R_s, self._p_s = self.data.oMf[sensor_frame].rotation, self.data.oMf[sensor_frame].translation
        # compiled kernel for the kinematic part (None: the Python path); data.J and the oMf views are
        # Pinocchio's own buffers, overwritten in place every step
        kmod = kernels.load("sim._dynamics_kernel")
        self.kernel = "compiled" if kmod is not None else "python"
        self._kernel = None
        if kmod is not None:
            s = self.snap
            self._kernel = kmod.DynamicsKernel(
                J_world=self.data.J, R_ee=self._R_ee, p_ee=self._p_ee, R_sensor=self._R_s, p_sensor=self._p_s,
                J_v_h=s.J_v_h, J_ee_body=s.J_ee_body, twist_ee_lwa=s.twist_ee_lwa, twist_ee_body=s.twist_ee_body,
                T_world_ee=s.T_world_ee, T_world_sensor=s.T_world_sensor, body_frame=body_frame,
                sensor_pose=sensor_pose,
            )

    def _set_frames(
        self, model: pin.Model, ee_frame: int, sensor_frame: int, body_frame: bool, sensor_pose: bool, world_drift: bool
    ) -> None:
        """The model, its data, the two frames and which optional quantities to fill (class docstring)."""
        self.model = model
        self.data = model.createData()
        self.ee_frame = ee_frame
        self.sensor_frame = sensor_frame
        self.body_frame = body_frame
        self.sensor_pose = sensor_pose
        self.world_drift = world_drift

    def update(self, q: np.ndarray, v: np.ndarray, t: float = 0.0) -> Snapshot:
        """Compute the snapshot at joint positions ``q`` [rad] and velocities ``v`` [rad/s]."""
        data, s = self.data, self.snap
        s.t = t
        s.q[:] = q
        s.v[:] = v
        # One pass for the kinematics, the mass matrix (CRBA, incl. armature, into data.M = s.M unless the
        # symmetrising fallback below is needed), the bias h = C q̇ + g (data.nle) and g alone (data.g)
        self._pinocchio_pass(s.q, s.v, s.dJdq_ee_body, s.dJdq_ee_lwa)
        s.h[:] = data.nle
        if self.gravity:
            s.g[:] = data.g
        self._minverse()  # into data.Minv (= s.Minv)
        if self._symmetrize:  # Pinocchio versions that fill only the upper triangle
            s.M[:] = data.M
            s.Minv[:] = data.Minv
            s.M[self._il] = s.M.T[self._il]
            s.Minv[self._il] = s.Minv.T[self._il]
        return s

    def _minverse(self) -> None:
        """M⁻¹ into ``data.Minv``: Pinocchio's sparse Cholesky M = Uᵀ D U of the ``data.M`` of this step's pass,
        then its inverse (the inverse of that M to round-off, ‖M M⁻¹ − I‖ ≈ 1e-15 on the iiwa14, against 1e-13 for
        ``computeMinverse``'s separate articulated-body pass; tests/test_dynamics_consistency.py)."""
        _chol_decompose(self.model, self.data)
        _chol_minv(self.model, self.data)

    def _pinocchio_pass(self, q: np.ndarray, v: np.ndarray, drift_body: np.ndarray, drift_lwa: np.ndarray) -> None:
        """Pinocchio's ``computeAllTerms`` at (q, v): placements, velocities, accelerations at q̈ = 0, the joint
        Jacobians, M, h = C q̇ + g and g in ``data`` (one pass instead of forward kinematics, Jacobians, CRBA and
        two RNEAs); then the frame placements, the kinematic part (the compiled kernel or
        :meth:`_kinematics_python`: poses, EE Jacobians, twists, w) and the drift accelerations J̇q̇ of the EE
        (LOCAL into ``drift_body``, classical LWA into ``drift_lwa``, when asked for)."""
        model, data, fid = self.model, self.data, self.ee_frame
        pin.computeAllTerms(model, data, q, v)
        pin.updateFramePlacements(model, data)
        if self._kernel is not None:  # poses, Jacobians, twists and w in one call (module docstring)
            w = self._kernel.step()
            if self._manip_in_kinematics:
                self._kin.manipulability = w
        else:
            self._kinematics_python()
        if self.body_frame:
            drift_body[:] = pin.getFrameAcceleration(model, data, fid, LOCAL).vector
        if self.world_drift:
            drift_lwa[:] = pin.getFrameClassicalAcceleration(model, data, fid, LWA).vector

    def _kinematics_python(self) -> None:
        """The kinematic part of :meth:`update` that the compiled kernel replaces (its Python reference):
        poses, EE Jacobians, twists and w from Pinocchio's data of this step."""
        model, data, s, fid = self.model, self.data, self._kin, self.ee_frame
        s.J_ee_lwa[:] = pin.getFrameJacobian(model, data, fid, LWA)
        if self.body_frame:
            s.J_ee_body[:] = pin.getFrameJacobian(model, data, fid, LOCAL)
        T, Ts = s.T_world_ee, s.T_world_sensor
        T[:3, :3] = self._R_ee
        T[:3, 3] = self._p_ee
        if self.sensor_pose:
            Ts[:3, :3] = self._R_s
            Ts[:3, 3] = self._p_s
        s.J_ee_lwa.dot(s.v, out=s.twist_ee_lwa)  # ndarray.dot: np.dot's BLAS call, less call overhead
        if self.body_frame:
            s.J_ee_body.dot(s.v, out=s.twist_ee_body)
        if self._manip_in_kinematics:
            s.manipulability = manipulability(s.J_ee_lwa, self._JJt)

    def _guard_values(self) -> kernels.Values:
        """The kinematic outputs the guard compares (copies)."""
        s = self._kin
        out = [
            ("T_world_ee", s.T_world_ee.copy()),
            ("J_ee_lwa", s.J_ee_lwa.copy()),
            ("twist_ee_lwa", s.twist_ee_lwa.copy()),
        ]
        if self.body_frame:
            out += [("J_ee_body", s.J_ee_body.copy()), ("twist_ee_body", s.twist_ee_body.copy())]
        if self.sensor_pose:
            out.append(("T_world_sensor", s.T_world_sensor.copy()))
        if self._manip_in_kinematics:
            out.append(("manipulability", np.array([s.manipulability])))
        return out

    def _guard_bounds(self) -> kernels.Bounds:
        """S and κ of each of :meth:`_guard_values` (sim/kernels.py).

        The poses are copies of Pinocchio's placements (S = 1 + max |T|). The Jacobians are Pinocchio's
        data.J re-expressed (LWA: the linear rows shifted by ω × r, three-term sums; LOCAL: rotated by Rᵀ):
        S = max |J| (1 + max |r|), r the EE position. The twists are J q̇ (nv-term sums): S = max_i Σ_j |J_ij
        q̇_j| (1 + max |r|). w = sqrt(det(J Jᵀ)) is a product of Cholesky pivots of J Jᵀ, whose relative
        error grows with κ(J Jᵀ): S = w, κ = κ(J Jᵀ)."""
        s = self._kin
        lever = 1.0 + kernels.magnitude(s.p_ee_in_world)
        sJ = kernels.magnitude(s.J_ee_lwa) * lever
        absv = np.abs(s.v)
        out = [
            (1.0 + kernels.magnitude(s.T_world_ee), 1.0),
            (sJ, 1.0),
            (kernels.magnitude(np.abs(s.J_ee_lwa) @ absv) * lever, 1.0),
        ]
        if self.body_frame:
            out += [(sJ, 1.0), (kernels.magnitude(np.abs(s.J_ee_body) @ absv) * lever, 1.0)]
        if self.sensor_pose:
            out.append((1.0 + kernels.magnitude(s.T_world_sensor), 1.0))
        if self._manip_in_kinematics:
            out.append((max(s.manipulability, 1e-300), kernels.condition(s.J_ee_lwa @ s.J_ee_lwa.T)))
        return out

    def check_kernel(self) -> tuple[float, kernels.KernelMismatch | None]:
        """The kernel guard (sim/kernels.py) for the snapshot of the last :meth:`update`: evaluate the
        Python kinematics on the same Pinocchio data and compare. On agreement the kernel's outputs are
        kept; on a mismatch the Python outputs are kept and the kernel is dropped for the rest of the run.
        Returns (largest |Δ|/bound, mismatch or None); (0, None) when no kernel is bound."""
        if self._kernel is None:
            return 0.0, None
        s = self._kin
        outputs = (s.J_v_h, s.J_ee_body, s.twist_ee_lwa, s.twist_ee_body, s.T_world_ee, s.T_world_sensor)
        ratio, bad = self._compare_reference(
            "sim._dynamics_kernel", s, outputs, self._guard_values, self._kinematics_python, self._guard_bounds
        )
        if bad is not None:
            self._after_kinematics_replaced()
        return ratio, bad

    def _compare_reference(self, module: str, snap: Any, outputs: Sequence[np.ndarray],
                           values: Callable[[], list[Any]], reference: Callable[[], None],
                           bounds: Callable[[], list[Any]]) -> tuple[float, kernels.KernelMismatch | None]:
        """One guard comparison: read the kernel's ``values()``, run the Python ``reference()`` over the
        same inputs (it overwrites ``outputs`` and ``snap.manipulability``), read ``values()`` again and
        compare within ``bounds`` (:func:`sim.kernels.compare`). Agreement restores the kernel's outputs
        (the run stays bit for bit the unguarded one); a mismatch keeps the reference's and drops the
        kernels for the rest of the run (:meth:`use_python`)."""
        return kernels.guarded_step(
            "dynamics", module, self.model.nv, written=kernels.Written(outputs, [(snap, "manipulability")]),
            reference=reference, values=values, bounds=bounds, drop=self.use_python,
        )

    def _after_kinematics_replaced(self) -> None:
        """Called when the guard replaced the kernel's kinematics by the Python reference's (the floating
        base then recomputes what it derived from them). Default: nothing."""

    def use_python(self) -> None:
        """Run the Python reference from now on (the guard calls this on a mismatch)."""
        self._kernel = None
        self.kernel = "python"
