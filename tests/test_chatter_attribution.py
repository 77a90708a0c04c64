"""experiments/chatter_attribution.py: each variant removes the cause it names, and the table shows it."""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.experiments.chatter_attribution import VARIANTS, main, table, variant_setup

from tests.helpers import REPO

FR3 = REPO / "scenarios" / "fr3_docking.yaml"


def _setup(name: str, divisor: int = 1):
    return variant_setup(FR3, name, divisor)


def test_the_joint_friction_variant_removes_it_from_the_plant_and_the_law() -> None:
    """The FR3 has joint dry friction; the variant zeroes the plant's and, through it, the feedforward's."""
    _, shipped = _setup("as shipped")
    _, none = _setup("no joint dry friction")
    assert np.all(np.asarray(shipped.controller.ff.f) > 0.0)
    assert np.all(np.asarray(none.controller.ff.f) == 0.0)
    assert np.all(none.asm.model.dof_frictionloss == 0.0) and np.any(shipped.asm.model.dof_frictionloss > 0.0)


def test_the_scenario_variants_set_what_they_name() -> None:
    sc, _ = _setup("law's force terms off", divisor=4)
    assert sc.controller.config.use_force_feedback is False and sc.controller.config.feedforward == "off"
    assert sc.sim.timestep == pytest.approx(0.001 / 4, rel=1e-15)
    sc, _ = _setup("no wall friction")
    assert sc.tool.config.friction == 0.0 and sc.target.config.friction == 0.0
    assert set(VARIANTS) >= {"as shipped", "no force feedback", "no feedforward", "no joint dry friction"}


def test_table_rows() -> None:
    rows = table({"as shipped": {1: {"chatter": [20, 90, 244], "verdict": "PASS"}}}, (1,))
    assert rows[-1] == "| as shipped | 20 / 90 / 244 (PASS) |"


def test_main_refuses_an_unknown_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(FR3), "--variants", "no gravity"]) == 2
    assert "allowed: as shipped" in capsys.readouterr().err
