/*
 * Compiled kernel of the SE(3) Lie-group impedance (controllers/se3_lie.py, docs/theory/se3_lie.md).
 *
 * SE3Kernel(...) is bound once to the preallocated arrays of one run (snapshot, desired motion, wrench
 * state, command, the controller's results buffer); step() then computes one whole control step with
 * no arguments and no Python objects. Body-frame quantities: T = T_world_ee, V = J_b q̇ (twist_ee_body),
 * J_b = J_ee_body (LOCAL), J̇_b q̇ = dJdq_ee_body; desired motion (T_d, V_d, V̇_d) in the desired body
 * frame; twists [v; ω], wrenches [f; n].
 *
 *   desired motion  (planners/motion_reference.py, world reference → desired body frame)
 *       T_d = [[R, p], [0, 1]],  V_d = [Rᵀ ṗ; Rᵀ ω],  V̇_d = [Rᵀ p̈ − ω_b × v_b; Rᵀ α]
 *     or, for pass-through planners, T_d, V_d, V̇_d as motion_into() wrote them (MotionReference.T/V/dV)
 *   force           F_body, or its first-order low-pass F̄_k = F̄_{k−1} + β (F_body − F̄_{k−1}) (force_filter; the
 *                   law then uses F̄ wherever it uses F_body; kernel_force_filter, sim/_kernel_math.h)
 *   error           T̃ = T⁻¹ T_d,  λ = log T̃,  Ṽ = Ad_T̃ V_d − V,  F̃ = Ad_T̃⁻ᵀ F_d − F_body
 *   coordinates     λ̇ = dexp⁻¹_λ Ṽ,  γ = dexp_λᵀ F̃        (dexp_λ := sim.lie.dexp(−λ), left Jacobian)
 *   error dynamics  λ̈* = A⁻¹ (γ − D λ̇ − K λ)
 *   task accel.     V̇_ref = Ad_T̃ V̇_d + ad_Ṽ (Ad_T̃ V_d) − dexp_λ λ̈* − (d/dt dexp_λ) λ̇
 *   torque          τ = h − d_null M q̇ + J_bᵀ (y − F_body) + τ_ff,
 *                   Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + d_null V,   Λ_b⁻¹ = J_b M⁻¹ J_bᵀ   (Cholesky);
 *                   τ_ff the joint feedforward, hybrid mode latched on |f̄| (kernel_feedforward)
 *
 * The Python reference (SE3LieController.law and _compute_python, sim/lie.py) writes these equations with
 * 6×6 matrices and Pinocchio's log6; this kernel evaluates them with its own float schedule: the rank-one
 * forms of dexp (docs/theory/lie.md) applied to vectors with no 6×6 matrix and no solve, the coefficient
 * series truncated per tier where the dropped tail is below 2⁻⁶⁴ |f|, the rotation log from the
 * antisymmetric part (kernel_so3_log), exact-zero shortcuts for ω_d = 0, α_d = 0, F_d = 0, plain loops and a
 * 6×6 Cholesky (kernel_cholesky) for the joint space, libm's tanh. It is compiled without fused
 * multiply-add (setup.py). The two agree within the round-off bound SE3LieController._guard_bounds states
 * (tests/test_se3_kernel.py, and the run-time kernel guard, sim/kernels.py).
 *
 * step() returns 0 (τ, diag and the results written), 1 (Λ_b⁻¹ not positive definite: the Cholesky
 * failed) or 2 (a math domain error where Python's math module would raise, e.g. sin(inf)). On 1 and 2
 * cmd.tau and cmd.diag are untouched and the controller runs its Python path for the step (np.linalg.solve
 * there; or the same exception).
 *
 * Results buffer (the controller's properties read it): see RESULTS_LAYOUT below and in the module.
 */
#include "../sim/_kernel_util.h"
#include "../sim/_kernel_math.h"
#include <math.h>
#include <string.h>
#include <structmember.h>

/* ------------------------------------------------------------------------------------------------
 * Coefficient functions of θ (sim.lie.coefficients: α, β, b, c, γ and their f'(θ)/θ)
 * ------------------------------------------------------------------------------------------------ */

/* x = θ² below which the power series in x are used (lie._SERIES_X = 1.5²) */
#define SERIES_X 2.25

/* The series coefficients as exact hex literals (the x^k terms of sim.lie's series, float.hex();
 * tests/test_se3_kernel.py checks jacobian_coeffs against sim.lie.coefficients on both sides of the switch).
 * X_TIERS: x below which n + 1 series terms suffice (n = 1 … 13); 14 terms above the last. */
static const double X_TIERS[13] = {
    0x1.7fb1390c48b2cp-61, 0x1.2f0d8a5b50f23p-28, 0x1.599c53883d50cp-17, 0x1.2599ed7c6fbd2p-11,
    0x1.906cca2db61bbp-8, 0x1.aee631f8a0903p-6, 0x1.32ca57a786c22p-4, 0x1.4fdf3b645a1cbp-3,
    0x1.34395810624ddp-2, 0x1.f6c8b43958106p-2, 0x1.7645a1cac0831p-1, 0x1.028f5c28f5c29p+0,
    0x1.599999999999ap+0};
