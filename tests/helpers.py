"""Shared test helpers: small scenario dictionaries and the tolerance table (one place)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"
#: campaign files (docs/campaigns.md), kept beside the scenarios but not scenarios themselves
CAMPAIGNS = SCENARIOS / "campaigns"


def scenario_files() -> list[Path]:
    """Every shipped scenario file (``scenarios/`` and its subfolders, without ``scenarios/campaigns/`` and
    ``scenarios/studies/``: campaign and study files)."""
    return sorted(f for f in SCENARIOS.rglob("*.yaml")
                  if f.relative_to(SCENARIOS).parts[0] not in ("campaigns", "studies"))

#: float64 machine epsilon (2.2e-16); round-off bounds in the tests are written as c·ε·(scale).
EPS = float(np.finfo(float).eps)


#: The project's tolerance table (docs/testing.md §2: no scattered per-test tolerances). Each entry compares two
#: descriptions of one plant (Pinocchio from the URDF-equivalent model, MuJoCo from the MJCF), so it
#: bounds model agreement (decimal parameters, MuJoCo's normalised quaternions and diagonalised
#: inertias) and round-off (a 7–8 link chain of 3×3 products: ≲ 8·γ_3 ≈ 5e-15 relative per quantity;
#: either library may contract to FMA on another CPU). Measured worst cases on five BLAS / SIMD code
#: paths are given; every entry has ≥ 100× headroom.
TOL = {
    "mass_matrix_rel": 1e-9,  # M (relative to max |M|): measured 1.1e-15
    "bias_rel": 1e-9,  # h = C q̇ + g (relative to max(|h|, 1)): measured 1.6e-15
    "pose_abs": 1e-12,  # EE position [m]: measured 1.1e-15
    "jacobian_abs": 1e-9,  # EE Jacobians [m/rad, 1]: measured 2e-15
    # F/T reading vs contact truth at a quasi-static press (relative to |truth|): physics, not round-off
    # (the residual acceleration of the tool at the end of the settle); measured ≤ 1.4e-8 for the probe
    "ft_truth_quasi_static_rel": 1e-6,
    "task_acc_abs": 1e-6,  # realised (MuJoCo) vs commanded (Pinocchio) task acceleration: measured 8e-12
    # sim.lie.mat2quat_batch vs MuJoCo's mju_mat2Quat (unit quaternions): per side a pivot sqrt of a 4-term
    # sum (≤ 2.5ε), ≤ 2 more roundings per component and a normalisation (numpy's norm and a division vs
    # MuJoCo's reciprocal scaling, possibly FMA-contracted): ≲ 9ε, so ≤ 18ε for both; measured ≤ 3.5ε
    # (18× headroom). A wrong branch or sign is O(1).
    "quat_vs_mujoco_abs": 64 * EPS,
}


def assert_within(actual, desired, bound, err_msg: str = "") -> None:
    """|actual − desired| ≤ bound elementwise, ``bound`` a scalar or an array broadcastable to the
    values (a stated round-off bound, e.g. c·ε·|A||x| per entry). Non-finite values must match exactly
    (NaN where NaN). A failure reports the worst |Δ|/bound and where it is."""
    a = np.asarray(actual, dtype=float)
    b = np.asarray(desired, dtype=float)
    a, b, bound = np.broadcast_arrays(a, b, np.asarray(bound, dtype=float))
    finite = np.isfinite(a) & np.isfinite(b)
    np.testing.assert_array_equal(a[~finite], b[~finite], err_msg=f"non-finite entries differ {err_msg}")
    diff = np.abs(a - b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(finite, np.where(diff > 0, diff / bound, 0.0), 0.0)
    if not np.all(ratio <= 1.0):
        i = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.ndim else ()
        raise AssertionError(
            f"|Δ| exceeds the bound {err_msg}: worst |Δ|/bound = {float(ratio[i]):.3g} at {i} "
            f"(actual {float(a[i])!r}, desired {float(b[i])!r}, bound {float(bound[i]):.3g}); "
            f"{int(np.sum(ratio > 1.0))} of {ratio.size} entries out"
        )


def scenario_dict(name: str) -> dict:
    """A deep copy of ``scenarios/<name>.yaml`` as a dict, to modify in tests."""
    return copy.deepcopy(yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text()))


#: the impedance preload depth of fr3_g20_press before its force set-point (10 N from the closed-loop statics) [m]
PRESS_PRELOAD_DEPTH = 0.0406
#: the contact-force options of docs/theory/force_control.md
FORCE_OPTION_KEYS = ("force_filter", "force_setpoint")


def plain_scenario_dict(name: str) -> dict:
    """``scenarios/<name>.yaml`` with the controller's contact-force options removed (no force filter, no force
    set-point, the hybrid feedforward back to the torque keying): for the tests that pin the plain law (the
    Python fast forms against their array forms, the friction integral's freeze on the first contact step).
    The kernel tests use the shipped scenarios themselves (:func:`scenario_dict`): the kernels implement the
    options."""
    d = scenario_dict(name)
    ctrl = d["controller"]
    had_setpoint = ctrl.get("force_setpoint") is not None
    for key in FORCE_OPTION_KEYS:
        ctrl.pop(key, None)
    if ctrl.get("feedforward") == "hybrid":
        ctrl["feedforward"] = "torque"
    target = d.get("target") or {}
    if had_setpoint and target.get("type") == "plate":  # a press: its impedance preload before the set-point
        target["press_depth"] = PRESS_PRELOAD_DEPTH
    # the gates that judge what the removed options do (the chatter they prevent, the preload they hold)
    dropped = {"contact.force_spikes_truth", "contact.on_off_toggles_truth"}
    if had_setpoint and target.get("type") != "plate":
        dropped.add("contact.steady_axial_force_truth")
    d["gates"] = [g for g in d.get("gates") or [] if g["metric"] not in dropped]
    return d


def press_scenario(robot: str = "iiwa14", press_depth: float = 0.004, **sim) -> dict:
    """The probe pressed straight down onto a fixed plate (quasi-static contact at the end)."""
    pos = [0.55, 0.0, 0.20] if robot == "iiwa14" else [0.45, 0.0, 0.25]
    return {
        "name": f"{robot}_press_test",
        "robot": {"type": robot},
        "sim": {"settle_time": 2.5, **sim},
        "start": {"standoff": 0.03},
        "tool": {"type": "probe"},
        "target": {"type": "plate", "pose": {"position": pos}, "press_depth": press_depth},
        "planner": {"type": "quintic", "v_max": 0.05, "a_max": 0.1},
        "controller": {"type": "khatib", "k": 300, "d": 100},
    }


def planner_context():
    """A fixed start → goal pair (goal rotated by (0.1, −0.2, 0.3) rad, approach along +z) for the
    planner fast-path tests."""
    import numpy as np
    from dockbench.planners.base import PlannerContext
    from dockbench.sim.lie import so3_exp

    T_goal = np.eye(4)
    T_goal[:3, :3] = so3_exp(np.array([0.1, -0.2, 0.3]))
    T_goal[:3, 3] = (0.5, 0.0, 0.3)
    T_start = np.eye(4)
    T_start[:3, 3] = (0.4, 0.1, 0.5)
    return PlannerContext(T_world_start=T_start, T_world_goal=T_goal, approach_axis_world=np.array((0.0, 0.0, 1.0)))


def random_reference(rng, snap, out=None, rot_scale: float = 0.2):
    """A world reference near the snapshot's EE pose (position within 2 cm, orientation rotated by a
    random vector of scale ``rot_scale`` rad, small velocities and accelerations), written into ``out``
    (a new :class:`planners.base.Reference` if None) and returned."""
    from dockbench.planners.base import Reference
    from dockbench.sim.lie import so3_exp

    ref = Reference() if out is None else out
    ref.pos[:] = snap.p_ee_in_world + rng.uniform(-0.02, 0.02, 3)
    ref.vel[:] = rng.uniform(-0.05, 0.05, 3)
    ref.acc[:] = rng.uniform(-0.1, 0.1, 3)
    ref.R[:] = so3_exp(rng.normal(scale=rot_scale, size=3)) @ snap.R_world_ee
    ref.omega[:] = rng.normal(scale=0.1, size=3)
    ref.alpha[:] = rng.normal(scale=0.1, size=3)
    return ref


def execute_notebook(path: Path, *extras: str) -> tuple[str, int]:
    """Run a notebook from top to bottom in a real Jupyter kernel (nbclient; its folder as the working
    directory) and return (the text of every code cell's outputs joined by newlines, the number of PNG
    images). Fails on any error output; skips when nbformat, nbclient, ipykernel or one of ``extras`` (module
    names of the notebook's extra) is not installed."""
    import pytest

    nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (extra: notebook)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (extra: notebook)")
    pytest.importorskip("ipykernel", reason="ipykernel not installed (extra: notebook)")
    for module in extras:
        pytest.importorskip(module, reason=f"{module} not installed (the notebook's extra)")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    text, images = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", out
            text.append(out.get("text", ""))
            data = out.get("data", {})
            text.append(data.get("text/plain", ""))
            images += "image/png" in data
    return "\n".join(text), images
