/*
 * Compiled kernel of the contact culling's per-period update (sim/culling.py, docs/theory/peg_hole.md §5).
 *
 * CullingKernel(...) is bound once to rows of one MjData (the tool geom's pose, the boxes' body pose, cvel,
 * subtree_com; MjData's buffers never move), to the culling's static box arrays (E2: the boxes' axes as rows,
 * (3n, 3); EC: each centre in its own axes; H: half sizes; lu: the capsule's end points in the geom frame) and
 * to its outputs: g (every box's bound), active (1.0 = the box stays in: g <= margin + reach) and state
 * [ends (6), ends at the last full pass (6), previous ends (6), has previous, slack, reach, max_reach_use, boxes in].
 * step() then does what BoxCulling._update_python does, but for MuJoCo's calls:
 *
 *   ends   = R_Bᵀ (R_geom lu + p_geom − p_B)                       (the capsule's ends, the boxes' body frame)
 *   max_reach_use = max(max_reach_use, max_e ‖ends_e − prev_e‖ / reach_prev)
 *   speed  = ‖v_tool‖ + ‖ω_tool‖ ρ_tool (+ ‖v_B‖ + ‖ω_B‖ ρ_B on a moving body), each from cvel at its point
 *   reach  = κ speed T_c + δ₀
 *   full pass when max_e ‖ends_e − full_e‖ + reach >= slack: g_i of every box (box_distance_bound), active,
 *   the boxes in, slack = min over the boxes out of g − margin (∞ when none is out), ends_full = ends.
 * It returns 0 without a full pass, else R_FULL | R_CHANGED (the set changed: the caller rewrites the contact
 * flags) | R_CHECK (a box out until now has g <= margin: the caller checks it with MuJoCo's exact distance).
 *
 * The arithmetic follows the Python reference operation for operation (compiled without fused multiply-add,
 * setup.py): g, the ends, the reach and max_reach_use are equal to the Python path bit for bit.
 */
#include <math.h>

#include "_kernel_util.h"

enum { B_GXPOS, B_GXMAT, B_XPOS, B_XMAT, B_CVEL, B_COM, B_E2, B_EC, B_H, B_LU, B_G, B_ACTIVE, B_STATE, NBUF };
static const char *BUF_NAMES[NBUF] = {"geom_xpos", "geom_xmat", "xpos", "xmat", "cvel", "subtree_com", "E2",
                                      "EC", "H", "lu", "g", "active", "state"};
enum { S_ENDS = 0, S_FULL = 6, S_PREV = 12, S_HAS_PREV = 18, S_SLACK = 19, S_REACH = 20, S_MRU = 21, S_ACTIVE = 22,
       S_N = 23 };
/* step()'s result: bits of what the caller must do after a full pass */
enum { R_FULL = 1, R_CHANGED = 2, R_CHECK = 4 };

typedef struct {
    PyObject_HEAD
    int bound;
    Py_buffer views[NBUF];
    double *p[NBUF];
    Py_ssize_t n; /* boxes */
    int tool, tool_body, tool_root, body, body_root, body_static;
    double T_c, l, r, rho_tool, rho_body, margin, kappa, floor0;
    double Rb[9], xb[3]; /* the boxes' body pose (kept from the start for a static body) */
} CullingKernel;

