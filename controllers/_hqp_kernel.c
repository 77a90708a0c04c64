/*
 * Compiled kernel of the HQP with adaptive compliance on its closed-form path (controllers/hqp.py with
 * controllers/adaptive_compliance.py, controllers/hqp_problem.py and controllers/manipulability.py;
 * docs/theory/hqp.md).
 *
 * HQPKernel(...) is bound once to the preallocated arrays of one run (snapshot, reference, wrench state,
 * command, the controller's problem and solution records); step(w, t) then computes one whole control
 * step of HQPController.compute() on the closed-form path, w = the snapshot's manipulability, t its time [s]:
 *
 *   F_ext  = [f; n_S + (p_S − p_E) × f]   (ext_world moved from the sensor origin to the EE origin; 0
 *            without force feedback), or its first-order low-pass F̄_k = F̄_{k−1} + β (F_ext − F̄_{k−1})
 *            (force_filter; the law then uses F̄ wherever it uses F_ext)
 *   force set-point (hybrid impedance, s its ramp; kernel_setpoint_update, sim/_kernel_math.h): the axial
 *            components of x − x_d, of ẋ_d and of ẍ_d removed with weight s, F_r += F_f = −a (F_d + k_p (F_d −
 *            f_a) + I + d_f v_a)
 *   α      = σ(k_α ‖f‖) (plain) or 2σ(k_α ‖f‖) − 1 (shifted),  K_r = K_0 · max(1 − α, k_min_ratio)
 *   e_p    = [x − x_d; log(R R_dᵀ)],  Δν = ν − ν_d
 *   Λ⁻¹    = J M⁻¹ Jᵀ = V diag(μ) Vᵀ (cyclic Jacobi on its lower triangle),  Λ = V diag(1/μ) Vᵀ,
 *            √s Λ^½ = V diag((μ/s)^−½) Vᵀ,  D_r = (√s Λ^½) ∘ (√K_0,i + √K_0,j)   (s = max(1 − α, k_min_ratio))
 *   F_r    = −D_r Δν − K_r e_p,  a = ν̇_d + Λ⁻¹ (F_r + F_ext),  b = a − J̇ q̇
 *   q̈_2   = −D_j q̇ − K_j (q − q_ref) [+ k_sa w ∇w/w when w < w_th]
 *   q̈*    = q̈_2 + M⁻¹ Jᵀ Λ (b − J q̈_2),  offset = h [− Jᵀ F_ext]
 *   τ      = M q̈* + offset + τ_ff,  when q̈* passes the feasibility test of _build_task (τ_ff: the joint
 *            feedforward, hybrid mode latched on ‖f̄‖, kernel_feedforward)
 *
 * J = J_ee_lwa (LOCAL_WORLD_ALIGNED at the EE, rows [v; ω]); twists [v; ω], wrenches [f; n], world axes.
 *
 * The scalar part is a literal port of HQPController._build_task's Python floats (same expressions,
 * same order of + and ×, the same libm exp/sqrt; compiled without fused multiply-add, setup.py), so
 * F_ext, α, K_r and Δν are equal to the Python path bit for bit (and so are the filter, set-point and latch
 * states and the set-point's diagnostics); e_p's rotation part is kernel_so3_log
 * where Python calls Pinocchio's log3 (round-off). The matrix products are plain
 * loops where Python calls BLAS, the eigendecomposition is a cyclic Jacobi iteration where Python calls
 * LAPACK dsyevd (eigenvectors may differ in sign and order; Λ and Λ^½ agree to round-off), P = (J Jᵀ)⁻¹ J
 * of ∇w is a Cholesky solve where Python calls dposv, and tanh is libm's where Python calls np.tanh:
 * everything after Λ⁻¹ agrees to round-off (tests/test_hqp_kernel.py).
 *
 * step() returns 0 (everything written: τ, diag, the problem and solution arrays, the results) or a
 * hand-back status (ST_* below); then NOTHING has been written and the controller runs its Python path
 * for the step (the QPs when the closed form is infeasible, np.linalg where LAPACK failed, or the same
 * exception where Python's math raises).
 */
#include "../sim/_kernel_util.h"
#include "../sim/_kernel_math.h"
#include <float.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <structmember.h>

/* Status codes of step() */
#define ST_OK 0
#define ST_INFEASIBLE 1 /* q̈* violates a box or torque row (or the test is NaN): the QP path decides */
#define ST_EIG 2        /* Λ⁻¹ not positive definite (an eigenvalue ≤ 0), not finite, or Jacobi did not converge */
#define ST_GRAD 3       /* J Jᵀ of ∇w not positive definite (dposv fails; Python then calls np.linalg.solve) */
#define ST_DOMAIN 4     /* where Python's math raises (so3 log of a garbage rotation) */

/* Jacobi: a pair (p, q) is rotated while a_pq² > JACOBI_TOL² |a_pp a_qq| (the relative criterion of
 * Demmel and Veselić: converged, the eigenvalues of an SPD matrix are accurate to a few ulp relative); a
 * sweep with no rotation ends the iteration. The entries are checked to be below JACOBI_MAX_ENTRY first,
 * so that the squares cannot overflow. */
#define JACOBI_TOL DBL_EPSILON
#define JACOBI_MAX_SWEEPS 50
#define JACOBI_MAX_ENTRY 1e100

/* The 15 pairs of a sweep in the round-robin order: 5 rounds of 3 disjoint pairs. Rotations of disjoint
 * pairs commute and each reads only its own rows and columns, so the three angles of a round are computed
 * from the same matrix (independent: the CPU overlaps their divisions and square roots) and then applied. */
