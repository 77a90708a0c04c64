"""docs/examples/gym_quickstart.ipynb runs from top to bottom (nbclient, a real Jupyter kernel) and shows what it
promises: the observation's keys, both policies' episodes, the saved run's figure, and the campaign table of
both policies."""

from __future__ import annotations

from tests.helpers import REPO, execute_notebook

NOTEBOOK = REPO / "docs" / "examples" / "gym_quickstart.ipynb"


def test_gym_quickstart_notebook_executes():
    joined, images = execute_notebook(NOTEBOOK, "gymnasium")
    assert "wrench" in joined and "policy period 0.02 s" in joined  # the observation's keys, the rate
    assert "law alone  seated True" in joined and "spiral     seated" in joined
    assert "verdict INCOMPLETE" in joined  # the saved episode ended at the seat, before the plan's end
    for row in ("zero    khatib", "zero    hqp", "spiral  khatib", "spiral  hqp"):
        assert row in joined
    assert images >= 1
