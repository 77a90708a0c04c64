"""experiments/preload_counterfactual.py: the "Preload-phase counterfactuals" section of docs/results.md."""

from __future__ import annotations

from dockbench.experiments.preload_counterfactual import BEGIN, END, SPEEDS, VARIANTS, section

from tests.helpers import REPO


def _records() -> list[dict]:
    out = []
    for k, (_stem, law, label, ov) in enumerate(VARIANTS):
        for j, v in enumerate(SPEEDS):
            out.append({"law": law, "variant": label, "overrides": ov, "docking_v_max": v,
                        "impact_peak": 10.0 + k + j / 10, "first_contact_peak": 11.0 + k, "preload_peak": 20.0 + k,
                        "short_at_plan_end": 0.001 * k, "v_first": 0.02, "v_peak": 0.01, "steady": 5.0,
                        "verdict": "PASS"})
    return out


def test_section_has_one_row_per_variant_with_both_speeds() -> None:
    text = section(_records())
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    for k, (_stem, law, label, _ov) in enumerate(VARIANTS):
        row = next(line for line in text.splitlines() if line.startswith(f"| {law} | {label} |"))
        assert f"{10.0 + k:.2f} / {10.1 + k:.2f}" in row and f"{20.0 + k:.2f} / {20.0 + k:.2f}" in row


def test_results_page_carries_the_section_with_every_variant() -> None:
    text = (REPO / "docs" / "results.md").read_text()
    assert text.count(BEGIN) == 1 and END in text
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for _stem, law, label, _ov in VARIANTS:
        assert f"| {law} | {label} |" in body