static void CullingKernel_dealloc(CullingKernel *self) {
    kernel_release(self->views, NBUF);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* sim.culling.spatial_speed: (‖v‖, ‖ω‖) of body b's motion at point q, cvel's v at the root's subtree COM. */
static void spatial_speed(const double *cvel, const double *com, int b, int root, const double *q, double *v_out,
                          double *w_out) {
    const double *c6 = cvel + 6 * b, *c = com + 3 * root;
    double w0 = c6[0], w1 = c6[1], w2 = c6[2], v0 = c6[3], v1 = c6[4], v2 = c6[5];
    double d0 = q[0] - c[0], d1 = q[1] - c[1], d2 = q[2] - c[2];
    v0 = v0 - (d1 * w2 - d2 * w1);
    v1 = v1 - (d2 * w0 - d0 * w2);
    v2 = v2 - (d0 * w1 - d1 * w0);
    *v_out = sqrt(v0 * v0 + v1 * v1 + v2 * v2);
    *w_out = sqrt(w0 * w0 + w1 * w1 + w2 * w2);
}

/* BoxCulling._largest_norm: max over the two rows of a − b of their norms. */
static double largest_norm(const double *a, const double *b) {
    double best = -INFINITY;
    for (int e = 0; e < 2; e++) {
        double x0 = a[3 * e] - b[3 * e], x1 = a[3 * e + 1] - b[3 * e + 1], x2 = a[3 * e + 2] - b[3 * e + 2];
        double s = x0 * x0 + x1 * x1 + x2 * x2;
        if (s > best) best = s;
    }
    return sqrt(best);
}

static double max3(double a, double b, double c) {
    double m = a;
    if (b > m) m = b;
    if (c > m) m = c;
    return m;
}

/* sim.culling.box_distance_bound for box i: p, w the capsule's centre and unit axis in the box's axes. */
static double bound(const double *p, const double *w, const double *H, double l, double r) {
    double aw[3] = {fabs(w[0]), fabs(w[1]), fabs(w[2])};
    double face[3], edge[3];
    for (int j = 0; j < 3; j++) face[j] = (fabs(p[j]) - H[j]) - l * aw[j];
    for (int j = 0; j < 3; j++) {
        int k = (j + 1) % 3, m = (j + 2) % 3;
        double s = sqrt(w[k] * w[k] + w[m] * w[m]);
        double num = (fabs(w[m] * p[k] - w[k] * p[m]) - H[k] * aw[m]) - H[m] * aw[k];
        edge[j] = s > 1e-9 ? num / s : -INFINITY;
    }
    double f = max3(face[0], face[1], face[2]), e = max3(edge[0], edge[1], edge[2]);
    return (f > e ? f : e) - r;
}

static PyObject *CullingKernel_step(CullingKernel *self, PyObject *Py_UNUSED(ignored)) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, "CullingKernel: not bound");
        return NULL;
    }
    double *st = self->p[B_STATE];
    const double *gx = self->p[B_GXPOS] + 3 * self->tool, *R = self->p[B_GXMAT] + 9 * self->tool;
    if (!self->body_static) {
        memcpy(self->Rb, self->p[B_XMAT] + 9 * self->body, 9 * sizeof(double));
        memcpy(self->xb, self->p[B_XPOS] + 3 * self->body, 3 * sizeof(double));
    }
    const double *lu = self->p[B_LU], *Rb = self->Rb, *xb = self->xb;
    double *ends = st + S_ENDS;
    for (int e = 0; e < 2; e++) {
        double rel[3];
        for (int i = 0; i < 3; i++) {
            double world = lu[3 * e] * R[3 * i] + lu[3 * e + 1] * R[3 * i + 1] + lu[3 * e + 2] * R[3 * i + 2] + gx[i];
            rel[i] = world - xb[i];
        }
        for (int k = 0; k < 3; k++) ends[3 * e + k] = rel[0] * Rb[k] + rel[1] * Rb[3 + k] + rel[2] * Rb[6 + k];
    }
    if (st[S_HAS_PREV] != 0.0 && st[S_REACH] > 0.0) {
        double use = largest_norm(ends, st + S_PREV) / st[S_REACH];
        if (use > st[S_MRU]) st[S_MRU] = use;
    }
    memcpy(st + S_PREV, ends, 6 * sizeof(double));
    st[S_HAS_PREV] = 1.0;
    double v, w;
    spatial_speed(self->p[B_CVEL], self->p[B_COM], self->tool_body, self->tool_root, gx, &v, &w);
    double speed = v + w * self->rho_tool;
    if (!self->body_static) {
        double vb, wb;
        spatial_speed(self->p[B_CVEL], self->p[B_COM], self->body, self->body_root, xb, &vb, &wb);
        speed = speed + vb + wb * self->rho_body;
    }
    double reach = self->kappa * speed * self->T_c + self->floor0;
    st[S_REACH] = reach;
    if (!(largest_norm(ends, st + S_FULL) + reach >= st[S_SLACK])) return PyLong_FromLong(0);
    /* the full pass: the capsule's centre and axis, every box's bound */
    double c[3], u[3];
    for (int i = 0; i < 3; i++) c[i] = 0.5 * (ends[i] + ends[3 + i]);
    for (int i = 0; i < 3; i++) u[i] = (ends[3 + i] - ends[i]) / (2.0 * self->l);
    const double *E2 = self->p[B_E2], *EC = self->p[B_EC], *H = self->p[B_H];
    double *g = self->p[B_G], *active = self->p[B_ACTIVE];
    double margin = self->margin, lim = margin + reach, gmin_out = INFINITY;
    long result = R_FULL, n_in = 0;
    for (Py_ssize_t b = 0; b < self->n; b++) {
        double P[3], W[3];
        for (int a = 0; a < 3; a++) {
            const double *row = E2 + 9 * b + 3 * a;
            P[a] = (row[0] * c[0] + row[1] * c[1] + row[2] * c[2]) - EC[3 * b + a];
            W[a] = row[0] * u[0] + row[1] * u[1] + row[2] * u[2];
        }
        double gb = g[b] = bound(P, W, H + 3 * b, self->l, self->r);
        double was = active[b], now = gb <= lim ? 1.0 : 0.0;
        if (was == 0.0 && gb <= margin) result |= R_CHECK;
        if (now != was) result |= R_CHANGED;
        active[b] = now;
        if (now != 0.0)
            n_in++;
        else if (gb < gmin_out)
            gmin_out = gb;
    }
    st[S_ACTIVE] = (double)n_in;
    st[S_SLACK] = n_in < self->n ? gmin_out - margin : INFINITY;
    memcpy(st + S_FULL, ends, 6 * sizeof(double));
    return PyLong_FromLong(result);
}

