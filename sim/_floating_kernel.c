/*
 * Compiled kernel of the free-floating base's base elimination (sim/floating.py, FloatingBaseDynamics;
 * docs/theory/floating_base.md). Python (FloatingBaseDynamics._prepare_python, ._reduce_python) is the
 * reference; the kernel guard compares the two within the round-off bounds of
 * FloatingBaseDynamics._reduce_guard_bounds.
 *
 * FloatingKernel(...) is bound once to: the base's MuJoCo free-joint state (base_qpos [p; quat (w, x, y, z)],
 * base_qvel [ṗ (world); ω (base axes)], views of MjData), the snapshot's q, v (n) and the free-flyer state
 * q_full (n + 7: [p; quat (x, y, z, w); q]) and v_full (n + 6: [Rᵀ ṗ; ω; q̇]); Pinocchio's data.M (nf × nf,
 * upper triangle read), data.nle (nf), the full-state Jacobians J_full (14 × nf: rows 0–5 LOCAL, 6–11
 * LOCAL_WORLD_ALIGNED, from the kinematics kernel), the base placement (data.oMi[1]: R, p), the full-state
 * EE drifts a_lwa, a_body (6) and the gravity vector g_full (nf; read when bound with gravity); it writes the
 * snapshot's J_v_h (rows 0–5 J*, row 7 c*), J_ee_body (J*_body), M (H*), Minv (H*⁻¹), g (g*), dJdq_ee_lwa /
 * dJdq_ee_body (the reduced drifts) and T_world_base.
 *
 *   prepare(): q_full, v_full from the base state and q, v (Rᵀ ṗ = conj(quat) ṗ quat).
 *   reduce():  X = H_b⁻¹ [H_bm | c_b | g_b] (Cholesky of H_b = M[0:6, 0:6]), then
 *              J* = J_m − J_b X_m (both frames), drift* = drift − J_b x_c, H* = H_m − H_bmᵀ X_m (lower
 *              triangle, mirrored), c* = c_m − H_bmᵀ x_c, g* = g_m − H_bmᵀ x_g, H*⁻¹ by Cholesky (lower
 *              triangle, mirrored), the base mobility Λ_b⁻¹ = J_b H_b⁻¹ J_bᵀ (both frames), T_world_base,
 *              and returns w = sqrt(det(J* J*ᵀ)) (0 at rank < 6), or
 *              −1 when H_b or H* is not positive definite (nothing but X and the reduced J, drift, H*, c*
 *              written: the Python path then takes the step and raises its error).
 */
#include "_kernel_util.h"
#include "_kernel_math.h"
#include <math.h>

enum {
    B_QB, B_VB, B_Q, B_V, B_QF, B_VF, B_M, B_H, B_G, B_JF, B_RB, B_PB, B_AL, B_AB,
    B_JVH, B_JB, B_MR, B_MIR, B_GR, B_DL, B_DB, B_TB, B_LL, B_LB, NBUF
};
static const char *BUF_NAMES[NBUF] = {"base_qpos", "base_qvel", "q", "v", "q_full", "v_full", "M_full", "h_full",
                                      "g_full", "J_full", "R_base", "p_base", "a_lwa", "a_body", "J_v_h", "J_ee_body",
                                      "M", "Minv", "g",
                                      "dJdq_ee_lwa", "dJdq_ee_body", "T_world_base", "Lambda_b_inv_lwa",
                                      "Lambda_b_inv_body"};
#define KERNEL "FloatingKernel"
#define NMAX 64

typedef struct {
    PyObject_HEAD
    int bound;
    Py_buffer views[NBUF];
    double *p[NBUF];
    Py_ssize_t rs[NBUF], cs[NBUF];
    int n, nf, body_frame, world_drift, gravity;
} FloatingKernel;

static void FloatingKernel_dealloc(FloatingKernel *self) {
    kernel_release(self->views, NBUF);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *FloatingKernel_prepare(FloatingKernel *self, PyObject *Py_UNUSED(ignored)) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, KERNEL ": not bound");
        return NULL;
    }
    double **b = self->p;
    const double *qb = b[B_QB], *vb = b[B_VB], *q = b[B_Q], *v = b[B_V];
    double *qf = b[B_QF], *vf = b[B_VF];
    const int n = self->n;
    qf[0] = qb[0]; qf[1] = qb[1]; qf[2] = qb[2];
    qf[3] = qb[4]; qf[4] = qb[5]; qf[5] = qb[6]; qf[6] = qb[3];
    for (int i = 0; i < n; i++) qf[7 + i] = q[i];
    /* Rᵀ ṗ with R the rotation of the unit quaternion (w, x, y, z): rotate by the conjugate (w, −x, −y, −z),
     * r' = r + 2 u × (u × r + w r) with u = −(x, y, z) */
    const double w = qb[3], ux = -qb[4], uy = -qb[5], uz = -qb[6];
    const double r0 = vb[0], r1 = vb[1], r2 = vb[2];
    const double t0 = (uy * r2 - uz * r1) + w * r0, t1 = (uz * r0 - ux * r2) + w * r1, t2 = (ux * r1 - uy * r0) + w * r2;
    vf[0] = r0 + 2.0 * (uy * t2 - uz * t1);
    vf[1] = r1 + 2.0 * (uz * t0 - ux * t2);
    vf[2] = r2 + 2.0 * (ux * t1 - uy * t0);
    vf[3] = vb[3]; vf[4] = vb[4]; vf[5] = vb[5];
    for (int i = 0; i < n; i++) vf[6 + i] = v[i];
    Py_RETURN_NONE;
}

