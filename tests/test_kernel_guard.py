"""The kernel guard and the stale check (sim/kernels.py): the Python law is the source of truth.

* An edited Python law (monkeypatched here, as a researcher's edit of controllers/khatib.py would be)
  is caught on the first step: a RuntimeWarning names the component and the step, meta.json records
  ``kernel_mismatch``, the run line says so, and the edited law is what ran for the rest of the run
  (each edit leaves a signature in the telemetry that only the edited law produces).
* An unedited law never trips the guard, in free space or in contact, for every controller with a
  kernel (the largest |Δ|/bound it sees is recorded and must stay below 1: this is the test of the
  round-off bound on whatever CPU and BLAS runs the suite).
* The guard does not perturb a run: guarded and unguarded telemetry are equal bit for bit (the same
  operations in the same library and process; the kernel's outputs are restored after each check).
* A kernel built against another version of its Python reference module is stale and not used.
"""

from __future__ import annotations

import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from dockbench.controllers.force_control import ForceFilter
from dockbench.controllers.hqp import HQPController
from dockbench.controllers.khatib import KhatibController
from dockbench.controllers.se3_lie import SE3LieController
from dockbench.sim import _kernel_manifest as manifest
from dockbench.sim import kernels
from dockbench.sim.dynamics import Dynamics
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchPipeline

from tests.helpers import REPO, scenario_dict

ALL_BUILT = all(kernels.status(n)[0] is not None for n in manifest.KERNELS)
built = pytest.mark.skipif(not ALL_BUILT, reason=f"a kernel is not built or stale; {kernels.BUILD_HINT}")

#: the edited laws' telemetry signatures
EDITED_TAU = 0.0  # τ ← 0 after the law
EDITED_FORCE_Z = 7.0  # the F/T force z (world axes) set to 7 N
EDITED_W = 12345.0  # manipulability set to a value no arm has
EDITED_FILTER_OFFSET = 0.01  # [N] added to the force filter's state after each update


def _short(name: str, duration: float = 0.3) -> dict:
    d = scenario_dict(name)
    d["sim"]["duration"] = duration
    return d


def _wrap(cls, method: str, after):
    """``cls.method`` followed by ``after(self, *args)``: an edit appended to a Python law."""
    original = getattr(cls, method)

    def edited(self, *args):
        out = original(self, *args)
        after(self, *args)
        return out

    return edited


def _zero_tau(self, snap, ref, wrench, cmd):
    cmd.tau *= 0.0


def _push_z(self, d, T):
    self.state.ext_world[2] = EDITED_FORCE_Z


def _odd_w(self):
    self.snap.manipulability = EDITED_W


def _drift_filter(self, x):
    self.state[:-1] += EDITED_FILTER_OFFSET  # the law uses this step's F̄ as returned; the state drifts


EDITS = {
    # component: (scenario, class, method, edit, channel, signature check)
    "khatib": ("iiwa14_docking", KhatibController, "_compute_python", _zero_tau, "controller"),
    "se3_lie": ("iiwa14_docking_se3", SE3LieController, "_compute_python", _zero_tau, "controller"),
    "hqp closed form": ("fr3_docking_hqp", HQPController, "_compute_python", _zero_tau, "controller"),
    "wrench pipeline": ("iiwa14_docking", WrenchPipeline, "_update_python", _push_z, "wrench"),
    "snapshot kinematics": ("fr3_docking", Dynamics, "_kinematics_python", _odd_w, "dynamics"),
    # a shared state array that the step's outputs do not show yet: the guard compares the state too
    "force filter (Khatib)": ("fr3_docking", ForceFilter, "update", _drift_filter, "controller"),
}


