"""Campaigns: parameter sweeps and Monte Carlo studies from one YAML file (docs/campaigns.md).

* :mod:`sim.campaign.spec`: the campaign file → trials (grid and random axes, variants, seeds);
* :mod:`sim.campaign.trial`: one trial in a worker (imports and compiled models reused);
* :mod:`sim.campaign.executors`: in-process, a local process pool, Ray;
* :mod:`sim.campaign.runner`: the driver (resume, trial folders, results.csv, summary.json, figures);
* :mod:`sim.campaign.stats`: Wilson intervals, quantiles;
* :mod:`sim.campaign.figures`: the figures of a campaign (heat maps, sweeps, histograms).
* :mod:`sim.campaign.study`: robust tuning over a campaign with Optuna (docs/tuning.md).

``python experiments/campaign.py CAMPAIGN.yaml`` (console script ``dockbench-campaign``) is the CLI.
"""

from dockbench.sim.campaign.runner import CampaignReport, run_campaign
from dockbench.sim.campaign.spec import Campaign, Trial, load_campaign

__all__ = ["Campaign", "CampaignReport", "Trial", "load_campaign", "run_campaign"]