static const int ROUNDS[5][3][2] = {{{0, 1}, {2, 5}, {3, 4}},
                                    {{0, 2}, {1, 3}, {4, 5}},
                                    {{0, 3}, {2, 4}, {1, 5}},
                                    {{0, 4}, {3, 5}, {1, 2}},
                                    {{0, 5}, {1, 4}, {2, 3}}};

/* ------------------------------------------------------------------------------------------------
 * 6 × 6 symmetric eigendecomposition (cyclic Jacobi, round-robin order)
 * ------------------------------------------------------------------------------------------------ */

/* A (6×6, symmetric, row-major; destroyed) = V diag(mu) Vᵀ, V's columns the eigenvectors (unsorted).
 * Returns 0, or 1 when an entry is not finite or above JACOBI_MAX_ENTRY, or the sweep limit is hit. */
static int jacobi6(double A[6][6], double V[6][6], double mu[6]) {
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            if (!(fabs(A[i][j]) <= JACOBI_MAX_ENTRY)) return 1; /* NaN too */
            V[i][j] = (i == j) ? 1.0 : 0.0;
        }
    const double tol2 = JACOBI_TOL * JACOBI_TOL;
    for (int sweep = 0; sweep < JACOBI_MAX_SWEEPS; sweep++) {
        int rotated = 0;
        for (int rd = 0; rd < 5; rd++) {
            double tk[3], sk[3], tauk[3];
            int on[3];
            for (int k = 0; k < 3; k++) { /* the angles: t = tan φ, the smaller root of t² + 2θt − 1 = 0 */
                const int p = ROUNDS[rd][k][0], q = ROUNDS[rd][k][1];
                const double apq = A[p][q];
                on[k] = apq * apq > tol2 * fabs(A[p][p] * A[q][q]);
                if (!on[k]) continue;
                const double theta = (A[q][q] - A[p][p]) / (2.0 * apq);
                double t;
                if (fabs(theta) > 1e150) {
                    t = 0.5 / theta;
                } else {
                    t = 1.0 / (fabs(theta) + sqrt(theta * theta + 1.0));
                    if (theta < 0.0) t = -t;
                }
                const double c = 1.0 / sqrt(t * t + 1.0);
                tk[k] = t;
                sk[k] = t * c;
                tauk[k] = sk[k] / (1.0 + c);
            }
            for (int k = 0; k < 3; k++) { /* A ← Gᵀ A G, V ← V G */
                if (!on[k]) continue;
                const int p = ROUNDS[rd][k][0], q = ROUNDS[rd][k][1];
                const double apq = A[p][q], t = tk[k], s = sk[k], tau = tauk[k];
                A[p][p] -= t * apq;
                A[q][q] += t * apq;
                A[p][q] = A[q][p] = 0.0;
                for (int r = 0; r < 6; r++) {
                    if (r != p && r != q) {
                        const double arp = A[r][p], arq = A[r][q];
                        A[r][p] = A[p][r] = arp - s * (arq + tau * arp);
                        A[r][q] = A[q][r] = arq + s * (arp - tau * arq);
                    }
                    const double vrp = V[r][p], vrq = V[r][q];
                    V[r][p] = vrp - s * (vrq + tau * vrp);
                    V[r][q] = vrq + s * (vrp - tau * vrq);
                }
                rotated = 1;
            }
        }
        if (!rotated) {
            for (int i = 0; i < 6; i++) mu[i] = A[i][i];
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------------
 * ∇w / w (controllers/manipulability.py ManipulabilityGradient) from the LWA Jacobian J (6 × nv, row-major)
 * ------------------------------------------------------------------------------------------------ */

/* g = ∇w / w: P = (J Jᵀ)⁻¹ J (kernel_cholesky of J Jᵀ), then per joint i
 *   g_i = Jv_i · Σ_{k≤i} C_k + Jω_i · Σ_{k>i} U_k,  C_k = Pv_k × Jω_k,  U_k = Jv_k × Pv_k + Jω_k × Pω_k.
 * P (6 × nv) is work memory. Returns 0, or 1 when J Jᵀ is not positive definite (nothing meaningful in g). */
static int grad_w(const double *J, int nv, double *P, double *g) {
    double L[36]; /* J Jᵀ in its lower triangle, then its Cholesky factor */
    for (int a = 0; a < 6; a++)
        for (int b = a; b < 6; b++) {
            double s = 0.0;
            for (int i = 0; i < nv; i++) s += J[a * nv + i] * J[b * nv + i];
            L[6 * b + a] = s;
        }
    if (kernel_cholesky(L, 6, KERNEL_POSITIVE)) return 1;
    /* P = (J Jᵀ)⁻¹ J, all nv columns */
    memcpy(P, J, (size_t)(6 * nv) * sizeof(double));
    kernel_cholesky_solve(L, 6, P, nv);
    /* lower part: Jv_i · Σ_{k≤i} C_k (joints ascending) */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < nv; i++) {
        double a0 = J[i], a1 = J[nv + i], a2 = J[2 * nv + i];
        double b0 = J[3 * nv + i], b1 = J[4 * nv + i], b2 = J[5 * nv + i];
        double c0 = P[i], c1 = P[nv + i], c2 = P[2 * nv + i];
        s0 += c1 * b2 - c2 * b1;
        s1 += c2 * b0 - c0 * b2;
        s2 += c0 * b1 - c1 * b0;
        g[i] = a0 * s0 + a1 * s1 + a2 * s2;
    }
    /* upper part: Jω_i · Σ_{k>i} U_k (joints descending) */
    double u0 = 0.0, u1 = 0.0, u2 = 0.0;
    for (int i = nv - 1; i >= 0; i--) {
        double a0 = J[i], a1 = J[nv + i], a2 = J[2 * nv + i];
        double b0 = J[3 * nv + i], b1 = J[4 * nv + i], b2 = J[5 * nv + i];
        double c0 = P[i], c1 = P[nv + i], c2 = P[2 * nv + i];
        double d0 = P[3 * nv + i], d1 = P[4 * nv + i], d2 = P[5 * nv + i];
        g[i] = g[i] + (b0 * u0 + b1 * u1 + b2 * u2);
        u0 += a1 * c2 - a2 * c1 + (b1 * d2 - b2 * d1);
        u1 += a2 * c0 - a0 * c2 + (b2 * d0 - b0 * d2);
        u2 += a0 * c1 - a1 * c0 + (b0 * d1 - b1 * d0);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * The kernel object
 * ------------------------------------------------------------------------------------------------ */

enum {
    /* read: snapshot, reference, wrench, constants */
    B_J, B_T, B_TS, B_TWIST, B_REF, B_WRENCH, B_M, B_MINV, B_H, B_Q, B_V, B_DJDQ, B_K0, B_S0, B_QREF, B_JC,
    B_FF_F, B_FF_D, B_FF_HALF, B_FF_G,
    /* written by step() */
    B_TAU, B_DIAG, B_PJ, B_VEC6, B_LI, B_LL, B_DR, B_MINVJT, B_QDD2, B_QDDC, B_OFFSET, B_MX, B_QDD, B_QDD1,
    B_RES, B_FF_STATE, B_FILT, B_FS, NBUF
};
static const char *BUF_NAMES[NBUF] = {
    "J_ee_lwa", "T_world_ee", "T_world_sensor", "twist_ee_lwa", "ref_flat", "ext_world", "M", "Minv", "h", "q",
    "v", "dJdq_ee_lwa", "k0", "S0", "q_ref", "joint_consts", "ff_f", "ff_d", "ff_half_f", "ff_g", "tau", "diag", "J",
    "vec6", "Lambda_inv", "LL", "D_r", "MinvJt", "qdd_posture", "qdd_closed", "tau_offset", "Mx", "qdd",
    "qdd_level1", "results", "ff_state", "filt_state", "fs_state"};
/* the matrices (any memory layout: indexed through their strides; the vectors must be contiguous) */
static int is_matrix(int i) {
    return i == B_J || i == B_T || i == B_TS || i == B_M || i == B_MINV || i == B_S0 || i == B_JC || i == B_PJ ||
           i == B_VEC6 || i == B_LI || i == B_LL || i == B_DR || i == B_MINVJT;
}
#define NDIAG 11 /* + 4 with the force set-point: s, F_d, f_a, I */

/* The law's gains and options by name (HQPConfig's keys and what HQPController derives from them,
 * docs/theory/hqp.md; HQPKernelBinding._config_gains builds the mapping; kernel_read_fields fills this
 * struct from it by these names). K_0 and √K_0,i + √K_0,j are arrays the kernel reads in place (k0, S0). */
typedef struct {
    double k_alpha;          /* α = σ(k_α ‖f‖) [1/N] */
    int sigmoid_plain;       /* 1: α = σ, 0: the shifted 2σ − 1 */
    double k_min_ratio;      /* K_r ≥ k_min_ratio K_0 */
    double k_j, d_j;         /* q̈_2 = −K_j (q − q_ref) − D_j q̇ [1/s², 1/s] */
    double k_sa, w_th;       /* the ∇w term k_sa w ∇w/w when w < w_th (k_sa 0 and w_th −inf when it is off) */
    double inv_horizon;      /* 1/Δ of the velocity rows [1/s] */
    double k2, k2_horizon;   /* the position rows q̈ ≤ k2 (q_max − q) − (k2 Δ) q̇ [1/s², 1/s] */
    int use_force_feedback;  /* F_ext in the law (0: F_ext = 0) */
    int wrench_compensation; /* offset = h − Jᵀ F_ext (0: h) */
} HQPGains;

static const KernelField HQP_GAINS[] = {
    KERNEL_FIELD_F64(HQPGains, "k_alpha", k_alpha),
    KERNEL_FIELD_BOOL(HQPGains, "sigmoid_plain", sigmoid_plain),
    KERNEL_FIELD_F64(HQPGains, "k_min_ratio", k_min_ratio),
    KERNEL_FIELD_F64(HQPGains, "k_j", k_j),
    KERNEL_FIELD_F64(HQPGains, "d_j", d_j),
    KERNEL_FIELD_F64(HQPGains, "k_sa", k_sa),
    KERNEL_FIELD_F64(HQPGains, "w_th", w_th),
    KERNEL_FIELD_F64(HQPGains, "inv_horizon", inv_horizon),
    KERNEL_FIELD_F64(HQPGains, "k2", k2),
    KERNEL_FIELD_F64(HQPGains, "k2_horizon", k2_horizon),
    KERNEL_FIELD_BOOL(HQPGains, "use_force_feedback", use_force_feedback),
    KERNEL_FIELD_BOOL(HQPGains, "wrench_compensation", wrench_compensation),
};
#define N_HQP_GAINS ((int)(sizeof(HQP_GAINS) / sizeof(HQP_GAINS[0])))
#define NRES 4 /* results: α, w, ‖J q̈* − b‖, evaluation time [s] */

typedef struct {
    PyObject_HEAD
    Py_buffer views[NBUF];
    double *p[NBUF];
    Py_ssize_t rs[NBUF], cs[NBUF]; /* element strides (row, column) of the matrices */
    int ready;                     /* all buffers bound (step() refuses to run otherwise) */
    int nv;
    /* the gains as the step reads them (from HQPGains; minus_k_j = −k_j, inv_D = 1/Δ, two_over_D = k2 Δ) */
    double k_alpha, k_min_ratio, minus_k_j, d_j, k_sa, w_th, inv_D, k2, two_over_D, ff_vel_eps;
    int plain, use_force, wrench_comp, ff_mode, ff_damping;
    double ff_threshold, ff_dw; /* the hybrid feedforward's contact threshold [N] and T / T_blend */
    int filt_on;                /* force filter on (with force feedback only) */
    double filt_beta;           /* its β */
    int fs_on;                  /* force set-point on */
    KernelSetpoint fs;          /* its constants */
    double *work; /* J (6 nv), M⁻¹Jᵀ (6 nv), P of ∇w (6 nv), ∇w/w, q̈_2, q̈*, offset, M q̈*, τ (nv each) */
} HQPKernel;

static void HQPKernel_dealloc(HQPKernel *self) {
    kernel_release(self->views, NBUF);
    PyMem_Free(self->work);
    self->work = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* element (i, j) of bound matrix b */
#define MAT(b, i, j) p[b][(i) * self->rs[b] + (j) * self->cs[b]]

static PyObject *HQPKernel_step(HQPKernel *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "HQPKernel: not bound (construction failed or was skipped)");
        return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "HQPKernel.step(w, t) takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    const double w = PyFloat_AsDouble(args[0]);
    if (w == -1.0 && PyErr_Occurred()) return NULL;
    const double t_now = PyFloat_AsDouble(args[1]); /* the snapshot's time [s] (the set-point's ramp) */
    if (t_now == -1.0 && PyErr_Occurred()) return NULL;
    struct timespec t_start, t_end;
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    double **p = self->p;
    const int nv = self->nv;
    double *Jc = self->work, *MinvJt = Jc + 6 * nv, *P = MinvJt + 6 * nv, *gw = P + 6 * nv;
    double *q2 = gw + nv, *x = q2 + nv, *off = x + nv, *Mx = off + nv, *tau = Mx + nv;
    const double *ref = p[B_REF], *tw = p[B_TWIST], *q = p[B_Q], *v = p[B_V];

    /* F_ext, world axes, about the EE origin: n_E = n_S + (p_S − p_E) × f */
    const double x0 = MAT(B_T, 0, 3), x1 = MAT(B_T, 1, 3), x2 = MAT(B_T, 2, 3);
    double f[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (self->use_force) {
        const double *e = p[B_WRENCH];
        const double e0 = e[0], e1 = e[1], e2 = e[2];
        const double d0 = MAT(B_TS, 0, 3) - x0, d1 = MAT(B_TS, 1, 3) - x1, d2 = MAT(B_TS, 2, 3) - x2;
        f[0] = e0;
        f[1] = e1;
        f[2] = e2;
        f[3] = e[3] + (d1 * e2 - d2 * e1);
        f[4] = e[4] + (d2 * e0 - d0 * e2);
        f[5] = e[5] + (d0 * e1 - d1 * e0);
    }
    /* F̄: the force filter (new state in filt: committed only once the step succeeds) */
    double filt[7];
    if (self->filt_on) {
        double x6[6];
        memcpy(x6, f, sizeof(x6));
        kernel_force_filter(p[B_FILT], self->filt_beta, x6, f, 6);
        memcpy(filt, f, sizeof(f));
        filt[6] = 1.0;
    }
    /* the force set-point (new state in fs: committed only once the step succeeds) */
    double fs[KERNEL_SETPOINT_NSTATE], s_fs = 0.0;
    if (self->fs_on) {
        memcpy(fs, p[B_FS], sizeof(fs));
        s_fs = kernel_setpoint_update(&self->fs, fs, t_now, f, tw);
    }
    /* α and K_r = K_0 max(1 − α, k_min_ratio) */
    const double f_norm = sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]); /* ‖f̄‖ (α, the hybrid latch) */
    const double sg = 1.0 / (1.0 + exp(-(self->k_alpha * f_norm)));
    const double alpha = self->plain ? sg : 2.0 * sg - 1.0;
    const double one_m_a = 1.0 - alpha;
    const double scale = (self->k_min_ratio > one_m_a) ? self->k_min_ratio : one_m_a; /* Python's max */
    double kr[6];
    for (int i = 0; i < 6; i++) kr[i] = p[B_K0][i] * scale;

    /* e_p = [x − x_d; log(R R_dᵀ)] (entry (i, j) of R R_dᵀ = R_i · R_d,j, then kernel_so3_log), Δν = ν − ν_d */
    double Rm[9], Rab[9], ew[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) Rm[3 * i + j] = MAT(B_T, i, j);
    const double *Rd = ref + 9;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            Rab[3 * i + j] = Rm[3 * i] * Rd[3 * j] + Rm[3 * i + 1] * Rd[3 * j + 1] + Rm[3 * i + 2] * Rd[3 * j + 2];
    if (kernel_so3_log(Rab[0], Rab[1], Rab[2], Rab[3], Rab[4], Rab[5], Rab[6], Rab[7], Rab[8], ew))
        return PyLong_FromLong(ST_DOMAIN);
    double vec6[8][6]; /* F_ext, K_r, e_p, Δν, F_r, F_r + F_ext, a, b */
    for (int i = 0; i < 6; i++) {
        vec6[0][i] = f[i];
        vec6[1][i] = kr[i];
    }
    double e3[3] = {x0 - ref[0], x1 - ref[1], x2 - ref[2]}, vd[3] = {ref[3], ref[4], ref[5]};
    if (s_fs > 0.0) { /* hybrid impedance: the axial pose error and reference velocity faded out by s */
        kernel_remove_axial(&self->fs, s_fs, e3);
        kernel_remove_axial(&self->fs, s_fs, vd);
    }
    vec6[2][0] = e3[0];
    vec6[2][1] = e3[1];
    vec6[2][2] = e3[2];
    vec6[2][3] = ew[0];
    vec6[2][4] = ew[1];
    vec6[2][5] = ew[2];
    for (int i = 0; i < 3; i++) {
        vec6[3][i] = tw[i] - vd[i];      /* v − v_d */
        vec6[3][3 + i] = tw[3 + i] - ref[18 + i]; /* ω − ω_d */
    }

    /* Λ⁻¹ = J M⁻¹ Jᵀ (full, as BLAS computes it; the eigendecomposition reads its lower triangle) */
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < nv; i++) Jc[r * nv + i] = MAT(B_J, r, i);
    for (int i = 0; i < nv; i++)
        for (int k = 0; k < 6; k++) {
            double s = 0.0;
            for (int j = 0; j < nv; j++) s += MAT(B_MINV, i, j) * Jc[k * nv + j];
            MinvJt[6 * i + k] = s;
        }
    double Li[6][6], A[6][6], V[6][6], mu[6];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            double s = 0.0;
            for (int i = 0; i < nv; i++) s += Jc[a * nv + i] * MinvJt[6 * i + b];
            Li[a][b] = s;
        }
    for (int a = 0; a < 6; a++)
        for (int b = 0; b <= a; b++) A[a][b] = A[b][a] = Li[a][b];
    if (jacobi6(A, V, mu)) return PyLong_FromLong(ST_EIG);
    for (int i = 0; i < 6; i++)
        if (!(mu[i] > 0.0) || isinf(mu[i])) return PyLong_FromLong(ST_EIG);
    /* [Λ; √s Λ^½] = [V/μ; V/√(μ/s)] Vᵀ;  D_r = (√s Λ^½) ∘ S0 */
    double mu_s[6], VS[12][6], LL[12][6], Dr[6][6];
    for (int j = 0; j < 6; j++) mu_s[j] = sqrt(mu[j] / scale);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            VS[i][j] = V[i][j] / mu[j];
            VS[6 + i][j] = V[i][j] / mu_s[j];
        }
    for (int i = 0; i < 12; i++)
        for (int k = 0; k < 6; k++) {
            double s = 0.0;
            for (int j = 0; j < 6; j++) s += VS[i][j] * V[k][j];
            LL[i][k] = s;
        }
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) Dr[i][j] = LL[6 + i][j] * MAT(B_S0, i, j);

    /* F_r = −D_r Δν − K_r e_p [+ F_f];  a = ν̇_d + Λ⁻¹ (F_r + F_ext);  b = a − J̇ q̇ */
    double tf[3] = {0.0, 0.0, 0.0}; /* F_f = −a force_cmd, the set-point's task force */
    if (s_fs > 0.0) {
        tf[0] = -fs[5] * self->fs.a0;
        tf[1] = -fs[5] * self->fs.a1;
        tf[2] = -fs[5] * self->fs.a2;
    }
    for (int i = 0; i < 6; i++) {
        double t = 0.0;
        for (int j = 0; j < 6; j++) t += Dr[i][j] * vec6[3][j];
        double r = -(t + kr[i] * vec6[2][i]);
        if (s_fs > 0.0 && i < 3) r = r + tf[i];
        vec6[4][i] = r;
        vec6[5][i] = r + f[i];
    }
    const double *djdq = p[B_DJDQ];
    double acc[3] = {ref[6], ref[7], ref[8]};
    if (s_fs > 0.0) kernel_remove_axial(&self->fs, s_fs, acc);
    for (int i = 0; i < 6; i++) {
        double t = 0.0;
        for (int j = 0; j < 6; j++) t += Li[i][j] * vec6[5][j];
        const double a = t + (i < 3 ? acc[i] : ref[21 + i - 3]); /* [ẍ_d; α_d] */
        vec6[6][i] = a;
        vec6[7][i] = a - djdq[i];
    }

    /* level 2: q̈_2 = −D_j q̇ − K_j (q − q_ref) [+ k_sa ∇w] with k_sa ∇w = (k_sa w)(∇w / w) */
    const double *qref = p[B_QREF], mkj = self->minus_k_j, dj = self->d_j;
    if (w < self->w_th) {
        if (grad_w(Jc, nv, P, gw)) return PyLong_FromLong(ST_GRAD);
        double ksa = self->k_sa;
        ksa *= w;
        for (int i = 0; i < nv; i++) q2[i] = (q[i] - qref[i]) * mkj - dj * v[i] + ksa * gw[i];
    } else {
        for (int i = 0; i < nv; i++) q2[i] = (q[i] - qref[i]) * mkj - dj * v[i];
    }

    /* closed form q̈* = q̈_2 + M⁻¹ Jᵀ Λ (b − J q̈_2) */
    double f6[6], g6[6];
    for (int r = 0; r < 6; r++) {
        double s = 0.0;
        for (int i = 0; i < nv; i++) s += Jc[r * nv + i] * q2[i];
        f6[r] = vec6[7][r] - s;
    }
    for (int r = 0; r < 6; r++) {
        double s = 0.0;
        for (int j = 0; j < 6; j++) s += LL[r][j] * f6[j];
        g6[r] = s;
    }
    for (int i = 0; i < nv; i++) {
        double s = 0.0;
        for (int k = 0; k < 6; k++) s += MinvJt[6 * i + k] * g6[k];
        x[i] = s + q2[i];
    }
    /* τ offset: h [− Jᵀ F_ext] */
    const double *h = p[B_H];
    for (int i = 0; i < nv; i++) {
        if (self->wrench_comp) {
            double s = 0.0;
            for (int r = 0; r < 6; r++) s += Jc[r * nv + i] * f[r];
            off[i] = h[i] - s;
        } else {
            off[i] = h[i];
        }
    }
    /* feasibility of q̈* (HQPController._build_task's float test): velocity box, position box and torque
     * rows per joint; joint_consts rows (−q̇_max/Δ, q̇_max/Δ, k2 q_min, k2 q_max, τ limit less f, d) */
    const double inv_D = self->inv_D, k2 = self->k2, tD = self->two_over_D;
    for (int i = 0; i < nv; i++) {
        double s = 0.0;
        for (int j = 0; j < nv; j++) s += MAT(B_M, i, j) * x[j];
        Mx[i] = s;
    }
    for (int i = 0; i < nv; i++) {
        const double vmn = MAT(B_JC, i, 0), vmx = MAT(B_JC, i, 1), qmn = MAT(B_JC, i, 2), qmx = MAT(B_JC, i, 3);
        const double tl = MAT(B_JC, i, 4), fd = MAT(B_JC, i, 5);
        const double vi = v[i], xi = x[i], mi = Mx[i], oi = off[i];
        const double n1 = vi * inv_D;
        const double n2 = q[i] * k2 + tD * vi;
        const double m = tl - fabs(vi) * fd;
        if (!(vmn - n1 <= xi && xi <= vmx - n1 && qmn - n2 <= xi && xi <= qmx - n2 && -(m + oi) <= mi &&
              mi <= m - oi))
            return PyLong_FromLong(ST_INFEASIBLE);
    }

    /* τ = M q̈* + offset + τ_ff;  level-1 residual ‖J q̈* − b‖ */
    for (int i = 0; i < nv; i++) tau[i] = Mx[i] + off[i];
    double ff_state[3];
    memcpy(ff_state, p[B_FF_STATE], sizeof(ff_state));
    if (self->ff_mode == 3) kernel_feedforward_latch(ff_state, f_norm, self->ff_threshold, self->ff_dw);
    kernel_feedforward(self->ff_mode, self->ff_damping, self->ff_vel_eps, ff_state[2], p[B_FF_F], p[B_FF_D],
                       p[B_FF_HALF], p[B_FF_G], v, tau, nv);
    double res2 = 0.0;
    for (int r = 0; r < 6; r++) {
        double s = 0.0;
        for (int i = 0; i < nv; i++) s += Jc[r * nv + i] * x[i];
        s = s - vec6[7][r];
        res2 = res2 + s * s;
    }
    const double level1 = sqrt(res2);

    /* commit: problem and solution arrays, τ, diagnostics, results */
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < nv; i++) MAT(B_PJ, r, i) = Jc[r * nv + i];
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < 6; i++) MAT(B_VEC6, r, i) = vec6[r][i];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++) {
            MAT(B_LI, r, c) = Li[r][c];
            MAT(B_DR, r, c) = Dr[r][c];
        }
    for (int r = 0; r < 12; r++)
        for (int c = 0; c < 6; c++) MAT(B_LL, r, c) = LL[r][c];
    for (int i = 0; i < nv; i++)
        for (int k = 0; k < 6; k++) MAT(B_MINVJT, i, k) = MinvJt[6 * i + k];
    const size_t bytes = (size_t)nv * sizeof(double);
    memcpy(p[B_QDD2], q2, bytes);
    memcpy(p[B_QDDC], x, bytes);
    memcpy(p[B_QDD], x, bytes);
    memcpy(p[B_QDD1], x, bytes);
    memcpy(p[B_OFFSET], off, bytes);
    memcpy(p[B_MX], Mx, bytes);
    memcpy(p[B_TAU], tau, bytes);
    if (self->filt_on) memcpy(p[B_FILT], filt, sizeof(filt));
    if (self->fs_on) memcpy(p[B_FS], fs, sizeof(fs));
    if (self->ff_mode == 3) memcpy(p[B_FF_STATE], ff_state, sizeof(ff_state));
    clock_gettime(CLOCK_MONOTONIC, &t_end);
    const double elapsed = (double)(t_end.tv_sec - t_start.tv_sec) + 1e-9 * (double)(t_end.tv_nsec - t_start.tv_nsec);
    double *diag = p[B_DIAG];
    diag[0] = 0.0; /* qp_status: closed form */
    diag[1] = elapsed;
    diag[2] = 0.0; /* primal residual */
    diag[3] = 0.0; /* active constraints */
    diag[4] = level1;
    diag[5] = alpha;
    diag[6] = kr[0];
    diag[7] = kr[3];
    diag[8] = f[0];
    diag[9] = f[1];
    diag[10] = f[2];
    if (self->fs_on) { /* s, F_d, f_a, I */
        diag[11] = fs[2];
        diag[12] = fs[3];
        diag[13] = fs[4];
        diag[14] = fs[1];
    }
    double *res = p[B_RES];
    res[0] = alpha;
    res[1] = w;
    res[2] = level1;
    res[3] = elapsed;
    return PyLong_FromLong(ST_OK);
}