@built
@pytest.mark.parametrize("which", list(EDITS))
def test_an_edited_python_law_trips_the_guard_and_is_what_runs(which: str, monkeypatch, tmp_path: Path) -> None:
    from dockbench.experiments.run_docking import format_summary

    scene, cls, method, edit, component = EDITS[which]
    monkeypatch.setattr(cls, method, _wrap(cls, method, edit))
    sc = scenario_from_dict(_short(scene))
    with kernels.forced("auto"), kernels.checking(kernels.DEFAULT_CHECK_EVERY):
        with pytest.warns(RuntimeWarning, match=rf"kernel guard: the compiled {component} kernel .* at step 0 "):
            result = run(sc, out_root=tmp_path)
    (bad,) = result.meta["kernel_mismatch"]
    assert bad["component"] == component and bad["step"] == 0 and bad["t"] == 0.0
    assert bad["kernel"] in manifest.KERNELS and bad["max_abs_diff"] > bad["bound"] > 0.0
    assert result.meta["kernels"][component] == "python"  # the rest of the run ran the Python law
    assert "KERNEL MISMATCH (" + component + " at step 0)" in format_summary(result, sc)
    assert result.meta["kernel_guard"]["mismatches"] == result.meta["kernel_mismatch"]
    tel = result.telemetry
    # the edited law ran at every step, the guarded one included
    if edit is _zero_tau:
        assert np.all(tel["tau_cmd"] == EDITED_TAU)
    elif edit is _push_z:
        assert np.all(tel["wrench_ext_world"][:, 2] == EDITED_FORCE_Z)
    elif edit is _drift_filter:  # step 0's τ is the same (F̄ = the first input); its state is not
        assert bad["quantity"] == "force options state"
    else:
        assert np.all(tel["manipulability"] == EDITED_W)


