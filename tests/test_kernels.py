"""Compiled kernels (sim/kernels.py): the mode switch, the stale-build check, and the Khatib, wrench and
snapshot kernels against the Python references they replace.

Exact equality is asserted only where both sides are the same operations in the same library: the
Khatib law's friction integral (F_I, the frozen flag: IEEE-754 operations in the same order in Python
floats and in C compiled without contraction, setup.py), the single-body F/T pipeline (scalar code on
both sides), copies (the poses), and Pinocchio's own results on both sides. Everything that goes through
BLAS, LAPACK, numpy reductions or Pinocchio's routines on one side only (τ, u with Pinocchio's log3) is
compared within the kernel guard's round-off bound (tests/roundoff.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dockbench.controllers.khatib import KhatibController
from dockbench.planners.base import Reference
from dockbench.sim import kernels
from dockbench.sim.lie import so3_exp
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import random_reference, scenario_dict
from tests.roundoff import assert_controllers_agree, assert_within_bound

KHATIB = "controllers._khatib_kernel"
#: every kernel setup.py builds
KERNEL_MODULES = (
    "controllers._khatib_kernel",
    "controllers._se3_kernel",
    "controllers._hqp_kernel",
    "sim._wrench_kernel",
    "sim._dynamics_kernel",
    "sim._floating_kernel",
    "sim._culling_kernel",
    "telemetry._row_kernel",
)
khatib_built = pytest.mark.skipif(
    kernels.status(KHATIB)[0] is None, reason=f"{kernels.status(KHATIB)[1]}; {kernels.BUILD_HINT}"
)


# ------------------------------------------------------------------------------------------ mode switch


def test_mode_comes_from_the_environment_and_bad_values_name_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(kernels.ENV, raising=False)
    assert kernels.mode() == "auto"
    monkeypatch.setenv(kernels.ENV, "Python")
    assert kernels.mode() == "python"
    monkeypatch.setenv(kernels.ENV, "fast")
    with pytest.raises(kernels.KernelError, match=r"DOCKBENCH_KERNELS='fast'.*auto, compiled, python"):
        kernels.mode()


def test_forced_overrides_the_environment_and_restores_it(monkeypatch) -> None:
    monkeypatch.setenv(kernels.ENV, "compiled")
    with kernels.forced("python"):
        assert kernels.mode() == "python"
        assert kernels.load(KHATIB) is None
    assert kernels.mode() == "compiled"
    with pytest.raises(kernels.KernelError, match="allowed values"):
        with kernels.forced("turbo"):
            pass


def test_missing_kernel_falls_back_under_auto_and_fails_clearly_under_compiled() -> None:
    with kernels.forced("auto"):
        assert kernels.load("controllers._no_such_kernel") is None
    with kernels.forced("compiled"):
        with pytest.raises(kernels.KernelError, match=r"not built.*pip install -e \."):
            kernels.load("controllers._no_such_kernel")


@khatib_built
def test_a_stale_build_is_not_used(monkeypatch) -> None:
    module, why = kernels.status(KHATIB)
    assert why == "compiled"
    monkeypatch.setattr(module, "SOURCE_SHA256", "0" * 64)
    assert kernels.status(KHATIB)[0] is None and "stale" in kernels.status(KHATIB)[1]
    with kernels.forced("auto"), pytest.warns(RuntimeWarning, match="stale"):
        assert kernels.load(KHATIB) is None
    with kernels.forced("compiled"), pytest.raises(kernels.KernelError, match="stale"):
        kernels.load(KHATIB)


# ------------------------------------------------------------------------------------------ Khatib kernel


def _pair(scene: str, **overrides):
    """(setup, compiled controller, Python controller) with the same config."""
    s = build(scenario_from_dict(scenario_dict(scene)))
    cfg = dataclasses.replace(s.controller.config, **overrides)
    with kernels.forced("compiled"):
        fast = KhatibController(cfg, s.plant, s.planner)
    with kernels.forced("python"):
        slow = KhatibController(cfg, s.plant, s.planner)
    return s, fast, slow


def _states(ctrl: KhatibController) -> list[np.ndarray]:
    """The contact-force options' state arrays (filter, set-point, hybrid latch) and the friction integral."""
    fs = ctrl.setpoint
    return [ctrl.force_filter.state, ctrl.ff.state, ctrl.integral, ctrl.F_I, ctrl._flags] + (
        [fs.state] if fs is not None else []
    )