/* FUSED_ROWS[k]: the x^k coefficients of (α, β, b, c, γ, α'/θ, β'/θ, b'/θ, c'/θ) */
static const double FUSED_ROWS[14][9] = {
    {0x1.0000000000000p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.5555555555555p-4, -0x1.5555555555555p-4, -0x1.1111111111111p-6, -0x1.6c16c16c16c17p-9, -0x1.a01a01a01a01ap-11},
    {-0x1.5555555555555p-5, -0x1.1111111111111p-7, -0x1.6c16c16c16c17p-10, -0x1.a01a01a01a01ap-12, 0x1.6c16c16c16c17p-10, 0x1.6c16c16c16c17p-8, 0x1.a01a01a01a01ap-11, 0x1.a01a01a01a01ap-14, 0x1.1566abc011567p-15},
    {0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16, 0x1.1566abc011567p-17, 0x1.1566abc011566p-15, -0x1.3813813813814p-13, -0x1.1566abc011567p-16, -0x1.bbd779334ef0ap-20, -0x1.42cb40df7f3abp-21},
    {-0x1.a01a01a01a01ap-16, -0x1.71de3a556c734p-19, -0x1.27e4fb7789f5cp-22, -0x1.ae64567f544e4p-24, 0x1.bbd779334ef0bp-21, 0x1.27e4fb7789f5cp-19, 0x1.ae64567f544e4p-23, 0x1.1eed8eff8d898p-26, 0x1.b96d79892884cp-28},
    {0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.b96d79892884cp-31, 0x1.66a8f2bf70ebep-26, -0x1.66a8f2bf70ebep-26, -0x1.b96d79892884bp-30, -0x1.f87d1d2f09bc4p-34, -0x1.93974a8c07c9dp-35},
    {-0x1.1eed8eff8d898p-29, -0x1.6124613a86d09p-33, -0x1.93974a8c07c9dp-37, -0x1.42df6ed66ca17p-38, 0x1.22805d644267fp-31, 0x1.2eb177e905d76p-33, 0x1.42df6ed66ca17p-37, 0x1.42df6ed66ca17p-41, 0x1.09e52e19ff1b9p-42},
    {0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-41, 0x1.ae7f3e733b81fp-45, 0x1.6286e822a97a1p-46, 0x1.d6db2c4e09163p-37, -0x1.78af56a4d411bp-41, -0x1.6286e822a97a1p-45, -0x1.3b22957424de4p-49, -0x1.09607ddb1192cp-50},
    {-0x1.ae7f3e733b81fp-45, -0x1.952c77030ad4ap-49, -0x1.6827863b97d97p-53, -0x1.2f49b46814157p-54, 0x1.7da4e1f79955cp-42, 0x1.6827863b97d97p-49, 0x1.2f49b46814157p-53, 0x1.e542ba4020225p-58, 0x1.9ff00d5b89420p-59},
    {0x1.6827863b97d97p-53, 0x1.2f49b46814157p-57, 0x1.e542ba4020225p-62, 0x1.9ff00d5b89420p-63, 0x1.355871d652e9ep-47, -0x1.10f588c412135p-57, -0x1.9ff00d5b89420p-62, -0x1.2e8009b6ef75dp-66, -0x1.070b29d6b9f72p-67},
    {-0x1.e542ba4020225p-62, -0x1.71b8ef6dcf572p-66, -0x1.0ce396db7f853p-70, -0x1.d3a2117dbc620p-72, 0x1.f57d968caacf1p-53, 0x1.501c7c925f668p-66, 0x1.d3a2117dbc620p-71, 0x1.37c160fe7d96bp-75, 0x1.125840dff3a35p-76},
    {0x1.0ce396db7f853p-70, 0x1.761b41316381ap-75, 0x1.f2cf01972f578p-80, 0x1.b6f39affec388p-81, 0x1.967e1f09c376fp-58, -0x1.56ee5117f08c2p-75, -0x1.b6f39affec388p-80, -0x1.0e1fc1d8915dep-84, -0x1.e038750f3b518p-86},
    {-0x1.f2cf01972f578p-80, -0x1.3f3ccdd165fa9p-84, -0x1.88e85fc6a4e5ap-89, -0x1.5d40552259afap-90, 0x1.497d9033a2b5dp-63, 0x1.26ae47d4fbac4p-84, 0x1.5d40552259afap-89, 0x1.8f24f394f8c8cp-94, 0x1.65da821ba1414p-95},
    {0x1.88e85fc6a4e5ap-89, 0x1.d1ab1c2dccea3p-94, 0x1.0a18a2635085dp-98, 0x1.dd235824d701ap-100, 0x1.0b132d7c6ad06p-68, -0x1.b06807e162d97p-94, -0x1.dd235824d7019p-99, -0x1.fcf280274bbd7p-104, -0x1.cbb1be12fa168p-105},
    {-0x1.0a18a2635085dp-98, -0x1.259f98b4358adp-103, -0x1.3932c5047d60ep-108, -0x1.1ae388a937705p-109, 0x1.b0f72d59f1c17p-74, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0},
};

/* Status codes of step() */
#define ST_OK 0
#define ST_NOT_SPD 1 /* Λ_b⁻¹ not positive definite (Cholesky pivot ≤ 0 or NaN) */
#define ST_DOMAIN 2  /* where Python raises: math.sin(±inf), math.sqrt(< 0), float division by 0 */

/* k = (α, β, b, c, γ, α'/θ, β'/θ, b'/θ, c'/θ) at x = θ² (sim.lie.coefficients), with
 *   α = (1 − cos θ)/θ²,  β = (θ − sin θ)/θ³,  b = (θ² + 2cos θ − 2)/(2θ⁴),
 *   c = (2θ − 3 sin θ + θ cos θ)/(2θ⁵),  γ = (1 − (θ/2) cot(θ/2))/θ²,  primes = d/dθ.
 * Series in x below θ = 1.5 with only the terms that matter at this x (Horner from the row of x^(n−1)),
 * the closed forms above. Returns ST_DOMAIN where Python's math.sin/cos would raise (θ = inf). */
static int jacobian_coeffs(double x, double *k) {
    if (x < SERIES_X) {
        /* n = bisect_right(X_TIERS, x) + 1 (the tiers are sorted; x is not NaN here) */
        int n = 1;
        for (int i = 0; i < 13; i++)
            if (!(x < X_TIERS[i])) n++;
        const double *row = FUSED_ROWS[n - 1];
        double al = row[0], be = row[1], b = row[2], c = row[3], g = row[4];
        double dal = row[5], dbe = row[6], db = row[7], dc = row[8];
        for (int r = n - 2; r >= 0; r--) {
            const double *q = FUSED_ROWS[r];
            al = al * x + q[0];
            be = be * x + q[1];
            b = b * x + q[2];
            c = c * x + q[3];
            g = g * x + q[4];
            dal = dal * x + q[5];
            dbe = dbe * x + q[6];
            db = db * x + q[7];
            dc = dc * x + q[8];
        }
        k[0] = al; k[1] = be; k[2] = b; k[3] = c; k[4] = g;
        k[5] = dal; k[6] = dbe; k[7] = db; k[8] = dc;
        return ST_OK;
    }
    double th = sqrt(x);
    if (isinf(th)) return ST_DOMAIN; /* math.sin(inf) raises ValueError */
    double s = sin(th), co = cos(th);
    double sinc = s / th, al = (1.0 - co) / x, be = (th - s) / (x * th);
    double b = (1.0 - 2.0 * al) / (2.0 * x);
    double c = (3.0 * be - al) / (2.0 * x);
    double half = 0.5 * th;
    double g = (1.0 - half * cos(half) / sin(half)) / x;
    double dal = (sinc - 2.0 * al) / x;
    double dbe = (al - 3.0 * be) / x;
    double db = -(dal + 2.0 * b) / x;
    double dc = (0.5 * (3.0 * dbe - dal) - 2.0 * c) / x;
    k[0] = al; k[1] = be; k[2] = b; k[3] = c; k[4] = g;
    k[5] = dal; k[6] = dbe; k[7] = db; k[8] = dc;
    return ST_OK;
}


/* λ = log T = [ρ; φ] of T = [[R, p], [0, 1]] (R by rows, then p; sim.lie.se3_log), φ = log R,
 * ρ = J_l3(φ)⁻¹ p = p − ½ φ × p + γ φ × (φ × p); co = the jacobian_coeffs of θ = |φ|. */
static int se3_log(const double *t, double *lam, double *co) {
    double w[3];
    int st = kernel_so3_log(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], w) ? ST_DOMAIN : ST_OK;
    if (st) return st;
    double w0 = w[0], w1 = w[1], w2 = w[2], p0 = t[9], p1 = t[10], p2 = t[11];
    st = jacobian_coeffs(w0 * w0 + w1 * w1 + w2 * w2, co);
    if (st) return st;
    double g = co[4];
    double c0 = w1 * p2 - w2 * p1, c1 = w2 * p0 - w0 * p2, c2 = w0 * p1 - w1 * p0;
    double d0 = w1 * c2 - w2 * c1, d1 = w2 * c0 - w0 * c2, d2 = w0 * c1 - w1 * c0;
    lam[0] = p0 - 0.5 * c0 + g * d0;
    lam[1] = p1 - 0.5 * c1 + g * d1;
    lam[2] = p2 - 0.5 * c2 + g * d2;
    lam[3] = w0;
    lam[4] = w1;
    lam[5] = w2;
    return ST_OK;
}

/* ------------------------------------------------------------------------------------------------
 * dexp (sim.lie.dexp): the SE(3) right Jacobian at λ = [ρ; φ] in rank-one form
 *   dexp = [[J_r3, B], [0, J_r3]],  J_r3 = j I − α φ^ + β φ φᵀ,  B = u^ + β (ρ φᵀ + φ ρᵀ) + e φ φᵀ + f I
 * ------------------------------------------------------------------------------------------------ */

typedef struct {
    double r0, r1, r2, p0, p1, p2; /* ρ, φ */
    double x;                      /* θ² = |φ|² */
    double k[9];                   /* jacobian_coeffs(x) */
    double j, d, u0, u1, u2, e, f;
} Dexp;

