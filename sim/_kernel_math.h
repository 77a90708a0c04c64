/*
 * Shared by the kernels (controllers/_khatib_kernel.c, _se3_kernel.c, _hqp_kernel.c, sim/_dynamics_kernel.c):
 * the rotation log (agreeing with sim.lie.so3_log, Pinocchio's log3, to round-off), the joint feedforward
 * and its hybrid latch, the force low-pass filter and the axial force set-point (ported from
 * controllers/feedforward.py and controllers/force_control.py operation for operation, compiled without fused
 * multiply-add, setup.py) and the one small Cholesky factorisation every kernel's linear algebra uses.
 */
#ifndef DOCKBENCH_KERNEL_MATH_H
#define DOCKBENCH_KERNEL_MATH_H

#include <math.h>

#include "_kernel_util.h" /* kernel_read_fields (the set-point's constants by name) */

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

/* The hybrid feedforward's latch (controllers/feedforward.py, DissipationFeedforward.compute): st = (latched,
 * n, w) advanced by one call with the law's contact-force magnitude `force` [N]: latched from the first call
 * with force > threshold on, then n += 1 and w = min(1, n dw) (dw = T / T_blend) while w < 1. The caller
 * passes a copy of the state and commits it once its step succeeds. */
static inline void kernel_feedforward_latch(double *st, double force, double threshold, double dw) {
    if (!(st[0] != 0.0) && force > threshold) st[0] = 1.0;
    if (st[0] != 0.0 && st[2] < 1.0) {
        st[1] = st[1] + 1.0;
        double m = st[1] * dw;
        st[2] = (m < 1.0) ? m : 1.0; /* Python's min(1.0, m): 1.0 unless m < 1.0 */
    }
}

/* controllers/feedforward.py, DissipationFeedforward.compute added to τ in place: mode 1 (torque)
 * τ_ff = f tanh((τ_pre − g) / (f/2)) (keyed on the torque without its gravity term g(q)), mode 2 (velocity)
 * τ_ff = f tanh(q̇ / ε), mode 3 (hybrid, w the weight of kernel_feedforward_latch): the torque keying for
 * w ≤ 0, the velocity keying for w ≥ 1, else f ((tanh(q̇/ε) − tanh((τ_pre − g)/(f/2))) w + tanh((τ_pre − g)/(f/2)));
 * plus d q̇ when damping is set; mode 0 = inactive. f, d, half_f = f/2 (1 where f = 0), g, q̇ and τ hold nv
 * floats. */
static inline void kernel_feedforward(int mode, int damping, double eps, double w, const double *f, const double *d,
                                      const double *half_f, const double *g, const double *qd, double *tau,
                                      int nv) {
    if (!mode) return;
    if (mode == 3) mode = (w >= 1.0) ? 2 : ((w <= 0.0) ? 1 : 3);
    for (int i = 0; i < nv; i++) {
        double o;
        if (mode == 2) {
            o = tanh(qd[i] / eps);
        } else if (mode == 1) {
            o = tanh((tau[i] - g[i]) / half_f[i]);
        } else { /* the blend, in the order of the Python: ((tanh(q̇/ε) − tq) w) + tq */
            double tq = tanh((tau[i] - g[i]) / half_f[i]);
            o = tanh(qd[i] / eps);
            o = o - tq;
            o = o * w;
            o = o + tq;
        }
        o = o * f[i];
        if (damping) o = o + d[i] * qd[i];
        tau[i] = tau[i] + o;
    }
}

/* Python's min(max(x, lo), hi) for floats, NaN included: max(a, b) is a unless b > a, min(a, b) is a unless
 * b < a. */
static inline double kernel_clamp_py(double x, double lo, double hi) {
    double m = (lo > x) ? lo : x;
    return (hi < m) ? hi : m;
}

/* The force low-pass (controllers/force_control.py, ForceFilter.update): y = F̄_k of the n-vector x from the
 * state st = [F̄_{k−1} (n); started]: y = x on the first call (started == 0), else y_i = F̄_i + β (x_i − F̄_i).
 * The new state is [y; 1], committed by the caller once its step succeeds. */
static inline void kernel_force_filter(const double *st, double beta, const double *x, double *y, int n) {
    if (st[n] == 0.0) {
        for (int i = 0; i < n; i++) y[i] = x[i];
    } else {
        for (int i = 0; i < n; i++) y[i] = st[i] + beta * (x[i] - st[i]);
    }
}