#: a force set-point that starts at the first contact, with a proportional gain (the other branches of
#: kernel_setpoint_update; the shipped ones start at the planner's end with k_p = 0)
_SETPOINT_AT_CONTACT = {"force": 5.0, "ramp_time": 0.02, "start": "contact", "delay": 0.005, "k_p": 0.5,
                        "k_i": 40.0, "i_max": 1.0, "damping": 50.0}


@khatib_built
@pytest.mark.parametrize(
    "scene, overrides",
    [
        ("iiwa14_docking", {}),
        ("fr3_docking", {}),  # the shipped FR3 law: hybrid feedforward, 5 ms force filter, friction integral
        ("paper/paper_fr3_khatib", {}),  # hybrid feedforward, force filter and force set-point
        ("fr3_g20_press", {}),  # velocity feedforward and force set-point, no filter
        ("fr3_docking", {"force_setpoint": _SETPOINT_AT_CONTACT, "force_filter": 0.002}),
        ("fr3_docking", {"feedforward": "torque", "force_filter": 0.0}),
        ("fr3_docking", {"feedforward": "velocity", "use_force_feedback": False}),
        ("fr3_docking", {"feedforward_velocity_scale": 0.1}),  # hybrid with the peg scenario's ε
        ("fr3_docking", {"feedforward": "off", "friction_integral": "off"}),
        ("iiwa14_docking", {"friction_integral": "on", "d_null": 0.0, "feedforward": "hybrid"}),
    ],
)
def test_khatib_kernel_equals_the_python_path(scene: str, overrides: dict) -> None:
    """120 random states (the F/T force small for 40 steps, then of contact size): the friction integral, the
    diagnostics and the state of the contact-force options (filter, set-point, hybrid latch: the same scalar
    operations in the same order on both sides) bit for bit; τ and u within the guard's bound. The time runs
    through the set-point's ramp (from 20 ms before its start) and the hybrid latch's blend (w: 0, the blend
    and 1)."""
    if isinstance(overrides.get("force_setpoint"), dict):
        from dockbench.controllers.force_control import ForceSetpointConfig

        overrides = {**overrides, "force_setpoint": ForceSetpointConfig(**overrides["force_setpoint"])}
    s, fast, slow = _pair(scene, **overrides)
    assert fast.summary()["kernel"] == "compiled" and slow.summary()["kernel"] == "python"
    rng = np.random.default_rng(11)
    cf, cs = fast.make_command(), slow.make_command()
    ref, w = Reference(), WrenchState()
    fs = slow.setpoint
    t0 = fs.t0 - 0.02 if fs is not None and fs.t0 < np.inf else 0.0
    ramped = latched = blended = 0
    for step in range(120):
        q = s.q0 + rng.uniform(-0.3, 0.3, s.plant.nv)
        v = rng.uniform(-0.4, 0.4, s.plant.nv)
        snap = s.dynamics.update(q, v, t0 + 0.01 * step)
        random_reference(rng, snap, ref, rot_scale=0.3)
        if step == 20:  # near π: the other branch of the rotation log
            ref.R[:] = so3_exp(np.array([0.0, 3.1, 0.05])) @ snap.R_world_ee
        w.ext_world[:] = rng.normal(scale=0.2 if step < 40 else 3.0, size=6)  # the integral runs, then freezes
        fast.compute(snap, ref, w, cf)
        slow.compute(snap, ref, w, cs)
        # the friction integral and the force options' state are the same IEEE operations in the same order
        # on both sides: bit for bit
        for a, b in zip(_states(fast), _states(slow), strict=True):
            assert np.array_equal(a, b), (step, a, b)
        assert np.array_equal(cf.diag, cs.diag) and fast.frozen == slow.frozen, step
        # τ and u: the rotation log is Pinocchio's log3 in Python and the kernel's own in C, the joint-space
        # products and the solve sum in another order than BLAS / MuJoCo's Cholesky
        assert_controllers_agree(fast, slow, snap, ref, w, cf, cs)
        ramped += fs is not None and 0.0 < fs.s
        latched += slow.ff.w == 1.0
        blended += 0.0 < slow.ff.w < 1.0
    assert fast.kernel_fallbacks == 0
    if fast.use_integral:
        assert fast.frozen and np.any(fast.F_I != 0.0)
    if fs is not None:
        assert ramped > 20 and fs.s == 1.0 and fs.integral != 0.0  # the ramp, the held set-point, the integral
    if slow.ff.mode == "hybrid" and slow.ff.active:  # (the iiwa14 has no joint friction nor damping)
        assert blended > 10 and latched > 10