/* the rank-one terms of dexp at λ = (r0, r1, r2, p0, p1, p2) from the coefficients of θ = |φ| */
static void dexp_set(Dexp *J, double r0, double r1, double r2, double p0, double p1, double p2,
                     const double *co) {
    double x = p0 * p0 + p1 * p1 + p2 * p2;
    memcpy(J->k, co, 9 * sizeof(double));
    double be = co[1], b = co[2], c = co[3];
    double d = p0 * r0 + p1 * r1 + p2 * r2;
    double ku = b * x - 0.5;
    double kp = (be - 2.0 * b) * d;
    J->r0 = r0; J->r1 = r1; J->r2 = r2;
    J->p0 = p0; J->p1 = p1; J->p2 = p2;
    J->x = x;
    J->j = 1.0 - be * x; /* J_r3 = j I − α φ^ + β φ φᵀ */
    J->d = d;
    J->u0 = ku * r0 + kp * p0;
    J->u1 = ku * r1 + kp * p1;
    J->u2 = ku * r2 + kp * p2;
    J->e = -2.0 * c * d;
    J->f = 2.0 * d * (c * x - be);
}

/* sol = dexp⁻¹ y (ω' = J⁻¹ y_ω, v' = J⁻¹ (y_v − B ω'),
 * J⁻¹ z = z + ½ φ × z + γ φ × (φ × z)) and tr = dexpᵀ w = [Jᵀ w_v; Bᵀ w_v + Jᵀ w_ω]. */
static void dexp_solve_tmul(const Dexp *J, const double *y, const double *w, double *sol, double *tr) {
    const double y0 = y[0], y1 = y[1], y2 = y[2], y3 = y[3], y4 = y[4], y5 = y[5];
    const double w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
    const double r0 = J->r0, r1 = J->r1, r2 = J->r2, p0 = J->p0, p1 = J->p1, p2 = J->p2;
    const double u0 = J->u0, u1 = J->u1, u2 = J->u2;
    const double al = J->k[0], be = J->k[1], g = J->k[4];
    const double j = J->j, e = J->e, f = J->f;
    /* ω' = J⁻¹ y_ω */
    double c0 = p1 * y5 - p2 * y4, c1 = p2 * y3 - p0 * y5, c2 = p0 * y4 - p1 * y3;
    double o0 = y3 + 0.5 * c0 + g * (p1 * c2 - p2 * c1);
    double o1 = y4 + 0.5 * c1 + g * (p2 * c0 - p0 * c2);
    double o2 = y5 + 0.5 * c2 + g * (p0 * c1 - p1 * c0);
    /* B ω' = u × ω' + (β φ·ω') ρ + (β ρ·ω' + e φ·ω') φ + f ω' */
    double po = p0 * o0 + p1 * o1 + p2 * o2;
    double kr = be * po;
    double kp = be * (r0 * o0 + r1 * o1 + r2 * o2) + e * po;
    double z0 = y0 - ((u1 * o2 - u2 * o1) + kr * r0 + kp * p0 + f * o0);
    double z1 = y1 - ((u2 * o0 - u0 * o2) + kr * r1 + kp * p1 + f * o1);
    double z2 = y2 - ((u0 * o1 - u1 * o0) + kr * r2 + kp * p2 + f * o2);
    c0 = p1 * z2 - p2 * z1;
    c1 = p2 * z0 - p0 * z2;
    c2 = p0 * z1 - p1 * z0;
    sol[0] = z0 + 0.5 * c0 + g * (p1 * c2 - p2 * c1);
    sol[1] = z1 + 0.5 * c1 + g * (p2 * c0 - p0 * c2);
    sol[2] = z2 + 0.5 * c2 + g * (p0 * c1 - p1 * c0);
    sol[3] = o0;
    sol[4] = o1;
    sol[5] = o2;
    /* Jᵀ z = j z + α φ × z + β (φ·z) φ,  Bᵀ z = −u × z + (β φ·z) ρ + (β ρ·z + e φ·z) φ + f z */
    double pv = p0 * w0 + p1 * w1 + p2 * w2;
    double bv = be * pv;
    kp = be * (p0 * w3 + p1 * w4 + p2 * w5 + r0 * w0 + r1 * w1 + r2 * w2) + e * pv;
    tr[0] = j * w0 + al * (p1 * w2 - p2 * w1) + bv * p0;
    tr[1] = j * w1 + al * (p2 * w0 - p0 * w2) + bv * p1;
    tr[2] = j * w2 + al * (p0 * w1 - p1 * w0) + bv * p2;
    tr[3] = j * w3 + f * w0 + al * (p1 * w5 - p2 * w4) - (u1 * w2 - u2 * w1) + kp * p0 + bv * r0;
    tr[4] = j * w4 + f * w1 + al * (p2 * w3 - p0 * w5) - (u2 * w0 - u0 * w2) + kp * p1 + bv * r1;
    tr[5] = j * w5 + f * w2 + al * (p0 * w4 - p1 * w3) - (u0 * w1 - u1 * w0) + kp * p2 + bv * r2;
}

/* out = dexp y − (d/dt dexp) λ̇ for the rate λ̇ = (s, q) = (ρ̇, φ̇):
 *   top    = j y_v + f y_ω + c_p φ + c_r ρ − c_q q − c_s s
 *            + φ × (α̇ s − α y_v − k̇_p q) + u × y_ω + q × (k̇_u ρ + (k_u + α) s)
 *   bottom = j y_ω + c_r φ − c_s q + φ × (α̇ q − α y_ω)
 * with ḟ(θ) = (f'/θ)(φ·φ̇) for every coefficient function f. */
