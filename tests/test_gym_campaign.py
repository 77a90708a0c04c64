"""A policy evaluated over a campaign (dockbench/gym_campaign.py, experiments/gym_campaign.py): the zero
policy gives the campaign runner's results table and summary bit for bit (but the timing columns), the trial
folders hold the same telemetry, a policy that acts changes the table, resume follows the policy's spec, and
a bad policy is one line naming ``--policy`` and the allowed forms.

The campaign: 2 variants (the whole run, 1.08 s; a run cut at ``sim.duration`` 0.5 s, INCOMPLETE) × 2
stiffnesses, with F/T noise (so each trial's seed matters). Neither run length is a whole number of 20 ms
policy periods (1083 and 501 control steps), so the episode's last, shortened, policy period is exercised.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("gymnasium")

from dockbench.sim.campaign import load_campaign, run_campaign  # noqa: E402
from dockbench.sim.campaign.executors import InlineExecutor  # noqa: E402
from dockbench.sim.campaign.runner import VOLATILE_COLUMNS  # noqa: E402
from dockbench.sim.errors import DockbenchError  # noqa: E402
from dockbench.telemetry.run import Run, first_difference  # noqa: E402

from dockbench.gym_campaign import POLICY_FILE, evaluate_policy, parse_policy  # noqa: E402
from tests.helpers import SCENARIOS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SPIRAL = str(REPO / "docs" / "examples" / "gym_spiral_baseline.py") + ":SpiralPolicy"
#: results.csv columns that depend on the machine or on how long things took (VOLATILE_COLUMNS), and the
#: time split of a trial (encode_s is not a column; sim_s is simulated time and is compared)
TIMING = set(VOLATILE_COLUMNS)


def _campaign(tmp_path: Path) -> Path:
    data = {
        "name": "policy_small",
        "base": str(SCENARIOS / "iiwa14_docking.yaml"),
        "set": {"start.standoff": 0.02, "planner.v_max": 0.2, "planner.a_max": 1.0, "sim.settle_time": 0.1,
                "gates": [], "uncertainty.ft_noise_std": [0.2, 0.2, 0.2, 0.01, 0.01, 0.01]},
        "variants": {"whole": {}, "cut": {"set": {"sim.duration": 0.5}}},
        "axes": [{"key": "controller.k", "values": [200, 400], "name": "k"}],
        "seed": 3,
        "telemetry": "all",
    }
    path = tmp_path / "policy_small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _table(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((folder / "results.csv").read_text())))


def _stable(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


class Offset:
    """A constant reference offset of 3 mm along the believed target's x, through stable-baselines3's API
    (``predict`` returns ``(action, state)``). Module level: a process pool can pickle it."""

    def predict(self, obs, deterministic=True):
        a = np.zeros(10)  # impedance mode on the Khatib law: 6 offsets + 2 × 2 gain scales
        a[0] = 0.3  # × offset_limit 10 mm
        return a, None


def test_the_zero_policy_is_the_campaign_bit_for_bit_and_a_policy_that_acts_is_not(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path))
    plain = run_campaign(camp, tmp_path / "plain", InlineExecutor(), progress=None, figures=False)
    zero = evaluate_policy(camp, "zero", tmp_path / "zero", jobs=1, progress=None, figures=False)
    t_plain, t_zero = _table(plain.out_dir), _table(zero.out_dir)
    assert list(t_zero[0]) == list(t_plain[0])  # the same columns, in the same order
    assert len(t_plain) == 4 and _stable(t_zero) == _stable(t_plain)
    assert {r["verdict"] for r in t_zero} == {"PASS", "INCOMPLETE"}  # the cut runs are INCOMPLETE in both
    steps = [round(float(r["sim_s"]) / 0.001) for r in t_zero]
    assert sorted(set(steps)) == [501, 1083] and all(n % 20 for n in steps)  # partial last policy periods
    # summary.json: the same keys; the same cells (rates, Wilson intervals, metric quantiles)
    s_plain, s_zero = (json.loads((r.out_dir / "summary.json").read_text()) for r in (plain, zero))
    assert sorted(s_zero) == sorted(s_plain) and s_zero["cells"] == s_plain["cells"]
    assert {k: s_zero[k] for k in ("passed", "success_rate", "wilson95", "statuses")} == \
           {k: s_plain[k] for k in ("passed", "success_rate", "wilson95", "statuses")}
    for r in t_plain:  # each trial's telemetry, bit for bit
        assert first_difference(Run.load(plain.out_dir / r["path"]), Run.load(zero.out_dir / r["path"])) is None
    # the campaign report reads the folder unchanged: the same section but the folder it names, the command
    # that made it (policy.json) and the sentence on the wall time and load
    from dockbench.experiments.campaign_results import section

    def report(folder: Path) -> list[str]:
        return [line.replace(str(folder), "F") for line in section(folder).splitlines()
                if "load average" not in line and not line.startswith("Run with")]

    assert report(zero.out_dir) == report(plain.out_dir) and len(report(zero.out_dir)) > 10
    assert f"Run with `python experiments/gym_campaign.py {camp.file} --policy zero --action-mode impedance`" \
        in section(zero.out_dir)
    assert f"Run with `dockbench campaign run {camp.file}`" in section(plain.out_dir)
    assert json.loads((zero.out_dir / POLICY_FILE).read_text())["policy"] == "zero"

    again = evaluate_policy(camp, "zero", tmp_path / "zero", jobs=1, progress=None, figures=False)
    assert (again.ran, again.skipped) == (0, 4)  # resumed: the same scenarios and the same policy spec
    # another policy into the same folder runs every trial again (the policy is part of a trial's hash)
    moved = evaluate_policy(camp, Offset(), tmp_path / "zero", jobs=1, progress=None, figures=False)
    assert (moved.ran, moved.skipped) == (4, 0)
    t_moved = _table(moved.out_dir)
    for a, b in zip(t_moved, t_zero, strict=True):  # the offset moves every trial's path from the first step
        assert a["trial"] == b["trial"] and a["seed"] == b["seed"]
        assert float(a["docking.lateral"]) != float(b["docking.lateral"]), a["trial"]
    pol = json.loads((moved.out_dir / POLICY_FILE).read_text())
    assert pol["resumable"] is False and pol["policy"] == f"{__name__}.Offset"
    rerun = evaluate_policy(camp, Offset(), tmp_path / "zero", jobs=1, progress=None, figures=False)
    assert rerun.ran == 4  # a Python object is not resumable


def test_a_scripted_policy_from_a_file_on_a_process_pool(tmp_path) -> None:
    """The spiral baseline (docs/examples) named as FILE.py:NAME, imported by each worker of a 2-process
    pool: it acts from the first contact on, so the whole runs change and the cut runs (0.5 s, no contact
    yet) are the zero policy's, bit for bit."""
    camp = load_campaign(_campaign(tmp_path))
    zero = evaluate_policy(camp, "zero", tmp_path / "zero", jobs=1, progress=None, figures=False)
    spiral = evaluate_policy(camp, SPIRAL, tmp_path / "spiral", jobs=2, allow_plugins=True, progress=None,
                             figures=False)
    assert spiral.summary["timing"]["workers"] == 2 and spiral.summary["timing"]["executor"] == "local"
    t_zero, t_spiral = _stable(_table(zero.out_dir)), _stable(_table(spiral.out_dir))
    for a, b in zip(t_spiral, t_zero, strict=True):
        assert a["status"] == "completed", a["message"]
        if a["cell"].startswith("cut/"):
            assert a == b
        else:
            assert a["contact.peak_force_truth"] != b["contact.peak_force_truth"], a["trial"]


