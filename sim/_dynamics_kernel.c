/*
 * Compiled kernel of the snapshot's kinematic part (sim/dynamics.py, Dynamics.update).
 *
 * DynamicsKernel(...) is bound once to Pinocchio's buffers (data.J, the rotation and translation of
 * data.oMf[ee] and data.oMf[sensor]; Pinocchio overwrites them in place, they never move) and to the
 * Snapshot's arrays. After forwardKinematics + computeJointJacobians + updateFramePlacements,
 * step() fills, with no Python objects:
 *
 *   T_world_ee = [[R, p], [0, 1]] of oMf[ee]   (and T_world_sensor when bound with sensor_pose)
 *   J_ee_lwa   = data.J shifted to the EE:  column j = [v_j − p × ω_j; ω_j]  (data.J: world axes, about
 *                the world origin; this is Pinocchio's getFrameJacobian(LOCAL_WORLD_ALIGNED), bit for bit)
 *   J_ee_body  = [Rᵀ (v_j − p × ω_j); Rᵀ ω_j]   (LOCAL, when bound with body_frame)
 *   twist_ee_lwa = J_ee_lwa q̇,  twist_ee_body = J_ee_body q̇   (q̇ = row 6 of Snapshot.J_v_h)
 *
 * and returns the manipulability w = sqrt(det(J Jᵀ)) of J_ee_lwa as the product of the Cholesky
 * diagonal of J Jᵀ (0 when a pivot is below 1e-300: rank < 6), as the Python path does with MuJoCo's
 * mju_cholFactor. The products differ from BLAS/MuJoCo in summation order only (≈1e-16 relative).
 */
#include "_kernel_util.h"
#include "_kernel_math.h"
#include <math.h>

enum { B_JW, B_RE, B_PE, B_RS, B_PS, B_JVH, B_JB, B_TWL, B_TWB, B_TE, B_TS, NBUF };
static const char *BUF_NAMES[NBUF] = {"J_world", "R_ee", "p_ee", "R_sensor", "p_sensor", "J_v_h",
                                      "J_ee_body", "twist_ee_lwa", "twist_ee_body", "T_world_ee", "T_world_sensor"};
#define KERNEL "DynamicsKernel"

typedef struct {
    PyObject_HEAD
    int bound; /* 1 once __init__ has bound every array */
    Py_buffer views[NBUF];
    double *p[NBUF];
    Py_ssize_t rs[NBUF], cs[NBUF]; /* row / column strides (doubles) of the strided matrices */
    int nv, body_frame, sensor_pose;
} DynamicsKernel;

static void DynamicsKernel_dealloc(DynamicsKernel *self) {
    kernel_release(self->views, NBUF);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* T (4×4, row-major) = [[R, p], [0, 1]] from a strided 3×3 R and a 3-vector p */
static void pose(double *T, const double *R, Py_ssize_t rs, Py_ssize_t cs, const double *p) {
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) T[4 * i + j] = R[i * rs + j * cs];
        T[4 * i + 3] = p[i];
    }
}

static PyObject *DynamicsKernel_step(DynamicsKernel *self, PyObject *Py_UNUSED(ignored)) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, "DynamicsKernel: not bound (construction failed or was skipped)");
        return NULL;
    }
    double **b = self->p;
    const int nv = self->nv;
    const double *Jw = b[B_JW];
    const Py_ssize_t jr = self->rs[B_JW], jc = self->cs[B_JW];
    double *T = b[B_TE];
    pose(T, b[B_RE], self->rs[B_RE], self->cs[B_RE], b[B_PE]);
    if (self->sensor_pose) pose(b[B_TS], b[B_RS], self->rs[B_RS], self->cs[B_RS], b[B_PS]);
    const double p0 = T[3], p1 = T[7], p2 = T[11];
    double *J = b[B_JVH]; /* rows 0–5 J_ee_lwa, row 6 q̇ (C order, 8 × nv) */
    const double *qd = J + 6 * nv;
    double *Jb = b[B_JB];
    for (int j = 0; j < nv; j++) {
        const double v0 = Jw[0 * jr + j * jc], v1 = Jw[1 * jr + j * jc], v2 = Jw[2 * jr + j * jc];
        const double w0 = Jw[3 * jr + j * jc], w1 = Jw[4 * jr + j * jc], w2 = Jw[5 * jr + j * jc];
        /* v − p × ω (Eigen's cross product: (p1 ω2 − p2 ω1, p2 ω0 − p0 ω2, p0 ω1 − p1 ω0)) */
        const double l0 = v0 - (p1 * w2 - p2 * w1), l1 = v1 - (p2 * w0 - p0 * w2), l2 = v2 - (p0 * w1 - p1 * w0);
        J[0 * nv + j] = l0; J[1 * nv + j] = l1; J[2 * nv + j] = l2;
        J[3 * nv + j] = w0; J[4 * nv + j] = w1; J[5 * nv + j] = w2;
        if (self->body_frame) { /* Rᵀ x: column i of R dotted with x */
            Jb[0 * nv + j] = T[0] * l0 + T[4] * l1 + T[8] * l2;
            Jb[1 * nv + j] = T[1] * l0 + T[5] * l1 + T[9] * l2;
            Jb[2 * nv + j] = T[2] * l0 + T[6] * l1 + T[10] * l2;
            Jb[3 * nv + j] = T[0] * w0 + T[4] * w1 + T[8] * w2;
            Jb[4 * nv + j] = T[1] * w0 + T[5] * w1 + T[9] * w2;
            Jb[5 * nv + j] = T[2] * w0 + T[6] * w1 + T[10] * w2;
        }
    }
    double *tl = b[B_TWL], *tb = b[B_TWB];
    for (int r = 0; r < 6; r++) {
        double s = 0.0, sb = 0.0;
        for (int j = 0; j < nv; j++) {
            s += J[r * nv + j] * qd[j];
            if (self->body_frame) sb += Jb[r * nv + j] * qd[j];
        }
        tl[r] = s;
        if (self->body_frame) tb[r] = sb;
    }
    /* w = sqrt(det(J Jᵀ)) = product of the Cholesky diagonal of J Jᵀ; a pivot below 1e-300 (rank < 6) or NaN: 0 */
    double A[36];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c <= r; c++) {
            double s = 0.0;
            for (int j = 0; j < nv; j++) s += J[r * nv + j] * J[c * nv + j];
            A[6 * r + c] = s;
        }
    if (kernel_cholesky(A, 6, 1e-300)) return PyFloat_FromDouble(0.0);
    double w = 1.0;
    for (int j = 0; j < 6; j++) w *= A[7 * j];
    return PyFloat_FromDouble(w);
}

