"""Campaign figures carry units (issue 30, item 4): grid axes the unit of the scenario key they set, the colour
bar the metric's unit (telemetry.metrics.METRICS) or the success rate's."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from dockbench.sim.campaign import figures as campaign_plots
from dockbench.sim.campaign.figures import SUCCESS_LABEL, campaign_figures, key_unit
from dockbench.sim.campaign.spec import load_campaign

from tests.helpers import REPO

CAMPAIGNS = REPO / "scenarios" / "campaigns"
#: pyplot's close, kept before the tests patch it
_CLOSE = plt.close


def test_key_units_come_from_the_typed_configs() -> None:
    types = {"controller": "khatib", "target": "drogue"}
    assert key_unit("controller.k", types) == "N/m"
    assert key_unit("controller.d", types) == "N·s/m"
    assert key_unit("target.belief_offset.position.0", types) == "m"  # list index dropped
    assert key_unit("target.belief_offset.rpy_deg[2]", types) == "deg"
    assert key_unit("sim.timestep") == "s"
    assert key_unit("controller.k") == "" and key_unit("nonsense.key") == ""  # no type / unknown: no unit


def _figures(campaign_file: Path, rows: list[dict], tmp_path: Path, monkeypatch) -> list[plt.Figure]:
    """campaign_figures' figures, kept open (plt.close patched) so their labels can be read."""
    figs: list[plt.Figure] = []
    monkeypatch.setattr(campaign_plots.plt, "close", lambda fig=None: figs.append(fig))
    campaign_figures(load_campaign(campaign_file), rows, {}, tmp_path)
    return figs


def test_heat_maps_label_their_axes_and_colour_bars_with_units(tmp_path, monkeypatch) -> None:
    """The k × d sweep (default tick labels): "k [N/m]", "d [N·s/m]"; colour bars "success rate [share of
    trials]" and "median contact.peak_force_truth [N]"."""
    camp = load_campaign(CAMPAIGNS / "iiwa14_stiffness_sweep.yaml")
    ks, ds = [v[0] for v in camp.axes[0].values], [v[0] for v in camp.axes[1].values]
    rows = [{"variant": "", "k": k, "d": d, "verdict": "PASS" if k < 600 else "FAIL",
             "metrics": {"contact.peak_force_truth": 10.0 + k / 100}} for k in ks for d in ds]
    figs = _figures(CAMPAIGNS / "iiwa14_stiffness_sweep.yaml", rows, tmp_path, monkeypatch)
    try:
        assert len(figs) == 2
        for fig, bar in zip(figs, (SUCCESS_LABEL, "median contact.peak_force_truth [N]"), strict=True):
            main, cbar = fig.axes[0], fig.axes[-1]
            assert (main.get_xlabel(), main.get_ylabel()) == ("k [N/m]", "d [N·s/m]")
            assert cbar.get_ylabel() == bar
    finally:
        for fig in figs:
            _CLOSE(fig)


def test_named_tick_labels_keep_the_keys_unit_in_the_axis_label(tmp_path, monkeypatch) -> None:
    """The misalignment envelope labels its ticks itself (-6mm, 0mm, 6mm): the axis label names the key and
    its unit; only the outer panels carry axis labels."""
    camp = load_campaign(CAMPAIGNS / "misalignment_envelope.yaml")
    by = {a.name: a for a in camp.axes}
    rows = [{"variant": v.name, "dx": x[0], "dy": y[0], "verdict": "PASS", "metrics": {"contact.peak_force_truth": 5.0}}
            for v in camp.variants for x in by["dx"].values for y in by["dy"].values]
    figs = _figures(CAMPAIGNS / "misalignment_envelope.yaml", rows, tmp_path, monkeypatch)
    try:
        panels = [ax for ax in figs[0].axes[:-1] if ax.get_visible()]
        assert panels[0].get_ylabel() == "dy (target.belief_offset.position[1] [m])"
        assert panels[-1].get_xlabel() == "dx (target.belief_offset.position[0] [m])"
        assert panels[0].get_xlabel() == "" and panels[1].get_ylabel() == ""  # inner panels: no repeats
    finally:
        for fig in figs:
            _CLOSE(fig)