@khatib_built
def test_singular_lambda_hands_the_step_back_to_python_with_nothing_written() -> None:
    s, fast, slow = _pair("fr3_docking")
    snap = s.dynamics.update(s.q0, np.full(s.plant.nv, 0.1))
    ref, w = Reference(), WrenchState()
    random_reference(np.random.default_rng(2), snap, ref)
    w.ext_world[:] = 0.1
    snap.J_ee_lwa[5] = 0.0  # rank 5: Λ⁻¹ singular → least squares
    cf, cs = fast.make_command(), slow.make_command()
    fast.compute(snap, ref, w, cf)
    slow.compute(snap, ref, w, cs)
    assert fast.kernel_fallbacks == 1
    # both steps ran the Python path: the same operations in the same library
    assert np.array_equal(cf.tau, cs.tau) and np.all(np.isfinite(cf.tau))
    # the integral, the force filter and the hybrid latch advanced once, not twice (the kernel wrote nothing
    # before handing back)
    assert np.array_equal(fast.integral, slow.integral) and np.any(fast.integral != 0.0)
    for a, b in zip(_states(fast), _states(slow), strict=True):
        assert np.array_equal(a, b)
    assert fast.force_filter.active and fast.force_filter.state[-1] == 1.0 and fast.ff.mode == "hybrid"


@khatib_built
def test_kernel_rejects_arrays_of_the_wrong_size_or_type_by_name() -> None:
    s, fast, _ = _pair("iiwa14_docking")
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv))
    cmd, ref, w = fast.make_command(), Reference(), WrenchState()
    fast._bind(snap, ref, w, cmd)  # the real arrays bind
    k = fast._kmod.KhatibKernel
    args = fast._kernel_args(snap, ref, w, cmd)
    with pytest.raises(ValueError, match="ref_flat must hold 24 floats, got 23"):
        k(**{**args, "ref_flat": np.zeros(23)})
    with pytest.raises(TypeError, match="tau must be float64"):
        k(**{**args, "tau": np.zeros(s.plant.nv, dtype=np.float32)})
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="diag must be a contiguous writable"):
        k(**{**args, "diag": ro})


