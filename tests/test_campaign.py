"""Campaigns (sim/campaign, experiments/campaign.py): the file format, the expansion and its seeds, the
results table and summary, resuming, the telemetry policy, determinism (order, cache, executor: the local
pool and Ray give the same table bit for bit) and the figures."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from dockbench.sim.campaign import load_campaign, run_campaign
from dockbench.sim.campaign.executors import InlineExecutor, make_executor
from dockbench.sim.campaign.runner import VOLATILE_COLUMNS
from dockbench.sim.campaign.spec import trial_seed
from dockbench.sim.campaign.stats import wilson_interval
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import build, simulate
from dockbench.sim.model_cache import AssemblyCache, model_key
from dockbench.sim.scenario import load_scenario
from dockbench.telemetry.run import Run, first_difference

from tests.helpers import SCENARIOS

#: a one-second docking (fast approach, no gates: a complete run passes) with F/T noise, so the trials'
#: telemetry depends on their seeds
FAST = {
    "start.standoff": 0.02, "planner.v_max": 0.2, "planner.a_max": 1.0, "sim.settle_time": 0.1, "gates": [],
    "uncertainty.ft_noise_std": [0.2, 0.2, 0.2, 0.01, 0.01, 0.01],
}


def _campaign(tmp_path: Path, **over) -> Path:
    """An 8-trial campaign: k × a random lateral belief error (2 samples) × 2 repeats."""
    data = {
        "name": "eight",
        "base": str(SCENARIOS / "iiwa14_docking.yaml"),
        "set": dict(FAST),
        "axes": [
            {"key": "controller.k", "values": [200, 400], "name": "k"},
            {"key": "target.belief_offset.position.0", "uniform": {"low": -0.003, "high": 0.003}, "name": "dx"},
        ],
        "samples": 2,
        "repeats": 2,
        "seed": 3,
        "telemetry": "all",
    }
    data.update(over)
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _table(report_or_dir) -> list[dict[str, str]]:
    out = report_or_dir.out_dir if hasattr(report_or_dir, "out_dir") else Path(report_or_dir)
    return list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))


def _stable(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS} for r in rows]


# ------------------------------------------------------------------------------------------ the file
@pytest.mark.parametrize(
    "change,key,text",
    [
        ({"axes": [{"key": "controller.k"}]}, "axes[0]", "give exactly one of values, range, uniform, normal"),
        ({"axes": [{"key": "controller.k", "range": {"start": 1, "stop": 2}}]}, "axes[0].range",
         "give exactly one of num"),
        ({"axes": [{"key": "controller.k", "values": [1, 2], "labels": ["a"]}]}, "axes[0].labels", "2 labels"),
        ({"axes": [{"key": "controller.k", "normal": {"mean": 1, "std": -1}}]}, "axes[0].normal.std", "std must be"),
        ({"axes": [{"key": "controller.k", "values": [1]}, {"key": "controller.k", "values": [2], "name": "b"}]},
         "axes[1].key", "also set by axes[0]"),
        ({"samples": 3}, "samples", "samples draws the random axes"),
        ({"telemetry": "some"}, "telemetry", "allowed: all, failures, none"),
        ({"bogus": 1}, None, "unknown top-level key 'bogus'"),
        ({"metrics": ["contact.nope"]}, "metrics", "unknown metric"),
        ({"base": "nope.yaml"}, "base", "scenario file not found"),
        ({"axes": [{"key": "controller..k", "values": [1]}]}, "axes[0].key", "bad key path"),
    ],
)
def test_a_bad_campaign_names_the_file_and_the_key(tmp_path, change, key, text) -> None:
    data = {"name": "bad", "base": str(SCENARIOS / "iiwa14_docking.yaml")}
    data.update(change)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as exc:
        load_campaign(path)
    assert exc.value.file == str(path) and exc.value.key == key and text in str(exc.value)


def test_a_bad_value_fails_before_any_trial_runs(tmp_path) -> None:
    path = _campaign(tmp_path, axes=[{"key": "controller.k", "values": [300, -5], "name": "k"}], samples=1)
    with pytest.raises(ScenarioError, match=r"iiwa14_docking.yaml: controller.k: must be .*trial k=-5/s000r00"):
        run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None)
    assert not list((tmp_path / "out" / "eight" / "trials").iterdir())


def test_the_expansion_cells_seeds_and_draws(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path, variants={"a": {}, "b": {"set": {"controller.d": 90}}}))
    trials = camp.trials()
    assert camp.n_trials == len(trials) == 2 * 2 * 2 * 2
    assert [t.cell for t in trials[:4]] == ["a/k=200"] * 4 and trials[4].cell == "a/k=400"
    assert trials[0].trial_id == "a__k=200/s000r00" and trials[3].trial_id == "a__k=200/s001r01"
    assert camp.columns() == ["variant", "k", "dx"]
    # seeds: per (sample, repeat), the same in every cell (paired); draws: per sample, within the bounds
    assert [t.seed for t in trials[:4]] == [trial_seed(3, m, r) for m in (0, 1) for r in (0, 1)]
    assert len({t.seed for t in trials[:4]}) == 4
    assert [t.seed for t in trials[:4]] == [t.seed for t in trials[4:8]] == [t.seed for t in trials[12:]]
    dx = [t.params["dx"] for t in trials]
    assert all(-0.003 <= x <= 0.003 for x in dx) and dx[0] == dx[1] != dx[2] == dx[3] and dx[:4] == dx[4:8]
    assert trials[12].overrides["controller.k"] == 400 and trials[12].set_layers[-1] == {"controller.d": 90}
    assert trials[0].overrides["sim.seed"] == trials[0].seed
    # unpaired: every cell draws its own
    unpaired = dataclasses.replace(camp, paired=False).trials()
    assert unpaired[0].params["dx"] != unpaired[4].params["dx"] and unpaired[0].seed != unpaired[4].seed
    # the same file expands to the same trials (nothing depends on the order of anything)
    assert load_campaign(camp.file).trials() == trials


def test_ranges_zipped_keys_and_labels(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path, samples=1, repeats=1, axes=[
        {"key": "controller.k", "range": {"start": 100, "stop": 500, "step": 200}},
        {"key": "sim.settle_time", "range": {"start": 0.1, "stop": 0.3, "num": 3}, "name": "settle"},
        {"key": ["controller.m", "controller.d"], "values": [[10, 80], [20, 140]], "labels": ["soft", "hard"],
         "name": "imp"},
    ]))
    grid = [a.values for a in camp.grid_axes]
    assert grid[0] == ((100,), (300,), (500,)) and all(isinstance(v[0], int) for v in grid[0])
    assert grid[1] == ((0.1,), (0.2,), (0.30000000000000004,)) or np.allclose([v[0] for v in grid[1]], [0.1, .2, .3])
    t = camp.trials()
    assert len(t) == 18 and t[1].cell == "controller.k=100/settle=0.1/imp=hard"
    assert t[1].params["controller.m"] == 20 and t[1].params["controller.d"] == 140
    assert camp.columns() == ["controller.k", "settle", "controller.m", "controller.d"]


# ------------------------------------------------------------------------------------- the run
def test_a_campaign_writes_its_table_summary_and_trial_folders_and_resumes(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path))
    rep = run_campaign(camp, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    out = rep.out_dir
    assert (rep.ran, rep.skipped, rep.interrupted) == (8, 0, False)
    rows = _table(rep)
    assert [r["trial"] for r in rows] == [t.trial_id for t in camp.trials()]
    assert {r["verdict"] for r in rows} == {"PASS"} and {r["status"] for r in rows} == {"completed"}
    for r, t in zip(rows, camp.trials(), strict=True):
        assert int(r["seed"]) == t.seed and float(r["dx"]) == t.params["dx"] and int(r["k"]) == t.params["k"]
        folder = out / r["path"]
        summary = json.loads((folder / "summary.json").read_text())
        meta = json.loads((folder / "meta.json").read_text())
        assert float(r["contact.peak_force_truth"]) == summary["metrics"]["contact.peak_force_truth"]
        assert meta["seed"] == t.seed and meta["scenario"]["controller"]["k"] == t.params["k"]
        assert meta["scenario"]["target"]["belief_offset"]["position"][0] == t.params["dx"]
        assert (folder / "telemetry.npz").is_file() and (folder / "trial.json").is_file()
    s = json.loads((out / "summary.json").read_text())
    assert s["trials"] == s["finished"] == 8 and s["passed"] == 8
    cell = s["cells"]["k=200"]
    assert cell["trials"] == 4 and cell["success_rate"] == 1.0 and cell["wilson95"] == list(wilson_interval(4, 4))
    peaks = [float(r["contact.peak_force_truth"]) for r in rows if r["cell"] == "k=200"]
    assert cell["metrics"]["contact.peak_force_truth"]["median"] == float(np.median(peaks))
    assert cell["metrics"]["contact.peak_force_truth"]["p95"] == float(np.percentile(peaks, 95))
    # the repeats differ (their seeds drive the F/T noise), the samples too (their draws)
    assert len({r["contact.peak_force_truth"] for r in rows}) == 8

    again = run_campaign(camp, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert (again.ran, again.skipped) == (0, 8)
    assert _table(again) == rows
    (out / rows[5]["path"] / "trial.json").unlink()  # an unfinished trial: run again, alone
    third = run_campaign(camp, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert (third.ran, third.skipped) == (1, 7)
    assert _stable(_table(third)) == _stable(rows)
    # a changed scenario runs again (the trial's hash of its scenario differs)
    changed = dataclasses.replace(camp, set={**camp.set, "controller.d": 90})
    fourth = run_campaign(changed, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert (fourth.ran, fourth.skipped) == (8, 0)
    assert fourth.summary["stale_trials"] == 0  # same trial folders, run again


def test_trial_folders_of_an_earlier_version_are_counted_as_stale(tmp_path) -> None:
    """Changing an axis' values renames cells: the old cells' finished trial folders are not in results.csv
    and the summary (and the CLI's report) count them as stale; ``fresh`` removes them."""
    from dockbench.experiments.campaign import format_report

    one = load_campaign(_campaign(tmp_path, samples=1, repeats=1, telemetry="none"))
    run_campaign(one, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    path = _campaign(tmp_path, samples=1, repeats=1, telemetry="none", axes=[
        {"key": "controller.k", "values": [200, 300], "name": "k"},  # was [200, 400]
        {"key": "target.belief_offset.position.0", "uniform": {"low": -0.003, "high": 0.003}, "name": "dx"},
    ])
    two = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert (two.ran, two.skipped) == (1, 1)  # k=200 is done, k=300 is new
    assert two.summary["stale_trials"] == 1 and len(_table(two)) == 2  # k=400's folder, not in the table
    assert "1 trial folders of an earlier version" in format_report(two)
    fresh = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False,
                         fresh=True)
    assert fresh.ran == 2 and fresh.summary["stale_trials"] == 0


def test_a_bug_inside_a_trials_loop_is_a_failed_trial_with_its_traceback(tmp_path, monkeypatch) -> None:
    """An exception inside one trial's control loop (sim.loop: status ``error``, InternalError with the
    result) is that trial's row (status error, INCOMPLETE, the message naming the step) with error.txt and the
    telemetry up to the failing step; the other trial and the campaign go on."""
    from dockbench.sim import loop as sim_loop

    real_build = sim_loop.build

    def build_with_a_bug(scenario, assembly=None):
        s = real_build(scenario, assembly=assembly)
        if scenario.controller.config.k == 400:  # the second cell only
            original, calls = s.controller.compute, {"n": 0}

            def buggy(snap, ref, w, cmd):
                calls["n"] += 1
                if calls["n"] > 50:
                    raise KeyError("a controller bug")
                original(snap, ref, w, cmd)

            s.controller.compute = buggy
        return s

    monkeypatch.setattr(sim_loop, "build", build_with_a_bug)
    camp = load_campaign(_campaign(tmp_path, samples=1, repeats=1, telemetry="failures"))
    rep = run_campaign(camp, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    rows = {r["k"]: r for r in _table(rep)}
    assert (rows["200"]["status"], rows["200"]["verdict"]) == ("completed", "PASS")
    bad = rows["400"]
    assert (bad["status"], bad["verdict"]) == ("error", "INCOMPLETE")
    assert "KeyError at t = 0.0500 s (step 50)" in bad["message"]
    folder = rep.out_dir / bad["path"]
    assert "a controller bug" in (folder / "error.txt").read_text()
    assert len(Run.load(folder).t) == 50  # the telemetry up to the failing step


def test_the_telemetry_policy_and_budget(tmp_path, monkeypatch) -> None:
    # the second duration ends before the planner: INCOMPLETE, a failure
    path = _campaign(tmp_path, telemetry="failures", samples=1, repeats=1, axes=[
        {"key": "sim.duration", "values": [None, 0.3], "labels": ["full", "short"], "name": "T"}])
    rep = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    rows = {r["cell"]: r for r in _table(rep)}
    assert rows["T=full"]["verdict"] == "PASS" and rows["T=short"]["verdict"] == "INCOMPLETE"
    assert rows["T=full"]["telemetry"] == "none" and rows["T=short"]["telemetry"] == "kept"
    full, short = rep.out_dir / rows["T=full"]["path"], rep.out_dir / rows["T=short"]["path"]
    assert not (full / "telemetry.npz").exists() and (full / "summary.json").is_file()
    # the kept telemetry is compressed and is the run's, bit for bit
    run = Run.load(short)
    seed = trial_seed(3, 0, 0)
    sc = load_scenario(SCENARIOS / "iiwa14_docking.yaml", {**FAST, "sim.duration": 0.3, "sim.seed": seed})
    ref = simulate(build(sc))[0].channels()
    assert first_difference(run.channels, ref) is None
    raw = sum(np.asarray(v).nbytes for v in ref.values())
    assert (short / "telemetry.npz").stat().st_size < 0.8 * raw
    # a budget smaller than one trial's telemetry keeps none, and says so
    small = dataclasses.replace(load_campaign(path), name="small", telemetry="all", telemetry_budget_mb=0.001)
    rep2 = run_campaign(small, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert {r["telemetry"] for r in _table(rep2)} == {"over budget"}
    assert rep2.summary["telemetry"]["over_budget"] == 2 and rep2.summary["telemetry"]["kept"] == 0
    # once a trial's telemetry did not fit, later trials are not asked to compress theirs (inline: one
    # trial at a time, so only the first is compressed and dropped); a "failures" policy labels only the
    # failures over budget
    import dockbench.sim.campaign.trial as trial_mod

    encoded = []
    real_encode = trial_mod.encode_npz
    monkeypatch.setattr(trial_mod, "encode_npz", lambda tel: encoded.append(1) or real_encode(tel))
    rep2b = run_campaign(dataclasses.replace(small, name="small_b"), tmp_path / "out", InlineExecutor(),
                         progress=None, figures=False)
    assert len(encoded) == 1 and {r["telemetry"] for r in _table(rep2b)} == {"over budget"}
    rep2c = run_campaign(dataclasses.replace(small, name="small_c", telemetry="failures"), tmp_path / "out",
                         InlineExecutor(), progress=None, figures=False)
    assert {r["cell"]: r["telemetry"] for r in _table(rep2c)} == {"T=full": "none", "T=short": "over budget"}
    none = dataclasses.replace(load_campaign(path), name="none", telemetry="none")
    rep3 = run_campaign(none, tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert not list(rep3.out_dir.rglob("telemetry.npz"))


class _Reversed(InlineExecutor):
    """Runs the tasks last first (the driver must not depend on the order)."""

    def run(self, tasks, fn=None):
        from dockbench.sim.campaign.trial import run_trial

        for task in reversed(list(tasks)):
            yield run_trial(task)


def test_a_trials_telemetry_does_not_depend_on_the_order_or_the_model_cache(tmp_path) -> None:
    camp = load_campaign(_campaign(tmp_path))
    a = run_campaign(camp, tmp_path / "a", InlineExecutor(), progress=None, figures=False)
    b = run_campaign(camp, tmp_path / "b", _Reversed(), progress=None, figures=False)
    assert _stable(_table(a)) == _stable(_table(b))
    for r in _table(a):
        diff = first_difference(Run.load(a.out_dir / r["path"]), Run.load(b.out_dir / r["path"]))
        assert diff is None, (r["trial"], diff)
    # a cached compiled model (another trial's belief) gives the same run as a fresh assembly
    cache = AssemblyCache()
    sc1 = load_scenario(SCENARIOS / "iiwa14_docking.yaml", {**FAST, "target.belief_offset.position.0": 0.002})
    sc2 = load_scenario(SCENARIOS / "iiwa14_docking.yaml", {**FAST, "target.belief_offset.position.0": -0.002})
    simulate(build(sc1, assembly=cache.get(sc1)))
    cached = simulate(build(sc2, assembly=cache.get(sc2)))[0].channels()
    assert cache.stats() == {"hits": 1, "misses": 1, "entries": 1}
    assert first_difference(cached, simulate(build(sc2))[0].channels()) is None


def test_the_model_cache_serves_a_keyed_drogue_with_its_probe() -> None:
    """A target that needs the tool's configuration (the keyed drogue: the probe's lugs) is rebuilt for each
    belief from the cached model with it, as assemble() builds it: hit or miss, the same target geometry."""
    from dockbench.sim.assembly import assemble

    cache = AssemblyCache()
    base = load_scenario(SCENARIOS / "keyed" / "iiwa14_keyed_khatib.yaml")
    for dx in (0.002, -0.002):
        sc = base.replace({"target.belief_offset.position.0": dx})
        tgt = cache.get(sc).target
        fresh = assemble(sc).target
        assert type(tgt).__name__ == "KeyedDrogue"
        assert tgt.seat_depth == fresh.seat_depth and tgt.lug_seat_height == fresh.lug_seat_height
    assert cache.stats()["hits"] == 1


def test_the_model_cache_key() -> None:
    sc = load_scenario(SCENARIOS / "iiwa14_docking.yaml")
    same = [sc.replace({"target.belief_offset.position.1": 0.004}), sc.replace({"controller.k": 123}),
            sc.replace({"sim.seed": 4, "sim.settle_time": 0.5}), sc.replace({"uncertainty.sensing_delay": 2})]
    other = [sc.replace({"target.pose.position.0": 0.56}), sc.replace({"tool.radius": 0.011}),
             sc.replace({"sim.timestep": 0.0005, "sim.control_period": 0.001}), sc.replace({"sim.integrator": "rk4"}),
             sc.replace({"robot.max_torque": 100.0})]
    assert all(model_key(s) == model_key(sc) for s in same)
    assert len({model_key(s) for s in other} | {model_key(sc)}) == 6
    # the user-model keys (robot.model, joints, limits, actuators: docs/robots.md) are in the key as well
    assert {"model", "joints", "torque_limits", "actuators"} <= set(json.loads(model_key(sc))["robot"])
    assert model_key(load_scenario(SCENARIOS / "fr3_g20_tracking.yaml")) is None  # the hand: never cached


@pytest.mark.slow
def test_the_local_pool_and_ray_give_the_same_results_table_bit_for_bit(tmp_path) -> None:
    """The same 8-trial campaign in this process, on a pool of 2 workers and on a local Ray instance: every
    column of results.csv but the timing ones (:data:`VOLATILE_COLUMNS`) is equal, floats written with
    17 significant digits; each trial's telemetry is equal bit for bit."""
    pytest.importorskip("ray")
    camp = load_campaign(_campaign(tmp_path))
    inline = run_campaign(camp, tmp_path / "inline", InlineExecutor(), progress=None, figures=False)
    pool_ex = make_executor("local", jobs=2)
    try:
        pool = run_campaign(camp, tmp_path / "pool", pool_ex, progress=None, figures=False)
    finally:
        pool_ex.close()
    ray_ex = make_executor("ray", jobs=2)
    try:
        ray = run_campaign(camp, tmp_path / "ray", ray_ex, progress=None, figures=False)
    finally:
        ray_ex.close()
    assert pool.summary["timing"]["workers"] == 2 and ray.summary["timing"]["executor"] == "ray"
    t_inline, t_pool, t_ray = _table(inline), _table(pool), _table(ray)
    assert len(t_inline) == 8 and _stable(t_pool) == _stable(t_inline) and _stable(t_ray) == _stable(t_inline)
    assert len({r["worker"] for r in t_pool}) == 2  # both workers ran trials
    for r in t_inline:
        ref = Run.load(inline.out_dir / r["path"])
        for other in (pool, ray):
            assert first_difference(ref, Run.load(other.out_dir / r["path"])) is None, (other.out_dir, r["trial"])


def test_figures_for_two_one_and_no_grid_axes(tmp_path) -> None:
    axes2 = [{"key": "controller.k", "values": [200, 400], "name": "k"},
             {"key": "target.belief_offset.position.0", "values": [0.0, 0.002], "name": "dx"}]
    for name, axes, files in (
        ("two", axes2, {"success_rate.png", "contact.peak_force_truth.png"}),
        ("one", axes2[:1], {"contact.peak_force_truth_vs_k.png"}),
        ("none", [{"key": "sim.seed", "uniform": {"low": 0, "high": 1}}], {"contact.peak_force_truth_histogram.png"}),
    ):
        path = _campaign(tmp_path, name=name, axes=axes, samples=2 if name == "none" else 1, repeats=1,
                         telemetry="none")
        if name == "none":  # sim.seed takes integers: a random axis over another key
            data = yaml.safe_load(path.read_text())
            data["axes"] = [{"key": "controller.k", "uniform": {"low": 200, "high": 400}}]
            path.write_text(yaml.safe_dump(data))
        rep = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None)
        assert {p.name for p in rep.figures} == files
        for p in rep.figures:
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_the_cli(tmp_path, capsys) -> None:
    from dockbench.experiments import campaign as cli

    path = _campaign(tmp_path, samples=1, repeats=1, telemetry="none")
    assert cli.main([str(path), "--dry-run"]) == 0
    assert "2 cells × 1 samples × 1 repeats = 2 trials" in capsys.readouterr().out
    assert cli.main([str(path), "--out", str(tmp_path / "c"), "--jobs", "1", "--no-progress", "--no-figures",
                     "--set", "controller.d=90"]) == 0
    out = capsys.readouterr().out
    assert "success    2/2" in out and "k=200" in out and str(tmp_path / "c" / "eight") in out
    meta = json.loads(next((tmp_path / "c" / "eight").rglob("meta.json")).read_text())
    assert meta["scenario"]["controller"]["d"] == 90.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert cli.main([str(bad)]) == 1
    assert f"{bad}: base: required key missing" in capsys.readouterr().err


def test_the_shipped_campaigns_load() -> None:
    for path in sorted((SCENARIOS / "campaigns").glob("*.yaml")):
        camp = load_campaign(path)
        assert camp.n_trials >= 1
        t = camp.trials()[0]
        from dockbench.sim.scenario import scenario_from_dict

        scenario_from_dict(t.scenario_data(yaml.safe_load(t.base.read_text())), file=str(t.base))
    env = load_campaign(SCENARIOS / "campaigns" / "misalignment_envelope.yaml")
    assert env.n_trials == 6 * 3 * 3 * 3 * 3
    keyed = load_campaign(SCENARIOS / "campaigns" / "keyed_envelope.yaml")
    assert keyed.n_trials == 6 * 3 * 3 * 3 * 3 * 2  # the step axis: dt and dt/2


def test_the_results_section_for_docs(tmp_path) -> None:
    from dockbench.experiments.campaign_results import section
    from dockbench.experiments.compare import kept_sections, write_section

    path = _campaign(tmp_path, name="sect", samples=1, repeats=1, telemetry="none",
                     variants={"soft": {"set": {"controller.k": 200}}, "stiff": {}},
                     axes=[{"key": "sim.duration", "values": [None, 0.3], "labels": ["full", "short"], "name": "T"}])
    rep = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    text = section(rep.out_dir)
    assert text.startswith("<!-- BEGIN campaign-sect") and text.rstrip().endswith("<!-- END campaign-sect -->")
    assert "| soft | 2 | 50.0% | [9.5%, 90.5%] |" in text  # the full run passes, the short one is INCOMPLETE
    assert "| variant | full | short |" in text and "| stiff | 100% (1/1) | 0% (0/1) |" in text
    page = tmp_path / "results.md"
    page.write_text("# Results\n\ntable\n")
    write_section(page, text)
    write_section(page, text)  # replaces its own section
    assert page.read_text().count("BEGIN campaign-sect") == 1 and page.read_text().startswith("# Results")
    assert kept_sections(page.read_text()) == text  # compare.py --md keeps it


def test_the_results_section_compares_verdicts_along_an_axis(tmp_path) -> None:
    """--compare-axis: each combination of the other axes across the axis' values. sim.duration null runs
    the whole plan (PASS), 0.3 s stops it early (INCOMPLETE): along T every combination changes verdict, along
    k (both stiffnesses pass the full run) none does; an unknown axis is refused with the grid axes named."""
    from dockbench.experiments.campaign_results import main, section

    path = _campaign(tmp_path, name="cmp", samples=1, repeats=1, telemetry="none",
                     axes=[{"key": "sim.duration", "values": [None, 0.3], "labels": ["full", "short"], "name": "T"},
                           {"key": "controller.k", "values": [800, 1000], "name": "k"}])
    rep = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    text = section(rep.out_dir, ("T", "k"))
    along_t = text.split("Verdict along `T`", 1)[1].split("Verdict along `k`", 1)[0]
    assert "| cmp | 2 | 0 | k=800" in along_t and "INCOMPLETE" in along_t
    along_k = text.split("Verdict along `k`", 1)[1]
    assert "| cmp | 2 | 2 | – |" in along_k
    t_full = [ln for ln in text.splitlines() if "median / p95 / max" in ln]
    assert t_full, "the first metric carries its maximum"
    assert main([str(rep.out_dir), "--compare-axis", "nope"]) == 1


def test_results_page_carries_the_envelope_section() -> None:
    """docs/results.md holds the generated section of the shipped envelope, with every variant and axis."""
    from tests.helpers import REPO

    text = (REPO / "docs" / "results.md").read_text()
    begin, end = "<!-- BEGIN campaign-misalignment_envelope", "<!-- END campaign-misalignment_envelope -->"
    assert text.count(begin) == 1 and end in text
    section = text.split(begin, 1)[1].split(end, 1)[0]
    env = load_campaign(SCENARIOS / "campaigns" / "misalignment_envelope.yaml")
    assert f"{env.n_trials} trials" in section
    for v in env.variants:
        assert f"| {v.name} | {env.n_trials // len(env.variants)} |" in section
    for a in env.grid_axes:
        assert f"Success rate by `{a.name}`" in section
    # the keyed envelope (issue 18): every variant, every axis, and the verdict along the step
    begin, end = "<!-- BEGIN campaign-keyed_envelope", "<!-- END campaign-keyed_envelope -->"
    assert text.count(begin) == 1 and end in text
    section = text.split(begin, 1)[1].split(end, 1)[0]
    keyed = load_campaign(SCENARIOS / "campaigns" / "keyed_envelope.yaml")
    assert f"{keyed.n_trials} trials" in section and "Verdict along `step`" in section
    for v in keyed.variants:
        assert f"| {v.name} | {keyed.n_trials // len(keyed.variants)} |" in section
    for a in keyed.grid_axes:
        assert f"Success rate by `{a.name}`" in section


def test_trials_that_end_when_seated_are_complete_successes(tmp_path) -> None:
    """``sim.end_after_seated`` in a campaign's ``set``: the trials end with status ``seated`` (a complete run)
    before their duration, and the table and the summary count them as the passes they are."""
    path = _campaign(tmp_path, name="seated", samples=1, repeats=1,
                     set={**FAST, "sim.settle_time": 3.0, "sim.end_after_seated": 1.0})
    rep = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    rows = _table(rep)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"seated"} and {r["verdict"] for r in rows} == {"PASS"}
    for r in rows:
        meta = json.loads((rep.out_dir / r["path"] / "meta.json").read_text())
        assert float(r["sim_s"]) < meta["duration"]  # ended before the planner + settle time
        assert float(r["sim_s"]) >= float(r["docking.time_to_seat"]) + 1.0
    s = json.loads((rep.out_dir / "summary.json").read_text())
    assert s["passed"] == s["trials"] == 2
    # a resumed campaign (after a kill, say) keeps them: a seated trial is finished, not "interrupted"
    again = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert (again.ran, again.skipped) == (0, 2) and _table(again) == rows


def test_each_trial_records_its_code_path_and_a_mixed_campaign_says_so(tmp_path) -> None:
    """results.csv's ``kernels`` says which code path a trial ran (sim.kernels.describe of its meta: ``compiled``,
    ``python`` or the mix; empty only for a trial that did not run), summary.json counts the trials by it, and a
    campaign whose trials ran different paths (here: one trial run with the Python references forced, the other
    resumed with the kernels) says so on its progress stream with what to do."""
    from dockbench.sim import kernels
    from dockbench.sim.campaign.runner import kernel_counts, mixed_paths_warning, trial_kernels

    assert trial_kernels({"kernels": {"dynamics": "compiled", "controller": "python", "wrench": "compiled"}}) \
        == "controller python, dynamics compiled, wrench compiled"
    assert trial_kernels({"kernels": {"dynamics": "compiled", "controller": "compiled"}}) == "compiled"
    assert trial_kernels({}) is None and trial_kernels(None) is None
    assert kernel_counts([{"kernels": "compiled"}, {"kernels": "python"}, {"kernels": None}, {}]) \
        == {"compiled": 1, "python": 1}
    assert mixed_paths_warning({"compiled": 3}) == ""
    if any(kernels.load(m) is None for m in ("controllers._khatib_kernel", "sim._dynamics_kernel",
                                             "sim._wrench_kernel")):
        pytest.skip("the compiled kernels are not built here: every trial runs the Python references")
    path = _campaign(tmp_path, name="paths", samples=1, repeats=1, telemetry="none",
                     axes=[{"key": "controller.k", "values": [200, 400], "name": "k"}])
    with kernels.forced("python"):
        first = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=None, figures=False)
    assert [r["kernels"] for r in _table(first)] == ["python"] * 2
    assert first.summary["kernels"] == {"python": 2}
    shutil.rmtree(first.out_dir / _table(first)[1]["path"])  # the second trial runs again, with the kernels
    out = io.StringIO()
    again = run_campaign(load_campaign(path), tmp_path / "out", InlineExecutor(), progress=out, figures=False)
    assert [r["kernels"] for r in _table(again)] == ["python", "compiled"]
    assert again.summary["kernels"] == {"compiled": 1, "python": 1}
    assert "the trials ran different code paths (1 compiled; 1 python; " in out.getvalue()