@built
@pytest.mark.slow
@pytest.mark.parametrize(
    "scene",
    ["iiwa14_docking", "fr3_docking", "iiwa14_docking_hqp", "fr3_docking_hqp", "iiwa14_docking_se3",
     "fr3_docking_se3", "iiwa14_docking_se3topp", "fr3_g20_press", "paper/paper_fr3_khatib"],
)
def test_unedited_laws_never_trip_the_guard_through_contact(scene: str) -> None:
    """Every kernel checked on a prime period (7 steps: about 1300 checks over a whole docking run, free
    space and contact) stays within the bound: no mismatch, largest |Δ|/bound < 1 for each component. The
    FR3 scenarios run their shipped laws: the hybrid feedforward, the force filter (Khatib, SE(3)) and the
    force set-point (HQP, the press, the paper's Khatib), all compiled."""
    setup = build(scenario_from_dict(scenario_dict(scene)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = simulate(setup, kernel_check=7)
    tel, status, g = out.telemetry, out.status, out.guard
    assert status == "completed"
    assert g.mismatches == [] and g.checks == math.ceil(tel.n / 7) > 500  # the press (3.9 s): 554
    assert set(g.max_ratio) == {"dynamics", "wrench", "controller"}
    assert setup.controller.summary()["kernel"] == "compiled"
    assert max(g.max_ratio.values()) < 1.0, g.max_ratio
    assert np.asarray(tel.arrays["contact_count"][: tel.n]).max() > 0  # contact was checked too


@built
@pytest.mark.parametrize(
    "scene", ["iiwa14_docking", "fr3_docking", "fr3_docking_hqp", "fr3_docking_se3", "fr3_g20_press"]
)
def test_a_guarded_run_equals_the_unguarded_one_bit_for_bit(scene: str) -> None:
    """Same operations in the same library and process: exact equality is the claim (the kernel's
    outputs and state are restored after every check: the friction integral, the force filter, the force
    set-point and the hybrid latch of the FR3 laws included). The wall-clock solve time is not a function of
    the state and is left out."""
    d = _short(scene, 7.0)  # into contact for the docking scenarios
    tels = []
    for every in (0, 3):
        setup = build(scenario_from_dict(d))
        out = simulate(setup, kernel_check=every)
        tel = out.telemetry
        assert out.status == "completed" and out.guard.checks == (0 if every == 0 else math.ceil(tel.n / every))
        tels.append(tel)
    a, b = tels
    assert np.asarray(a.arrays["contact_count"][: a.n]).max() > 0
    for name, x in a.channels().items():
        if name != "ctrl_qp_solve_time":
            assert np.array_equal(x, b.channels()[name]), name


@built
def test_a_mismatch_in_the_middle_of_a_run_switches_from_that_step() -> None:
    """The edit only after t = 0.1 s: the checks at steps 0 and 100 agree, the one at 200 (period 100)
    does not; the torque is the kernel's before, the edited law's from there."""
    original = KhatibController._compute_python

    def late_edit(self, snap, ref, wrench, cmd):
        original(self, snap, ref, wrench, cmd)
        if snap.t > 0.1:
            cmd.tau *= 0.0

    setup = build(scenario_from_dict(_short("iiwa14_docking")))
    setup.controller._compute_python = late_edit.__get__(setup.controller)
    with pytest.warns(RuntimeWarning, match="at step 200 "):
        out = simulate(setup, kernel_check=100)
    tel = out.telemetry
    assert [m.step for m in out.guard.mismatches] == [200]
    assert out.guard.checks == 4  # 0, 100, 200 and 300: the snapshot and wrench kernels are still checked
    tau = tel.arrays["tau_cmd"][: tel.n]
    assert np.all(np.any(tau[:200] != 0.0, axis=1)) and np.all(tau[200:] == 0.0)


@built
def test_the_guard_period_comes_from_the_environment_and_is_validated(monkeypatch) -> None:
    monkeypatch.setenv(kernels.CHECK_ENV, "250")
    assert kernels.check_every() == 250
    monkeypatch.setenv(kernels.CHECK_ENV, "0")
    setup = build(scenario_from_dict(_short("iiwa14_docking", 0.05)))
    guard = simulate(setup).guard
    assert guard.every == 0 and guard.checks == 0
    monkeypatch.delenv(kernels.CHECK_ENV)
    assert kernels.check_every() == kernels.DEFAULT_CHECK_EVERY
    for bad in ("-1", "ten", "1.5", "1e3"):
        monkeypatch.setenv(kernels.CHECK_ENV, bad)
        with pytest.raises(kernels.KernelError, match=rf"{kernels.CHECK_ENV}=.*whole number of control steps ≥ 0"):
            kernels.check_every()
    with pytest.raises(kernels.KernelError, match="whole number"):
        with kernels.checking(-3):
            pass


def test_run_docking_rejects_a_negative_kernel_check(capsys) -> None:
    from dockbench.experiments.run_docking import main

    assert main(["--scenario", str(REPO / "scenarios/iiwa14_docking.yaml"), "--kernel-check", "-2"]) == 1
    assert "--kernel-check: must be ≥ 0" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ compare()


def test_compare_allows_the_bound_and_not_one_step_beyond_it() -> None:
    n, scale, kappa = 7, 3.0, 40.0
    bound = kernels.GUARD_C * n * kernels.EPS * kappa * scale
    x = np.array([1.0, -2.0, 3.0])
    for delta, ok in ((0.0, True), (0.99 * bound, True), (1.01 * bound, False)):
        y = x.copy()
        y[1] += delta
        ratio, bad = kernels.compare("controller", "k", n, [("tau", y)], [("tau", x)], [(scale, kappa)])
        assert (bad is None) == ok, delta
        if not ok:
            assert bad.quantity == "tau" and bad.index == 1 and bad.kernel_value == y[1] and bad.python_value == -2.0
            assert math.isclose(bad.bound, bound) and ratio > 1.0
    # κ < 1 never tightens the bound; S = 0 leaves the value's own round-off GUARD_C · n ε max |x| as the floor
    floor = kernels.GUARD_C * n * kernels.EPS * 3.0
    _, bad = kernels.compare("c", "k", n, [("a", x + 1e-300)], [("a", x)], [(0.0, 1.0)])
    assert bad is None  # x + 1e-300 == x
    _, bad = kernels.compare("c", "k", n, [("a", x + 1.0)], [("a", x)], [(0.0, 0.5)])
    assert bad is not None and bad.bound == floor
    # within the floor the bounds are not evaluated at all; beyond it they are
    calls = []
    def bounds():
        calls.append(1)
        return [(1.0, 1.0)]

    assert kernels.compare("c", "k", n, [("a", x * (1 + 1e-15))], [("a", x)], bounds)[1] is None
    assert calls == []
    kernels.compare("c", "k", n, [("a", x + 1e-9)], [("a", x)], bounds)
    assert calls == [1]


def test_compare_treats_nan_on_both_sides_as_equal_and_on_one_side_as_a_mismatch() -> None:
    x = np.array([np.nan, 1.0])
    assert kernels.compare("c", "k", 1, [("a", x.copy())], [("a", x)], [(1.0, 1.0)])[1] is None
    _, bad = kernels.compare("c", "k", 1, [("a", np.array([0.0, 1.0]))], [("a", x)], [(1e300, 1.0)])
    assert bad is not None and bad.index == 0 and bad.max_abs_diff == math.inf
    _, bad = kernels.compare("c", "k", 1, [("a", np.zeros(3))], [("a", np.zeros(2))], [(1.0, 1.0)])
    assert bad is not None and "shape" not in bad.quantity and bad.max_abs_diff == math.inf


# ------------------------------------------------------------------------------------------ stale check


def _copy_sources(dst: Path) -> None:
    """The kernels' C sources, shared headers and Python references under ``dst`` (a fake package root)."""
    for src, refs in manifest.KERNELS.values():
        for rel in (src, *refs):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dst / rel)
    for h in manifest.SHARED_HEADERS:
        shutil.copy2(REPO / h, dst / h)


@built
def test_a_kernel_built_against_another_python_reference_is_stale(monkeypatch, tmp_path: Path) -> None:
    """The researcher's edit of the issue: one line of code added to controllers/khatib.py. The Khatib kernel is
    then stale (auto: a warning and the Python path; compiled: an error naming the file); kernels that
    do not port that module stay current."""
    _copy_sources(tmp_path)
    monkeypatch.setattr(kernels, "ROOT", tmp_path)
    monkeypatch.setattr(kernels, "SHARED_HEADERS", tuple(tmp_path / h for h in manifest.SHARED_HEADERS))
    assert all(kernels.status(n)[1] == "compiled" for n in manifest.KERNELS)  # the copies are current
    law = tmp_path / "controllers/khatib.py"
    law.write_text(law.read_text() + "\nGAIN_SCALE = 0.0  # (an edit)\n")
    module, why = kernels.status("controllers._khatib_kernel")
    assert module is None
    assert why == (
        "controllers._khatib_kernel is stale: its Python reference controllers/khatib.py changed since it was "
        "built (the kernel would run the old law)"
    )
    for other in ("controllers._se3_kernel", "controllers._hqp_kernel", "sim._wrench_kernel", "sim._dynamics_kernel"):
        assert kernels.status(other)[1] == "compiled"
    with kernels.forced("auto"), pytest.warns(RuntimeWarning, match="khatib.py changed since it was built"):
        assert kernels.load("controllers._khatib_kernel") is None
    with kernels.forced("compiled"), pytest.raises(kernels.KernelError, match="khatib.py changed.*pip install -e"):
        kernels.load("controllers._khatib_kernel")
    # a comment, a docstring or blank lines in a reference leave every kernel current (the code digest)
    lie = tmp_path / "sim/lie.py"
    text = lie.read_text()
    lie.write_text(text + "\n\n# a researcher's note\n")
    assert all(kernels.status(n)[1] == "compiled" for n in manifest.KERNELS if n != "controllers._khatib_kernel")
    head, sep, rest = text.partition('"""')  # the module docstring's opening quotes
    lie.write_text(head + sep + "An edited docstring. " + rest)
    assert all(kernels.status(n)[1] == "compiled" for n in manifest.KERNELS if n != "controllers._khatib_kernel")
    # a shared helper module whose code changes stales every kernel that ports it
    lie.write_text(text + "\n_EDITED = 1\n")
    stale = {n for n in manifest.KERNELS if kernels.status(n)[0] is None}
    assert stale == {n for n, (_, refs) in manifest.KERNELS.items() if "sim/lie.py" in refs}
    # and an edited C source is reported as such
    c = tmp_path / "sim/_wrench_kernel.c"
    c.write_text(c.read_text() + "\n")
    assert kernels.status("sim._wrench_kernel")[1] == (
        "sim._wrench_kernel is stale: it was built from another version of _wrench_kernel.c"
    )


@built
def test_every_kernel_carries_the_digests_of_its_python_references() -> None:
    for name, (_, refs) in manifest.KERNELS.items():
        module, why = kernels.status(name)
        assert why == "compiled"
        compiled = dict(item.split("=", 1) for item in module.REFERENCE_SHA256.split(","))
        assert list(compiled) == list(refs)
        assert all(len(d) == 64 for d in compiled.values())