/* The axial force set-point's constants (controllers/force_control.py, AxialForceSetpoint.kernel_args):
 * the unit mating axis a, F, the ramp time, the delay, the contact threshold, k_p, k_i T, I_max, d_f. */
typedef struct {
    double a0, a1, a2, force, ramp_time, delay, threshold, k_p, k_i_T, i_max, damping;
} KernelSetpoint;
#define KERNEL_SETPOINT_NSTATE 6

/* AxialForceSetpoint.update at time t with the law's force f (3, world) and the tool's velocity v (3, world):
 * st = (t0, I, s, F_d, f_a, force_cmd) advanced in place (a copy the caller commits once its step succeeds);
 * returns s. The same float operations in the same order as the Python. */
static inline double kernel_setpoint_update(const KernelSetpoint *c, double *st, double t, const double *f,
                                            const double *v) {
    const double a0 = c->a0, a1 = c->a1, a2 = c->a2, f0 = f[0], f1 = f[1], f2 = f[2];
    double t0 = st[0], integral = st[1];
    const double fa = a0 * f0 + a1 * f1 + a2 * f2;
    if (t0 == INFINITY && sqrt(f0 * f0 + f1 * f1 + f2 * f2) > c->threshold) t0 = t + c->delay;
    double s = (t - t0) / c->ramp_time;
    s = (s <= 0.0) ? 0.0 : ((s >= 1.0) ? 1.0 : s);
    const double fd = s * c->force;
    double cmd;
    if (s > 0.0) {
        if (fa > c->threshold) { /* anti-windup: integrate only while the target pushes back */
            double i = integral + c->k_i_T * (fd - fa);
            integral = kernel_clamp_py(i, -c->i_max, c->i_max);
        }
        cmd = fd + c->k_p * (fd - fa) + integral;
        if (c->damping > 0.0) cmd = cmd + c->damping * (a0 * v[0] + a1 * v[1] + a2 * v[2]);
    } else {
        cmd = 0.0;
    }
    st[0] = t0;
    st[1] = integral;
    st[2] = s;
    st[3] = fd;
    st[4] = fa;
    st[5] = cmd;
    return s;
}

/* AxialForceSetpoint.remove_axial: x ← x − w a (aᵀ x) for the 3-vector x. */
static inline void kernel_remove_axial(const KernelSetpoint *c, double w, double *x) {
    const double k = w * (c->a0 * x[0] + c->a1 * x[1] + c->a2 * x[2]);
    x[0] = x[0] - k * c->a0;
    x[1] = x[1] - k * c->a1;
    x[2] = x[2] - k * c->a2;
}

/* The set-point's constants by name (AxialForceSetpoint.kernel_args, controllers/force_control.py): the
 * mating axis a, the ``force_setpoint:`` block's keys and k_i T; kernel_read_fields (sim/_kernel_util.h). */
static const KernelField KERNEL_SETPOINT_FIELDS[] = {
    KERNEL_FIELD_F64(KernelSetpoint, "axis_x", a0),
    KERNEL_FIELD_F64(KernelSetpoint, "axis_y", a1),
    KERNEL_FIELD_F64(KernelSetpoint, "axis_z", a2),
    KERNEL_FIELD_F64(KernelSetpoint, "force", force),
    KERNEL_FIELD_F64(KernelSetpoint, "ramp_time", ramp_time),
    KERNEL_FIELD_F64(KernelSetpoint, "delay", delay),
    KERNEL_FIELD_F64(KernelSetpoint, "contact_threshold", threshold),
    KERNEL_FIELD_F64(KernelSetpoint, "k_p", k_p),
    KERNEL_FIELD_F64(KernelSetpoint, "k_i_period", k_i_T),
    KERNEL_FIELD_F64(KernelSetpoint, "i_max", i_max),
    KERNEL_FIELD_F64(KernelSetpoint, "damping", damping),
};

/* The set-point's constants from the dict `params` (kernel __init__); 0, or -1 with an exception naming
 * the kernel and the key. */
static inline int kernel_setpoint_params(const char *kernel, PyObject *params, KernelSetpoint *c) {
    return kernel_read_fields(kernel, "fs_params", params, KERNEL_SETPOINT_FIELDS,
                              (int)(sizeof(KERNEL_SETPOINT_FIELDS) / sizeof(KERNEL_SETPOINT_FIELDS[0])), c);
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