static int CullingKernel_init(CullingKernel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"geom_xpos", "geom_xmat", "xpos", "xmat", "cvel", "subtree_com", "E2", "EC", "H", "lu",
                             "g", "active", "state", "tool_geom", "tool_body", "tool_root", "body", "body_root",
                             "body_static", "control_period", "half_length", "radius", "rho_tool", "rho_body",
                             "margin", "reach_speed_factor", "reach_floor", NULL};
    PyObject *o[NBUF];
    int body_static;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$OOOOOOOOOOOOOiiiiipdddddddd", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &self->tool,
                                     &self->tool_body, &self->tool_root, &self->body, &self->body_root, &body_static,
                                     &self->T_c, &self->l, &self->r, &self->rho_tool, &self->rho_body, &self->margin,
                                     &self->kappa, &self->floor0))
        return -1;
    kernel_release(self->views, NBUF);
    self->bound = 0;
    for (int i = 0; i < NBUF; i++) {
        self->p[i] = kernel_bind("CullingKernel", o[i], &self->views[i], -1, i >= B_G, BUF_NAMES[i]);
        if (self->p[i] == NULL) return -1;
    }
    Py_ssize_t n = self->views[B_G].len / 8;
    const Py_ssize_t want[NBUF] = {-1, -1, -1, -1, -1, -1, 9 * n, 3 * n, 3 * n, 6, n, n, S_N};
    for (int i = B_E2; i < NBUF; i++)
        if (self->views[i].len != want[i] * 8) {
            PyErr_Format(PyExc_ValueError, "CullingKernel: %s must hold %zd floats, got %zd", BUF_NAMES[i], want[i],
                         self->views[i].len / 8);
            return -1;
        }
    Py_ssize_t ngeom = self->views[B_GXPOS].len / 24, nbody = self->views[B_XPOS].len / 24;
    if (self->views[B_GXMAT].len != ngeom * 72 || self->views[B_XMAT].len != nbody * 72 ||
        self->views[B_CVEL].len != nbody * 48 || self->views[B_COM].len != nbody * 24) {
        PyErr_SetString(PyExc_ValueError, "CullingKernel: geom_xmat, xmat, cvel and subtree_com must match "
                                          "geom_xpos and xpos (one MjData)");
        return -1;
    }
    if (self->tool < 0 || self->tool >= ngeom || self->tool_body < 0 || self->tool_body >= nbody ||
        self->tool_root < 0 || self->tool_root >= nbody || self->body < 0 || self->body >= nbody ||
        self->body_root < 0 || self->body_root >= nbody) {
        PyErr_SetString(PyExc_ValueError, "CullingKernel: a geom or body index outside the MjData's rows");
        return -1;
    }
    if (!(self->l > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "CullingKernel: half_length must be > 0 (a capsule with an axis)");
        return -1;
    }
    self->n = n;
    self->body_static = body_static;
    memcpy(self->Rb, self->p[B_XMAT] + 9 * self->body, 9 * sizeof(double));
    memcpy(self->xb, self->p[B_XPOS] + 3 * self->body, 3 * sizeof(double));
    self->bound = 1;
    return 0;
}

static PyMethodDef CullingKernel_methods[] = {
    {"step", (PyCFunction)CullingKernel_step, METH_NOARGS,
     "step() -> int: the period's update; 0, or R_FULL | R_CHANGED | R_CHECK after a full pass (see the source)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CullingKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sim._culling_kernel.CullingKernel",
    .tp_basicsize = sizeof(CullingKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Contact culling update bound to one MjData and one BoxCulling (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CullingKernel_init,
    .tp_dealloc = (destructor)CullingKernel_dealloc,
    .tp_methods = CullingKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_culling_kernel",
                                    "Compiled contact culling update (sim/culling.py is the reference).", -1, NULL};

PyMODINIT_FUNC PyInit__culling_kernel(void) { return kernel_module(&module, &CullingKernelType, "CullingKernel"); }