static int HQPKernel_init(HQPKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"J_ee_lwa", "T_world_ee", "T_world_sensor", "twist_ee_lwa", "ref_flat", "ext_world",
                             "M", "Minv", "h", "q", "v", "dJdq_ee_lwa", "k0", "S0", "q_ref", "joint_consts", "ff_f",
                             "ff_d", "ff_half_f", "ff_g", "tau", "diag", "J", "vec6", "Lambda_inv", "LL", "D_r", "MinvJt",
                             "qdd_posture", "qdd_closed", "tau_offset", "Mx", "qdd", "qdd_level1", "results",
                             "gains", "ff_mode", "ff_damping",
                             "ff_vel_eps", "ff_state", "filt_state", "fs_state", "ff_threshold", "ff_dw", "filt_on",
                             "filt_beta", "fs_on", "fs_params", NULL};
    PyObject *o[NBUF];
    HQPGains g;
    PyObject *gains;
    double ff_vel_eps;
    int ff_mode, ff_damping;
    double ff_threshold, ff_dw; /* the hybrid feedforward's contact threshold [N] and T / T_blend */
    int filt_on;                /* force filter on (with force feedback only) */
    double filt_beta;           /* its β */
    int fs_on;                  /* force set-point on */
    KernelSetpoint fs;          /* its constants */
    PyObject *fs_params;
    self->ready = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOipdOOOddpdpO", kwlist, &o[B_J], &o[B_T], &o[B_TS],
            &o[B_TWIST], &o[B_REF], &o[B_WRENCH], &o[B_M], &o[B_MINV], &o[B_H], &o[B_Q], &o[B_V], &o[B_DJDQ],
            &o[B_K0], &o[B_S0], &o[B_QREF], &o[B_JC], &o[B_FF_F], &o[B_FF_D], &o[B_FF_HALF], &o[B_FF_G], &o[B_TAU], &o[B_DIAG],
            &o[B_PJ], &o[B_VEC6], &o[B_LI], &o[B_LL], &o[B_DR], &o[B_MINVJT], &o[B_QDD2], &o[B_QDDC], &o[B_OFFSET],
            &o[B_MX], &o[B_QDD], &o[B_QDD1], &o[B_RES], &gains, &ff_mode, &ff_damping, &ff_vel_eps,
            &o[B_FF_STATE], &o[B_FILT], &o[B_FS], &ff_threshold, &ff_dw, &filt_on, &filt_beta, &fs_on, &fs_params))
        return -1;
    if (ff_mode < 0 || ff_mode > 3) {
        PyErr_SetString(PyExc_ValueError,
                        "HQPKernel: ff_mode must be 0 (inactive), 1 (torque), 2 (velocity) or 3 (hybrid)");
        return -1;
    }
    if (kernel_read_fields("HQPKernel", "gains", gains, HQP_GAINS, N_HQP_GAINS, &g) < 0) return -1;
    if (kernel_setpoint_params("HQPKernel", fs_params, &fs) < 0) return -1;
    /* nv from tau, then every size checked against it */
    Py_buffer probe;
    if (kernel_bind("HQPKernel", o[B_TAU], &probe, -1, 1, BUF_NAMES[B_TAU]) == NULL) return -1;
    Py_ssize_t nv = probe.len / 8;
    PyBuffer_Release(&probe);
    if (nv < 1 || nv > 1024) {
        PyErr_Format(PyExc_ValueError, "HQPKernel: tau must hold 1..1024 floats, got %zd", nv);
        return -1;
    }
    /* vectors: number of floats; matrices: rows, cols */
    const Py_ssize_t ndiag = NDIAG + (fs_on ? 4 : 0);
    const Py_ssize_t rows[NBUF] = {6,  4,  4,  6,  24, 6,  nv, nv, nv, nv, nv, 6,  6,  6,  nv, nv, nv,
                                   nv, nv, nv, nv, ndiag, 6, 8, 6, 12, 6, nv, nv, nv, nv, nv, nv, nv, NRES,
                                   3, 7, KERNEL_SETPOINT_NSTATE};
    const Py_ssize_t cols[NBUF] = {nv, 4, 4, 1, 1, 1, nv, nv, 1, 1, 1, 1, 1, 6, 1, 6, 1,
                                   1,  1, 1, 1, 1, nv, 6, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    kernel_release(self->views, NBUF); /* __init__ called again */
    for (int i = 0; i < NBUF; i++) {
        const int writable = i >= B_TAU;
        if (is_matrix(i)) {
            self->p[i] = kernel_bind_matrix("HQPKernel", o[i], &self->views[i], rows[i], cols[i], writable,
                                            BUF_NAMES[i], &self->rs[i], &self->cs[i]);
        } else {
            self->p[i] = kernel_bind("HQPKernel", o[i], &self->views[i], rows[i], writable, BUF_NAMES[i]);
            self->rs[i] = 1;
            self->cs[i] = 1;
        }
        if (self->p[i] == NULL) {
            kernel_release(self->views, NBUF);
            return -1;
        }
    }
    double *work = PyMem_Realloc(self->work, sizeof(double) * (size_t)(24 * nv));
    if (work == NULL) {
        kernel_release(self->views, NBUF);
        PyErr_NoMemory();
        return -1;
    }
    self->work = work;
    self->nv = (int)nv;
    self->k_alpha = g.k_alpha;
    self->k_min_ratio = g.k_min_ratio;
    self->minus_k_j = -g.k_j;
    self->d_j = g.d_j;
    self->k_sa = g.k_sa;
    self->w_th = g.w_th;
    self->inv_D = g.inv_horizon;
    self->k2 = g.k2;
    self->two_over_D = g.k2_horizon;
    self->plain = g.sigmoid_plain;
    self->use_force = g.use_force_feedback;
    self->wrench_comp = g.wrench_compensation;
    self->ff_mode = ff_mode;
    self->ff_damping = ff_damping;
    self->ff_vel_eps = ff_vel_eps;
    self->ff_threshold = ff_threshold;
    self->ff_dw = ff_dw;
    self->filt_on = filt_on;
    self->filt_beta = filt_beta;
    self->fs_on = fs_on;
    self->fs = fs;
    self->ready = 1;
    return 0;
}

