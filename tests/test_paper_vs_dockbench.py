"""experiments/paper_vs_dockbench.py: the "Paper vs dockbench" section of docs/results.md and its scenarios."""

from __future__ import annotations

from pathlib import Path

import yaml
from dockbench.experiments.compare import kept_sections, write_section
from dockbench.experiments.paper_vs_dockbench import BEGIN, END, PAPER, RUNS

from tests.helpers import REPO


def test_write_section_replaces_it_in_place_and_compare_keeps_it(tmp_path: Path) -> None:
    page = tmp_path / "results.md"
    page.write_text("# Results\n\ntable\n")
    write_section(page, f"{BEGIN}\nold\n{END}\n")
    write_section(page, f"{BEGIN}\nnew\n{END}\n")
    text = page.read_text()
    assert text.count(BEGIN) == 1 and "new" in text and "old" not in text and text.startswith("# Results")
    assert kept_sections(text) == f"{BEGIN}\nnew\n{END}\n"
    assert kept_sections("# Results\n\ntable\n") == ""


def test_results_page_carries_the_section_with_the_papers_numbers() -> None:
    text = (REPO / "docs" / "results.md").read_text()
    assert BEGIN in text and END in text
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for _, label, peak, preload in RUNS:
        assert label in section
        assert f"≈ {peak}" in section if peak is not None else f"| {preload} |" in section


def test_every_paper_scenario_names_its_sources_and_gates_seat_and_preload() -> None:
    """Each scenarios/paper/ file says where its numbers come from ([paper], [model], [dockbench] in the header)
    and gates the seat and the 5 N preload within 5 %."""
    for stem, *_ in RUNS:
        path = PAPER / f"{stem}.yaml"
        text = path.read_text()
        header = text.split("\nname:", 1)[0]
        assert "[paper]" in header and "[model]" in header and "[dockbench]" in header, path
        gates = {g["metric"]: g for g in yaml.safe_load(text)["gates"]}
        assert "docking.depth" in gates
        g = gates["contact.steady_axial_force_truth"]
        assert (g["min"], g["max"]) == (4.75, 5.25)
