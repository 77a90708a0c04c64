"""Gains go to the compiled controller kernels by name (sim/_kernel_util.h ``kernel_read_fields``; the laws'
``_config_gains``), and the laws' gain scales (``set_gain_scales``, which the gym's impedance action calls)
reach the compiled kernel and the Python path alike.

* A gains mapping with a key missing, an unknown key, a value of the wrong type or the old positional tuple
  fails at binding with an error naming the kernel, the argument and the key (never read by position).
* After gain-scale changes the kernel guard (sim/kernels.py: kernel and Python reference from the same state,
  τ compared within the stated round-off bound) passes on every step, Khatib, SE(3) and HQP; and a kernel
  left bound to the old gains is caught by that same comparison (the check can fail).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from dockbench.planners.base import Reference
from dockbench.sim import kernels
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import scenario_dict

#: shipped scenario → (its law's kernel module, the kernel type)
LAWS = {
    "iiwa14_docking": ("controllers._khatib_kernel", "KhatibKernel"),
    "iiwa14_docking_se3": ("controllers._se3_kernel", "SE3Kernel"),
    "iiwa14_docking_hqp": ("controllers._hqp_kernel", "HQPKernel"),
}


def _bound_args(scene: str) -> tuple[object, dict, object]:
    """(the kernel type, the keyword arguments the law binds it with, the law) of a shipped scenario's law."""
    module, name = LAWS[scene]
    if kernels.load(module) is None:
        pytest.skip(f"{module} is not built")
    s = build(scenario_from_dict(scenario_dict(scene)))
    ctrl = s.controller
    real = ctrl._kmod
    seen: dict = {}

    def make(**kw):
        seen.update(kw)
        return getattr(real, name)(**kw)

    ctrl._kmod = SimpleNamespace(**{**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")}, name: make})
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv))
    ctrl._bind(snap, Reference(), WrenchState(), ctrl.make_command())
    ctrl._kmod = real
    return getattr(real, name), seen, ctrl


@pytest.mark.parametrize("scene", list(LAWS))
def test_a_missing_unknown_or_mistyped_gain_fails_by_name(scene: str) -> None:
    kernel, args, ctrl = _bound_args(scene)
    cls = LAWS[scene][1]
    gains = args["gains"]
    assert isinstance(gains, dict) and gains is ctrl._config_gains()  # one mapping per config object
    kernel(**args)  # the law's own mapping binds
    first = next(iter(gains))
    missing = {k: v for k, v in gains.items() if k != first}
    with pytest.raises(ValueError, match=rf"^{cls}: gains is missing the key '{first}' \(expected: .*{first}"):
        kernel(**{**args, "gains": missing})
    with pytest.raises(ValueError, match=rf"^{cls}: gains has an unknown key 'k_typo' \(expected: "):
        kernel(**{**args, "gains": {**gains, "k_typo": 1.0}})
    with pytest.raises(ValueError, match=rf"^{cls}: gains has a key 3 that is not a gain name"):
        kernel(**{**args, "gains": {**gains, 3: 1.0}})
    scalar = next(k for k, v in gains.items() if type(v) is float)
    with pytest.raises(TypeError, match=rf"^{cls}: gains\['{scalar}'\] must be a float, got str"):
        kernel(**{**args, "gains": {**gains, scalar: "fast"}})
    with pytest.raises(TypeError, match=rf"^{cls}: gains must be a dict of name -> value, got tuple"):
        kernel(**{**args, "gains": tuple(gains.values())})  # the old positional form


def test_an_array_gain_of_the_wrong_length_names_the_key() -> None:
    kernel, args, _ = _bound_args("iiwa14_docking_se3")
    with pytest.raises(ValueError, match=r"^SE3Kernel: gains\['a_inv_k'\] must be a sequence of 6 floats"):
        kernel(**{**args, "gains": {**args["gains"], "a_inv_k": (1.0,) * 5}})


@pytest.mark.parametrize("scene", ["iiwa14_docking", "iiwa14_docking_hqp"])
def test_the_force_setpoint_constants_go_by_name_too(scene: str) -> None:
    kernel, args, _ = _bound_args(scene)
    cls = LAWS[scene][1]
    params = args["fs_params"]
    with pytest.raises(ValueError, match=rf"^{cls}: fs_params has an unknown key 'k_d' \(expected: axis_x, "):
        kernel(**{**args, "fs_params": {**params, "k_d": 0.0}})
    with pytest.raises(ValueError, match=rf"^{cls}: fs_params is missing the key 'damping'"):
        kernel(**{**args, "fs_params": {k: v for k, v in params.items() if k != "damping"}})


# ------------------------------------------------------------------------------------------ gain scales

def _scaled_run(scene: str, stale: bool = False):
    """A short impedance episode under the kernel guard at every step, the gain scales changed at every policy
    step (2 ms); ``stale``: the compiled kernel is kept bound to the gains it had (the bug the check catches)."""
    pytest.importorskip("gymnasium", reason="the gym extra (gymnasium) is not installed")
    from dockbench.gym import DockingEnv

    module, _ = LAWS[scene]
    if kernels.load(module) is None:
        pytest.skip(f"{module} is not built")
    env = DockingEnv(scene, randomize={}, policy_rate=500.0, max_time=0.02, kernel_check=1)
    env.reset(seed=0)
    ctrl = env.setup.controller
    n = ctrl.n_gain_scales
    rng = np.random.default_rng(7)
    if stale:
        keep = ctrl.set_gain_scales

        def set_gain_scales(k, d):  # the new gains, but not for the kernel
            K0 = getattr(ctrl, "K0", None)
            keep(k, d)
            if K0 is not None:  # HQP: new arrays instead of writing the bound ones in place
                ctrl.K0 = ctrl.K0.copy()
                K0[:] = ctrl._K0_unscaled
            elif ctrl._bound:
                ctrl._bound = (*ctrl._bound[:4], ctrl.config)  # no rebind on the new config

        ctrl.set_gain_scales = set_gain_scales
    k_seen = []
    while not env.done:
        a = np.zeros(env.action_space.shape)
        a[6 : 6 + 2 * n] = rng.uniform(-1.0, 1.0, 2 * n)
        env.step(a)
        k_seen.append(env._gains.stiffness().copy())
    return env, ctrl, k_seen


@pytest.mark.parametrize("scene", list(LAWS))
def test_compiled_and_python_paths_agree_after_gain_scale_changes(scene: str) -> None:
    env, ctrl, k_seen = _scaled_run(scene)
    guard = env.cycle.guard
    assert guard.mismatches == [], [m.message() for m in guard.mismatches]
    assert ctrl.kernel == "compiled" and guard.checks >= 19  # every step compared (20 steps of 1 ms)
    assert guard.max_ratio["controller"] < 1.0
    # the scales did change the law's stiffness, by up to the gain ratio
    changes = np.max(np.abs(np.log(np.array(k_seen) / k_seen[0])), axis=0)
    assert np.max(changes) > 0.5 * math.log(env.gain_ratio)


@pytest.mark.parametrize("scene", ["iiwa14_docking", "iiwa14_docking_hqp"])
def test_a_kernel_left_on_the_old_gains_is_caught(scene: str) -> None:
    with pytest.warns(RuntimeWarning, match="kernel"):
        env, ctrl, _ = _scaled_run(scene, stale=True)
    assert env.cycle.guard.mismatches and ctrl.kernel == "python"