static PyMethodDef HQPKernel_methods[] = {
    {"step", (PyCFunction)(void (*)(void))HQPKernel_step, METH_FASTCALL,
     "step(w, t) -> int: one control step (closed form) into the bound arrays, w = the snapshot's manipulability, "
     "t its time [s]; "
     "0 ok, else a hand-back status (STATUS_*): nothing written, run the Python path."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef HQPKernel_members[] = {{"nv", T_INT, offsetof(HQPKernel, nv), READONLY, "number of joints"},
                                          {NULL, 0, 0, 0, NULL}};

static PyTypeObject HQPKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "controllers._hqp_kernel.HQPKernel",
    .tp_basicsize = sizeof(HQPKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HQPKernel(J_ee_lwa, T_world_ee, T_world_sensor, twist_ee_lwa, ref_flat, ext_world, M, Minv, h, q, "
              "v, dJdq_ee_lwa, k0, S0, q_ref, joint_consts, ff_f, ff_d, ff_half_f, ff_g, tau, diag, J, vec6, Lambda_inv, "
              "LL, D_r, MinvJt, qdd_posture, qdd_closed, tau_offset, Mx, qdd, qdd_level1, results, gains, "
              "ff_mode, ff_damping, ff_vel_eps, ff_state, filt_state, fs_state, ff_threshold, ff_dw, filt_on, filt_beta, "
              "fs_on, fs_params)\n\n"
              "The HQP closed-form step bound to one run's arrays (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)HQPKernel_init,
    .tp_dealloc = (destructor)HQPKernel_dealloc,
    .tp_methods = HQPKernel_methods,
    .tp_members = HQPKernel_members,
};

/* ------------------------------------------------------------------------------------------------
 * Module-level helpers (for tests: the eigendecomposition and ∇w on their own)
 * ------------------------------------------------------------------------------------------------ */

/* Copy the float64 rows × cols matrix obj (any memory layout) into out, row-major; -1 with an exception set. */
static int read_matrix(PyObject *obj, Py_buffer *view, Py_ssize_t rows, Py_ssize_t cols, const char *name,
                       double *out) {
    Py_ssize_t rs, cs;
    double *m = kernel_bind_matrix("_hqp_kernel", obj, view, rows, cols, 0, name, &rs, &cs);
    if (m == NULL) return -1;
    for (Py_ssize_t i = 0; i < rows; i++)
        for (Py_ssize_t j = 0; j < cols; j++) out[i * cols + j] = m[i * rs + j * cs];
    PyBuffer_Release(view);
    return 0;
}

static PyObject *py_eigh(PyObject *Py_UNUSED(mod), PyObject *arg) {
    Py_buffer view;
    double a[36], A[6][6], V[6][6], mu[6];
    if (read_matrix(arg, &view, 6, 6, "A", a) < 0) return NULL;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j <= i; j++) A[i][j] = A[j][i] = a[6 * i + j]; /* the lower triangle */
    if (jacobi6(A, V, mu)) {
        PyErr_SetString(PyExc_ArithmeticError, "eigh: the Jacobi iteration did not converge");
        return NULL;
    }
    PyObject *vecs = PyList_New(6);
    if (vecs == NULL) return NULL;
    for (int i = 0; i < 6; i++) {
        PyObject *row = Py_BuildValue("(dddddd)", V[i][0], V[i][1], V[i][2], V[i][3], V[i][4], V[i][5]);
        if (row == NULL) {
            Py_DECREF(vecs);
            return NULL;
        }
        PyList_SET_ITEM(vecs, i, row);
    }
    return Py_BuildValue("((dddddd)N)", mu[0], mu[1], mu[2], mu[3], mu[4], mu[5], vecs);
}

static PyObject *py_grad_w(PyObject *Py_UNUSED(mod), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) return NULL;
    Py_ssize_t nv = view.ndim == 2 ? view.shape[1] : 0;
    PyBuffer_Release(&view);
    if (nv < 1 || nv > 1024) {
        PyErr_SetString(PyExc_ValueError, "grad_w: J must be a 6 x nv float64 matrix (1 <= nv <= 1024)");
        return NULL;
    }
    double *buf = PyMem_Malloc(sizeof(double) * (size_t)(13 * nv));
    if (buf == NULL) return PyErr_NoMemory();
    double *J = buf, *P = J + 6 * nv, *g = P + 6 * nv;
    PyObject *out = NULL;
    if (read_matrix(arg, &view, 6, nv, "J", J) == 0) {
        if (grad_w(J, (int)nv, P, g)) {
            PyErr_SetString(PyExc_ArithmeticError, "grad_w: J J^T is not positive definite");
        } else {
            out = PyList_New(nv);
            for (Py_ssize_t i = 0; out != NULL && i < nv; i++) {
                PyObject *gi = PyFloat_FromDouble(g[i]);
                if (gi == NULL) {
                    Py_CLEAR(out);
                    break;
                }
                PyList_SET_ITEM(out, i, gi);
            }
        }
    }
    PyMem_Free(buf);
    return out;
}

static PyMethodDef module_methods[] = {
    {"eigh", py_eigh, METH_O,
     "eigh(A) -> (mu, V): the kernel's cyclic Jacobi on the lower triangle of the 6 x 6 matrix A "
     "(A = V diag(mu) V^T, V as rows; eigenvalues unsorted)."},
    {"grad_w", py_grad_w, METH_O,
     "grad_w(J) -> list: the gradient of the manipulability divided by it, from the 6 x nv LWA Jacobian J "
     "(ManipulabilityGradient as the kernel computes it)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hqp_kernel",
                                    "Compiled HQP closed-form step (controllers/hqp.py is the reference).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__hqp_kernel(void) {
    PyObject *m = kernel_module(&module, &HQPKernelType, "HQPKernel");
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "STATUS_OK", ST_OK) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_INFEASIBLE", ST_INFEASIBLE) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_EIG", ST_EIG) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_GRAD", ST_GRAD) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_DOMAIN", ST_DOMAIN) < 0 || PyModule_AddIntConstant(m, "NDIAG", NDIAG) < 0 ||
        PyModule_AddIntConstant(m, "NRESULTS", NRES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
