/*
 * Shared by the kernels (controllers/_khatib_kernel.c, _se3_kernel.c, _hqp_kernel.c, sim/_dynamics_kernel.c):
 * the rotation log (agreeing with sim.lie.so3_log, Pinocchio's log3, to round-off), the joint feedforward
 * (ported from controllers/feedforward.py operation for operation, compiled without fused multiply-add,
 * setup.py) and the one small Cholesky factorisation every kernel's linear algebra uses.
 */
#ifndef DOCKBENCH_KERNEL_MATH_H
#define DOCKBENCH_KERNEL_MATH_H

#include <math.h>

/* The kernels' rotation log (returns 0, or 1 where it is undefined: then the caller hands the step to its
 * Python path): φ = log R (|φ| = θ ∈ [0, π], sim.lie.so3_log) for R given by rows.
 * θ = atan2(|s|, c), s = vee(½(R − Rᵀ)) = sin θ n, c = (tr R − 1)/2 clamped to [−1, 1]; axis s/|s| for
 * c > −0.9, else from the symmetric part ½(R + Rᵀ) − cI = (1 − c) n nᵀ with n·s ≥ 0. */
static inline int kernel_so3_log(double r00, double r01, double r02, double r10, double r11, double r12, double r20,
                   double r21, double r22, double *phi) {
    double s0 = 0.5 * (r21 - r12);
    double s1 = 0.5 * (r02 - r20);
    double s2 = 0.5 * (r10 - r01);
    double c = 0.5 * (r00 + r11 + r22 - 1.0);
    c = (c > -1.0) ? c : -1.0; /* max(-1.0, c): c unless c > −1 is false */
    c = (c < 1.0) ? c : 1.0;   /* min(1.0, c): c unless c < 1 is false */
    double s = sqrt(s0 * s0 + s1 * s1 + s2 * s2);
    double theta = atan2(s, c);
    if (c > -0.9) {
        double ratio = (s > 1e-12) ? theta / s : 1.0 + theta * theta / 6.0;
        phi[0] = s0 * ratio;
        phi[1] = s1 * ratio;
        phi[2] = s2 * ratio;
        return 0;
    }
    /* near π: column i of B = ½(R + Rᵀ) − cI, i = first index of the largest diagonal */
    double one_m_c = 1.0 - c;
    double d0 = r00 - c, d1 = r11 - c, d2 = r22 - c;
    double di, n0, n1, n2;
    if (d0 >= d1 && d0 >= d2) {
        di = d0; n0 = d0; n1 = 0.5 * (r10 + r01); n2 = 0.5 * (r20 + r02);
    } else if (d1 >= d2) {
        di = d1; n0 = 0.5 * (r01 + r10); n1 = d1; n2 = 0.5 * (r21 + r12);
    } else {
        di = d2; n0 = 0.5 * (r02 + r20); n1 = 0.5 * (r12 + r21); n2 = d2;
    }
    double arg = di * one_m_c;
    /* math.sqrt of a negative raises ValueError, n / 0.0 ZeroDivisionError (Python floats) */
    if (arg <= 0.0) return 1;
    double k = sqrt(arg);
    n0 = n0 / k;
    n1 = n1 / k;
    n2 = n2 / k;
    if (n0 * s0 + n1 * s1 + n2 * s2 < 0.0) {
        n0 = -n0; n1 = -n1; n2 = -n2;
    }
    phi[0] = theta * n0;
    phi[1] = theta * n1;
    phi[2] = theta * n2;
    return 0;
}

/* controllers/feedforward.py, DissipationFeedforward.compute added to τ in place: mode 1 (torque)
 * τ_ff = f tanh((τ_pre − g) / (f/2)) (keyed on the torque without its gravity term g(q)), mode 2 (velocity)
 * τ_ff = f tanh(q̇ / ε), plus d q̇ when damping is set; mode 0 = inactive. f, d, half_f = f/2 (1 where f = 0),
 * g, q̇ and τ hold nv floats. */
static inline void kernel_feedforward(int mode, int damping, double eps, const double *f, const double *d,
                                      const double *half_f, const double *g, const double *qd, double *tau,
                                      int nv) {
    if (!mode) return;
    for (int i = 0; i < nv; i++) {
        double o = (mode == 2) ? tanh(qd[i] / eps) : tanh((tau[i] - g[i]) / half_f[i]);
        o = o * f[i];
        if (damping) o = o + d[i] * qd[i];
        tau[i] = tau[i] + o;
    }
}

/* Cholesky factor A = L Lᵀ of a symmetric positive definite n × n matrix A (row-major; only the lower
 * triangle is read), L written over that lower triangle (the diagonal holds L_jj). The one pivot rule of
 * every kernel: the factorisation fails, returning 1 with A partly overwritten, when a pivot
 * d_j = A_jj − Σ_{c<j} L_jc² is not ≥ min_pivot, NaN included; a caller passes its threshold (a positive
 * number; KERNEL_POSITIVE, the smallest positive double, means "positive definite", as LAPACK's dpotrf).
 * Sums run over c ascending; off-diagonal entries are divided by L_jj. Returns 0 on success. */
#define KERNEL_POSITIVE 4.9406564584124654e-324
static inline int kernel_cholesky(double *A, int n, double min_pivot) {
    for (int j = 0; j < n; j++) {
        double d = A[(n + 1) * j];
        for (int c = 0; c < j; c++) d -= A[n * j + c] * A[n * j + c];
        if (!(d >= min_pivot)) return 1;
        d = sqrt(d);
        A[(n + 1) * j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[n * i + j];
            for (int c = 0; c < j; c++) s -= A[n * i + c] * A[n * j + c];
            A[n * i + j] = s / d;
        }
    }
    return 0;
}

/* X ← (L Lᵀ)⁻¹ X with L from kernel_cholesky (n × n), for the m columns of the n × m row-major X (m = 1: a
 * vector): L Z = X by forward substitution, then Lᵀ X = Z backward, each entry divided by L_ii. */
static inline void kernel_cholesky_solve(const double *L, int n, double *X, int m) {
    for (int k = 0; k < m; k++) {
        for (int i = 0; i < n; i++) {
            double s = X[m * i + k];
            for (int c = 0; c < i; c++) s -= L[n * i + c] * X[m * c + k];
            X[m * i + k] = s / L[(n + 1) * i];
        }
        for (int i = n - 1; i >= 0; i--) {
            double s = X[m * i + k];
            for (int c = i + 1; c < n; c++) s -= L[n * c + i] * X[m * c + k];
            X[m * i + k] = s / L[(n + 1) * i];
        }
    }
}

#endif
