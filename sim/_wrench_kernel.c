/*
 * Compiled kernel of the force/torque pipeline (sim/wrench.py, docs/theory/ft_pipeline.md).
 *
 * WrenchKernel(...) is bound once to rows of one MjData (F/T site pose, force and torque sensor
 * readings, the tool bodies' cfrc_ext, the subtree COMs of the kinematic root and of the tool; MjData's
 * buffers never move), to the snapshot's T_world_ee, to the WrenchState buffer and to the pipeline's
 * compensation buffer comp = [ft_bias (6); tare b (6); W = m_t g (3)]; step(tool_contacts) then fills
 * the state:
 *
 *   ft_raw    = [f_S; n_S] (+ ft_bias when offset is on)
 *   ext_world = −R_WS (ft_raw − b) (− [W; (c_t − p_S) × W] when gravity is on)
 *                                                        (environment on tool, world axes, about S)
 *   ext_body  = [R_WEᵀ f_W; R_WEᵀ (n_W + (p_S − p_E) × f_W)] (EE axes, about the EE origin E)
 *   truth     = the contact wrench on the tool from MuJoCo's cfrc_ext ([n; f] about the subtree COM c,
 *               world axes), moved to S: [f; n_c + (c − p_S) × f], and its body form as above;
 *               zeroed once per contact-free stretch (tool_contacts = 0).
 *
 * The arithmetic follows WrenchPipeline.update's Python floats operation for operation (compiled
 * without fused multiply-add, setup.py): the wrenches are equal to the Python path bit for bit.
 * Inertial compensation is not in the kernel (the pipeline keeps its Python path for it); the tare is
 * taken by the Python side, which writes b into comp and calls step() again.
 */
#include "_kernel_util.h"

enum { B_XMAT, B_XPOS, B_FORCE, B_TORQUE, B_CFRC, B_COM, B_T, B_STATE, B_TCOM, B_COMP, NBUF };
static const char *BUF_NAMES[NBUF] = {"site_xmat", "site_xpos", "force", "torque", "cfrc_ext", "subtree_com",
                                      "T_world_ee", "state", "tool_com", "comp"};

typedef struct {
    PyObject_HEAD
    int bound; /* 1 once __init__ has bound every array */
    Py_buffer views[NBUF];
    double *p[NBUF];
    int nbodies;   /* tool bodies whose cfrc_ext rows are summed */
    int *bodies;   /* their indices into cfrc_ext (rows of 6) */
    int zeroed;    /* the truth wrenches are known to be zero */
    int gravity;   /* subtract the tool weight W at the tool COM */
    int offset;    /* add ft_bias to the reading and subtract the tare b */
} WrenchKernel;