static void dexp_mul_minus_dot(const Dexp *J, const double *y, const double *rate, double *out) {
    const double y0 = y[0], y1 = y[1], y2 = y[2], y3 = y[3], y4 = y[4], y5 = y[5];
    const double s0 = rate[0], s1 = rate[1], s2 = rate[2], q0 = rate[3], q1 = rate[4], q2 = rate[5];
    const double r0 = J->r0, r1 = J->r1, r2 = J->r2, p0 = J->p0, p1 = J->p1, p2 = J->p2;
    const double u0 = J->u0, u1 = J->u1, u2 = J->u2;
    const double al = J->k[0], be = J->k[1], b = J->k[2], c = J->k[3];
    double dal = J->k[5], dbe = J->k[6], db = J->k[7], dc = J->k[8];
    const double x = J->x, d = J->d, j = J->j, e = J->e, f = J->f;
    /* time derivatives of the scalars: θθ̇ = φ·φ̇ */
    double rr = p0 * q0 + p1 * q1 + p2 * q2;
    double dx = 2.0 * rr;
    dal *= rr;
    dbe *= rr;
    db *= rr;
    dc *= rr;
    double g = -(dbe * x + be * dx);                                   /* dj/dt */
    double dd = p0 * s0 + p1 * s1 + p2 * s2 + r0 * q0 + r1 * q1 + r2 * q2; /* ḋ = φ·ρ̇ + ρ·φ̇ */
    double ku = b * x - 0.5, dku = db * x + b * dx;
    double dkp = (dbe - 2.0 * db) * d + (be - 2.0 * b) * dd;
    double de = -2.0 * (dc * d + c * dd);
    double df = 2.0 * dd * (c * x - be) + 2.0 * d * (dc * x + c * dx - dbe);
    /* dot products: φ·y_ω, ρ̇·φ̇, |φ̇|² */
    double pw = p0 * y3 + p1 * y4 + p2 * y5;
    double sq = s0 * q0 + s1 * q1 + s2 * q2;
    double qq = q0 * q0 + q1 * q1 + q2 * q2;
    /* coefficients of φ, ρ, φ̇, ρ̇ */
    double c_r = be * pw - dbe * rr - be * qq;
    double c_p = be * (p0 * y0 + p1 * y1 + p2 * y2 + r0 * y3 + r1 * y4 + r2 * y5) + e * pw - dbe * dd -
                 2.0 * be * sq - de * rr - e * qq;
    double c_q = be * dd + e * rr + df;
    double c_s = g + be * rr;
    /* the vectors crossed: a (with φ, top), h (with q, top), m (with φ, bottom) */
    double ks = ku + al;
    double a0 = dal * s0 - al * y0 - dkp * q0, a1 = dal * s1 - al * y1 - dkp * q1,
           a2 = dal * s2 - al * y2 - dkp * q2;
    double h0 = dku * r0 + ks * s0, h1 = dku * r1 + ks * s1, h2 = dku * r2 + ks * s2;
    double m0 = dal * q0 - al * y3, m1 = dal * q1 - al * y4, m2 = dal * q2 - al * y5;
    out[0] = j * y0 + f * y3 + c_p * p0 + c_r * r0 - c_q * q0 - c_s * s0 + (p1 * a2 - p2 * a1) +
             (u1 * y5 - u2 * y4) + (q1 * h2 - q2 * h1);
    out[1] = j * y1 + f * y4 + c_p * p1 + c_r * r1 - c_q * q1 - c_s * s1 + (p2 * a0 - p0 * a2) +
             (u2 * y3 - u0 * y5) + (q2 * h0 - q0 * h2);
    out[2] = j * y2 + f * y5 + c_p * p2 + c_r * r2 - c_q * q2 - c_s * s2 + (p0 * a1 - p1 * a0) +
             (u0 * y4 - u1 * y3) + (q0 * h1 - q1 * h0);
    out[3] = j * y3 + c_r * p0 - c_s * q0 + (p1 * m2 - p2 * m1);
    out[4] = j * y4 + c_r * p1 - c_s * q1 + (p2 * m0 - p0 * m2);
    out[5] = j * y5 + c_r * p2 - c_s * q2 + (p0 * m1 - p1 * m0);
}

/* ------------------------------------------------------------------------------------------------
 * Desired motion (planners/motion_reference.py _body_motion)
 * ------------------------------------------------------------------------------------------------ */

/* flat = Reference.flat = [p, ṗ, p̈, R row-major, ω, α] (world axes) → T_d (rows of R, then p),
 * V_d = [Rᵀ ṗ; Rᵀ ω], V̇_d = [Rᵀ p̈ − ω_b × v_b; Rᵀ α]; for ω = α = 0 exactly (fixed-orientation
 * planners) the angular parts are the literal zeros of the Python shortcut. */
static void body_motion(const double *flat, double *Td, double *Vd, double *dVd) {
    const double p0 = flat[0], p1 = flat[1], p2 = flat[2];
    const double a0 = flat[3], a1 = flat[4], a2 = flat[5];
    const double c0 = flat[6], c1 = flat[7], c2 = flat[8];
    const double r00 = flat[9], r01 = flat[10], r02 = flat[11], r10 = flat[12], r11 = flat[13],
                 r12 = flat[14], r20 = flat[15], r21 = flat[16], r22 = flat[17];
    const double b0 = flat[18], b1 = flat[19], b2 = flat[20];
    const double e0 = flat[21], e1 = flat[22], e2 = flat[23];
    Td[0] = r00; Td[1] = r01; Td[2] = r02; Td[3] = r10; Td[4] = r11; Td[5] = r12;
    Td[6] = r20; Td[7] = r21; Td[8] = r22; Td[9] = p0; Td[10] = p1; Td[11] = p2;
    /* Rᵀ x: column k of R dotted with x */
    double v0 = r00 * a0 + r10 * a1 + r20 * a2;
    double v1 = r01 * a0 + r11 * a1 + r21 * a2;
    double v2 = r02 * a0 + r12 * a1 + r22 * a2;
    double g0 = r00 * c0 + r10 * c1 + r20 * c2;
    double g1 = r01 * c0 + r11 * c1 + r21 * c2;
    double g2 = r02 * c0 + r12 * c1 + r22 * c2;
    if (!(b0 != 0.0 || b1 != 0.0 || b2 != 0.0 || e0 != 0.0 || e1 != 0.0 || e2 != 0.0)) {
        Vd[0] = v0; Vd[1] = v1; Vd[2] = v2; Vd[3] = 0.0; Vd[4] = 0.0; Vd[5] = 0.0;
        dVd[0] = g0; dVd[1] = g1; dVd[2] = g2; dVd[3] = 0.0; dVd[4] = 0.0; dVd[5] = 0.0;
        return;
    }
    double w0 = r00 * b0 + r10 * b1 + r20 * b2;
    double w1 = r01 * b0 + r11 * b1 + r21 * b2;
    double w2 = r02 * b0 + r12 * b1 + r22 * b2;
    Vd[0] = v0; Vd[1] = v1; Vd[2] = v2; Vd[3] = w0; Vd[4] = w1; Vd[5] = w2;
    dVd[0] = g0 - (w1 * v2 - w2 * v1);
    dVd[1] = g1 - (w2 * v0 - w0 * v2);
    dVd[2] = g2 - (w0 * v1 - w1 * v0);
    dVd[3] = r00 * e0 + r10 * e1 + r20 * e2;
    dVd[4] = r01 * e0 + r11 * e1 + r21 * e2;
    dVd[5] = r02 * e0 + r12 * e1 + r22 * e2;
}

/* ------------------------------------------------------------------------------------------------
 * Results buffer layout (float64, owned by the controller; SE3LieController reads it through views)
 * ------------------------------------------------------------------------------------------------ */
#define R_TT 0     /* T̃ = T⁻¹T_d: rows of R̃ (9), then p̃ (3) */
#define R_LAM 12   /* λ = log T̃ */
#define R_LAMD 18  /* λ̇ = dexp⁻¹_λ Ṽ */
#define R_L2 24    /* λ̈* = A⁻¹(γ − Dλ̇ − Kλ) */
#define R_VERR 30  /* Ṽ = Ad_T̃ V_d − V */
#define R_FERR 36  /* F̃ = Ad_T̃⁻ᵀ F_d − F_body */
#define R_GAMMA 42 /* γ = dexp_λᵀ F̃ */
#define R_DVREF 48 /* V̇_ref */
#define R_TD 54    /* T_d: rows of R_d (9), then p_d (3) */
#define R_VD 66    /* V_d */
#define R_DVD 72   /* V̇_d */
#define R_Y 78     /* y = Λ_b (V̇_ref − J̇_b q̇ + d_null V) */
#define R_HEAD 84  /* then q̇ (nv) and M⁻¹J_bᵀ (nv × 6, row-major): 84 + 7 nv floats in all */

/* Gains and constant parameters of the law */
typedef struct {
    int diag;        /* 1: diagonal A⁻¹, A⁻¹D, A⁻¹K (gd), 0: full G */
    double gd[18];   /* diagonals of A⁻¹, A⁻¹D, A⁻¹K */
    const double *G; /* (6, 18) [A⁻¹, −A⁻¹D, −A⁻¹K], element (i, j) at G[i g_rs + j g_cs] */
    Py_ssize_t g_rs, g_cs;
    int has_Fd;
    double Fd[6]; /* F_d = [f; n] in the desired frame */
} LawParams;