static PyObject *FloatingKernel_reduce(FloatingKernel *self, PyObject *Py_UNUSED(ignored)) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, KERNEL ": not bound");
        return NULL;
    }
    double **b = self->p;
    const int n = self->n, nf = self->nf, nx = n + 2;
    const double *M = b[B_M], *h = b[B_H], *g = b[B_G], *JF = b[B_JF];
    const Py_ssize_t mr = self->rs[B_M], mc = self->cs[B_M];
#define MF(i, j) ((i) <= (j) ? M[(i) * mr + (j) * mc] : M[(j) * mr + (i) * mc]) /* upper triangle */
    double Hb[36], X[6 * (NMAX + 2)]; /* H_b's Cholesky factor (kernel_cholesky, sim/_kernel_math.h) */
    for (int i = 0; i < 6; i++)
        for (int j = 0; j <= i; j++) Hb[6 * i + j] = MF(i, j);
    if (kernel_cholesky(Hb, 6, KERNEL_POSITIVE)) return PyFloat_FromDouble(-1.0);
    /* X = H_b⁻¹ [H_bm | c_b | g_b]  (6 × (n + 2), row-major) */
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < n; j++) X[i * nx + j] = MF(i, 6 + j);
        X[i * nx + n] = h[i];
        X[i * nx + n + 1] = self->gravity ? g[i] : 0.0;
    }
    kernel_cholesky_solve(Hb, 6, X, nx);
    /* J* = J_m − J_b X_m, drift* = drift − J_b x_c; J_full rows 0–5 LOCAL, 6–11 LWA */
    double *Jvh = b[B_JVH], *Jb = b[B_JB], *dl = b[B_DL], *db = b[B_DB];
    const double *al = b[B_AL], *ab = b[B_AB];
    for (int r = 0; r < 12; r++) {
        if (r < 6 && !self->body_frame) continue;
        const double *row = JF + r * nf;
        double *out = (r < 6) ? Jb + r * n : Jvh + (r - 6) * n;
        for (int j = 0; j < n; j++) {
            double s = row[6 + j];
            for (int k = 0; k < 6; k++) s -= row[k] * X[k * nx + j];
            out[j] = s;
        }
        double sc = 0.0;
        for (int k = 0; k < 6; k++) sc += row[k] * X[k * nx + n];
        if (r < 6) db[r] = ab[r] - sc;
        else if (self->world_drift) dl[r - 6] = al[r - 6] - sc;
    }
    /* H* = H_m − H_bmᵀ X_m (lower triangle, mirrored), c* = c_m − H_bmᵀ x_c, g* = g_m − H_bmᵀ x_g */
    double *Mr = b[B_MR], *Mir = b[B_MIR], *gr = b[B_GR];
    double *cr = Jvh + 7 * n;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j <= i; j++) {
            double s = MF(6 + i, 6 + j);
            for (int k = 0; k < 6; k++) s -= MF(k, 6 + i) * X[k * nx + j];
            Mr[i * n + j] = s;
            Mr[j * n + i] = s;
        }
        double sc = h[6 + i], sg = self->gravity ? g[6 + i] : 0.0;
        for (int k = 0; k < 6; k++) {
            sc -= MF(k, 6 + i) * X[k * nx + n];
            sg -= MF(k, 6 + i) * X[k * nx + n + 1];
        }
        cr[i] = sc;
        if (self->gravity) gr[i] = sg;
    }
