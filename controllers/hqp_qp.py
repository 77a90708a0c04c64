"""Solving the HQP's two-level problem (:mod:`controllers.hqp_problem`): the closed form when it is feasible,
else two QPs (docs/theory/hqp.md, "Levels"; the controller is :mod:`controllers.hqp`).

Solution
    Unconstrained, the lexicographic optimum has the closed form
    q̈* = q̈_2 + M⁻¹ Jᵀ Λ (b − J q̈_2),  b = a − J̇ q̇   (= J̄ b + N q̈_2).
    ``qp_mode: auto`` (default) returns q̈* without calling a solver when it satisfies every
    constraint: a convex program whose unconstrained optimum is feasible has that point as its
    constrained optimum, level by level, so this is exactly the QP solution. Otherwise (or always
    with ``qp_mode: always``) two QPs are solved (``solver``: daqp | proxqp | quadprog; proxqp and
    quadprog through qpsolvers, daqp through its own API with the arrays qpsolvers would hand it —
    the same solutions bit for bit when cold, tests/test_hqp_fast.py — and warm-started from the
    previous step's multipliers with ``warm_start``, the default):
        QP1: min ½ q̈ᵀ (JᵀJ + ε M) q̈ − (Jᵀ b + ε M q̈*)ᵀ q̈   s.t. lb ≤ q̈ ≤ ub, G q̈ ≤ h
             (the ε-regulariser pulls toward q̈*, which zeroes ‖J q̈ − b‖, so it does not bias
             level 1 when the constraints are inactive; it makes P positive definite);
        QP2: min ½ q̈ᵀ M q̈ − (M q̈_2)ᵀ q̈   s.t. J q̈ = J q̈_1, lb ≤ q̈ ≤ ub, G q̈ ≤ h.
    A failed QP1 falls back to q̈* (the unconstrained least-squares solution) and is counted. A failed
    QP2 (typically quadprog on a degenerate equality, q̈_1 on a vertex of the constraint set) is
    retried once with the equality relaxed to |J q̈ − J q̈_1| ≤ 1e-9 (1 + |J q̈_1|); if that fails too,
    q̈_1 is kept. All counts show in :meth:`controllers.hqp.HQPController.summary`.

:class:`TwoLevelQP` is this stage of :class:`controllers.hqp.HQPController` (a mixin: it reads the
controller's problem and solution records and its counters, so the kernel guard saves and restores them
by name). The compiled kernel never solves a QP: it hands such a step back to this Python code.
"""

from __future__ import annotations

import math
import time

import numpy as np
import qpsolvers
from dockbench.controllers.hqp_problem import (
    STATUS_CLOSED_FORM,
    STATUS_FALLBACK,
    STATUS_L2_FAILED,
    STATUS_QP,
    HQPProblem,
    HQPSolution,
)
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.errors import ScenarioError

#: QP backends this controller accepts (qpsolvers' names; daqp is called through its own API).
QP_SOLVERS = ("daqp", "proxqp", "quadprog")
#: per-backend options (proxqp: its default eps_abs = 1e-3 is far too lax; 1e-9 makes its ALM iterate
#: for ms on the ε-regularised level-1 QP; 1e-7 agrees with daqp to ~1e-6)
_SOLVER_OPTIONS: dict[str, dict] = {
    "daqp": {},
    "proxqp": {"eps_abs": 1e-7, "eps_rel": 0.0, "max_iter": 1000},
    "quadprog": {},
}
#: the compiled kernel of the closed-form step (sim/kernels.py)
#: relative slack below which an inequality counts as active
ACTIVE_TOL = 1e-7
#: relative half-width of the level-2 band used when the exact level-2 equality QP fails
LEVEL2_BAND = 1e-9


def check_solver(solver: str) -> None:
    """A one-line :class:`ScenarioError` (key ``controller.solver``) when the QP backend is not installed."""
    if solver not in qpsolvers.available_solvers:
        raise ScenarioError(
            f"QP solver {solver!r} is not installed; available: {', '.join(qpsolvers.available_solvers)}",
            key="controller.solver",
        )


