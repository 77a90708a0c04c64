"""The telemetry row writer (telemetry/rows.py): the compiled row copy gives the reference's bytes."""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.sim import kernels
from dockbench.telemetry.rows import KERNEL, RowWriter


def _setup(nv: int = 7, rows: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    scal = np.zeros(5)
    tau_cmd, tau = rng.normal(size=nv), np.zeros(nv)
    other = [rng.normal(size=k) for k in (3, 9, 16)]
    sources = [scal[0:2], tau_cmd, other[0], scal[2:5], tau, other[1], other[2]]
    width = sum(a.size for a in sources)
    return sources, np.full((rows, width), -1.0), scal, tau_cmd, tau, other


def _writers():
    built = kernels.status(KERNEL)[0] is not None
    out = []
    for mode in ("python", "compiled") if built else ("python",):
        with kernels.forced(mode):
            out.append((mode, _setup()))
            s = out[-1][1]
            out[-1] = (mode, s, RowWriter(s[0], s[1], s[2], s[3], s[4]))
    return out


def test_compiled_row_equals_the_reference_bytes():
    """Both writers, fed the same values step by step (saturated or not, NaN, −0.0), write the same bytes; the
    sources are read live (the owners update them in place)."""
    writers = _writers()
    if len(writers) < 2:
        pytest.skip("telemetry._row_kernel is not built (pip install -e .)")
    assert [w.kernel for _, _, w in writers] == ["python", "compiled"]
    rng = np.random.default_rng(1)
    for row in range(4):
        values = rng.normal(size=7), rng.normal(size=3)
        for _, (_, _, _, tau_cmd, tau, other), w in writers:
            tau_cmd[:] = values[0]
            tau[:] = np.clip(values[0], -0.5, 0.5) if row % 2 else values[0]
            if row == 3:
                tau_cmd[2] = tau[2] = np.nan  # NaN ≠ NaN: saturated, as the list comparison says
                tau[4] = -0.0 if tau_cmd[4] == 0.0 else tau[4]
            other[0][:] = values[1]
            w.write(row, 0.001 * row, 2, 5, 0.125)
    (_, a, _), (_, b, _) = writers
    assert a[1].tobytes() == b[1].tobytes()
    assert a[1][:, 1].tolist() == [0.0, 1.0, 0.0, 1.0]  # saturated when clipping changed a torque (or NaN)


def test_the_row_writer_refuses_a_block_of_another_width():
    sources, block, scal, tau_cmd, tau, _ = _setup()
    with pytest.raises(ValueError, match="the sources hold 47 floats"):
        RowWriter(sources, block[:, 1:], scal, tau_cmd, tau)


def test_the_kernel_refuses_non_float64_and_out_of_range_rows():
    module = kernels.status(KERNEL)[0]
    if module is None:
        pytest.skip("telemetry._row_kernel is not built (pip install -e .)")
    sources, block, scal, tau_cmd, tau, _ = _setup()
    with pytest.raises(TypeError, match=r"sources\[1\] must be float64"):
        module.RowKernel(sources=[sources[0], tau_cmd.astype(np.float32), *sources[2:]], block=block, scal=scal,
                         tau_cmd=tau_cmd, tau=tau)
    k = module.RowKernel(sources=sources, block=block, scal=scal, tau_cmd=tau_cmd, tau=tau)
    with pytest.raises(IndexError, match="row 4 outside the block's 4 rows"):
        k.write(4, 0.0, 0, 0, 0.0)