#undef MF
    /* H*⁻¹ by Cholesky: H* X = I solved for all columns, the lower triangle kept and mirrored */
    double L[NMAX * NMAX];
    for (int i = 0; i < n * n; i++) L[i] = Mr[i];
    if (kernel_cholesky(L, n, KERNEL_POSITIVE)) return PyFloat_FromDouble(-1.0);
    for (int i = 0; i < n * n; i++) Mir[i] = (i % (n + 1) == 0) ? 1.0 : 0.0;
    kernel_cholesky_solve(L, n, Mir, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) Mir[j * n + i] = Mir[i * n + j];
    /* the base's own mobility at the EE, Λ_b⁻¹ = J_b H_b⁻¹ J_bᵀ, both frames (J_full rows 6–11 LWA, 0–5 LOCAL) */
    for (int f = 0; f < 2; f++) {
        const double *Jrows = JF + (f == 0 ? 6 : 0) * nf;
        double *Lam = b[f == 0 ? B_LL : B_LB];
        double Z[36]; /* Z = H_b⁻¹ J_bᵀ (6 × 6, row-major): column c = H_b⁻¹ (row c of J_b) */
        for (int c = 0; c < 6; c++)
            for (int k = 0; k < 6; k++) Z[k * 6 + c] = Jrows[c * nf + k];
        kernel_cholesky_solve(Hb, 6, Z, 6);
        for (int r = 0; r < 6; r++)
            for (int c = 0; c < 6; c++) {
                double s = 0.0;
                for (int k = 0; k < 6; k++) s += Jrows[r * nf + k] * Z[k * 6 + c];
                Lam[r * 6 + c] = s;
            }
    }
    /* T_world_base from Pinocchio's oMi[1] */
    double *T = b[B_TB];
    const double *R = b[B_RB], *pb = b[B_PB];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) T[4 * i + j] = R[i * self->rs[B_RB] + j * self->cs[B_RB]];
        T[4 * i + 3] = pb[i];
    }
    /* w = sqrt(det(J* J*ᵀ)) = product of the Cholesky diagonal of J* J*ᵀ */
    double A[36];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c <= r; c++) {
            double s = 0.0;
            for (int j = 0; j < n; j++) s += Jvh[r * n + j] * Jvh[c * n + j];
            A[6 * r + c] = s;
        }
    double w = 1.0;
    for (int j = 0; j < 6; j++) {
        double d = A[7 * j];
        for (int c = 0; c < j; c++) d -= A[6 * j + c] * A[6 * j + c];
        if (d < 1e-300) return PyFloat_FromDouble(0.0);
        d = sqrt(d);
        A[7 * j] = d;
        w *= d;
        for (int i = j + 1; i < 6; i++) {
            double s = A[6 * i + j];
            for (int c = 0; c < j; c++) s -= A[6 * i + c] * A[6 * j + c];
            A[6 * i + j] = s / d;
        }
    }
    return PyFloat_FromDouble(w);
}

static int FloatingKernel_init(FloatingKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"base_qpos", "base_qvel", "q", "v", "q_full", "v_full", "M_full", "h_full", "g_full",
                             "J_full", "R_base", "p_base", "a_lwa", "a_body", "J_v_h", "J_ee_body", "M", "Minv", "g",
                             "dJdq_ee_lwa", "dJdq_ee_body", "T_world_base", "Lambda_b_inv_lwa", "Lambda_b_inv_body",
                             "body_frame", "world_drift", "gravity", NULL};
    PyObject *o[NBUF];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOOOOOOOOOOOOOOppp", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14],
                                     &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22], &o[23],
                                     &self->body_frame, &self->world_drift, &self->gravity))
        return -1;
    self->bound = 0;
    kernel_release(self->views, NBUF);
    Py_buffer probe;
    if (kernel_bind(KERNEL, o[B_Q], &probe, -1, 1, BUF_NAMES[B_Q]) == NULL) return -1;
    Py_ssize_t n = probe.len / 8;
    PyBuffer_Release(&probe);
    if (n < 1 || n > NMAX) {
        PyErr_Format(PyExc_ValueError, KERNEL ": the arm must have 1 to %d joints, got %zd", NMAX, n);
        return -1;
    }
    self->n = (int)n;
    self->nf = (int)n + 6;
    const Py_ssize_t nf = n + 6;
    const int strided[NBUF] = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const Py_ssize_t size[NBUF] = {7, 6, n, n, n + 7, nf, nf, nf, self->gravity ? nf : -1, 14 * nf, 3, 3, 6, 6,
                                   8 * n, 6 * n, n * n, n * n, n, 6, 6, 16, 36, 36};
    const Py_ssize_t cols[NBUF] = {0, 0, 0, 0, 0, 0, nf, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int writable[NBUF] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < NBUF; i++) {
        if (strided[i])
            self->p[i] = kernel_bind_matrix(KERNEL, o[i], &self->views[i], size[i], cols[i], writable[i], BUF_NAMES[i],
                                            &self->rs[i], &self->cs[i]);
        else
            self->p[i] = kernel_bind(KERNEL, o[i], &self->views[i], size[i], writable[i], BUF_NAMES[i]);
        if (self->p[i] == NULL) return -1;
    }
    self->bound = 1;
    return 0;
}

static PyMethodDef FloatingKernel_methods[] = {
    {"prepare", (PyCFunction)FloatingKernel_prepare, METH_NOARGS, "Fill q_full, v_full from the base state and q, v."},
    {"reduce", (PyCFunction)FloatingKernel_reduce, METH_NOARGS,
     "Eliminate the base; return the manipulability of J* (−1: H_b or H* not positive definite)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FloatingKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sim._floating_kernel.FloatingKernel",
    .tp_basicsize = sizeof(FloatingKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Free-floating base elimination bound to one Pinocchio Data and one FloatingSnapshot (see the source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)FloatingKernel_init,
    .tp_dealloc = (destructor)FloatingKernel_dealloc,
    .tp_methods = FloatingKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_floating_kernel",
                                    "Compiled free-floating base elimination (sim/floating.py is the reference).", -1,
                                    NULL};

PyMODINIT_FUNC PyInit__floating_kernel(void) { return kernel_module(&module, &FloatingKernelType, "FloatingKernel"); }
