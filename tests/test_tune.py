"""Robust gain tuning (sim/campaign/study.py, experiments/tune.py, docs/tuning.md): the objective and constraint
functions on synthetic rows, one-line errors for bad study files, and tiny studies (2-3 candidates × 2 short
trials) that check the parameters reach the trials, the objective is computed from the candidates' own results,
pruning, resuming after a kill (no candidate lost or evaluated twice) and determinism with a seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("optuna", reason="optuna not installed (the tune extra)")

from dockbench.sim.campaign import study as st  # noqa: E402
from dockbench.sim.campaign.stats import wilson_interval  # noqa: E402
from dockbench.sim.errors import ScenarioError  # noqa: E402

from tests.helpers import SCENARIOS  # noqa: E402

#: a 0.6 s docking (fast approach, no gates), cut before its plan ends (INCOMPLETE: a failure): ~0.3 s a trial
FAST = {"start.standoff": 0.02, "planner.v_max": 0.2, "planner.a_max": 1.0, "sim.settle_time": 0.1,
        "sim.duration": 0.6, "gates": []}
PEAK = "contact.peak_force_truth"


def _rows(verdicts: str, peaks: list[float | None]) -> list[dict]:
    return [{"verdict": "PASS" if v == "P" else "FAIL", "metrics": {PEAK: p}}
            for v, p in zip(verdicts, peaks, strict=True)]


def _study_data(**over) -> dict:
    data = {
        "name": "tiny",
        "label": "Khatib",
        "campaign": {
            "base": str(SCENARIOS / "iiwa14_docking.yaml"),
            "set": dict(FAST),
            "axes": [{"key": "target.belief_offset.position.0", "values": [-0.002, 0.002], "name": "dx"}],
            "telemetry": "none",
        },
        "search": [{"key": "controller.k", "type": "float", "low": 100, "high": 1500, "log": True}],
        "objectives": [{"stat": "success_wilson_low"},
                       {"stat": "p95", "metric": PEAK, "direction": "minimize", "scale": 25.0}],
        "candidates": 3,
        "sampler": {"seed": 1, "startup": 2},
    }
    data.update(over)
    return data


def _write(tmp_path: Path, data: dict, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _study(tmp_path: Path, **over) -> st.Study:
    return st.load_study(_write(tmp_path, _study_data(**over)))


# ------------------------------------------------------------------------------ objective on synthetic rows
def test_stats_on_known_rows():
    rows = _rows("PPPF", [10.0, 12.0, 14.0, 30.0])
    assert st.stat_value(st.Term("success_rate"), rows) == 0.75
    assert st.stat_value(st.Term("success_wilson_low"), rows) == wilson_interval(3, 4)[0]
    # numpy's linear interpolation: p95 of [10, 12, 14, 30] = 14 + 0.85 (30 - 14)
    assert st.stat_value(st.Term("p95", PEAK), rows) == pytest.approx(14.0 + 0.85 * 16.0, rel=1e-12)
    assert st.stat_value(st.Term("max", PEAK), rows) == 30.0
    assert st.stat_value(st.Term("mean", PEAK), rows) == pytest.approx(16.5, rel=1e-12)
    assert st.stat_value(st.Term("median", PEAK), _rows("PF", [None, None])) is None  # nothing to compute on


def test_lexicographic_one_more_success_outweighs_any_force():
    """J orders by the Wilson bound first: 3/4 seated at 24.9 N beats 2/4 seated at 0 N; at equal success
    the lower p95 wins; a missing secondary counts as its worst."""
    first = st.Term("success_wilson_low", direction="maximize")
    second = st.Term("p95", PEAK, direction="minimize", scale=25.0)
    j = lambda rows: st.lexicographic_value(first, second, rows, 4)  # noqa: E731
    worse_success = j(_rows("PPFF", [0.0, 0.0, 0.0, 0.0]))
    better_success = j(_rows("PPPF", [1e6, 1e6, 1e6, 1e6]))  # the secondary clipped at CAP
    assert better_success < worse_success
    assert j(_rows("PPPP", [10.0] * 4)) < j(_rows("PPPP", [11.0] * 4))
    assert j(_rows("PPPP", [None] * 4)) > j(_rows("PPPP", [1e3] * 4)) - 1e-9  # missing = CAP = clipped worst
    # the smallest Wilson step is positive for every n (the bound rises with k)
    for n in (1, 2, 16, 81, 162):
        assert st.wilson_low_step(n) > 0


def test_constraints_and_pruning_rule():
    study = st.Study("s", "s", "", Path("s.yaml"), None, (), (st.Term("success_rate", direction="maximize"),),
                     "lexicographic", (st.Term("success_rate", min=0.75), st.Term("max", PEAK, max=25.0)), True, 1,
                     {})
    ok = _rows("PPPF", [10.0, 12.0, 14.0, 20.0])
    assert st.constraint_values(study, ok) == pytest.approx([0.0, -5.0])
    assert all(c <= 0 for c in st.constraint_values(study, ok))
    bad = _rows("PPFF", [10.0, 12.0, 14.0, 26.0])
    assert st.constraint_values(study, bad) == pytest.approx([0.25, 1.0])
    # pruning: of 8 planned trials, 0.75 allows 2 failures; a third cannot be made up, nor a 26 N peak
    assert st.can_still_hold(study, _rows("FF", [1.0, 1.0]), 8)
    assert not st.can_still_hold(study, _rows("FFF", [1.0, 1.0, 1.0]), 8)
    assert not st.can_still_hold(study, _rows("P", [26.0]), 8)


def test_pareto_front_and_best():
    study = st.Study("s", "s", "", Path("s.yaml"), None, (),
                     (st.Term("success_rate", direction="maximize"), st.Term("p95", PEAK, direction="minimize")),
                     "pareto", (), True, 1, {})
    mk = lambda n, v: st.Candidate(n, {}, "COMPLETE", v, [], True, {}, "", 0.0)  # noqa: E731
    cands = [mk(0, [1.0, 20.0]), mk(1, [0.5, 10.0]), mk(2, [0.5, 15.0]), mk(3, [1.0, 18.0])]
    assert [c.number for c in st.pareto_front(study, cands)] == [1, 3]
    assert st.best_candidate(study, cands).number == 3  # the front's best by the first objective


# ------------------------------------------------------------------------------ bad study files
@pytest.mark.parametrize("over, key, text", [
    ({"sampler": {"type": "grid"}}, "sampler.type", "allowed: tpe, cmaes, nsga2, random"),
    ({"search": [{"key": "controller.kk", "low": 1, "high": 2}]}, "search[0]", "controller.kk"),
    ({"search": [{"key": "controller.k", "low": -500, "high": 2}]}, "search[0]", "controller.k = -500"),
    ({"search": [{"key": "controller.k", "type": "real", "low": 1, "high": 2}]}, "search[0].type",
     "allowed: float, int, categorical"),
    ({"search": [{"key": "controller.k", "type": "categorical", "choices": [1, 2], "low": 1}]}, "search[0]",
     "takes choices"),
    ({"search": [{"key": "controller.k", "low": 5, "high": 2}]}, "search[0]", "low must be < high"),
    ({"search": [{"key": "target.belief_offset.position.0", "low": 0, "high": 1}]}, "search[0].key",
     "an axis of the campaign"),
    ({"objectives": [{"stat": "p95", "metric": "nope"}]}, "objectives[0].metric", "docs/metrics.md"),
    ({"objectives": [{"stat": "p95", "metric": PEAK}, {"stat": "success_rate"}]}, "objectives[0]",
     "first term of a lexicographic objective"),
    ({"constraints": [{"stat": "success_rate"}]}, "constraints[0]", "give min and/or max"),
    ({"mode": "weighted"}, "mode", "allowed: lexicographic, pareto"),
    ({"search": [{"key": ["controller.k", "controller.k"], "low": 100, "high": 200}]}, "search[0].key",
     "listed twice"),
    ({"search": [{"key": ["controller.k", "target.belief_offset.position.0"], "low": 0, "high": 1}]},
     "search[0].key", "an axis of the campaign"),
    ({"search": [{"key": ["controller.k", 3], "low": 100, "high": 200}]}, "search[0].key[1]",
     "expected a scenario key path"),
    ({"envelope": {"axes": [], "grid": 3}}, "envelope", "optionally samples, seed, repeats"),
    ({"holdout": {"samples": 3}}, "holdout", "expected {axes: [...]}"),
    ({"budget": 3}, None, "unknown top-level key 'budget'"),
    ({"start": [{"controller.d": 50}]}, "start[0].controller.d", "not a searched key; allowed: controller.k"),
    ({"start": [{"controller.k": 50}]}, "start[0].controller.k", "allowed: 100.0 to 1500.0"),
    ({"start": [{"controller.k": "stiff"}]}, "start[0].controller.k", "expected a number"),
    ({"start": {"controller.k": 500}}, "start", "expected a list of mappings"),
    ({"start": [{"controller.k": 500 + i} for i in range(4)]}, "start", "4 start candidates but a budget of 3"),
    ({"campaign": {"base": "nope.yaml"}}, "campaign.base", "scenario file not found"),
])
def test_bad_study_files_give_one_line_errors(tmp_path, over, key, text):
    path = _write(tmp_path, _study_data(**over))
    with pytest.raises(ScenarioError) as info:
        st.load_study(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and text in msg, msg
    assert info.value.key == key


# ------------------------------------------------------------------------------ tiny studies
def _trial_records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "trials").glob("*/*/trial.json"))]


def test_study_applies_parameters_and_scores_its_own_results(tmp_path):
    holdout = {"axes": [{"key": "target.belief_offset.position.1", "values": [0.001], "name": "dy"}]}
    study = _study(tmp_path, candidates=2, holdout=holdout)
    rep = st.run_study(study, tmp_path / "out", progress=None, executor=_inline())
    assert len(rep.candidates) == 2 and rep.evaluated == 2 and rep.shipped["trials"] == 2
    # the held-out campaign (cases the tuner never saw) ran with the shipped and the best values
    assert set(rep.holdout) == {"shipped", "tuned"} and rep.holdout["tuned"]["trials"] == 1
    meta = next((rep.out_dir / rep.holdout["tuned"]["folder"] / "trials").glob("*/*/meta.json"))
    held = json.loads(meta.read_text())["scenario"]
    assert held["controller"]["k"] == rep.best.params["controller.k"]
    assert held["target"]["belief_offset"]["position"][1] == 0.001
    for c in rep.candidates:
        folder = rep.out_dir / c.folder
        assert (folder / "results.csv").is_file() and (folder / "summary.json").is_file()
        metas = [json.loads(p.read_text()) for p in sorted((folder / "trials").glob("*/*/meta.json"))]
        assert len(metas) == 2
        for m in metas:  # the candidate's value reached the resolved scenario of every trial
            assert m["scenario"]["controller"]["k"] == c.params["controller.k"]
        rows = [r["row"] for r in _trial_records(folder)]
        assert c.values == st.objective_values(study, rows, 2)  # the same floats, from the candidate's own rows
    vals = [c.values[0] for c in rep.candidates]
    assert vals[0] != vals[1]  # two gains, two peaks: the objective sees the parameter
    saved = json.loads((rep.out_dir / "study.json").read_text())
    assert [c["params"] for c in saved["candidates"]] == [c.params for c in rep.candidates]


def test_tied_keys_and_the_envelope_campaign(tmp_path):
    """A tied parameter (``key: [a, b]``) sets both keys to one value in every trial; the ``envelope`` campaign
    (here random draws: ``samples`` and ``seed`` as in any campaign) runs the shipped and the best values after
    the study, in envelope/shipped and envelope/best_cNNNN, on the same drawn cases."""
    envelope = {"axes": [{"key": "target.belief_offset.position.1", "uniform": {"low": -0.001, "high": 0.001},
                          "name": "dy"}], "samples": 2, "seed": 5}
    search = [{"key": ["controller.k", "controller.k_rot"], "type": "float", "low": 100, "high": 150}]
    study = _study(tmp_path, candidates=1, search=search, envelope=envelope)
    assert study.search[0].keys == ("controller.k", "controller.k_rot") and study.envelope.n_trials == 2
    rep = st.run_study(study, tmp_path / "out", progress=None, executor=_inline())
    value = rep.candidates[0].params["controller.k"]
    assert list(rep.candidates[0].params) == ["controller.k"]  # one parameter in the database
    for m in (json.loads(p.read_text()) for p in (rep.out_dir / rep.candidates[0].folder).glob("trials/*/*/meta.json")):
        assert m["scenario"]["controller"]["k"] == value and m["scenario"]["controller"]["k_rot"] == value
    assert set(rep.envelope) == {"shipped", "tuned"} and rep.holdout is None
    assert rep.envelope["tuned"]["folder"] == str(Path("envelope") / "best_c0000")
    assert rep.envelope["shipped"]["folder"] == str(Path("envelope") / "shipped")
    drawn = {}
    for key in ("shipped", "tuned"):
        metas = [json.loads(p.read_text())["scenario"]
                 for p in sorted((rep.out_dir / rep.envelope[key]["folder"]).glob("trials/*/*/meta.json"))]
        assert len(metas) == 2 and rep.envelope[key]["trials"] == 2
        drawn[key] = sorted(m["target"]["belief_offset"]["position"][1] for m in metas)
        assert all(-0.001 <= y <= 0.001 for y in drawn[key])
        assert all((m["controller"]["k"] == value) == (key == "tuned") for m in metas)
    assert drawn["shipped"] == drawn["tuned"] and drawn["shipped"][0] != drawn["shipped"][1]
    assert json.loads((rep.out_dir / "study.json").read_text())["envelope"]["tuned"]["trials"] == 2


def test_confirm_runs_the_best_candidates_on_the_envelope_and_keeps_the_best_there(tmp_path):
    """confirm: 2 — the two best feasible candidates run on the envelope; the tuned values are the one with the
    better objective value on the envelope's own trials (computed from its campaign folder), and the held-out
    campaign runs them. A study without an envelope, or a pareto one, refuses confirm > 1."""
    envelope = {"axes": [{"key": "target.belief_offset.position.0", "values": [-0.003, 0.0, 0.003], "name": "dx"}]}
    holdout = {"axes": [{"key": "target.belief_offset.position.1", "values": [0.001], "name": "dy"}]}
    study = _study(tmp_path, candidates=3, envelope=envelope, holdout=holdout, confirm=2)
    rep = st.run_study(study, tmp_path / "out", progress=None, executor=_inline(), shipped=False)
    top = st.top_candidates(study, rep.candidates, 2)
    assert len(top) == 2 and top[0] is rep.best
    conf = rep.envelope["confirmed"]
    assert sorted(conf) == sorted(str(c.number) for c in top)
    for c in top:  # each confirmed candidate's value: from its own envelope trials
        rows = [r["row"] for r in _trial_records(rep.out_dir / conf[str(c.number)]["folder"])]
        assert len(rows) == 3 and conf[str(c.number)]["value"] == st.objective_values(study, rows, 3)[0]
    chosen = min(top, key=lambda c: (conf[str(c.number)]["value"], top.index(c)))
    assert rep.envelope["chosen"] == chosen.number == rep.tuned.number
    assert rep.envelope["tuned"] is conf[str(chosen.number)] or rep.envelope["tuned"] == conf[str(chosen.number)]
    assert (rep.confirmed is None) == (chosen is rep.best)
    assert rep.holdout["tuned"]["folder"] == str(Path("holdout") / f"best_c{chosen.number:04d}")
    for over, text in (({"confirm": 2}, "give envelope"),
                       ({"confirm": 2, "envelope": envelope, "mode": "pareto"}, "not pareto")):
        with pytest.raises(ScenarioError, match=text):
            _study(tmp_path, **over)


def test_pruning_stops_a_candidate_at_its_first_failure(tmp_path):
    """A peak gate no docking meets: every candidate fails its first trial and stops there (inline: one trial
    recorded of two), PRUNED, and the study has no best."""
    camp = _study_data()["campaign"]
    camp["set"] = {**FAST, "gates": [{"metric": PEAK, "max": 1.0}]}
    study = _study(tmp_path, campaign=camp, candidates=2, constraints=[{"stat": "success_rate", "min": 1.0}])
    rep = st.run_study(study, tmp_path / "out", progress=None, executor=_inline(), shipped=False)
    assert [c.state for c in rep.candidates] == ["PRUNED", "PRUNED"] and rep.best is None
    for c in rep.candidates:
        assert len(_trial_records(rep.out_dir / c.folder)) == 1
        assert c.stats["trials"] == 1 and c.stats["passed"] == 0


def _inline():
    from dockbench.sim.campaign.executors import make_executor

    return make_executor("inline")


def test_resume_after_a_kill_loses_nothing_and_repeats_nothing(tmp_path):
    """Study A runs 3 candidates at once. Study B (same file, same seed) is killed twice, in the two states a
    SIGKILL can leave: (1) candidate 1 proposed and one of its two trials recorded (a RUNNING trial with its
    parameters, a part-filled campaign folder); (2) candidate 2 created in the database before any parameter was
    stored (killed inside the proposal). Each rerun finishes the RUNNING candidate — candidate 1 from its folder,
    candidate 2 with the parameters its proposal would have had. B ends with A's candidates and values:
    3 trials in the database, none twice, and candidate 1's recorded trial not run again."""
    import optuna
    from dockbench.sim.campaign.runner import run_campaign

    study = _study(tmp_path)
    a = st.run_study(study, tmp_path / "a", progress=None, executor=_inline(), shipped=False)
    b_out = tmp_path / "b"
    st.run_study(study, b_out, progress=None, executor=_inline(), shipped=False, stop_after=1)
    storage = f"sqlite:///{b_out / study.name / st.DB_FILE}"
    # kill 1: candidate 1 proposed as the driver does, one trial of its campaign recorded
    ostudy = optuna.load_study(study_name=study.name, storage=storage, sampler=st.make_sampler(study))
    trial = ostudy.ask()
    params = {p.key: st.suggest(trial, p) for p in study.search}
    assert trial.number == 1
    camp = st.candidate_campaign(study, params, "c0001")
    stop_at_one = st.PruningExecutor(_inline(), lambda results: len(results) < 1)
    run_campaign(camp, b_out / study.name / "candidates", stop_at_one, progress=None, figures=False)
    first = _trial_records(b_out / study.name / "candidates" / "c0001")
    assert len(first) == 1
    resumed = st.run_study(study, b_out, progress=None, executor=_inline(), shipped=False, stop_after=1)
    assert resumed.resumed == [1] and resumed.evaluated == 1
    # kill 2: candidate 2 created, no parameter stored yet
    ostudy = optuna.load_study(study_name=study.name, storage=storage, sampler=st.make_sampler(study))
    assert ostudy.ask().number == 2
    assert ostudy.trials[2].params == {}
    b = st.run_study(study, b_out, progress=None, executor=_inline(), shipped=False)
    assert b.resumed == [2] and b.evaluated == 1
    trials = optuna.load_study(study_name=study.name, storage=storage).get_trials()
    assert [t.number for t in trials] == [0, 1, 2]
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert len({json.dumps(t.params, sort_keys=True) for t in trials}) == 3  # none twice
    again = _trial_records(b_out / study.name / "candidates" / "c0001")
    assert len(again) == 2 and first[0] in again  # the recorded trial kept, not run again
    # determinism: the interrupted study proposed and scored exactly what the uninterrupted one did
    assert [c.params for c in b.candidates] == [c.params for c in a.candidates]
    assert [c.values for c in b.candidates] == [c.values for c in a.candidates]