@khatib_built
@pytest.mark.slow
@pytest.mark.parametrize("scene", ["iiwa14_docking", "fr3_docking"])
def test_whole_docking_run_compiled_equals_python(scene: str) -> None:
    """Free-space approach: the states agree to 1e-12 and τ to 1e-11 (absolute). Per step τ differs by
    the solve's round-off (the guard's bound 10 · 7 ε κ(Λ⁻¹) S_τ ≈ 1e-11 at κ ≈ 10³, S_τ ≈ 10 N·m) and the
    stable free-space loop does not amplify it: measured ≤ 2.5e-15 (states) and ≤ 2.3e-13 (τ) on three
    BLAS code paths, ≥ 40× headroom. In contact round-off is amplified by the stiff contact
    (tests/test_optimised_equals_reference.py), so there the docking outcome is compared (1e-6 m; measured
    ≤ 1.8e-9 m)."""
    tels = {}
    for mode in ("compiled", "python"):
        with kernels.forced(mode):
            setup = build(scenario_from_dict(scenario_dict(scene)))
        tel, status, _, _ = simulate(setup)
        assert status == "completed"
        assert setup.controller.summary()["kernel"] == mode
        tels[mode] = tel
    a, b = tels["compiled"], tels["python"]
    assert a.n == b.n
    contact = np.asarray(b.arrays["contact_count"][: b.n]).reshape(b.n)
    first = int(np.argmax(contact > 0))
    assert first > 1000
    for ch in ("q", "v", "ee_pos"):
        np.testing.assert_allclose(a.arrays[ch][:first], b.arrays[ch][:first], rtol=0, atol=1e-12, err_msg=ch)
    np.testing.assert_allclose(a.arrays["tau_cmd"][:first], b.arrays["tau_cmd"][:first], rtol=0, atol=1e-11)
    np.testing.assert_allclose(a.arrays["ee_pos"][: a.n], b.arrays["ee_pos"][: b.n], rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------ wrench kernel

WRENCH = "sim._wrench_kernel"
wrench_built = pytest.mark.skipif(
    kernels.status(WRENCH)[0] is None, reason=f"{kernels.status(WRENCH)[1]}; {kernels.BUILD_HINT}"
)


class _BothPipelines:
    """Stands in for the loop's WrenchPipeline: runs the compiled one (whose state the loop reads) and a
    Python one on the same MjData and pose every step, and keeps the largest difference and the largest
    |Δ| / bound of the guard (sim/kernels.py)."""

    def __init__(self, fast, slow):
        self.fast, self.slow = fast, slow
        self.state = fast.state
        self.steps = self.contact_steps = 0
        self.max_diff = self.max_ratio = 0.0

    def update(self, d, T_world_ee):
        a = self.fast.update(d, T_world_ee)
        got = self.fast._guard_values()
        self.slow.update(d, T_world_ee)
        want = self.slow._guard_values()
        self.max_diff = max(self.max_diff, float(np.max(np.abs(got[0][1] - want[0][1]))))
        self.max_ratio = max(
            self.max_ratio, assert_within_bound("wrench", 6, got, want, self.slow._guard_bounds(T_world_ee))
        )
        assert a.contact_count == self.slow.state.contact_count
        self.steps += 1
        self.contact_steps += a.contact_count > 0
        return a


#: gravity on (the tool-weight stage) with a simulated sensor bias and a tare: every branch of the kernel
_BIASED = {"sim.gravity": [0.0, 0.0, -9.81], "wrench.ft_bias": [0.5, -0.2, 1.0, 0.01, 0.02, -0.03],
           "wrench.tare_time": 0.01}


@wrench_built
@pytest.mark.parametrize(
    ("scene", "changes"),
    [("iiwa14_docking_misaligned", {}), ("fr3_g20_press", {}),  # one tool body; the hand's many
     ("iiwa14_docking_misaligned", _BIASED), ("fr3_g20_press", _BIASED)],
    ids=["probe", "hand", "probe-gravity-bias-tare", "hand-gravity-bias-tare"],
)
def test_wrench_kernel_equals_the_python_pipeline(scene: str, changes: dict) -> None:
    """Every step of two contact runs. With one tool body both sides are the same scalar operations in
    the same order: equal bit for bit. The G20's 23 tool bodies are summed by numpy's reduction on the
    Python side (its grouping is numpy's choice): within the guard's bound (three-term sums, S = max
    |wrench| (1 + lever arms))."""
    from dockbench.sim.assembly import FORCE_SENSOR, TORQUE_SENSOR
    from dockbench.sim.wrench import WrenchPipeline

    d = scenario_dict(scene)
    for key, value in changes.items():
        section, name = key.split(".")
        d.setdefault(section, {})[name] = value
    setup = build(scenario_from_dict(d))
    wp = setup.wrench
    assert wp.kernel == "compiled"
    assert wp.compensation == ("gravity" if changes else "none")
    args = (setup.asm.model, setup.asm.tool.sensor_site, FORCE_SENSOR, TORQUE_SENSOR, setup.asm.tool.root_body)
    with kernels.forced("python"):
        slow = WrenchPipeline(*args, gravity_compensation=wp.gravity_compensation, ft_bias=wp.ft_bias.copy(),
                              tare_step=wp.tare_step)
    assert slow.kernel == "python"
    both = _BothPipelines(wp, slow)
    setup.wrench = both
    simulate(setup, kernel_check=0)  # the shim compares every step itself
    assert both.steps > 1000 and both.contact_steps > 100
    if wp.single_body:
        assert both.max_diff == 0.0
    assert both.max_ratio < 1.0
    if changes:  # the tare happened on both sides, with the same bias
        assert wp.tare_record is not None and wp.tare_record == slow.tare_record


@wrench_built
def test_wrench_kernel_rejects_bad_rows_by_name() -> None:
    setup = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    wp, d = setup.wrench, setup.data
    wp._bind(d)
    k = wp._kmod.WrenchKernel
    good = [wp._v_xmat, wp._v_xpos, wp._v_f, wp._v_n, d.cfrc_ext, wp._v_com, np.eye(4), wp.state.buf, [1]]
    bad = list(good)
    bad[6] = np.eye(3)
    with pytest.raises(ValueError, match="T_world_ee must hold 16 floats, got 9"):
        k(*bad)
    bad = list(good)
    bad[8] = [setup.asm.model.nbody]
    with pytest.raises(ValueError, match="outside cfrc_ext"):
        k(*bad)


def test_the_manifest_lists_every_kernel_its_headers_and_its_python_reference() -> None:
    """setup.py builds exactly the kernels of sim/_kernel_manifest.py (the table sim.kernels checks
    against), every C kernel in the tree is in it, its local includes are the shared headers, and each
    Python reference module it names exists (so that editing the law makes the kernel stale)."""
    import re

    from dockbench.sim import _kernel_manifest as manifest

    from tests.helpers import REPO

    setup_text = (REPO / "setup.py").read_text()
    assert '"_kernel_manifest.py"' in setup_text and 'MANIFEST["KERNELS"]' in setup_text
    assert set(manifest.KERNELS) == set(KERNEL_MODULES)
    c_files = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("*/_*_kernel.c"))
    assert sorted(src for src, _ in manifest.KERNELS.values()) == c_files
    for name, (src, refs) in manifest.KERNELS.items():
        assert kernels.source_path(name) == REPO / src
        local = re.findall(r'#include "([^"]+)"', (REPO / src).read_text())
        resolved = {((REPO / src).parent / inc).resolve().relative_to(REPO).as_posix() for inc in local}
        assert resolved <= set(manifest.SHARED_HEADERS), (name, resolved)
        assert refs and all((REPO / r).is_file() and r.endswith(".py") for r in refs), name
        assert kernels.reference_paths(name) == refs


