"""Force/torque pipeline (docs/theory/ft_pipeline.md): raw site sensors → F_ext, plus the contact truth.

Sign convention (one place, pinned by ``tests/test_wrench.py``): ``F_ext`` is the wrench the
ENVIRONMENT exerts ON the tool. MuJoCo's ``force``/``torque`` site sensors report the interaction
wrench that the parent body (the flange) exerts on the sensor body's subtree (the tool, everything
beyond the sensor), in sensor axes about the sensor origin S. Newton–Euler for that subtree of mass
m_t and centre of mass c (world axes, moments about S)::

    R_WS f_S + F_ext + m_t g = m_t a_c
    R_WS n_S + n_ext + (c − p_S) × m_t g = (c − p_S) × m_t a_c + I α + ω × I ω   (one rigid body)

so the pipeline's single sign flip is ``F_ext = −R_WS raw`` plus the tool's own load, which is
removed by one of the compensation stages below.

Outputs (wrenches are [f; n], Pinocchio's order), all preallocated and updated in place:

* ``ft_raw``      (6,): the sensor reading [f_S; n_S] (sensor axes; plus the simulated ``ft_bias``).
* ``ext_world``   (6,): F/T estimate of F_ext, world axes, moment about the sensor origin S
  (classical / HQP path): f_W = −R_WS (f_S − b_f) − comp_f, n_W = −R_WS (n_S − b_n) − comp_n.
* ``ext_body``    (6,): the same, EE axes, moment about the EE origin E (SE(3) path):
  f_E = R_EW f_W, n_E = R_EW (n_W + (p_S − p_E) × f_W).
* ``truth_world`` (6,), ``truth_body`` (6,): the same two wrenches computed from MuJoCo's contact
  solution (``cfrc_ext`` of the tool bodies = ``mj_contactForce`` over every contact that involves a
  tool geom).

Compensation of the tool's own load (``comp``; ``wrench.gravity_compensation`` / ``inertial_compensation``):

* none: comp = 0 (right only at zero gravity and rest);
* tool gravity (the lab's static compensation, default whenever gravity is non-zero): with W = m_t g,
  comp_f = W, comp_n = (c − p_S) × W, where m_t is the subtree mass beyond the sensor and c its
  centre of mass, both from the model (``body_subtreemass``, ``subtree_com``; c follows the fingers
  of a hand). Exact in quasi-static contact;
* inertial (option): comp_f = −m_t ã, comp_n = −(I α + ω × I ω) − (c − p_S) × m_t ã per tool body, with
  ã = a_c − g the body's acceleration as MuJoCo reports it (``mj_objectAcceleration``: the world's
  acceleration is −g in MuJoCo's recursion, so a body at rest reads ã = −g). It contains the gravity
  term, so it replaces the gravity stage.

Bias b (sensor axes): zero, or the tare taken at the control step ``tare_step`` (the tool quiet and out
of contact): b = −R_WSᵀ F̂ with F̂ the estimate of that step before the tare, so F̂ = 0 there and the
sensor's constant offset (and any load not modelled) is removed from then on.

Compiled kernel: when ``sim._wrench_kernel`` is built (sim/kernels.py) and inertial compensation is off,
:meth:`WrenchPipeline.update` binds it once to the MjData rows, the EE pose and the state, and each step
is one call that computes the same floats bit for bit (tests/test_kernels.py), gravity stage and bias
included; the Python code below stays the reference.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from dockbench.sim import kernels, lie
from dockbench.sim.errors import ModelError


class WrenchState:
    """Preallocated wrench channels (see module docstring for frames)."""

    __slots__ = (
        "ext_world", "ext_body", "truth_world", "truth_body", "contact_count", "ft_raw", "head", "truth", "buf"
    )

    def __init__(self) -> None:
        # one buffer, views into it: ft_raw, ext_world, ext_body (``head``: the pipeline writes the
        # three with one copy), then truth_world, truth_body; ext_world … truth_body are side by side
        # in the telemetry's column order, so they are recorded with one copy too
        self.buf = w = np.zeros(30)
        self.head = w[0:18]
        self.ft_raw = w[0:6]
        self.ext_world = w[6:12]
        self.ext_body = w[12:18]
        self.truth_world = w[18:24]
        self.truth_body = w[24:30]
        self.truth = w[18:30]  # [truth_world; truth_body]
        self.contact_count = 0


#: (r × f)ᵢ = rᵢ₊₁ fᵢ₊₂ − rᵢ₊₂ fᵢ₊₁: the indices i + 1 and i + 2 (mod 3)
_NEXT, _AFTER = np.array([1, 2, 0]), np.array([2, 0, 1])


def transport_world_to_body(
    w_world_at_S: np.ndarray, p_S: np.ndarray, T_world_ee: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """World-axes wrench about point S → EE-axes wrench about the EE origin E (docs/theory/ft_pipeline.md):

        f_E = R_WEᵀ f_W,   n_E = R_WEᵀ (n_W + (p_S − p_E) × f_W).

    ``w_world_at_S`` (6,) or (k, 6) (each row transported), ``out`` of the same shape. The cross product
    is accumulated into n_W term by term, (n_W + r₁f₂) − r₂f₁ …, and the products are
    :func:`~dockbench.sim.lie.mul3t`: the compiled kernel's operations, equal bit for bit."""
    R_WE, p_E = T_world_ee[:3, :3], T_world_ee[:3, 3]
    f_W, n_W = w_world_at_S[..., :3], w_world_at_S[..., 3:]
    r = p_S - p_E
    m = n_W + r[_NEXT] * f_W[..., _AFTER] - r[_AFTER] * f_W[..., _NEXT]  # n_W + (p_S − p_E) × f_W
    fm = np.concatenate((f_W, m), axis=-1).reshape((*f_W.shape[:-1], 2, 3))
    out.reshape(fm.shape)[:] = lie.mul3t(R_WE, fm)  # [f_E; n_E] = R_WEᵀ [f_W; m]
    return out