static void WrenchKernel_dealloc(WrenchKernel *self) {
    kernel_release(self->views, NBUF);
    PyMem_Free(self->bodies);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* sim.wrench.transport_world_to_body: world-axes wrench about S → EE-axes wrench about the EE origin. */
static void transport(double f0, double f1, double f2, double n0, double n1, double n2, double s0, double s1,
                      double s2, const double *T, double *out) {
    double a00 = T[0], a01 = T[1], a02 = T[2], e0 = T[3];
    double a10 = T[4], a11 = T[5], a12 = T[6], e1 = T[7];
    double a20 = T[8], a21 = T[9], a22 = T[10], e2 = T[11];
    double r0 = s0 - e0, r1 = s1 - e1, r2 = s2 - e2;
    double m0 = n0 + r1 * f2 - r2 * f1;
    double m1 = n1 + r2 * f0 - r0 * f2;
    double m2 = n2 + r0 * f1 - r1 * f0;
    out[0] = f0 * a00 + f1 * a10 + f2 * a20;
    out[1] = f0 * a01 + f1 * a11 + f2 * a21;
    out[2] = f0 * a02 + f1 * a12 + f2 * a22;
    out[3] = m0 * a00 + m1 * a10 + m2 * a20;
    out[4] = m0 * a01 + m1 * a11 + m2 * a21;
    out[5] = m0 * a02 + m1 * a12 + m2 * a22;
}

static PyObject *WrenchKernel_step(WrenchKernel *self, PyObject *arg) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, "WrenchKernel: not bound (construction failed or was skipped)");
        return NULL;
    }
    long contacts = PyLong_AsLong(arg);
    if (contacts == -1 && PyErr_Occurred()) return NULL;
    double **p = self->p;
    const double *R = p[B_XMAT], *S = p[B_XPOS], *fa = p[B_FORCE], *na = p[B_TORQUE], *T = p[B_T];
    double *st = p[B_STATE];
    double s0 = S[0], s1 = S[1], s2 = S[2];
    double a0 = fa[0], a1 = fa[1], a2 = fa[2], b0 = na[0], b1 = na[1], b2 = na[2];
    const double *comp = p[B_COMP];
    if (self->offset) { /* the sensor's reading (+ simulated bias) */
        a0 = a0 + comp[0]; a1 = a1 + comp[1]; a2 = a2 + comp[2];
        b0 = b0 + comp[3]; b1 = b1 + comp[4]; b2 = b2 + comp[5];
    }
    st[0] = a0; st[1] = a1; st[2] = a2; st[3] = b0; st[4] = b1; st[5] = b2; /* ft_raw */
    if (self->offset) { /* the tare removed */
        a0 = a0 - comp[6]; a1 = a1 - comp[7]; a2 = a2 - comp[8];
        b0 = b0 - comp[9]; b1 = b1 - comp[10]; b2 = b2 - comp[11];
    }
    /* the one sign flip: parent-on-tool reading → environment-on-tool wrench (R_WS raw, negated) */
    double f0 = -(R[0] * a0 + R[1] * a1 + R[2] * a2);
    double f1 = -(R[3] * a0 + R[4] * a1 + R[5] * a2);
    double f2 = -(R[6] * a0 + R[7] * a1 + R[8] * a2);
    double n0 = -(R[0] * b0 + R[1] * b1 + R[2] * b2);
    double n1 = -(R[3] * b0 + R[4] * b1 + R[5] * b2);
    double n2 = -(R[6] * b0 + R[7] * b1 + R[8] * b2);
    if (self->gravity) { /* − W at the tool COM c: f −= W, n −= (c − p_S) × W */
        const double *W = comp + 12, *ct = p[B_TCOM];
        double w0 = W[0], w1 = W[1], w2 = W[2];
        double q0 = ct[0] - s0, q1 = ct[1] - s1, q2 = ct[2] - s2;
        f0 = f0 - w0; f1 = f1 - w1; f2 = f2 - w2;
        n0 = n0 - (q1 * w2 - q2 * w1);
        n1 = n1 - (q2 * w0 - q0 * w2);
        n2 = n2 - (q0 * w1 - q1 * w0);
    }
    st[6] = f0; st[7] = f1; st[8] = f2; st[9] = n0; st[10] = n1; st[11] = n2; /* ext_world */
    transport(f0, f1, f2, n0, n1, n2, s0, s1, s2, T, st + 12);                 /* ext_body */
    if (contacts == 0) {
        if (!self->zeroed) {
            memset(st + 18, 0, 12 * sizeof(double));
            self->zeroed = 1;
        }
        Py_RETURN_NONE;
    }
    /* truth: cfrc_ext rows are [n; f] about the subtree COM c */
    const double *cf = p[B_CFRC];
    const double *row = cf + 6 * self->bodies[0];
    double t0 = row[0], t1 = row[1], t2 = row[2], t3 = row[3], t4 = row[4], t5 = row[5];
    for (int i = 1; i < self->nbodies; i++) {
        row = cf + 6 * self->bodies[i];
        t0 += row[0]; t1 += row[1]; t2 += row[2]; t3 += row[3]; t4 += row[4]; t5 += row[5];
    }
    double tn0 = t0, tn1 = t1, tn2 = t2, tf0 = t3, tf1 = t4, tf2 = t5;
    const double *c = p[B_COM];
    double r0 = c[0] - s0, r1 = c[1] - s1, r2 = c[2] - s2;
    double w3 = tn0 + (r1 * tf2 - r2 * tf1);
    double w4 = tn1 + (r2 * tf0 - r0 * tf2);
    double w5 = tn2 + (r0 * tf1 - r1 * tf0);
    st[18] = tf0; st[19] = tf1; st[20] = tf2; st[21] = w3; st[22] = w4; st[23] = w5;
    transport(tf0, tf1, tf2, w3, w4, w5, s0, s1, s2, T, st + 24);
    self->zeroed = 0;
    Py_RETURN_NONE;
}