class TwoLevelQP:
    """The QP stage of :class:`controllers.hqp.HQPController` (module docstring).

    It works on the controller's ``_prob`` (:class:`HQPProblem`), ``_sol`` (:class:`HQPSolution`), ``nv``,
    ``config`` (``solver``, ``warm_start``, ``regularization``), ``_auto`` (``qp_mode: auto``), the
    transposed task Jacobian ``_JT``, the counters ``n_steps``, ``n_qp``, ``n_fail``, ``n_fail_l2``,
    ``n_relaxed_l2``, ``n_qp_iterations`` and the warm-start memory ``_warm``; ``_constraints`` (the rows
    of this step) and ``_sync_kernel_step`` come from the controller.
    """

    _prob: HQPProblem
    _sol: HQPSolution

    def _init_qp(self, solver: str) -> None:
        """The solver's options, work arrays and the problems built once over the preallocated arrays."""
        nv = self.nv
        self.solver_options = dict(_SOLVER_OPTIONS[solver])
        c = self.config
        self._f6 = np.zeros(6)
        self._n = np.zeros(nv)
        self._Mqdd = np.zeros(nv)
        self._slack = np.zeros(4 * nv)
        self._G2 = np.zeros((2 * nv + 12, nv))
        # level-2 band QP bounds in daqp's layout [ub; h2] (h2 = the band's inequality right-hand side)
        self._bu_band = np.zeros(3 * nv + 12)
        self._h2 = self._bu_band[nv:]
        p = self._prob
        if c.solver == "daqp":
            # daqp's own API (what qpsolvers.solve_problem ends in, without its per-call restacking of
            # the constraints, Problem unpacking and Solution record: ≈ 4 µs instead of ≈ 11 µs): box rows
            # first (daqp's simple bounds), then G x ≤ h, then J x = b_eq (sense 5), bounds −1e30 below —
            # qpsolvers' layout exactly (the sense array starts at zero every solve); warm starts go
            # through daqp's dual_start instead (see _qp)
            import daqp  # only needed for this backend

            self._daqp_solve = daqp.solve
            m1, m2 = 3 * nv, 3 * nv + 6
            bu, bl = np.zeros(m2), np.full(m2, -1e30)
            sense = np.zeros(m2, dtype=np.intc)
            sense[m1:] = 5
            bl_band = np.full(3 * nv + 12, -1e30)
            # per problem: daqp.solve's arguments and the (destination, source) copies made before each
            # solve (this step's bounds; the senses from their initial values)
            sense0, sense_band = sense.copy(), np.zeros(3 * nv + 12, dtype=np.intc)
            self._qp1 = (
                (p.P1, p.q1, p.G, bu[:m1], bl[:m1], sense[:m1]),
                ((bu[:nv], p.ub), (bu[nv:m1], p.h), (bl[:nv], p.lb), (sense[:m1], sense0[:m1])),
            )
            self._qp2 = (
                (p.P2, p.q2, p.GJ, bu, bl, sense),
                ((bu[:nv], p.ub), (bu[nv:m1], p.h), (bu[m1:], p.b_eq), (bl[:nv], p.lb), (sense, sense0)),
            )
            band_copies = ((self._bu_band[:nv], p.ub), (bl_band[:nv], p.lb), (sense_band, np.zeros_like(sense_band)))
            self._qp2_band = ((p.P2, p.q2, self._G2, self._bu_band, bl_band, sense_band), band_copies)
        else:
            self._daqp_solve = None
            # qpsolvers problems built ONCE over the preallocated arrays (Problem keeps references, and
            # every array is updated in place each step)
            self._qp1 = qpsolvers.Problem(p.P1, p.q1, p.G, p.h, None, None, p.lb, p.ub)
            self._qp2 = qpsolvers.Problem(p.P2, p.q2, p.G, p.h, p.A_eq, p.b_eq, p.lb, p.ub)
            self._qp2_band = qpsolvers.Problem(p.P2, p.q2, self._G2, self._h2, None, None, p.lb, p.ub)

    def _assemble_qp(self, snap: Snapshot) -> None:
        """Fill P1, q1, P2, q2, G (the QP matrices) of :attr:`prob`, and lb, ub, h unless
        :meth:`_build_task` already stored them this step."""
        if self._kernel_step:
            self._sync_kernel_step()
        p = self._prob
        nv = self.nv
        M = snap.M
        if not self._box_filled:  # after a compiled step (the kernel does not store the rows)
            self._constraints(snap)
        eps = self.config.regularization
        JT = self._JT
        JT.dot(p.J, out=p.P1)
        p.P1 += eps * M
        # q1 = −(Jᵀ b + ε M q̈*)
        M.dot(p.qdd_closed, out=self._n)
        self._n *= eps
        JT.dot(p.b, out=p.q1)
        p.q1 += self._n
        np.negative(p.q1, out=p.q1)
        p.P2[:] = M
        M.dot(p.qdd_posture, out=p.q2)
        np.negative(p.q2, out=p.q2)
        p.G[:nv] = M
        np.negative(M, out=p.G[nv:])
        p.qp_assembled = True

    # ------------------------------------------------------------------------------------ solve

    def _feasible(self, x: np.ndarray, snap: Snapshot) -> bool:
        """All constraints hold at ``x`` (one min over the stacked slacks)."""
        return bool(self._slacks(x, snap.M).min() >= 0.0)

    def _qp(self, problem: qpsolvers.Problem | tuple) -> tuple[np.ndarray | None, float]:
        """Solve one preassembled problem (``_qp1``, ``_qp2``, ``_qp2_band``); (x or None on failure,
        wall time [s])."""
        t0 = time.perf_counter()
        if self._daqp_solve is None:
            s = qpsolvers.solve_problem(problem, solver=self.config.solver, **self.solver_options)
            x = s.x if s.found else None
        else:
            args, copies = problem
            for dst, src in copies:  # bounds of this step, and the constraint senses reset
                dst[:] = src
            # warm start: the same QP solved at the previous control step → its multipliers give
            # daqp the starting active set (same optimum; fewer active-set iterations)
            key = id(problem)
            prev = self._warm.get(key) if self.config.warm_start else None
            if prev is not None and prev[0] == self.n_steps - 1:
                x, _, exitflag, info = self._daqp_solve(*args, dual_start=prev[1], **self.solver_options)
            else:
                x, _, exitflag, info = self._daqp_solve(*args, **self.solver_options)
            self.n_qp_iterations += info["iterations"]
            if exitflag > 0:
                self._warm[key] = (self.n_steps, info["lam"])
            else:
                x = None
                self._warm.pop(key, None)
        dt = time.perf_counter() - t0
        ok = x is not None and all(map(math.isfinite, x.tolist()))
        return (x if ok else None), dt

    def _slacks(self, x: np.ndarray, M: np.ndarray) -> np.ndarray:
        """Stacked inequality slacks [x − lb; ub − x; h_top − M x; h_bot + M x] (≥ 0 when feasible)."""
        p = self._prob
        nv = self.nv
        S = self._slack
        np.subtract(x, p.lb, out=S[:nv])
        np.subtract(p.ub, x, out=S[nv : 2 * nv])
        Mx = self._Mqdd
        M.dot(x, out=Mx)
        np.subtract(p.h[:nv], Mx, out=S[2 * nv : 3 * nv])
        np.add(p.h[nv:], Mx, out=S[3 * nv :])
        return S

    def _stats(self, x: np.ndarray, M: np.ndarray, sol: HQPSolution, eq: bool) -> None:
        """Primal residual (max violation) and active-inequality count of ``x``: the slacks of
        :meth:`_slacks`, an inequality active when its slack ≤ ACTIVE_TOL (1 + |bound|)."""
        p = self._prob
        slack = self._slacks(x, M)
        bound = np.concatenate((p.lb, p.ub, p.h))
        viol = max(0.0, -float(slack.min()))
        if eq:
            viol = max(viol, float(np.abs(p.J @ x - p.b_eq).max()))
        sol.primal_residual = viol
        sol.n_active = int(np.count_nonzero(slack <= ACTIVE_TOL * (1.0 + np.abs(bound))))

    def solve(self, snap: Snapshot) -> HQPSolution:
        """Solve the problem last built for ``snap`` (closed form when feasible in ``auto`` mode)."""
        if self._kernel_step:
            self._sync_kernel_step()
        return self._solve(snap, None)

    def _solve(self, snap: Snapshot, closed_feasible: bool | None) -> HQPSolution:
        """:meth:`solve`; ``closed_feasible``: the feasibility of q̈* when already known (compute()
        passes the test made in _build_task; None re-tests the problem's arrays)."""
        p = self._prob
        if closed_feasible is None and not p.qp_assembled:
            self._assemble_qp(snap)
        if self._auto and (self._feasible(p.qdd_closed, snap) if closed_feasible is None else closed_feasible):
            return self._closed_form_solution()
        sol = self._sol
        if not p.qp_assembled:
            self._assemble_qp(snap)
        self.n_qp += 1
        x1, dt1 = self._qp(self._qp1)
        if x1 is None:
            self.n_fail += 1
            sol.qdd[:] = p.qdd_closed
            sol.qdd_level1[:] = p.qdd_closed
            sol.status = STATUS_FALLBACK
            sol.solve_time = dt1
            self._stats(sol.qdd, snap.M, sol, eq=False)
        else:
            sol.qdd_level1[:] = x1
            p.J.dot(x1, out=p.b_eq)
            x2, dt2 = self._qp(self._qp2)
            eq = True
            if x2 is None:
                # degenerate equality (q̈_1 on a vertex of the constraints): retry once with the
                # equality relaxed to the band |J q̈ − J q̈_1| ≤ δ, δ = 1e-9 (1 + |J q̈_1|)
                self.n_relaxed_l2 += 1
                nv = self.nv
                G2, h2 = self._G2, self._h2
                G2[: 2 * nv] = p.G
                G2[2 * nv : 2 * nv + 6] = p.J
                np.negative(p.J, out=G2[2 * nv + 6 :])
                h2[: 2 * nv] = p.h
                delta = self._f6
                np.abs(p.b_eq, out=delta)
                delta += 1.0
                delta *= LEVEL2_BAND
                np.add(p.b_eq, delta, out=h2[2 * nv : 2 * nv + 6])
                np.subtract(delta, p.b_eq, out=h2[2 * nv + 6 :])
                x2, dt2b = self._qp(self._qp2_band)
                dt2 += dt2b
                eq = False
            if x2 is None:
                self.n_fail_l2 += 1
                sol.qdd[:] = x1
                sol.status = STATUS_L2_FAILED
                self._stats(sol.qdd, snap.M, sol, eq=False)
            else:
                sol.qdd[:] = x2
                sol.status = STATUS_QP
                self._stats(sol.qdd, snap.M, sol, eq=eq)
            sol.solve_time = dt1 + dt2
        sol.level1_residual = self._level1_residual(sol.qdd)
        return sol

    def _closed_form_solution(self) -> HQPSolution:
        """Record q̈* of the problem as the solution (status 0, no active constraint)."""
        t0 = time.perf_counter()
        sol = self._sol
        x = self._prob.qdd_closed
        sol.qdd[:] = x
        sol.qdd_level1[:] = x
        sol.status = STATUS_CLOSED_FORM
        sol.solve_time = time.perf_counter() - t0
        sol.primal_residual = 0.0
        sol.n_active = 0
        sol.level1_residual = self._level1_residual(x)
        return sol

    def _level1_residual(self, x: np.ndarray) -> float:
        """‖J x − b‖ [m/s², rad/s²]."""
        p = self._prob
        return float(np.linalg.norm(p.J @ x - p.b))