/* The law's gains by name (SE3LieConfig's keys and what SE3LieController derives from them,
 * docs/theory/se3_lie.md; SE3LieController._config_gains builds the mapping; kernel_read_fields fills this
 * struct from it by these names). The full gain matrix G = [A⁻¹, −A⁻¹D, −A⁻¹K] is an array the kernel reads
 * in place (G); the diagonals below are used instead when all three matrices are diagonal. */
typedef struct {
    int diagonal;              /* 1: A⁻¹, A⁻¹D, A⁻¹K are diagonal (the diagonals below), 0: the full G */
    double a_inv[6];           /* diagonal of A⁻¹ */
    double a_inv_d[6];         /* diagonal of A⁻¹D */
    double a_inv_k[6];         /* diagonal of A⁻¹K */
    double wrench_desired[6];  /* F_d = [f; n] in the desired frame [N; N·m] */
    int has_wrench_desired;    /* F_d ≠ 0 */
    double d_null;             /* null-space joint damping [1/s] */
} SE3Gains;

static const KernelField SE3_GAINS[] = {
    KERNEL_FIELD_BOOL(SE3Gains, "diagonal", diagonal),
    KERNEL_FIELD_ARRAY(SE3Gains, "a_inv", a_inv, 6),
    KERNEL_FIELD_ARRAY(SE3Gains, "a_inv_d", a_inv_d, 6),
    KERNEL_FIELD_ARRAY(SE3Gains, "a_inv_k", a_inv_k, 6),
    KERNEL_FIELD_ARRAY(SE3Gains, "wrench_desired", wrench_desired, 6),
    KERNEL_FIELD_BOOL(SE3Gains, "has_wrench_desired", has_wrench_desired),
    KERNEL_FIELD_F64(SE3Gains, "d_null", d_null),
};
#define N_SE3_GAINS ((int)(sizeof(SE3_GAINS) / sizeof(SE3_GAINS[0])))

/* SE3LieController._law: T (the top 3 rows of T_world_ee, row-major), V, T_d (12: rows of R_d, p_d), V_d, F_body, V̇_d →
 * res[R_TT … R_DVREF + 6). Returns ST_OK or ST_DOMAIN. */
static int law(const LawParams *P, const double *T, const double *V, const double *Td, const double *Vd,
               const double *F, const double *dVd, double *res) {
    const double a00 = T[0], a01 = T[1], a02 = T[2], a03 = T[3];
    const double a10 = T[4], a11 = T[5], a12 = T[6], a13 = T[7];
    const double a20 = T[8], a21 = T[9], a22 = T[10], a23 = T[11];
    const double b00 = Td[0], b01 = Td[1], b02 = Td[2], b10 = Td[3], b11 = Td[4], b12 = Td[5];
    const double b20 = Td[6], b21 = Td[7], b22 = Td[8], b03 = Td[9], b13 = Td[10], b23 = Td[11];
    /* T̃ = T⁻¹ T_d:  R̃ = Rᵀ R_d,  p̃ = Rᵀ (p_d − p) */
    double *Tt = res + R_TT;
    const double t00 = a00 * b00 + a10 * b10 + a20 * b20;
    const double t01 = a00 * b01 + a10 * b11 + a20 * b21;
    const double t02 = a00 * b02 + a10 * b12 + a20 * b22;
    const double t10 = a01 * b00 + a11 * b10 + a21 * b20;
    const double t11 = a01 * b01 + a11 * b11 + a21 * b21;
    const double t12 = a01 * b02 + a11 * b12 + a21 * b22;
    const double t20 = a02 * b00 + a12 * b10 + a22 * b20;
    const double t21 = a02 * b01 + a12 * b11 + a22 * b21;
    const double t22 = a02 * b02 + a12 * b12 + a22 * b22;
    const double e0 = b03 - a03, e1 = b13 - a13, e2 = b23 - a23;
    const double p0 = a00 * e0 + a10 * e1 + a20 * e2;
    const double p1 = a01 * e0 + a11 * e1 + a21 * e2;
    const double p2 = a02 * e0 + a12 * e1 + a22 * e2;
    Tt[0] = t00; Tt[1] = t01; Tt[2] = t02; Tt[3] = t10; Tt[4] = t11; Tt[5] = t12;
    Tt[6] = t20; Tt[7] = t21; Tt[8] = t22; Tt[9] = p0; Tt[10] = p1; Tt[11] = p2;

    /* λ = log T̃ with the coefficients of θ = |φ| (even in θ: they also serve dexp_λ = lie.dexp(−λ)) */
    double *lam = res + R_LAM;
    double co[9];
    int st = se3_log(Tt, lam, co);
    if (st) return st;
    const double l0 = lam[0], l1 = lam[1], l2 = lam[2], l3 = lam[3], l4 = lam[4], l5 = lam[5];
    Dexp jac;
    dexp_set(&jac, -l0, -l1, -l2, -l3, -l4, -l5, co);

    /* Ad_T̃ V_d = [R̃ v_d + p̃ × (R̃ ω_d); R̃ ω_d] =: [a; b];  Ṽ = Ad_T̃ V_d − V */
    const double vd0 = Vd[0], vd1 = Vd[1], vd2 = Vd[2], wd0 = Vd[3], wd1 = Vd[4], wd2 = Vd[5];
    double a0 = t00 * vd0 + t01 * vd1 + t02 * vd2;
    double a1 = t10 * vd0 + t11 * vd1 + t12 * vd2;
    double a2 = t20 * vd0 + t21 * vd1 + t22 * vd2;
    const double u0 = V[0], u1 = V[1], u2 = V[2], u3 = V[3], u4 = V[4], u5 = V[5];
    double *verr = res + R_VERR;
    /* ω_d ≠ 0 (else b = 0 exactly: fixed-orientation planners; Python's `w0 or w1 or w2`) */
    const int rot_d = (wd0 != 0.0 || wd1 != 0.0 || wd2 != 0.0);
    double b0 = 0.0, b1 = 0.0, b2 = 0.0;
    if (rot_d) {
        b0 = t00 * wd0 + t01 * wd1 + t02 * wd2;
        b1 = t10 * wd0 + t11 * wd1 + t12 * wd2;
        b2 = t20 * wd0 + t21 * wd1 + t22 * wd2;
        a0 += p1 * b2 - p2 * b1;
        a1 += p2 * b0 - p0 * b2;
        a2 += p0 * b1 - p1 * b0;
        verr[0] = a0 - u0; verr[1] = a1 - u1; verr[2] = a2 - u2;
        verr[3] = b0 - u3; verr[4] = b1 - u4; verr[5] = b2 - u5;
    } else {
        verr[0] = a0 - u0; verr[1] = a1 - u1; verr[2] = a2 - u2;
        verr[3] = -u3; verr[4] = -u4; verr[5] = -u5;
    }

    /* F̃ = Ad_T̃⁻ᵀ F_d − F_body,  Ad_T̃⁻ᵀ [f; n] = [R̃ f; p̃ × (R̃ f) + R̃ n] */
    const double f0 = F[0], f1 = F[1], f2 = F[2], n0 = F[3], n1 = F[4], n2 = F[5];
    double *ferr = res + R_FERR;
    if (P->has_Fd) {
        const double g0 = P->Fd[0], g1 = P->Fd[1], g2 = P->Fd[2], h0 = P->Fd[3], h1 = P->Fd[4], h2 = P->Fd[5];
        const double c0 = t00 * g0 + t01 * g1 + t02 * g2;
        const double c1 = t10 * g0 + t11 * g1 + t12 * g2;
        const double c2 = t20 * g0 + t21 * g1 + t22 * g2;
        ferr[0] = c0 - f0;
        ferr[1] = c1 - f1;
        ferr[2] = c2 - f2;
        ferr[3] = t00 * h0 + t01 * h1 + t02 * h2 + (p1 * c2 - p2 * c1) - n0;
        ferr[4] = t10 * h0 + t11 * h1 + t12 * h2 + (p2 * c0 - p0 * c2) - n1;
        ferr[5] = t20 * h0 + t21 * h1 + t22 * h2 + (p0 * c1 - p1 * c0) - n2;
    } else {
        ferr[0] = -f0; ferr[1] = -f1; ferr[2] = -f2; ferr[3] = -n0; ferr[4] = -n1; ferr[5] = -n2;
    }

    /* λ̇ = dexp⁻¹_λ Ṽ and γ = dexp_λᵀ F̃ */
    double *lamd = res + R_LAMD, *gam = res + R_GAMMA;
    dexp_solve_tmul(&jac, verr, ferr, lamd, gam);

    /* λ̈* = A⁻¹γ − A⁻¹D λ̇ − A⁻¹K λ */
    double *l2s = res + R_L2;
    if (P->diag) {
        const double *i = P->gd, *dg = P->gd + 6, *kg = P->gd + 12;
        for (int r = 0; r < 6; r++) l2s[r] = i[r] * gam[r] - dg[r] * lamd[r] - kg[r] * lam[r];
    } else { /* full matrices: [A⁻¹, −A⁻¹D, −A⁻¹K] [γ; λ̇; λ] (Python: BLAS, round-off only) */
        double buf[18];
        for (int r = 0; r < 6; r++) {
            buf[r] = gam[r];
            buf[6 + r] = lamd[r];
            buf[12 + r] = lam[r];
        }
        for (int r = 0; r < 6; r++) {
            const double *Gr = P->G + r * P->g_rs;
            double s = 0.0;
            for (int c = 0; c < 18; c++) s += Gr[c * P->g_cs] * buf[c];
            l2s[r] = s;
        }
    }

    /* dṼ* = dexp_λ λ̈* + (d/dt dexp_λ) λ̇ = jac.mul_minus_dot(λ̈*, λ̇) (dexp_dot is odd in the rate) */
    double m[6];
    dexp_mul_minus_dot(&jac, l2s, lamd, m);

    /* V̇_ref = Ad_T̃ V̇_d + ad_Ṽ (Ad_T̃ V_d) − dṼ*,  Ad_T̃ [ȧ; α] = [R̃ ȧ + p̃ × (R̃ α); R̃ α] =: [o; c] */
    const double ea0 = dVd[0], ea1 = dVd[1], ea2 = dVd[2], fa0 = dVd[3], fa1 = dVd[4], fa2 = dVd[5];
    double o0 = t00 * ea0 + t01 * ea1 + t02 * ea2;
    double o1 = t10 * ea0 + t11 * ea1 + t12 * ea2;
    double o2 = t20 * ea0 + t21 * ea1 + t22 * ea2;
    double c0, c1, c2;
    if (fa0 != 0.0 || fa1 != 0.0 || fa2 != 0.0) { /* α_d ≠ 0 (else c = 0 exactly) */
        c0 = t00 * fa0 + t01 * fa1 + t02 * fa2;
        c1 = t10 * fa0 + t11 * fa1 + t12 * fa2;
        c2 = t20 * fa0 + t21 * fa1 + t22 * fa2;
        o0 += p1 * c2 - p2 * c1;
        o1 += p2 * c0 - p0 * c2;
        o2 += p0 * c1 - p1 * c0;
        c0 = c0 - m[3];
        c1 = c1 - m[4];
        c2 = c2 - m[5];
    } else {
        c0 = -m[3];
        c1 = -m[4];
        c2 = -m[5];
    }
    /* ad_Ṽ [a; b] = [ω × a + v × b; ω × b] with Ṽ = [v; ω] (b = 0 unless ω_d ≠ 0) */
    const double v0 = verr[0], v1 = verr[1], v2 = verr[2], w0 = verr[3], w1 = verr[4], w2 = verr[5];
    double *out = res + R_DVREF;
    if (rot_d) {
        out[0] = (o0 - m[0]) + (w1 * a2 - w2 * a1 + v1 * b2 - v2 * b1);
        out[1] = (o1 - m[1]) + (w2 * a0 - w0 * a2 + v2 * b0 - v0 * b2);
        out[2] = (o2 - m[2]) + (w0 * a1 - w1 * a0 + v0 * b1 - v1 * b0);
        out[3] = c0 + (w1 * b2 - w2 * b1);
        out[4] = c1 + (w2 * b0 - w0 * b2);
        out[5] = c2 + (w0 * b1 - w1 * b0);
    } else {
        out[0] = (o0 - m[0]) + (w1 * a2 - w2 * a1);
        out[1] = (o1 - m[1]) + (w2 * a0 - w0 * a2);
        out[2] = (o2 - m[2]) + (w0 * a1 - w1 * a0);
        out[3] = c0;
        out[4] = c1;
        out[5] = c2;
    }
    return ST_OK;
}