static int WrenchKernel_init(WrenchKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"site_xmat", "site_xpos", "force", "torque", "cfrc_ext", "subtree_com", "T_world_ee",
                             "state", "tool_bodies", "tool_com", "comp", "gravity", "offset", NULL};
    PyObject *o[NBUF], *bodies;
    int gravity = 0, offset = 0;
    o[B_TCOM] = o[B_COMP] = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOO|OOpp", kwlist, &o[B_XMAT], &o[B_XPOS], &o[B_FORCE],
                                     &o[B_TORQUE], &o[B_CFRC], &o[B_COM], &o[B_T], &o[B_STATE], &bodies, &o[B_TCOM],
                                     &o[B_COMP], &gravity, &offset))
        return -1;
    self->bound = 0;
    kernel_release(self->views, NBUF); /* __init__ called again */
    if ((gravity || offset) && (o[B_TCOM] == NULL || o[B_COMP] == NULL)) {
        PyErr_SetString(PyExc_ValueError, "WrenchKernel: gravity or offset needs tool_com and comp");
        return -1;
    }
    /* without compensation the two optional rows default to the subtree COM row (bound, never read) */
    if (o[B_TCOM] == NULL) o[B_TCOM] = o[B_COM];
    const Py_ssize_t sizes[NBUF] = {9, 3, 3, 3, -1, 3, 16, 30, 3, 15};
    for (int i = 0; i < NBUF; i++) {
        if (i == B_COMP && o[B_COMP] == NULL) {
            self->views[i].obj = NULL;
            self->p[i] = NULL;
            continue;
        }
        self->p[i] = kernel_bind("WrenchKernel", o[i], &self->views[i], sizes[i], i == B_STATE, BUF_NAMES[i]);
        if (self->p[i] == NULL) return -1;
    }
    Py_ssize_t nrows = self->views[B_CFRC].len / 48;
    if (self->views[B_CFRC].len != nrows * 48) {
        PyErr_SetString(PyExc_ValueError, "WrenchKernel: cfrc_ext must hold rows of 6 floats");
        return -1;
    }
    PyObject *seq = PySequence_Fast(bodies, "WrenchKernel: tool_bodies must be a sequence of body indices");
    if (seq == NULL) return -1;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(seq);
    if (nb < 1) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "WrenchKernel: tool_bodies must not be empty");
        return -1;
    }
    PyMem_Free(self->bodies);
    self->bodies = PyMem_Malloc(sizeof(int) * (size_t)nb);
    if (self->bodies == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nb; i++) {
        long b = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((b == -1 && PyErr_Occurred()) || b < 0 || b >= nrows) {
            Py_DECREF(seq);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "WrenchKernel: tool body %ld outside cfrc_ext's %zd rows", b, nrows);
            return -1;
        }
        self->bodies[i] = (int)b;
    }
    Py_DECREF(seq);
    self->nbodies = (int)nb;
    self->zeroed = 0;
    self->gravity = gravity;
    self->offset = offset;
    self->bound = 1;
    return 0;
}

static PyMethodDef WrenchKernel_methods[] = {
    {"step", (PyCFunction)WrenchKernel_step, METH_O,
     "step(tool_contacts): fill the bound WrenchState from the bound MjData rows (see the module source)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject WrenchKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sim._wrench_kernel.WrenchKernel",
    .tp_basicsize = sizeof(WrenchKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "F/T pipeline step bound to one MjData and one WrenchState (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)WrenchKernel_init,
    .tp_dealloc = (destructor)WrenchKernel_dealloc,
    .tp_methods = WrenchKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wrench_kernel",
                                    "Compiled F/T pipeline step (sim/wrench.py is the reference).", -1, NULL};

PyMODINIT_FUNC PyInit__wrench_kernel(void) { return kernel_module(&module, &WrenchKernelType, "WrenchKernel"); }