def test_the_same_study_in_process_and_on_ray_gives_the_same_candidates_and_values(tmp_path):
    """Determinism whichever executor runs the campaigns (issue 33 item 4): the same study file in this process
    and on a local Ray instance with 2 workers proposes the same candidates and scores them with the same states
    and values, float for float (the sampler's seed is a function of the study seed and the candidate number; a
    candidate's score is a function of its campaign's rows, which Ray's workers compute from the same scenario
    files)."""
    pytest.importorskip("ray")
    from dockbench.sim.campaign.executors import make_executor

    study = _study(tmp_path)
    a = st.run_study(study, tmp_path / "a", progress=None, executor=_inline(), shipped=False)
    ray_ex = make_executor("ray", jobs=2)
    try:
        b = st.run_study(study, tmp_path / "b", progress=None, executor=ray_ex, shipped=False)
    finally:
        ray_ex.close()
    assert b.timing["executor"] == "ray" and a.timing["executor"] == "inline"
    assert len(a.candidates) == len(b.candidates) == 3
    assert [c.params for c in b.candidates] == [c.params for c in a.candidates]
    assert [c.state for c in b.candidates] == [c.state for c in a.candidates]
    assert [c.values for c in b.candidates] == [c.values for c in a.candidates]


def test_start_candidates_are_evaluated_first_and_once_across_a_resume(tmp_path):
    """``start``: the listed values are the first candidates (a tied key given by its second name; keys left
    out sampled); a study stopped after the first and resumed evaluates the second start candidate next and
    ends with what an uninterrupted run gives — no start candidate enqueued twice."""
    search = [{"key": ["controller.k", "controller.k_rot"], "low": 100, "high": 400, "log": True},
              {"key": "planner.v_max", "low": 0.1, "high": 0.3}]
    start = [{"controller.k_rot": 250.0, "planner.v_max": 0.2}, {"controller.k": 300}]
    study = _study(tmp_path, search=search, start=start, candidates=3)
    assert study.start == ({"controller.k": 250.0, "planner.v_max": 0.2}, {"controller.k": 300.0})
    a = st.run_study(study, tmp_path / "a", progress=None, executor=_inline(), shipped=False)
    assert a.candidates[0].params == {"controller.k": 250.0, "planner.v_max": 0.2}
    assert a.candidates[1].params["controller.k"] == 300.0 and 0.1 <= a.candidates[1].params["planner.v_max"] <= 0.3
    assert 100 <= a.candidates[2].params["controller.k"] <= 400
    meta = next((a.out_dir / a.candidates[0].folder / "trials").glob("*/*/meta.json"))
    ctrl = json.loads(meta.read_text())["scenario"]["controller"]
    assert ctrl["k"] == ctrl["k_rot"] == 250.0  # both tied keys took the start value
    b_out = tmp_path / "b"
    first = st.run_study(study, b_out, progress=None, executor=_inline(), shipped=False, stop_after=1)
    assert first.evaluated == 1
    b = st.run_study(study, b_out, progress=None, executor=_inline(), shipped=False)
    assert b.evaluated == 2 and [c.number for c in b.candidates] == [0, 1, 2]
    assert [c.params for c in b.candidates] == [c.params for c in a.candidates]
    assert [c.values for c in b.candidates] == [c.values for c in a.candidates]


