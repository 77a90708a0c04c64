"""The telemetry row of one control step: what the cycle's record stage writes.

Every quantity a run records is an array that its owner updates in place each step (the snapshot, the
reference, the command, the wrench state, views of MjData), so the row is fixed at the start of the run as
an ordered list of *sources*, and recording a step is

    scal = (t, saturated, tool contacts, all contacts, manipulability)
    block[row] = concatenate(sources)

with ``saturated`` = 1 when clipping changed a joint torque (τ_cmd ≠ τ for some joint; a NaN compares
unequal), 0 otherwise; ``scal`` is itself one of the sources (views of it). :meth:`RowWriter.write_python` is
that statement, the reference; ``telemetry/_row_kernel.c`` does the same float64 copies in one call without
one numpy call per source (≈ 2 µs per step with fifteen sources, about 7 % of a docking step), so the two
give the same bytes (tests/test_rows.py). Which one runs follows ``DOCKBENCH_KERNELS`` (sim/kernels.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from dockbench.sim import kernels

#: the kernel module (sim/_kernel_manifest.py)
KERNEL = "telemetry._row_kernel"


class RowWriter:
    """Writes one telemetry row per step into ``block`` (see the module docstring).

    Args:
        sources: the row's arrays in column order (1-D float64, updated in place by their owners; their
            lengths sum to the block's width). ``scal`` must be among them (as views) for the step scalars
            to be recorded.
        block: the telemetry block (rows × width float64, C-contiguous), written in place.
        scal: five float64: t [s], saturated (0/1), tool contacts, all contacts, manipulability.
        tau_cmd, tau: the law's torque and the clipped one [N·m] (``saturated`` compares them).

    Attributes:
        write: ``write(row, t, tool_contacts, contacts, manipulability)``: the compiled kernel's bound method
            when it is built, current and the arrays are contiguous float64, else :meth:`write_python`.
        kernel: ``compiled`` or ``python``.
    """

    def __init__(self, sources: Sequence[np.ndarray], block: np.ndarray, scal: np.ndarray, tau_cmd: np.ndarray,
                 tau: np.ndarray):
        self.sources, self.block, self.scal = list(sources), block, scal
        self.tau_cmd, self.tau = tau_cmd, tau
        width = sum(a.size for a in self.sources)
        if block.ndim != 2 or block.shape[1] != width:
            raise ValueError(f"the sources hold {width} floats, the block's rows {block.shape[1:]}")
        self.write = self.write_python
        self.kernel = "python"
        kmod = kernels.load(KERNEL)
        if kmod is not None:
            self._kernel = kmod.RowKernel(sources=self.sources, block=block, scal=scal, tau_cmd=tau_cmd, tau=tau)
            self.write = self._kernel.write
            self.kernel = "compiled"

    def write_python(self, row: int, t: float, tool_contacts: float, contacts: float, manipulability: float) -> None:
        """The reference: the step scalars, then the sources into ``block[row]`` in one copy."""
        self.scal[:] = (t, self.tau_cmd.tolist() != self.tau.tolist(), tool_contacts, contacts, manipulability)
        np.concatenate(self.sources, out=self.block[row])