# ------------------------------------------------------------------------------------------ dynamics kernel

DYNAMICS = "sim._dynamics_kernel"
dynamics_built = pytest.mark.skipif(
    kernels.status(DYNAMICS)[0] is None, reason=f"{kernels.status(DYNAMICS)[1]}; {kernels.BUILD_HINT}"
)


@dynamics_built
@pytest.mark.parametrize("scene", ["iiwa14_docking", "fr3_docking_hqp", "iiwa14_docking_se3"])
def test_dynamics_kernel_fills_the_snapshot_as_the_python_path(scene: str) -> None:
    from dockbench.sim.dynamics import Dynamics

    setup = build(scenario_from_dict(scenario_dict(scene)))
    d0 = setup.dynamics
    assert d0.kernel == "compiled"
    flags = dict(body_frame=d0.body_frame, sensor_pose=d0.sensor_pose, world_drift=d0.world_drift)
    args = (d0.model, d0.ee_frame, d0.sensor_frame)
    with kernels.forced("compiled"):
        fast = Dynamics(*args, **flags)
    with kernels.forced("python"):
        slow = Dynamics(*args, **flags)
    assert slow.kernel == "python"
    rng = np.random.default_rng(3)
    for k in range(50):
        q = setup.q0 + rng.uniform(-0.5, 0.5, setup.plant.nv)
        v = rng.uniform(-1.0, 1.0, setup.plant.nv)
        a, b = fast.update(q, v, 0.01 * k), slow.update(q, v, 0.01 * k)
        # the poses are copies of Pinocchio's placements on both sides: exact
        assert np.array_equal(a.T_world_ee, b.T_world_ee) and np.array_equal(a.T_world_sensor, b.T_world_sensor), k
        # Pinocchio computes these on both sides (the kernel does not touch them): exact
        for name in ("dJdq_ee_body", "dJdq_ee_lwa", "h", "M", "Minv"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), (name, k)
        # the kernel's Jacobians, twists and w against Pinocchio's frame Jacobians, BLAS products and MuJoCo's
        # Cholesky: within the guard's bound (Dynamics._guard_bounds states S and κ)
        assert_within_bound("dynamics", fast.model.nv, fast._guard_values(), slow._guard_values(), slow._guard_bounds())
    # at a singular configuration (rank < 6) both give w = 0, and at a NaN state too (the one pivot rule of
    # sim/_kernel_math.h: a pivot not ≥ the threshold, NaN included, fails the factorisation)
    q = np.zeros(setup.plant.nv)
    assert fast.update(q, v).manipulability == slow.update(q, v).manipulability == 0.0
    q = np.full(setup.plant.nv, np.nan)
    assert fast.update(q, v).manipulability == slow.update(q, v).manipulability == 0.0