/* ------------------------------------------------------------------------------------------------
 * The bound kernel
 * ------------------------------------------------------------------------------------------------ */

enum {
    B_T, B_TWIST, B_JB, B_DJDQ, B_M, B_MINV, B_H, B_V, B_REF, B_DES_T, B_DES_V, B_DES_DV, B_WRENCH, B_TAU,
    B_DIAG, B_RES, B_G, B_FF_F, B_FF_D, B_FF_HALF, B_FF_G, B_FF_STATE, B_FILT, NBUF
};
static const char *BUF_NAMES[NBUF] = {
    "T_world_ee", "twist_ee_body", "J_ee_body", "dJdq_ee_body", "M", "Minv", "h", "v", "ref_flat", "des_T",
    "des_V", "des_dV", "ext_body", "tau", "diag", "results", "G", "ff_f", "ff_d", "ff_half_f", "ff_g", "ff_state",
    "filt_state"};
/* 1: written by step() */
static const int BUF_WRITABLE[NBUF] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1};
/* the matrices (any memory layout: indexed through their strides; the vectors must be contiguous) */
static int is_matrix(int i) { return i == B_T || i == B_JB || i == B_M || i == B_MINV || i == B_DES_T || i == B_G; }

typedef struct {
    PyObject_HEAD
    Py_buffer views[NBUF];
    double *p[NBUF];
    int ready; /* all buffers bound (step() refuses to run otherwise) */
    int nv;
    Py_ssize_t rs[NBUF], cs[NBUF]; /* element strides (row, column) of the matrices */
    LawParams law;
    double d_null;
    int passthrough;       /* desired motion from des_T/des_V/des_dV, else from ref_flat */
    int ff_mode;           /* 0 inactive, 1 torque, 2 velocity, 3 hybrid */
    int ff_damping;        /* add d q̇ */
    double ff_vel_eps;     /* velocity scale of the smooth sign (VELOCITY_EPS) */
    double ff_threshold;   /* hybrid: the contact threshold [N] of the latch */
    double ff_dw;          /* hybrid: T / T_blend */
    int filt_on;           /* force filter on (with force feedback only) */
    double filt_beta;      /* its β */
    double *work;          /* τ (nv) */
} SE3Kernel;

