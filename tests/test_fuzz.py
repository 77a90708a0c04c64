"""Seeded scenario fuzzing in CI (issue 23): mutated shipped scenarios, run for 0.05 s, give a run whose
folder loads complete or a clear error naming the file — never a traceback. The big run (≥ 2000
cases with hang detection in worker processes) is ``experiments/fuzz_scenarios.py``; this is the
same mutator and classifier on a few hundred cases, in this process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from dockbench.experiments.fuzz_scenarios import adversarial_cases, hostile_yaml_cases, mutation_cases, run_case

N_MUTATIONS = 300
SEED = 23


def test_seeded_mutations_of_the_shipped_scenarios_never_raise_a_traceback(tmp_path: Path) -> None:
    counts: Counter[str] = Counter()
    bad = []
    for label, data, duration in mutation_cases(N_MUTATIONS, SEED, 0.05):
        o = run_case(data, tmp_path, duration, label)
        counts[o.kind] += 1
        if o.kind not in ("ok", "clean error"):
            bad.append(f"[{o.kind}] {label}: {o.detail}")
    assert not bad, "\n".join(bad[:10])
    assert counts["ok"] >= 30 and counts["clean error"] >= 100, counts  # both paths are exercised


def test_the_faults_of_issue_23_are_clean_errors_or_clean_runs(tmp_path: Path) -> None:
    # the named faults, not the key sweep; not the 86400 s run, refused only where disk or memory are short
    cases = [c for c in adversarial_cases() if ":" not in c[0] and "86400" not in c[0]]
    assert len(cases) > 20
    for label, data, duration in cases:
        o = run_case(data, tmp_path, duration, label)
        assert o.kind in ("ok", "clean error"), f"{label}: {o.kind}: {o.detail}"
        if label.startswith(("401-digit", "control_period", "timestep", "seat_gap", "bore_length", "shaft_length",
                             "name", "q_init", "target.segments", "--duration", "sim.duration 1e6")):
            assert o.kind == "clean error", f"{label}: {o.detail}"


@pytest.mark.parametrize("k", [0, 1, 2])
def test_mutations_are_reproducible_from_seed_and_index(k: int) -> None:
    a = mutation_cases(k + 1, SEED, 0.05)[k]
    b = mutation_cases(k + 1, SEED, 0.05)[k]
    assert a[0] == b[0] and repr(a[1]) == repr(b[1])


def test_a_run_without_telemetry_is_not_counted_as_a_broken_folder(tmp_path: Path) -> None:
    """``telemetry.enabled: false`` records no rows: the folder check expects 0, not the step count (the
    seeded mutations hit this once the robot block grew the user-model keys, issue 20 part 3)."""
    from tests.helpers import scenario_dict

    d = scenario_dict("iiwa14_docking")
    d["telemetry"] = {"enabled": False}
    o = run_case(d, tmp_path, 0.05, "telemetry off")
    assert o.kind == "ok", o.detail


def test_hostile_yaml_is_a_one_line_error_never_a_hang_or_a_traceback(tmp_path: Path, monkeypatch) -> None:
    """Issue 36: alias bombs in every position (scenario keys, plugins:, a mapping key, --set values, a
    campaign's seed, axes, set: and base scenario), duplicate keys, the YAML 1.1 forms, names of every
    refused Unicode class and plugins without the opt-in. Each is a clean error of one line naming the
    file, except the few the YAML 1.2 reading gets right (``ok``). A bomb that expanded would not finish."""
    monkeypatch.delenv("DOCKBENCH_ALLOW_PLUGINS", raising=False)
    cases = hostile_yaml_cases()
    assert len(cases) > 60
    bad = []
    for label, raw, duration in cases:
        o = run_case(raw, tmp_path, duration, label)
        want = "ok" if raw.ok else "clean error"
        if o.kind != want or "\n" in o.detail:
            bad.append(f"{label}: {o.kind} (want {want}): {o.detail}")
    assert not bad, "\n".join(bad)
    # nothing of a plugin ran and nothing was written for the refused cases
    assert not list(tmp_path.glob("runs/*/*")) or all(p.parent.name in {"iiwa14_docking", "2024-01-01"}
                                                     for p in tmp_path.glob("runs/*/*"))