static int DynamicsKernel_init(DynamicsKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"J_world", "R_ee", "p_ee", "R_sensor", "p_sensor", "J_v_h", "J_ee_body",
                             "twist_ee_lwa", "twist_ee_body", "T_world_ee", "T_world_sensor", "body_frame",
                             "sensor_pose", NULL};
    PyObject *o[NBUF];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOpp", kwlist, &o[B_JW], &o[B_RE], &o[B_PE], &o[B_RS],
                                     &o[B_PS], &o[B_JVH], &o[B_JB], &o[B_TWL], &o[B_TWB], &o[B_TE], &o[B_TS],
                                     &self->body_frame, &self->sensor_pose))
        return -1;
    self->bound = 0;
    kernel_release(self->views, NBUF); /* __init__ called again */
    /* nv from J_v_h (8 × nv, C order) */
    Py_buffer probe;
    if (kernel_bind(KERNEL, o[B_JVH], &probe, -1, 1, BUF_NAMES[B_JVH]) == NULL) return -1;
    Py_ssize_t nv = probe.len / 64;
    int whole_rows = probe.len == nv * 64;
    PyBuffer_Release(&probe);
    if (nv < 1 || !whole_rows) {
        PyErr_SetString(PyExc_ValueError, KERNEL ": J_v_h must be an 8 × nv float64 array");
        return -1;
    }
    self->nv = (int)nv;
    /* strided matrices: data.J (6 × nv), the two rotations (3 × 3) */
    const int strided[NBUF] = {1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    const Py_ssize_t rows[NBUF] = {6, 3, 3, 3, 3, 8 * nv, 6 * nv, 6, 6, 16, 16};
    const Py_ssize_t cols[NBUF] = {nv, 3, 0, 3, 0, 0, 0, 0, 0, 0, 0};
    const int writable[NBUF] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < NBUF; i++) {
        if (strided[i])
            self->p[i] = kernel_bind_matrix(KERNEL, o[i], &self->views[i], rows[i], cols[i], writable[i], BUF_NAMES[i],
                                            &self->rs[i], &self->cs[i]);
        else
            self->p[i] = kernel_bind(KERNEL, o[i], &self->views[i], rows[i], writable[i], BUF_NAMES[i]);
        if (self->p[i] == NULL) return -1;
    }
    self->bound = 1;
    return 0;
}

static PyMethodDef DynamicsKernel_methods[] = {
    {"step", (PyCFunction)DynamicsKernel_step, METH_NOARGS,
     "Fill the bound snapshot's poses, Jacobians and twists; return the manipulability (see the module source)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject DynamicsKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sim._dynamics_kernel.DynamicsKernel",
    .tp_basicsize = sizeof(DynamicsKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Snapshot kinematics step bound to one Pinocchio Data and one Snapshot (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)DynamicsKernel_init,
    .tp_dealloc = (destructor)DynamicsKernel_dealloc,
    .tp_methods = DynamicsKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dynamics_kernel",
                                    "Compiled snapshot kinematics (sim/dynamics.py is the reference).", -1, NULL};

PyMODINIT_FUNC PyInit__dynamics_kernel(void) { return kernel_module(&module, &DynamicsKernelType, "DynamicsKernel"); }