static void SE3Kernel_dealloc(SE3Kernel *self) {
    kernel_release(self->views, NBUF);
    PyMem_Free(self->work);
    self->work = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int SE3Kernel_init(SE3Kernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"T_world_ee", "twist_ee_body", "J_ee_body", "dJdq_ee_body", "M", "Minv", "h", "v",
                             "ref_flat", "des_T", "des_V", "des_dV", "ext_body", "tau", "diag", "results", "G",
                             "ff_f", "ff_d", "ff_half_f", "ff_g", "ff_state", "filt_state", "gains", "passthrough", "ff_mode",
                             "ff_damping", "ff_vel_eps", "ff_threshold", "ff_dw",
                             "filt_on", "filt_beta", NULL};
    PyObject *o[NBUF];
    PyObject *gains;
    SE3Gains g;
    int passthrough, ff_mode, ff_damping, filt_on;
    double ff_vel_eps, ff_threshold, ff_dw, filt_beta;
    self->ready = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOOOOOOOOOOOOOOpipdddpd", kwlist, &o[B_T],
                                     &o[B_TWIST], &o[B_JB], &o[B_DJDQ], &o[B_M], &o[B_MINV], &o[B_H], &o[B_V],
                                     &o[B_REF], &o[B_DES_T], &o[B_DES_V], &o[B_DES_DV], &o[B_WRENCH], &o[B_TAU],
                                     &o[B_DIAG], &o[B_RES], &o[B_G], &o[B_FF_F], &o[B_FF_D], &o[B_FF_HALF], &o[B_FF_G],
                                     &o[B_FF_STATE], &o[B_FILT], &gains, &passthrough,
                                     &ff_mode, &ff_damping, &ff_vel_eps, &ff_threshold, &ff_dw, &filt_on, &filt_beta))
        return -1;
    if (ff_mode < 0 || ff_mode > 3) {
        PyErr_SetString(PyExc_ValueError,
                        "SE3Kernel: ff_mode must be 0 (inactive), 1 (torque), 2 (velocity) or 3 (hybrid)");
        return -1;
    }
    if (kernel_read_fields("SE3Kernel", "gains", gains, SE3_GAINS, N_SE3_GAINS, &g) < 0) return -1;
    LawParams lp;
    memset(&lp, 0, sizeof(lp));
    lp.diag = g.diagonal;
    memcpy(lp.gd, g.a_inv, sizeof(g.a_inv));
    memcpy(lp.gd + 6, g.a_inv_d, sizeof(g.a_inv_d));
    memcpy(lp.gd + 12, g.a_inv_k, sizeof(g.a_inv_k));
    memcpy(lp.Fd, g.wrench_desired, sizeof(g.wrench_desired));
    lp.has_Fd = g.has_wrench_desired;

    /* nv from tau, then every size checked against it */
    Py_buffer probe;
    if (kernel_bind("SE3Kernel", o[B_TAU], &probe, -1, 1, BUF_NAMES[B_TAU]) == NULL) return -1;
    Py_ssize_t nv = probe.len / 8;
    PyBuffer_Release(&probe);
    if (nv < 1 || nv > 1024) {
        PyErr_Format(PyExc_ValueError, "SE3Kernel: tau must hold 1..1024 floats, got %zd", nv);
        return -1;
    }
    /* vectors: number of floats; matrices: rows, cols */
    const Py_ssize_t rows[NBUF] = {4, 6, 6, 6, nv, nv, nv, nv, 24, 4, 6, 6, 6, nv, 6, R_HEAD + 7 * nv, 6, nv, nv, nv, nv,
                                   3, 7};
    const Py_ssize_t cols[NBUF] = {4, 1, nv, 1, nv, nv, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 18, 1, 1, 1, 1, 1, 1};
    kernel_release(self->views, NBUF); /* __init__ called again */
    for (int i = 0; i < NBUF; i++) {
        if (is_matrix(i)) {
            self->p[i] = kernel_bind_matrix("SE3Kernel", o[i], &self->views[i], rows[i], cols[i], 0, BUF_NAMES[i],
                                            &self->rs[i], &self->cs[i]);
        } else {
            self->p[i] = kernel_bind("SE3Kernel", o[i], &self->views[i], rows[i], BUF_WRITABLE[i], BUF_NAMES[i]);
            self->rs[i] = 1;
            self->cs[i] = 1;
        }
        if (self->p[i] == NULL) {
            kernel_release(self->views, NBUF);
            return -1;
        }
    }
    double *work = PyMem_Realloc(self->work, sizeof(double) * (size_t)nv);
    if (work == NULL) {
        kernel_release(self->views, NBUF);
        PyErr_NoMemory();
        return -1;
    }
    self->work = work;
    self->nv = (int)nv;
    lp.G = self->p[B_G];
    lp.g_rs = self->rs[B_G];
    lp.g_cs = self->cs[B_G];
    self->law = lp;
    self->d_null = g.d_null;
    self->passthrough = passthrough;
    self->ff_mode = ff_mode;
    self->ff_damping = ff_damping;
    self->ff_vel_eps = ff_vel_eps;
    self->ff_threshold = ff_threshold;
    self->ff_dw = ff_dw;
    self->filt_on = filt_on;
    self->filt_beta = filt_beta;
    self->ready = 1;
    return 0;
}