class WrenchPipeline:
    """Reads the F/T site sensors and the contact solution after each MuJoCo step.

    Args:
        m: assembled model.
        sensor_site: name of the F/T site (its body is the tool root).
        force_sensor, torque_sensor: names of the MuJoCo ``force``/``torque`` sensors on that site.
        tool_body: name of the tool's root body; every geom in its subtree counts as a tool geom.
        inertial_compensation: subtract the tool's inertial load, gravity included (module docstring).
        gravity_compensation: subtract the tool's weight m_t g at its centre of mass (module
            docstring); ignored when ``inertial_compensation`` is on (which contains it).
        ft_bias: (6,) simulated constant offset of the sensor [f_S; n_S] (sensor axes) [N, N·m], added
            to the MuJoCo reading (to exercise the tare); default none.
        tare_step: control step (0-based count of :meth:`update` calls) at which the bias is taken;
            None = no tare.
        dynamic_offset: ``comp[0:6]`` (the simulated offset) is rewritten before each update (F/T noise,
            sim/uncertainty.py), so the offset stage runs even while it is zero.
    """

    def __init__(
        self,
        m: mujoco.MjModel,
        sensor_site: str,
        force_sensor: str,
        torque_sensor: str,
        tool_body: str,
        inertial_compensation: bool = False,
        gravity_compensation: bool = False,
        ft_bias: np.ndarray | None = None,
        tare_step: int | None = None,
        dynamic_offset: bool = False,
    ):
        self.m = m
        self.site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, sensor_site)
        fs = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, force_sensor)
        ts = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, torque_sensor)
        tb = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, tool_body)
        if min(self.site, fs, ts, tb) < 0:
            raise ModelError(
                f"F/T pipeline needs site {sensor_site!r}, sensors {force_sensor!r}/{torque_sensor!r} "
                f"and body {tool_body!r} in the assembled model"
            )
        self.f_adr = int(m.sensor_adr[fs])
        self.n_adr = int(m.sensor_adr[ts])
        self.tool_body = tb
        subtree = {tb}
        for b in range(tb + 1, m.nbody):
            if int(m.body_parentid[b]) in subtree:
                subtree.add(b)
        self.tool_bodies = np.array(sorted(subtree))
        self.single_body = len(subtree) == 1
        self.root_body = int(m.body_rootid[tb])
        is_tool = np.zeros(m.ngeom, dtype=bool)
        for g in range(m.ngeom):
            is_tool[g] = int(m.geom_bodyid[g]) in subtree
        self.is_tool_geom = is_tool
        self.inertial_compensation = inertial_compensation
        self.gravity_compensation = bool(gravity_compensation) and not inertial_compensation
        self.state = WrenchState()
        self._zeroed: WrenchState | None = None  # the state whose truth wrenches are known to be zero
        self._f6 = np.zeros(6)
        self._fw = np.zeros(3)
        self._nw = np.zeros(3)
        self._tmp = np.zeros(6)
        self._both = np.zeros((2, 6))  # [ext_body; truth_body] of the Python path
        #: mass beyond the sensor [kg] (the tool's subtree, from the model)
        self.tool_mass = float(m.body_subtreemass[tb])
        #: compensation parameters, one buffer (the kernel reads it): [ft_bias (6) sensor axes;
        #: tare b (6) sensor axes; W = m_t g (3) world]
        self.comp = np.zeros(15)
        if ft_bias is not None:
            self.comp[0:6] = ft_bias
        self.comp[12:15] = self.tool_mass * np.asarray(m.opt.gravity, dtype=float)
        self.ft_bias = self.comp[0:6]
        self.tare = self.comp[6:12]
        self.tare_step = tare_step
        #: the raw reading is offset (simulated bias or a tare): two extra float operations per channel
        self._offset = bool(np.any(self.comp[0:6] != 0.0)) or tare_step is not None or dynamic_offset
        self._n_updates = 0
        #: what the tare saw (step, bias, tool contacts at that instant), for the summary
        self.tare_record: dict | None = None
        self._is_tool_list = is_tool.tolist()
        #: the source of the contact that acted over the last control period (:class:`SubstepContact`
        #: when the loop steps the substeps itself), else None: the truth is read from the MjData
        self._acting: SubstepContact | None = None
        # row views into the MjData of the last update() (re-taken when a different MjData comes in)
        self._d: mujoco.MjData | None = None
        self._v_xmat = self._v_xpos = self._v_f = self._v_n = self._v_ft = self._v_cfrc = self._v_com = None
        self._v_tcom = None
        # compiled kernel (None: the Python path), bound to (MjData, T_world_ee, state) on first use
        self._kmod = None if inertial_compensation else kernels.load("sim._wrench_kernel")
        self._kernel = None
        self._kernel_T: np.ndarray | None = None
        self.kernel = "compiled" if self._kmod is not None else "python"

    @property
    def compensation(self) -> str:
        """The tool-load compensation in use: ``inertial``, ``gravity`` or ``none``."""
        if self.inertial_compensation:
            return "inertial"
        return "gravity" if self.gravity_compensation else "none"

    def summary(self) -> dict:
        """Run-level facts for meta.json: the compensation, the tool mass, the tare (if any)."""
        return {
            "compensation": self.compensation,
            "tool_mass": self.tool_mass,
            "ft_bias": self.ft_bias.tolist(),
            "tare": self.tare_record,
            "kernel": self.kernel,
        }

    def _bind(self, d: mujoco.MjData) -> None:
        """Cache the row views of ``d`` that :meth:`update` reads (MjData buffers never move)."""
        self._v_xmat = d.site_xmat[self.site]
        self._v_xpos = d.site_xpos[self.site]
        self._v_f = d.sensordata[self.f_adr : self.f_adr + 3]
        self._v_n = d.sensordata[self.n_adr : self.n_adr + 3]
        # force and torque sensors adjacent in sensordata: one read of 6
        self._v_ft = d.sensordata[self.f_adr : self.f_adr + 6] if self.n_adr == self.f_adr + 3 else None
        self._v_cfrc = self._cfrc_rows(d)[self.tool_body]
        self._v_com = d.subtree_com[self.root_body]
        self._v_tcom = d.subtree_com[self.tool_body]  # centre of mass of everything beyond the sensor
        self._bind_sensor()
        self._d = d
        self._kernel = self._kernel_T = None

    def _bind_sensor(self) -> None:
        """The F/T reading's row views: the period's mean from the acting source when it averages the
        substeps' readings (:attr:`SubstepContact.ft_mean`), else the MjData's sensors (bound by :meth:`_bind`)."""
        ft = None if self._acting is None else self._acting.ft_mean
        if ft is not None:
            self._v_f, self._v_n, self._v_ft = ft[0:3], ft[3:6], ft

    def _cfrc_rows(self, d: mujoco.MjData) -> np.ndarray:
        """The (nbody, 6) rows the truth is read from: MjData's ``cfrc_ext``, or the acting source's."""
        return d.cfrc_ext if self._acting is None else self._acting.cfrc

    def attach_acting(self, source: SubstepContact) -> None:
        """Read the truth (and the tool contact count) from ``source``, the contact that acted over the
        last control period (:class:`SubstepContact`), instead of from the MjData's last evaluation."""
        self._acting = source
        self._d = None  # re-bind the row views (and the kernel) on the next update

    def _bind_kernel(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> None:
        """Bind the compiled kernel to the rows of ``d`` (bound by :meth:`_bind`), the EE pose and the state."""
        self._kernel = self._kmod.WrenchKernel(
            site_xmat=self._v_xmat, site_xpos=self._v_xpos, force=self._v_f, torque=self._v_n,
            cfrc_ext=self._cfrc_rows(d), subtree_com=self._v_com, T_world_ee=T_world_ee, state=self.state.buf,
            tool_bodies=self.tool_bodies.tolist(), tool_com=self._v_tcom, comp=self.comp,
            gravity=self.gravity_compensation, offset=self._offset,
        )
        self._kernel_T = T_world_ee
        self._zeroed = None  # the kernel tracks the zeroed truth itself

    def update(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> WrenchState:
        """Fill :attr:`state` from the data of the last step (sensors and contacts of one instant)."""
        if d is not self._d:
            self._bind(d)
        k = self._n_updates
        self._n_updates = k + 1
        self._update(d, T_world_ee)
        if k == self.tare_step:
            self._take_tare(d, T_world_ee)
        return self.state

    def _take_tare(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> None:
        """b = −R_WSᵀ F̂ (force and moment) from this step's estimate, then this step again with it."""
        R = self._v_xmat.reshape(3, 3)
        ext = self.state.ext_world
        self.tare[0:3] = -(R.T @ ext[0:3])
        self.tare[3:6] = -(R.T @ ext[3:6])
        self.tare_record = {
            "step": int(self.tare_step),
            "bias": self.tare.tolist(),
            "tool_contacts": int(self.state.contact_count),
        }
        self._update(d, T_world_ee)

    def _update(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> None:
        """One pipeline evaluation: the compiled kernel when bound, else the Python reference."""
        if self._kmod is not None:
            if T_world_ee is not self._kernel_T:
                self._bind_kernel(d, T_world_ee)
            cnt = self.state.contact_count = self._tool_contact_count(d)
            self._kernel.step(cnt)
            return
        self._update_python(d, T_world_ee)

    def _update_python(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> WrenchState:
        """The reference implementation of one pipeline evaluation (what the compiled kernel ports), one
        statement per equation of the module docstring. The 3×3 products and cross products are element-wise
        numpy operations in the kernel's order (sim/lie.py :func:`~dockbench.sim.lie.mul3`,
        :func:`~dockbench.sim.lie.cross3`): both paths give the same floats bit for bit (tests/test_kernels.py)."""
        st = self.state
        R_WS, p_S = self._v_xmat.reshape(3, 3), self._v_xpos
        raw = self._v_ft if self._v_ft is not None else np.concatenate((self._v_f, self._v_n))
        x = raw
        if self._offset:
            raw = raw + self.comp[0:6]  # the sensor's reading + the simulated bias
            x = raw - self.comp[6:12]  # the tare b removed
        # the one sign flip: parent-on-tool reading → environment-on-tool wrench, F_ext = −R_WS raw
        ext = -lie.mul3(R_WS, x.reshape(2, 3))  # [f_W; n_W] = −R_WS [f_S − b_f; n_S − b_n] (rows)
        if self.gravity_compensation:  # the tool's weight W = m_t g at its centre of mass c
            W = self.comp[12:15]
            ext[0] -= W  # comp_f = W
            ext[1] -= lie.cross3(self._v_tcom - p_S, W)  # comp_n = (c − p_S) × W
        st.ft_raw[:] = raw
        st.ext_world.reshape(2, 3)[:] = ext
        if self.inertial_compensation:
            self._subtract_inertial(d, p_S, st.ext_world)
        self._truth(d, p_S, st.truth_world)
        if st.contact_count == 0:
            transport_world_to_body(st.ext_world, p_S, T_world_ee, st.ext_body)
            if self._zeroed is not st:  # zero once per contact-free stretch, not every step
                st.truth_body[:] = 0.0
                self._zeroed = st
        else:  # the estimate and the truth to EE axes in one call
            both = transport_world_to_body(np.array((st.ext_world, st.truth_world)), p_S, T_world_ee, self._both)
            st.ext_body[:] = both[0]
            st.truth_body[:] = both[1]
            self._zeroed = None
        return st

    def _guard_values(self) -> kernels.Values:
        """The pipeline's outputs the guard compares (copies): the five wrenches and the contact count."""
        st = self.state
        return [("wrenches", st.buf.copy()), ("contact_count", np.array([float(st.contact_count)]))]

    def _guard_bounds(self, T_world_ee: np.ndarray) -> kernels.Bounds:
        """S and κ of each of :meth:`_guard_values` (sim/kernels.py): the wrenches are rotations and
        lever-arm cross products (three-term sums), S = max |f|, |n| times (1 + max |r|), r the sensor's
        offset from the EE, the subtree COM's and the tool COM's (the weight stage's lever) from the
        sensor; the contact count is exact (S = 0)."""
        lever = (
            1.0
            + kernels.magnitude(self._v_xpos - T_world_ee[:3, 3])
            + kernels.magnitude(self._v_com - self._v_xpos)
            + kernels.magnitude(self._v_tcom - self._v_xpos)
        )
        return [(kernels.magnitude(self.state.buf) * lever, 1.0), (0.0, 1.0)]

    def check_kernel(self, d: mujoco.MjData, T_world_ee: np.ndarray) -> tuple[float, kernels.KernelMismatch | None]:
        """The kernel guard (sim/kernels.py) for the last :meth:`update` (same ``d``, same instant):
        evaluate the Python pipeline and compare; keep the kernel's outputs on agreement, else keep the
        Python ones and drop the kernel for the rest of the run. Returns (largest |Δ|/bound, mismatch)."""
        if self._kmod is None or self._kernel is None:
            return 0.0, None
        st = self.state
        return kernels.guarded_step(
            "wrench", "sim._wrench_kernel", 6,
            written=kernels.Written([st.buf], [(st, "contact_count"), (self, "_zeroed")]),
            reference=lambda: self._update_python(d, T_world_ee), values=self._guard_values,
            bounds=lambda: self._guard_bounds(T_world_ee), drop=self.use_python,
        )

    def use_python(self) -> None:
        """Run the Python reference from now on (the guard calls this on a mismatch)."""
        self._kmod = self._kernel = self._kernel_T = None
        self._zeroed = None  # the kernel tracked the zeroed truth itself
        self.kernel = "python"

    def _tool_contact_count(self, d: mujoco.MjData) -> int:
        """Tool contacts of the contact that acted over the last period: the acting source's count
        (:class:`SubstepContact`), else those of ``d``'s last evaluation."""
        if self._acting is not None:
            return self._acting.count
        ncon = d.ncon
        return self._count_tool_contacts(d, ncon) if ncon else 0

    def _count_tool_contacts(self, d: mujoco.MjData, ncon: int) -> int:
        """Number of active contacts between a tool geom and a non-tool geom."""
        geom = d.contact.geom  # (ncon, 2): MuJoCo's view holds the active contacts only
        if len(geom) != ncon:  # pragma: no cover - a binding that exposes the whole contact buffer
            geom = geom[:ncon]
        if ncon <= 32:
            tool = self._is_tool_list
            n = 0
            for g1, g2 in geom.tolist():
                if tool[g1] != tool[g2]:
                    n += 1
            return n
        return int(np.count_nonzero(self.is_tool_geom[geom[:, 0]] != self.is_tool_geom[geom[:, 1]]))

    def _truth(self, d: mujoco.MjData, p_S: np.ndarray, out: np.ndarray) -> None:
        """Contact wrench on the tool, world axes, moment about the sensor origin (hot path); sets
        ``state.contact_count``, and leaves ``out`` alone without tool contacts when it is the state's
        ``truth_world`` that is known to be zero.

        Reads MuJoCo's ``cfrc_ext`` of the tool bodies (the constraint forces of the contact solution,
        [n; f] about the subtree COM c of the kinematic root, world axes; ``mj_rnePostConstraint``
        fills it because the model has force/torque sensors) and moves the moment to S:
        n_S = n_c + (c − p_S) × f. :meth:`truth_from_contacts` computes the same wrench contact by
        contact with ``mj_contactForce``; the tests check the two agree.
        """
        if d is not self._d:
            self._bind(d)
        cnt = self.state.contact_count = self._tool_contact_count(d)
        if cnt == 0:
            if not (out is self.state.truth_world and self._zeroed is self.state):
                out[:] = 0.0
            return
        cf = self._v_cfrc if self.single_body else self._cfrc_rows(d)[self.tool_bodies].sum(axis=0)
        out[:3] = cf[3:]  # f
        out[3:] = cf[:3] + lie.cross3(self._v_com - p_S, cf[3:])  # n_S = n_c + (c − p_S) × f

    def truth_from_contacts(self, d: mujoco.MjData, p_S: np.ndarray) -> np.ndarray:
        """Reference implementation of the truth wrench (world axes, about ``p_S``), contact by
        contact: ``mj_contactForce`` gives the force geom1 exerts on geom2 in the contact frame
        (rows of ``contact.frame``: normal geom1 → geom2, then the tangents); the sign is flipped
        when the tool is geom1. Slower than :meth:`_truth`; used by tests as an independent check."""
        out = np.zeros(6)
        f6 = np.zeros(6)
        for i in range(d.ncon):
            g1, g2 = d.contact.geom[i]
            t1, t2 = self.is_tool_geom[g1], self.is_tool_geom[g2]
            if t1 == t2:
                continue
            mujoco.mj_contactForce(self.m, d, i, f6)
            frame = d.contact.frame[i].reshape(3, 3)
            sign = 1.0 if t2 else -1.0
            fw = sign * (frame.T @ f6[:3])
            nw = sign * (frame.T @ f6[3:])
            out[:3] += fw
            out[3:] += nw + np.cross(d.contact.pos[i] - p_S, fw)
        return out

    def _subtract_inertial(self, d: mujoco.MjData, p_S: np.ndarray, w: np.ndarray) -> None:
        """Remove the tool's inertial load, gravity included, from the F/T estimate (world axes, about p_S).

        Newton–Euler for each tool body beyond S (module docstring): F_ext = −R_WS raw + m ã and
        n_ext = −R_WS n_raw + I α + ω × I ω + (c − p_S) × m ã, with ã = a_c − g the acceleration of the
        body's centre of mass c as MuJoCo reports it (``mj_objectAcceleration``, world axes: MuJoCo's
        recursion starts from a world acceleration of −g, so ã already contains the gravity term and
        a body at rest reads ã = −g; subtracting g again would add the tool's weight twice).
        """
        m = self.m
        for b in self.tool_bodies:
            mass = m.body_mass[b]
            mujoco.mj_objectAcceleration(m, d, mujoco.mjtObj.mjOBJ_BODY, int(b), self._tmp, 0)
            alpha = self._tmp[:3]
            a_c = self._tmp[3:]  # ã = a_c − g (see docstring)
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, int(b), self._f6, 0)
            omega = self._f6[:3]
            Ri = d.ximat[b].reshape(3, 3)
            I_w = Ri @ np.diag(m.body_inertia[b]) @ Ri.T
            f_in = mass * a_c
            n_in_c = I_w @ alpha + lie.cross3(omega, I_w @ omega)
            c = d.xipos[b]
            w[:3] += f_in
            w[3:] += n_in_c + lie.cross3(c - p_S, f_in)


#: telemetry channels of :class:`SubstepContact` (derived channels of the loop's Telemetry)
PEAK_CHANNELS: tuple[str, ...] = ("contact_force_peak", "contact_axial_force_peak", "contact_count_peak")


class SubstepContact:
    """The contact that acted over each control period, and its per-substep maxima
    (docs/theory/ft_pipeline.md, "Substep-resolved contact"; docs/theory/floating_base.md, "Contact truth").

    **What acted.** Each ``mj_step`` evaluates the contact solution at the state it starts from and then
    integrates. With the Euler-type integrators (``euler``, ``implicit``, ``implicitfast``) that one
    evaluation is the force the step applies: the substep's impulse is h f. RK4 evaluates the dynamics
    at four stage states X₀ … X₃ and advances the velocity by h Σᵢ bᵢ q̈ᵢ, b = (1/6, 1/3, 1/3, 1/6): the
    impulse the plant receives over the substep is h Σᵢ bᵢ fᵢ, fᵢ the contact solution at stage i.
    MuJoCo keeps none of this in MjData after ``mj_step``: the sensors and ``cfrc_ext`` are those of X₀
    (stage 2–4 skip the sensor pass) while ``d.contact`` / ``efc_force`` are overwritten by the later
    stages, so a read after the step mixes instants. Here an RK4 substep runs what ``mj_step`` runs
    (``mj_checkPos``, ``mj_checkVel``, ``mj_forward``, ``mj_checkAcc``, ``mj_RungeKutta``: the same
    plant, bit for bit), reads stage 0 after ``mj_forward`` and re-evaluates stages 1–3 on a scratch
    MjData from the same X₀, q̈ⱼ, controls and warm start, with MuJoCo's own tableau
    (Xᵢ = X₀ ⊕ h aᵢ (vᵢ₋₁, q̈ᵢ₋₁), a = ½, ½, 1) and the stage call ``mj_forwardSkip(…, skipsensor=1)``;
    ``tests/test_contact_truth.py`` checks that these stages reproduce MuJoCo's new state to rounding.
    The per-substep acting wrench is Σᵢ bᵢ wᵢ (RK4) or w (Euler-type).

    **Per period.** :attr:`cfrc` holds the mean of the acting wrench over the period's k substeps (the
    period's contact impulse / T_c), in ``cfrc_ext``'s layout and convention ([n; f], world axes,
    moment about the kinematic root's subtree COM as MjData holds it when the period ends) on the tool's
    root row, and :attr:`count` the most tool contacts any of the period's evaluations had; the
    :class:`WrenchPipeline` reads its truth from them (:meth:`WrenchPipeline.attach_acting`), so the
    truth impulse Σ truth · T_c is the impulse the plant applied. :attr:`last` holds the period's maxima
    of ‖f‖ [N], |fᵀa| [N] (a the mating axis) and of the contact count over every evaluation the plant
    integrated: each substep's one evaluation (Euler-type), or each RK4 stage (the integrator's points
    on the trajectory at t, t + h/2, t + h/2, t + h). A stage-weighted mean is an average over the
    substep and under-reads a short peak by up to 10 % at dt in ``fr3_orbit_floating_target`` (7.62 N
    at dt, 8.36 N at dt/4), the stage maximum stays within 0.3 % (8.68, 8.68, 8.66 N at dt, dt/2,
    dt/4; the Euler-type runs 8.74, 8.67, 8.67 N; ``python experiments/contact_truth.py --peaks``).
    Row i of the channels covers the period that ends at t_i (row 0: the initial state).

    With k = 1 and an Euler-type integrator the period is one ``mj_step`` whose evaluation the MjData
    keeps: the loop steps the plant in one call, the pipeline reads the MjData, the peak channels are
    derived from ``wrench_truth_world`` and ``contact_count`` after the run, and :attr:`resolved` is
    False. Otherwise (k > 1 or RK4) :meth:`step` runs the substeps (≈ 1–3 µs per Euler substep in
    Python; RK4 re-evaluates three stages, ≈ +75 % of the plant's cost).

    Args:
        pipeline: the run's :class:`WrenchPipeline` (tool bodies and geoms).
        m, d: the plant.
        nsub: substeps per control period.
        n_steps: control steps of the run (unused; kept for callers).
        axis: (3,) mating axis a, world axes (unit).
    """

    #: RK4's tableau as MuJoCo's ``mj_RungeKutta`` uses it: stage offsets a and weights b
    RK4_A: tuple[float, ...] = (0.5, 0.5, 1.0)
    RK4_B: tuple[float, ...] = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)

    def __init__(
        self, pipeline: WrenchPipeline, m: mujoco.MjModel, d: mujoco.MjData, nsub: int, n_steps: int,
        axis: np.ndarray, sensor_mean: bool = False,
    ):
        self.wp, self.m, self.d, self.nsub = pipeline, m, d, int(nsub)
        self.rk4 = int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4)
        self.resolved = self.nsub > 1 or self.rk4
        self.axis = np.asarray(axis, dtype=float).copy()
        self._a = self.axis.tolist()
        #: (‖f‖, |fᵀa|, contacts) maxima of the last period run: row i + 1 records the period of control
        #: step i (row 0 records zeros: the initial state is the row's own)
        self.last = np.zeros(3)
        #: the mean acting contact wrench of the last period, ``cfrc_ext``'s layout (tool root row only)
        self.cfrc = np.zeros((m.nbody, 6))
        #: the most tool contacts of the last period's evaluations
        self.count = 0
        #: with ``sensor_mean`` on a resolved period: the mean F/T reading [f; n] (sensor axes, the sensors'
        #: sign) over the period's substeps, which the pipeline reads instead of the MjData's last one; else None
        self.ft_mean: np.ndarray | None = None
        if not self.resolved:
            return
        self._root = pipeline.root_body
        self._tb = pipeline.tool_body
        # before the first period: the initial state's own evaluation (what the MjData holds)
        self.cfrc[self._tb] = d.cfrc_ext[pipeline.tool_bodies].sum(axis=0)
        self.count = pipeline._count_tool_contacts(d, d.ncon) if d.ncon else 0
        if sensor_mean:
            f, n = pipeline.f_adr, pipeline.n_adr
            self._sd_f, self._sd_n = d.sensordata[f : f + 3], d.sensordata[n : n + 3]
            # force and torque adjacent in sensordata (the shipped tools): one add of 6 per substep
            self._sd_ft = d.sensordata[f : f + 6] if n == f + 3 else None
            self.ft_mean = np.concatenate((self._sd_f, self._sd_n))  # the initial state's reading
            self._ft_sum = np.zeros(6)
        pipeline.attach_acting(self)
        if self.rk4:
            self._d2 = mujoco.MjData(m)
            self._q0 = np.zeros(m.nq)
            self._v0 = np.zeros(m.nv)
            self._F = np.zeros(m.nv)
            self._q = np.zeros(m.nq)
            self._act0 = np.zeros(m.na)
            self._adot = np.zeros(m.na)

    def _wrench(self, dd: mujoco.MjData) -> tuple[list[float], int] | None:
        """The contact wrench on the tool in ``dd``'s evaluation: ([f; n_O], contacts), n_O the moment
        about the world origin (n_O = n_c + c × f from ``cfrc_ext`` about the subtree COM c), or None
        without tool contacts."""
        ncon = dd.ncon
        if not ncon:
            return None
        wp = self.wp
        cnt = wp._count_tool_contacts(dd, ncon)
        if not cnt:
            return None
        if wp.single_body:
            n0, n1, n2, f0, f1, f2 = dd.cfrc_ext[self._tb].tolist()
        else:
            n0, n1, n2, f0, f1, f2 = dd.cfrc_ext[wp.tool_bodies].sum(axis=0).tolist()
        c0, c1, c2 = dd.subtree_com[self._root].tolist()
        return [f0, f1, f2, n0 + c1 * f2 - c2 * f1, n1 + c2 * f0 - c0 * f2, n2 + c0 * f1 - c1 * f0], cnt

    def _rk4_substep(self) -> tuple[list[float] | None, int, float, float]:
        """One RK4 ``mj_step`` of the plant; returns (Σᵢ bᵢ wᵢ over its four stages, or None without
        contact; the most tool contacts of a stage; the largest ‖fᵢ‖ and |fᵢᵀa| of a stage) (class
        docstring)."""
        m, d, d2 = self.m, self.d, self._d2
        mujoco.mj_checkPos(m, d)
        mujoco.mj_checkVel(m, d)
        mujoco.mj_forward(m, d)
        mujoco.mj_checkAcc(m, d)
        acc: list[float] | None = None
        cmax = 0
        fpk = apk = 0.0
        a0, a1, a2 = self._a
        w = self._wrench(d)
        b = self.RK4_B
        if w is not None:
            acc = [b[0] * x for x in w[0]]
            cmax = w[1]
            f0, f1, f2 = w[0][:3]
            fpk = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
            apk = abs(f0 * a0 + f1 * a1 + f2 * a2)
        # stages 1-3 from X0 on the scratch data (mj_RungeKutta's tableau)
        q0, v0, F, q = self._q0, self._v0, self._F, self._q
        q0[:] = d.qpos
        v0[:] = d.qvel
        F[:] = d.qacc
        na = m.na
        if na:
            self._act0[:] = d.act
            self._adot[:] = d.act_dot
            d2.act_dot[:] = d.act_dot
        d2.ctrl[:] = d.ctrl
        d2.qacc_warmstart[:] = d.qacc_warmstart
        d2.qfrc_applied[:] = d.qfrc_applied
        d2.xfrc_applied[:] = d.xfrc_applied
        if m.nmocap:
            d2.mocap_pos[:] = d.mocap_pos
            d2.mocap_quat[:] = d.mocap_quat
        h, t0 = m.opt.timestep, d.time
        v = v0
        for i, a in enumerate(self.RK4_A, start=1):
            q[:] = q0
            mujoco.mj_integratePos(m, q, v * a, h)
            v = v0 + (F * a) * h
            d2.qpos[:] = q
            d2.qvel[:] = v
            if na:
                d2.act[:] = self._act0 + (d2.act_dot * a) * h
            d2.time = t0 + a * h
            mujoco.mj_forwardSkip(m, d2, mujoco.mjtStage.mjSTAGE_NONE, 1)
            F[:] = d2.qacc
            if d2.ncon:
                mujoco.mj_rnePostConstraint(m, d2)  # cfrc_ext (the sensor pass that fills it is skipped)
                w = self._wrench(d2)
                if w is not None:
                    bi = b[i]
                    if acc is None:
                        acc = [0.0] * 6
                    acc = [s + bi * x for s, x in zip(acc, w[0], strict=True)]
                    if w[1] > cmax:
                        cmax = w[1]
                    f0, f1, f2 = w[0][:3]
                    fpk = max(fpk, math.sqrt(f0 * f0 + f1 * f1 + f2 * f2))
                    apk = max(apk, abs(f0 * a0 + f1 * a1 + f2 * a2))
        mujoco.mj_RungeKutta(m, d, 4)
        return acc, cmax, fpk, apk

    def step(self, i: int) -> None:
        """Run the substeps of control period ``i``: the mean acting wrench goes to :attr:`cfrc` and
        :attr:`count`, the maxima to :attr:`last` (row ``i + 1``)."""
        m, d = self.m, self.d
        mj_step = mujoco.mj_step
        a0, a1, a2 = self._a
        fmax = amax = 0.0
        cmax = 0
        rk4 = self.rk4
        s0 = s1 = s2 = s3 = s4 = s5 = 0.0
        touched = False
        ft_sum = None if self.ft_mean is None else self._ft_sum
        if ft_sum is not None:
            ft_sum[:] = 0.0
        for _ in range(self.nsub):
            if rk4:
                w, cnt, fn, fa = self._rk4_substep()
            else:
                mj_step(m, d)
                r = self._wrench(d)
                w, cnt = (None, 0) if r is None else r
            if ft_sum is not None:  # the substep's reading: its evaluation's (RK4: stage 0, as MjData keeps)
                if self._sd_ft is not None:
                    np.add(ft_sum, self._sd_ft, out=ft_sum)
                else:
                    ft_sum[0:3] += self._sd_f
                    ft_sum[3:6] += self._sd_n
            if w is None:
                if cnt > cmax:  # pragma: no cover - contacts without a stage wrench cannot happen
                    cmax = cnt
                continue
            touched = True
            f0, f1, f2, n0, n1, n2 = w
            s0 += f0
            s1 += f1
            s2 += f2
            s3 += n0
            s4 += n1
            s5 += n2
            if not rk4:  # the one evaluation is the acting force (RK4: the largest stage's, above)
                fn = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
                fa = abs(f0 * a0 + f1 * a1 + f2 * a2)
            if fn > fmax:
                fmax = fn
            if fa > amax:
                amax = fa
            if cnt > cmax:
                cmax = cnt
        self.last[:] = (fmax, amax, cmax)
        self.count = cmax
        if ft_sum is not None:
            np.divide(ft_sum, float(self.nsub), out=self.ft_mean)
        row = self.cfrc[self._tb]
        if not touched:
            row[:] = 0.0
            return
        k = float(self.nsub)
        f0, f1, f2, n0, n1, n2 = s0 / k, s1 / k, s2 / k, s3 / k, s4 / k, s5 / k
        c0, c1, c2 = d.subtree_com[self._root].tolist()  # the pipeline moves the moment from here to S
        row[:] = (n0 - (c1 * f2 - c2 * f1), n1 - (c2 * f0 - c0 * f2), n2 - (c0 * f1 - c1 * f0), f0, f1, f2)

    def fill(self, arrays: dict[str, np.ndarray], n: int, peaks: np.ndarray | None = None) -> None:
        """Write the first ``n`` rows of the :data:`PEAK_CHANNELS` into ``arrays`` (the telemetry's): the
        maxima of the substeps (``peaks``: (≥ n, 3) rows of :attr:`last` as recorded, for a resolved run),
        and never less than the row's own sample of ``wrench_truth_world`` and ``contact_count``."""
        f = arrays["wrench_truth_world"][:n, :3]
        fn = np.linalg.norm(f, axis=1)
        fa = np.abs(f @ self.axis)
        cnt = np.asarray(arrays["contact_count"][:n], dtype=float)
        if self.resolved:
            peaks = peaks[:n]
            np.maximum(fn, peaks[:, 0], out=fn)
            np.maximum(fa, peaks[:, 1], out=fa)
            cnt = np.maximum(cnt, peaks[:, 2])
        arrays["contact_force_peak"][:n] = fn
        arrays["contact_axial_force_peak"][:n] = fa
        arrays["contact_count_peak"][:n] = cnt