@dynamics_built
def test_dynamics_kernel_rejects_a_wrong_matrix_by_name() -> None:
    setup = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    dyn = setup.dynamics
    s = dyn.snap
    k = kernels.load(DYNAMICS).DynamicsKernel
    args = [dyn.data.J, dyn._R_ee, dyn._p_ee, dyn._R_s, dyn._p_s, s.J_v_h, s.J_ee_body, s.twist_ee_lwa,
            s.twist_ee_body, s.T_world_ee, s.T_world_sensor, True, True]
    bad = list(args)
    bad[1] = np.eye(4)
    with pytest.raises(ValueError, match=r"R_ee has the wrong shape \(expected a 3 x 3 float64 matrix\)"):
        k(*bad)


@pytest.mark.parametrize(
    "name, cls", [(KHATIB, "KhatibKernel"), (WRENCH, "WrenchKernel"), (DYNAMICS, "DynamicsKernel")]
)
def test_an_unbound_kernel_raises_instead_of_crashing(name: str, cls: str) -> None:
    module, why = kernels.status(name)
    if module is None:
        pytest.skip(why)
    k = getattr(module, cls).__new__(getattr(module, cls))
    with pytest.raises(RuntimeError, match="not bound"):
        k.step(0) if cls != "DynamicsKernel" else k.step()  # WrenchKernel.step(i), KhatibKernel.step(t)
    with pytest.raises(TypeError):  # a failed construction leaves it unbound too
        k.__init__(*([None] * 3))
    with pytest.raises(RuntimeError, match="not bound"):
        k.step(0) if cls != "DynamicsKernel" else k.step()  # WrenchKernel.step(i), KhatibKernel.step(t)


@khatib_built
def test_khatib_kernel_hands_back_where_its_rotation_log_is_undefined() -> None:
    """R_d Rᵀ = diag(−1, −1, −1.5) is no rotation: the kernel's rotation log refuses it (its near-π branch
    would divide by zero) and hands the step back, writing nothing; the Python path takes the step, so
    the compiled controller's τ is exactly the Python one's (the same operations in the same library)."""
    s, fast, slow = _pair("iiwa14_docking")
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv))
    ref, w = Reference(), WrenchState()
    random_reference(np.random.default_rng(1), snap, ref)
    snap.T_world_ee[:3, :3] = np.eye(3)
    ref.R[:] = np.diag([-1.0, -1.0, -1.5])
    cf, cs = fast.make_command(), slow.make_command()
    slow.compute(snap, ref, w, cs)
    fast.compute(snap, ref, w, cf)
    assert fast.kernel_fallbacks == 1
    assert np.array_equal(cf.tau, cs.tau)