static PyObject *SE3Kernel_step(SE3Kernel *self, PyObject *Py_UNUSED(ignored)) {
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "SE3Kernel: not bound (construction failed or was skipped)");
        return NULL;
    }
    double **p = self->p;
    const int nv = self->nv;
    double *res = p[B_RES];
    double *Td = res + R_TD, *Vd = res + R_VD, *dVd = res + R_DVD;

    /* desired motion (T_d, V_d, V̇_d) in the desired body frame */
    if (self->passthrough) { /* MotionReference.T / V / dV as motion_into() wrote them */
        const double *T = p[B_DES_T];
        const Py_ssize_t rs = self->rs[B_DES_T], cs = self->cs[B_DES_T];
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) Td[3 * i + j] = T[i * rs + j * cs]; /* rows of R_d */
            Td[9 + i] = T[i * rs + 3 * cs];                                /* p_d */
        }
        memcpy(Vd, p[B_DES_V], 6 * sizeof(double));
        memcpy(dVd, p[B_DES_DV], 6 * sizeof(double));
    } else {
        body_motion(p[B_REF], Td, Vd, dVd);
    }

    /* the law up to V̇_ref */
    double T[12]; /* the top 3 rows of T_world_ee */
    {
        const double *Tw = p[B_T];
        const Py_ssize_t rs = self->rs[B_T], cs = self->cs[B_T];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) T[4 * i + j] = Tw[i * rs + j * cs];
    }
    const double *V = p[B_TWIST], *F = p[B_WRENCH];
    double filt[7]; /* F̄ and the filter's new state (committed only once the step succeeds) */
    if (self->filt_on) {
        kernel_force_filter(p[B_FILT], self->filt_beta, F, filt, 6);
        filt[6] = 1.0;
        F = filt;
    }
    int st = law(&self->law, T, V, Td, Vd, F, dVd, res);
    if (st) return PyLong_FromLong(st);
    const double *dVref = res + R_DVREF;

    /* joint space: M⁻¹J_bᵀ (nv × 6), Λ_b⁻¹ = J_b M⁻¹ J_bᵀ (one triangle: the factorisation reads one) */
    const double *Jb = p[B_JB], *Minv = p[B_MINV], *M = p[B_M];
    const Py_ssize_t j_rs = self->rs[B_JB], j_cs = self->cs[B_JB];
    const Py_ssize_t mi_rs = self->rs[B_MINV], mi_cs = self->cs[B_MINV], m_rs = self->rs[B_M], m_cs = self->cs[B_M];
    double *MinvJt = res + R_HEAD + nv;
    for (int i = 0; i < nv; i++)
        for (int k = 0; k < 6; k++) {
            double s = 0.0;
            for (int j = 0; j < nv; j++) s += Minv[i * mi_rs + j * mi_cs] * Jb[k * j_rs + j * j_cs];
            MinvJt[6 * i + k] = s;
        }
    double L[36]; /* Λ_b⁻¹ in its lower triangle, then its Cholesky factor */
    for (int a = 0; a < 6; a++)
        for (int b = a; b < 6; b++) {
            double s = 0.0;
            for (int i = 0; i < nv; i++) s += Jb[a * j_rs + i * j_cs] * MinvJt[6 * i + b];
            L[6 * b + a] = s;
        }
    /* rhs = V̇_ref − J̇_b q̇ + d_null V */
    const double dn = self->d_null, *djdq = p[B_DJDQ];
    double y[6];
    if (dn != 0.0) {
        for (int r = 0; r < 6; r++) y[r] = dVref[r] - djdq[r] + dn * V[r];
    } else {
        for (int r = 0; r < 6; r++) y[r] = dVref[r] - djdq[r];
    }
    /* Cholesky Λ_b⁻¹ = L Lᵀ: a pivot ≤ 0 or NaN → not SPD (as dpotrf), nothing written */
    if (kernel_cholesky(L, 6, KERNEL_POSITIVE)) return PyLong_FromLong(ST_NOT_SPD);
    kernel_cholesky_solve(L, 6, y, 1);
    /* τ = h − d_null M q̇ + J_bᵀ (y − F_body) */
    const double *h = p[B_H], *qd = p[B_V];
    double *tau = self->work;
    double yf[6];
    for (int r = 0; r < 6; r++) yf[r] = y[r] - F[r];
    for (int i = 0; i < nv; i++) {
        double t = h[i];
        if (dn != 0.0) {
            double s = 0.0; /* (Mᵀ q̇)_i = (M q̇)_i, M symmetric (Python: dgemv on M.T) */
            for (int j = 0; j < nv; j++) s += M[j * m_rs + i * m_cs] * qd[j];
            t = t - dn * s;
        }
        double s = 0.0;
        for (int r = 0; r < 6; r++) s += Jb[r * j_rs + i * j_cs] * yf[r];
        tau[i] = t + s;
    }
    /* joint dissipation feedforward (controllers/feedforward.py; the hybrid latch on |f̄|) */
    double ff_state[3];
    memcpy(ff_state, p[B_FF_STATE], sizeof(ff_state));
    if (self->ff_mode == 3)
        kernel_feedforward_latch(ff_state, sqrt(F[0] * F[0] + F[1] * F[1] + F[2] * F[2]), self->ff_threshold,
                                 self->ff_dw);
    kernel_feedforward(self->ff_mode, self->ff_damping, self->ff_vel_eps, ff_state[2], p[B_FF_F], p[B_FF_D],
                       p[B_FF_HALF], p[B_FF_G], qd, tau, nv);
    /* commit: torque, diagnostics (λ), y and q̇ for q_ddot_ref, the filter's and the latch's state */
    if (self->filt_on) memcpy(p[B_FILT], filt, sizeof(filt));
    if (self->ff_mode == 3) memcpy(p[B_FF_STATE], ff_state, sizeof(ff_state));
    memcpy(p[B_TAU], tau, (size_t)nv * sizeof(double));
    memcpy(p[B_DIAG], res + R_LAM, 6 * sizeof(double));
    memcpy(res + R_Y, y, 6 * sizeof(double));
    memcpy(res + R_HEAD, qd, (size_t)nv * sizeof(double));
    return PyLong_FromLong(ST_OK);
}

static PyMethodDef SE3Kernel_methods[] = {
    {"step", (PyCFunction)SE3Kernel_step, METH_NOARGS,
     "step() -> int: one control step into the bound arrays; 0 ok, 1 Λ_b⁻¹ not positive definite, 2 math "
     "domain error (on 1 and 2 tau and diag are untouched: run the Python path)."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef SE3Kernel_members[] = {
    {"nv", T_INT, offsetof(SE3Kernel, nv), READONLY, "number of joints"},
    {"passthrough", T_INT, offsetof(SE3Kernel, passthrough), READONLY,
     "1: desired motion read from des_T/des_V/des_dV, 0: converted from ref_flat"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject SE3KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "controllers._se3_kernel.SE3Kernel",
    .tp_basicsize = sizeof(SE3Kernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SE3Kernel(T_world_ee, twist_ee_body, J_ee_body, dJdq_ee_body, M, Minv, h, v, ref_flat, des_T, "
              "des_V, des_dV, ext_body, tau, diag, results, G, ff_f, ff_d, ff_half_f, ff_g, ff_state, filt_state, "
              "gains, passthrough, ff_mode, ff_damping, ff_vel_eps, ff_threshold, ff_dw, "
              "filt_on, filt_beta)\n\n"
              "The SE(3) impedance step bound to one run's arrays (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)SE3Kernel_init,
    .tp_dealloc = (destructor)SE3Kernel_dealloc,
    .tp_methods = SE3Kernel_methods,
    .tp_members = SE3Kernel_members,
};

/* ------------------------------------------------------------------------------------------------
 * Module-level helpers (for tests: the scalar functions on their own)
 * ------------------------------------------------------------------------------------------------ */

static PyObject *domain_error(void) {
    PyErr_SetString(PyExc_ValueError, "math domain error");
    return NULL;
}

static PyObject *py_jacobian_coeffs(PyObject *Py_UNUSED(mod), PyObject *arg) {
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    double k[9];
    if (jacobian_coeffs(x, k)) return domain_error();
    return Py_BuildValue("(ddddddddd)", k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], k[8]);
}

static PyObject *py_se3_log(PyObject *Py_UNUSED(mod), PyObject *args) {
    double t[12];
    if (!PyArg_ParseTuple(args, "dddddddddddd", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8],
                          &t[9], &t[10], &t[11]))
        return NULL;
    double lam[6], co[9];
    if (se3_log(t, lam, co)) return domain_error();
    return Py_BuildValue("((dddddd)(ddddddddd))", lam[0], lam[1], lam[2], lam[3], lam[4], lam[5], co[0], co[1],
                         co[2], co[3], co[4], co[5], co[6], co[7], co[8]);
}

static PyMethodDef module_methods[] = {
    {"jacobian_coeffs", py_jacobian_coeffs, METH_O,
     "jacobian_coeffs(x) -> 9 floats: sim.lie.coefficients(x) as the kernel computes it."},
    {"se3_log", py_se3_log, METH_VARARGS,
     "se3_log(r00, …, r22, p0, p1, p2) -> (λ, coeffs): sim.lie.se3_log and the coefficients of |φ| as the kernel computes them."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_se3_kernel",
                                    "Compiled SE(3) Lie-group impedance step (controllers/se3_lie.py is the "
                                    "reference).",
                                    -1, module_methods};

/* RESULTS_LAYOUT = {name: (offset, length)} of the fixed head of the results buffer */
static int add_layout(PyObject *m) {
    PyObject *d = Py_BuildValue("{s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)s(ii)}", "T_err", R_TT,
                                12, "lam", R_LAM, 6, "lam_dot", R_LAMD, 6, "lam_ddot", R_L2, 6, "V_err", R_VERR, 6,
                                "F_err", R_FERR, 6, "gamma", R_GAMMA, 6, "dV_ref", R_DVREF, 6, "T_d", R_TD, 12,
                                "V_d", R_VD, 6, "dV_d", R_DVD, 6, "y", R_Y, 6);
    if (d == NULL) return -1;
    if (PyModule_AddObject(m, "RESULTS_LAYOUT", d) < 0) {
        Py_DECREF(d);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__se3_kernel(void) {
    PyObject *m = kernel_module(&module, &SE3KernelType, "SE3Kernel");
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "RESULTS_HEAD", R_HEAD) < 0 || add_layout(m) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_OK", ST_OK) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_NOT_SPD", ST_NOT_SPD) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_DOMAIN", ST_DOMAIN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