def test_a_changed_study_file_is_refused_on_resume(tmp_path):
    study = _study(tmp_path, candidates=1)
    st.run_study(study, tmp_path / "out", progress=None, executor=_inline(), shipped=False)
    other = _study(tmp_path, candidates=1, search=[{"key": "controller.k", "low": 200, "high": 1500}])
    with pytest.raises(st.DockbenchError, match="another version of .*--fresh"):
        st.run_study(other, tmp_path / "out", progress=None, executor=_inline(), shipped=False)


def test_candidate_seed_is_a_function_of_seed_and_number():
    assert st.candidate_seed(0, 3) == st.candidate_seed(0, 3)
    assert len({st.candidate_seed(s, n) for s in range(3) for n in range(50)}) == 150


def test_compare_writes_the_tuned_vs_shipped_section(tmp_path, capsys):
    """dockbench tune --compare: two laws (here two labels of the same law with other search spaces), one
    candidate each, the section written into a page with its two figures; unequal budgets are refused."""
    from dockbench.experiments import tune

    a = _write(tmp_path, _study_data(name="law_a", label="Law A", candidates=1), "a.yaml")
    b = _write(tmp_path, _study_data(name="law_b", label="Law B", candidates=1,
                                     search=[{"key": "controller.d", "type": "float", "low": 20, "high": 200}]),
               "b.yaml")
    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text("# Results\n")
    assert tune.main([str(a), str(b), "--compare", "--jobs", "1", "--out", str(tmp_path / "out"), "--md", str(page),
                      "--no-progress"]) == 0
    text = page.read_text()
    assert text.startswith("# Results\n") and "<!-- BEGIN tune-compare" in text and "<!-- END tune-compare -->" in text
    for label in ("Law A", "Law B"):
        assert f"| {label} | shipped | 0/2 (0%) | [0.00, 0.66] |" in text and f"| {label} | tuned (c0000) |" in text
    for name in ("tune_compare_history.png", "tune_compare_pareto.png"):
        assert (page.parent / "img" / name).stat().st_size > 1000 and f"(img/{name})" in text
    c = _write(tmp_path, _study_data(name="law_c", candidates=2), "c.yaml")
    assert tune.main([str(a), str(c), "--compare", "--jobs", "1", "--out", str(tmp_path / "out")]) == 1
    assert "different budgets ([1, 2] candidates)" in capsys.readouterr().err