def test_a_bad_policy_names_the_flag_and_the_allowed_forms(tmp_path, capsys) -> None:
    camp = load_campaign(_campaign(tmp_path))
    for bad in ("spiral", "my_module", "a b:c", "x.py:", ":f", "pkg.mod:1f"):
        with pytest.raises(DockbenchError, match=r"--policy .*not a policy; give zero .*MODULE:NAME.*FILE\.py:NAME"):
            parse_policy(bad)
    assert parse_policy("zero") == ("zero", "", "")
    assert parse_policy("docs.examples.gym_spiral_baseline:SpiralPolicy") == (
        "module", "docs.examples.gym_spiral_baseline", "SpiralPolicy")
    with pytest.raises(DockbenchError, match=r"--policy .*is Python code .*--allow-plugins"):
        evaluate_policy(camp, SPIRAL, tmp_path / "o", jobs=1, allow_plugins=False, progress=None)
    with pytest.raises(DockbenchError, match=r"has no 'Nope'"):
        evaluate_policy(camp, SPIRAL.replace("SpiralPolicy", "Nope"), tmp_path / "o", jobs=1, allow_plugins=True)
    with pytest.raises(DockbenchError, match=r"no module named 'no_such_policy_module'"):
        evaluate_policy(camp, "no_such_policy_module:f", tmp_path / "o", jobs=1, allow_plugins=True)
    with pytest.raises(DockbenchError, match=r"neither callable .* nor an object with \.predict"):
        evaluate_policy(camp, 3.0, tmp_path / "o", jobs=1)
    with pytest.raises(DockbenchError, match=r"--action-mode 'force': allowed: impedance, setpoint, torque"):
        evaluate_policy(camp, "zero", tmp_path / "o", jobs=1, action_mode="force")
    with pytest.raises(DockbenchError, match=r"cannot be sent to worker processes"):
        evaluate_policy(camp, lambda obs: obs, tmp_path / "o", jobs=2)
    # the command line: exit 1, one line naming --policy
    from dockbench.experiments.gym_campaign import main

    assert main([str(_campaign(tmp_path)), "--policy", "spiral", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--policy 'spiral': not a policy; give zero" in err
    assert main([str(_campaign(tmp_path)), "--policy", SPIRAL, "--out", str(tmp_path / "o")]) == 1
    assert "--allow-plugins" in capsys.readouterr().err


def test_the_command_line_writes_the_campaign_folder(tmp_path, capsys) -> None:
    from dockbench.experiments.gym_campaign import main

    code = main([str(_campaign(tmp_path)), "--policy", "zero", "--jobs", "1", "--out", str(tmp_path / "o"),
                 "--no-progress", "--no-figures", "--name", "zero_policy", "--set", "sim.duration=0.3"])
    out = capsys.readouterr().out
    assert code == 0, out
    folder = tmp_path / "o" / "zero_policy"
    rows = _table(folder)
    assert len(rows) == 4 and sorted({round(float(r["sim_s"]) / 0.001) for r in rows}) == [301, 501]  # cut: its own
    assert "campaign   zero_policy  (4/4 trials" in out and "policy     zero (impedance;" in out
    assert (folder / "campaign.yaml").is_file() and (folder / POLICY_FILE).is_file()


class Raises:
    """A policy that fails at t = 0.2 s."""

    def __call__(self, obs):
        if obs["time"][0] >= 0.2:
            raise RuntimeError("the policy broke")
        return np.zeros(10)


def test_a_policy_that_raises_is_a_failed_trial_with_its_traceback(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path))
    rep = evaluate_policy(camp, Raises(), tmp_path / "o", jobs=1, progress=None, figures=False)
    rows = _table(rep.out_dir)
    assert [r["status"] for r in rows] == ["error"] * 4 and {r["verdict"] for r in rows} == {"FAIL"}
    assert all("RuntimeError: the policy broke (at t = 0.200 s)" in r["message"] for r in rows), rows[0]["message"]
    assert "the policy broke" in (rep.out_dir / rows[0]["path"] / "error.txt").read_text()
    assert rep.summary["statuses"] == {"error": 4}
