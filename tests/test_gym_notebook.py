"""docs/examples/gym_quickstart.ipynb runs from top to bottom (nbclient, a real Jupyter kernel) and shows what it
promises: the observation's keys, both policies' episodes, the saved run's figure, and the campaign table of
both policies."""

from __future__ import annotations

import pytest

from tests.helpers import REPO

NOTEBOOK = REPO / "docs" / "examples" / "gym_quickstart.ipynb"


def test_gym_quickstart_notebook_executes():
    nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (extra: notebook)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (extra: notebook)")
    pytest.importorskip("ipykernel", reason="ipykernel not installed (extra: notebook)")
    pytest.importorskip("gymnasium", reason="gymnasium not installed (extra: gym)")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    text, images = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", out
            text.append(out.get("text", ""))
            data = out.get("data", {})
            text.append(data.get("text/plain", ""))
            images += "image/png" in data
    joined = "\n".join(text)
    assert "wrench" in joined and "policy period 0.02 s" in joined  # the observation's keys, the rate
    assert "law alone  seated True" in joined and "spiral     seated" in joined
    assert "verdict INCOMPLETE" in joined  # the saved episode ended at the seat, before the plan's end
    for row in ("zero    khatib", "zero    hqp", "spiral  khatib", "spiral  hqp"):
        assert row in joined
    assert images >= 1