def test_importance_and_envelope_figures(tmp_path):
    """The comparison's parameter importances (Optuna's PED-ANOVA over the complete candidates: one value per
    searched parameter, summing to 1) and the envelope heat map (each cell of the envelope's first two axes:
    the largest peak of its trials, from the envelope campaign's results.csv)."""
    import csv

    import numpy as np
    from dockbench.experiments import tune

    envelope = {"axes": [{"key": "target.belief_offset.position.0", "values": [-0.002, 0.002], "name": "dx"},
                         {"key": "target.belief_offset.position.1", "values": [0.0, 0.001], "name": "dy"}]}
    search = [{"key": "controller.k", "type": "float", "low": 100, "high": 1500, "log": True},
              {"key": "controller.d", "type": "float", "low": 20, "high": 200}]
    study = _study(tmp_path, candidates=3, search=search, envelope=envelope, sampler={"seed": 2, "startup": 3})
    rep = st.run_study(study, tmp_path / "out", progress=None, executor=_inline(), shipped=False)
    imp = tune.param_importances(study, rep)
    assert set(imp) == {"controller.k", "controller.d"} and sum(imp.values()) == pytest.approx(1.0, abs=1e-12)
    (ax_x, ax_y), grid, failed = tune._grid_peaks(study, rep, "tuned")
    assert (ax_x.name, ax_y.name) == ("dx", "dy") and grid.shape == (2, 2)
    with open(rep.out_dir / rep.envelope["tuned"]["folder"] / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    for r in rows:
        ix, iy = [-0.002, 0.002].index(float(r["dx"])), [0.0, 0.001].index(float(r["dy"]))
        assert grid[iy, ix] == float(r[PEAK])  # one trial per cell: its own peak
        assert failed[iy, ix] == (r["verdict"] != "PASS")
    assert not np.isnan(grid).any()
    figs = tune.figures([(study, rep)], tmp_path / "img", "t")
    assert [f.name for f in figs] == ["t_history.png", "t_pareto.png", "t_importance.png", "t_envelope.png"]
    assert all(f.stat().st_size > 1000 for f in figs)


def test_shipped_studies_validate_and_compare_fairly():
    """scenarios/studies/: every file reads (its keys checked against the scenario schema at their bounds), and
    the FR3 keyed studies share the campaign's cases, objective, constraints, sampler and budget."""
    files = sorted((SCENARIOS / "studies").glob("*.yaml"))
    assert len(files) >= 3
    studies = [st.load_study(f) for f in files]
    keyed = [s for s in studies if s.name.startswith("fr3_keyed_")]
    assert len(keyed) == 3
    cases = {json.dumps([t.params for t in s.campaign.trials()], sort_keys=True) for s in keyed}
    assert len(cases) == 1
    assert len({(s.objectives, s.constraints, json.dumps(s.sampler), s.candidates) for s in keyed}) == 1
    for extra in ("envelope", "holdout"):  # the same whole envelope and held-out draws for every law
        assert len({json.dumps([t.params for t in getattr(s, extra).trials()], sort_keys=True) for s in keyed}) == 1
    for s in keyed:  # the held-out cases are not the tuned ones, nor the envelope's; the screen is in the envelope
        tuned = {json.dumps(t.params, sort_keys=True) for t in s.campaign.trials()}
        whole = {json.dumps(t.params, sort_keys=True) for t in s.envelope.trials()}
        held = {json.dumps(t.params, sort_keys=True) for t in s.holdout.trials()}
        assert not (tuned | whole) & held and tuned < whole and len(whole) == 81 and len(held) == 24
