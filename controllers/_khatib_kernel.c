/*
 * Compiled kernel of the Khatib task-space impedance (controllers/khatib.py, docs/theory/khatib.md).
 *
 * KhatibKernel(...) is bound once to the preallocated arrays of one run (snapshot, reference, wrench
 * state, command, controller state); step(t) then computes one control step at time t [s] with no Python
 * objects:
 *
 *   f̄     = f_ext, or its first-order low-pass f̄_k = f̄_{k−1} + β (f_ext − f̄_{k−1}) (force_filter)
 *   u_pos = ẍ_d + M_d⁻¹ (−D_d (ẋ − ẋ_d) − K_d (x − x_d) [+ F_I] [+ f̄])          (world axes)
 *   e_R   = log(R_d Rᵀ),  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R (ω_d − ω))
 *   τ     = Jᵀ y + h − d_null q̇ [+ J_vᵀ F_f] + τ_ff,   Λ⁻¹ y = u − J̇q̇ + d_null J M⁻¹ q̇,   Λ⁻¹ = J M⁻¹ Jᵀ
 *   F_I   = clamp(k_i ∫(x_d − x) dt, ±F_I,max), frozen from the first step with |f̄| > threshold
 *   force set-point (hybrid impedance, s the ramp): the axial components of x − x_d, ẋ − ẋ_d (the absolute
 *   axial velocity then damped), ẍ_d, F_I and f̄ removed with weight s, F_f = −a (F_d + k_p (F_d − f_a) + I
 *   + d_f v_a) (kernel_setpoint_update, sim/_kernel_math.h)
 *   τ_ff  the joint feedforward, hybrid mode latched on |f̄| (kernel_feedforward)
 *
 * J = J_ee_lwa (LOCAL_WORLD_ALIGNED at the EE, rows [v; ω]); f_ext = the force part of
 * WrenchState.ext_world (environment on tool, world axes) [N]; τ [N·m]. docs/theory/force_control.md states
 * the filter, the set-point and the hybrid feedforward.
 *
 * The scalar part follows KhatibController._compute_python's Python floats operation for operation (same
 * expressions, same order; compiled without fused multiply-add, setup.py), so F_I is equal to the Python
 * path bit for bit, and so are the filter, set-point and latch states and the diagnostics; the rotation
 * error is kernel_so3_log where Python calls Pinocchio's log3 (u agrees to round-off), and the joint-space
 * products are plain loops where Python calls BLAS. step() returns 0, or 1 when Λ⁻¹ has a Cholesky pivot
 * below the threshold (singular: the Python path then solves by least squares); on 1 nothing has been written, the
 * controller state included (the friction integral, the filter, the set-point and the latch), so the Python
 * path can run the step from the same state.
 */
#include "../sim/_kernel_util.h"
#include "../sim/_kernel_math.h"

enum { B_T, B_TWIST, B_REF, B_WRENCH, B_JVH, B_MINV, B_DJDQ, B_INTEGRAL, B_FI, B_FLAGS, B_TAU, B_DIAG, B_U,
       B_FF_F, B_FF_D, B_FF_HALF, B_FF_G, B_FF_STATE, B_FILT, B_FS, NBUF };
static const char *BUF_NAMES[NBUF] = {
    "T_world_ee", "twist_ee_lwa", "ref_flat", "ext_world", "J_v_h", "Minv", "dJdq_ee_lwa", "integral", "F_I",
    "flags", "tau", "diag", "u", "ff_f", "ff_d", "ff_half_f", "ff_g", "ff_state", "filt_state", "fs_state"};

/* The law's gains by name (KhatibConfig's keys, docs/theory/khatib.md; KhatibController._config_gains builds
 * the mapping; kernel_read_fields fills this struct from it by these names) */
typedef struct {
    double m, d, k;            /* M_d = m I [kg], D_d = d I [N·s/m], K_d = k I [N/m] */
    double m_rot, d_rot, k_rot; /* M_R [kg·m²], D_R [N·m·s/rad], K_R [N·m/rad] */
    double d_null;             /* D_null = d_null I [N·m·s/rad] */
    double k_i, f_i_max;       /* friction integral gain [N/(m·s)] and the clamp of F_I [N] */
    double contact_threshold;  /* |f̄| that freezes the integral [N] */
} KhatibGains;

static const KernelField KHATIB_GAINS[] = {
    KERNEL_FIELD_F64(KhatibGains, "m", m),
    KERNEL_FIELD_F64(KhatibGains, "d", d),
    KERNEL_FIELD_F64(KhatibGains, "k", k),
    KERNEL_FIELD_F64(KhatibGains, "m_rot", m_rot),
    KERNEL_FIELD_F64(KhatibGains, "d_rot", d_rot),
    KERNEL_FIELD_F64(KhatibGains, "k_rot", k_rot),
    KERNEL_FIELD_F64(KhatibGains, "d_null", d_null),
    KERNEL_FIELD_F64(KhatibGains, "k_i", k_i),
    KERNEL_FIELD_F64(KhatibGains, "f_i_max", f_i_max),
    KERNEL_FIELD_F64(KhatibGains, "contact_threshold", contact_threshold),
};
#define N_KHATIB_GAINS ((int)(sizeof(KHATIB_GAINS) / sizeof(KHATIB_GAINS[0])))

typedef struct {
    PyObject_HEAD
    int bound; /* 1 once __init__ has bound every array */
    Py_buffer views[NBUF];
    double *p[NBUF];
    int nv;
    /* the gains as the step reads them (from KhatibGains): −d, k, 1/m, k_rot, d_rot, 1/m_rot, d_null, k_i,
     * F_I,max, contact threshold */
    double md, k, inv_m, k_rot, d_rot, inv_mrot, dn, k_i, f_i_max, f_contact, dt, min_pivot;
    int use_integral, use_force_feedback;
    int ff_mode; /* 0 off (inactive), 1 torque, 2 velocity, 3 hybrid */
    int ff_damping;
    double ff_vel_eps, ff_threshold, ff_dw; /* ε; the hybrid mode's contact threshold [N] and T / T_blend */
    int filt_on;                            /* force filter on: f̄ = the low-pass of f_ext */
    double filt_beta;                       /* its β = 1 − exp(−T/τ_f) */
    int fs_on;                              /* force set-point on */
    KernelSetpoint fs;                      /* its constants */
    double *work; /* M⁻¹Jᵀ (nv×6), [Λ⁻¹; (J M⁻¹ q̇)ᵀ] (7×6), L (6×6), y (6), τ (nv) */
} KhatibKernel;

static void KhatibKernel_dealloc(KhatibKernel *self) {
    kernel_release(self->views, NBUF);
    PyMem_Free(self->work);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *KhatibKernel_step(KhatibKernel *self, PyObject *arg) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, "KhatibKernel: not bound (construction failed or was skipped)");
        return NULL;
    }
    const double t = PyFloat_AsDouble(arg); /* the snapshot's time [s] (the set-point's ramp) */
    if (t == -1.0 && PyErr_Occurred()) return NULL;
    double **p = self->p;
    const int nv = self->nv;
    const double *T = p[B_T], *tw = p[B_TWIST], *ref = p[B_REF], *fw = p[B_WRENCH];
    const double *Jvh = p[B_JVH], *Minv = p[B_MINV], *djdq = p[B_DJDQ];
    double *integral = p[B_INTEGRAL], *F_I = p[B_FI], *flags = p[B_FLAGS];
    const double md = self->md, k = self->k, inv_m = self->inv_m, k_rot = self->k_rot, d_rot = self->d_rot,
                 inv_mrot = self->inv_mrot, dn = self->dn;

    double x0 = T[3], x1 = T[7], x2 = T[11];
    double v0 = tw[0], v1 = tw[1], v2 = tw[2], w0 = tw[3], w1 = tw[4], w2 = tw[5];
    double ep0 = x0 - ref[0], ep1 = x1 - ref[1], ep2 = x2 - ref[2];  /* x − x_d */
    double ev0 = v0 - ref[3], ev1 = v1 - ref[4], ev2 = v2 - ref[5];  /* ẋ − ẋ_d */
    double f0 = fw[0], f1 = fw[1], f2 = fw[2];
    /* f̄: the force filter (the new state kept in filt: committed only once the step succeeds) */
    double filt[4];
    if (self->filt_on) {
        const double x3[3] = {f0, f1, f2};
        kernel_force_filter(p[B_FILT], self->filt_beta, x3, filt, 3);
        filt[3] = 1.0;
        f0 = filt[0]; f1 = filt[1]; f2 = filt[2];
    }
    const double f_norm = sqrt(f0 * f0 + f1 * f1 + f2 * f2); /* ‖f̄‖ (the hybrid feedforward's contact test) */
    /* the force set-point (new state in fs: committed only once the step succeeds) */
    double fs[KERNEL_SETPOINT_NSTATE], s_fs = 0.0;
    if (self->fs_on) {
        const double f3[3] = {f0, f1, f2}, v3[3] = {v0, v1, v2};
        memcpy(fs, p[B_FS], sizeof(fs));
        s_fs = kernel_setpoint_update(&self->fs, fs, t, f3, v3);
    }

    /* friction integral (new values kept in locals: committed only once the step succeeds) */
    int frozen = flags[0] != 0.0;
    double i0 = integral[0], i1 = integral[1], i2 = integral[2];
    double fi0 = F_I[0], fi1 = F_I[1], fi2 = F_I[2];
    int integrate = 0;
    if (self->use_integral && !frozen) {
        if (f_norm > self->f_contact) {
            frozen = 1;
        } else {
            double dt = self->dt;
            i0 -= ep0 * dt;
            i1 -= ep1 * dt;
            i2 -= ep2 * dt;
            fi0 = kernel_clamp_py(self->k_i * i0, -self->f_i_max, self->f_i_max);
            fi1 = kernel_clamp_py(self->k_i * i1, -self->f_i_max, self->f_i_max);
            fi2 = kernel_clamp_py(self->k_i * i2, -self->f_i_max, self->f_i_max);
            integrate = 1;
        }
    }

    const double *acc = ref + 6, *om = ref + 18, *al = ref + 21;
    double ac[3] = {acc[0], acc[1], acc[2]}, fu[3] = {fi0, fi1, fi2}, fe[3] = {f0, f1, f2};
    if (s_fs > 0.0) {
        /* hybrid impedance: along the mating axis the position impedance (pose error, reference motion,
         * friction integral, measured force) is faded out by s and the absolute velocity is damped */
        const KernelSetpoint *c = &self->fs;
        double e3[3] = {ep0, ep1, ep2}, w3[3] = {ev0, ev1, ev2};
        kernel_remove_axial(c, s_fs, e3);
        const double va = s_fs * (c->a0 * v0 + c->a1 * v1 + c->a2 * v2);
        kernel_remove_axial(c, s_fs, w3);
        ep0 = e3[0]; ep1 = e3[1]; ep2 = e3[2];
        ev0 = w3[0] + va * c->a0; ev1 = w3[1] + va * c->a1; ev2 = w3[2] + va * c->a2;
        kernel_remove_axial(c, s_fs, ac);
        kernel_remove_axial(c, s_fs, fu);
        kernel_remove_axial(c, s_fs, fe);
    }
    /* u_pos = ẍ_d + M_d⁻¹ (−D_d (ẋ − ẋ_d) − K_d (x − x_d) [+ F_I] [+ f̄]) */
    double g0 = ev0 * md - k * ep0, g1 = ev1 * md - k * ep1, g2 = ev2 * md - k * ep2;
    if (self->use_integral) {
        g0 += fu[0]; g1 += fu[1]; g2 += fu[2];
    }
    if (self->use_force_feedback) {
        g0 += fe[0]; g1 += fe[1]; g2 += fe[2];
    }
    /* e_R = log(R_d Rᵀ): entry (i, j) = R_d,i0 R_j0 + R_d,i1 R_j1 + R_d,i2 R_j2 then kernel_so3_log */
    const double *A = ref + 9;
    double B[9] = {T[0], T[1], T[2], T[4], T[5], T[6], T[8], T[9], T[10]};
    double Rab[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            Rab[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
    double e[3];
    if (kernel_so3_log(Rab[0], Rab[1], Rab[2], Rab[3], Rab[4], Rab[5], Rab[6], Rab[7], Rab[8], e))
        return PyLong_FromLong(1); /* where Python's math raises: the Python path takes the step */
    double u[6];
    u[0] = ac[0] + g0 * inv_m;
    u[1] = ac[1] + g1 * inv_m;
    u[2] = ac[2] + g2 * inv_m;
    u[3] = al[0] + (e[0] * k_rot + d_rot * (om[0] - w0)) * inv_mrot;
    u[4] = al[1] + (e[1] * k_rot + d_rot * (om[1] - w1)) * inv_mrot;
    u[5] = al[2] + (e[2] * k_rot + d_rot * (om[2] - w2)) * inv_mrot;

    /* [J; q̇ᵀ] M⁻¹ Jᵀ → rows 0–5 Λ⁻¹, row 6 (J M⁻¹ q̇)ᵀ (M⁻¹ symmetric) */
    double *MinvJt = self->work, *LiR = MinvJt + 6 * nv, *L = LiR + 42, *y = L + 36, *tau = y + 6;
    for (int i = 0; i < nv; i++)
        for (int j = 0; j < 6; j++) {
            double s = 0.0;
            for (int c = 0; c < nv; c++) s += Minv[i * nv + c] * Jvh[j * nv + c];
            MinvJt[6 * i + j] = s;
        }
    for (int r = 0; r < 7; r++)
        for (int j = 0; j < 6; j++) {
            double s = 0.0;
            for (int c = 0; c < nv; c++) s += Jvh[r * nv + c] * MinvJt[6 * c + j];
            LiR[6 * r + j] = s;
        }
    /* rhs = (u − J̇q̇) + d_null J M⁻¹ q̇ */
    for (int i = 0; i < 6; i++) y[i] = (u[i] - djdq[i]) + dn * LiR[36 + i];
    /* Cholesky Λ⁻¹ = L Lᵀ (lower), a pivot below min_pivot = singular → status 1, nothing written */
    memcpy(L, LiR, 36 * sizeof(double));
    if (kernel_cholesky(L, 6, self->min_pivot)) return PyLong_FromLong(1);
    kernel_cholesky_solve(L, 6, y, 1);
    /* τ = Jᵀ y − d_null q̇ + h  (rows 0–5 of J_v_h are J, row 6 q̇, row 7 h) */
    for (int c = 0; c < nv; c++) {
        double s = 0.0;
        for (int r = 0; r < 6; r++) s += Jvh[r * nv + c] * y[r];
        tau[c] = s - dn * Jvh[6 * nv + c] + Jvh[7 * nv + c];
    }
    if (s_fs > 0.0) { /* τ += J_vᵀ F_f, F_f = −a force_cmd */
        const double m = fs[5];
        const double tf0 = -m * self->fs.a0, tf1 = -m * self->fs.a1, tf2 = -m * self->fs.a2;
        for (int c = 0; c < nv; c++) tau[c] = tau[c] + (Jvh[c] * tf0 + Jvh[nv + c] * tf1 + Jvh[2 * nv + c] * tf2);
    }
    /* joint dissipation feedforward (controllers/feedforward.py; the hybrid latch on ‖f̄‖) */
    double ff_state[3];
    memcpy(ff_state, p[B_FF_STATE], sizeof(ff_state));
    if (self->ff_mode == 3) kernel_feedforward_latch(ff_state, f_norm, self->ff_threshold, self->ff_dw);
    kernel_feedforward(self->ff_mode, self->ff_damping, self->ff_vel_eps, ff_state[2], p[B_FF_F], p[B_FF_D],
                       p[B_FF_HALF], p[B_FF_G], Jvh + 6 * nv, tau, nv);
    /* commit: torque, task acceleration, controller state, diagnostics */
    memcpy(p[B_TAU], tau, (size_t)nv * sizeof(double));
    memcpy(p[B_U], u, sizeof(u));
    if (integrate) {
        integral[0] = i0; integral[1] = i1; integral[2] = i2;
        F_I[0] = fi0; F_I[1] = fi1; F_I[2] = fi2;
    }
    flags[0] = frozen ? 1.0 : 0.0;
    if (self->filt_on) memcpy(p[B_FILT], filt, sizeof(filt));
    if (self->fs_on) memcpy(p[B_FS], fs, sizeof(fs));
    if (self->ff_mode == 3) memcpy(p[B_FF_STATE], ff_state, sizeof(ff_state));
    double *diag = p[B_DIAG];
    diag[0] = fi0; diag[1] = fi1; diag[2] = fi2; diag[3] = frozen ? 1.0 : 0.0;
    if (self->fs_on) { /* s, F_d, f_a, I */
        diag[4] = fs[2]; diag[5] = fs[3]; diag[6] = fs[4]; diag[7] = fs[1];
    }
    return PyLong_FromLong(0);
}

static int KhatibKernel_init(KhatibKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"T_world_ee", "twist_ee_lwa", "ref_flat", "ext_world", "J_v_h", "Minv",
                             "dJdq_ee_lwa", "integral", "F_I", "flags", "tau", "diag", "u", "ff_f", "ff_d",
                             "ff_half_f", "ff_g", "ff_state", "filt_state", "fs_state", "gains", "dt", "min_pivot",
                             "use_integral", "use_force_feedback", "ff_mode", "ff_damping", "ff_vel_eps",
                             "ff_threshold", "ff_dw", "filt_on", "filt_beta", "fs_on", "fs_params", NULL};
    PyObject *o[NBUF];
    KhatibGains g;
    PyObject *gains, *fs_params;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOOOOOOOOOOOddppipdddpdpO", kwlist, &o[B_T], &o[B_TWIST],
                                     &o[B_REF], &o[B_WRENCH], &o[B_JVH], &o[B_MINV], &o[B_DJDQ], &o[B_INTEGRAL],
                                     &o[B_FI], &o[B_FLAGS], &o[B_TAU], &o[B_DIAG], &o[B_U], &o[B_FF_F], &o[B_FF_D],
                                     &o[B_FF_HALF], &o[B_FF_G], &o[B_FF_STATE], &o[B_FILT], &o[B_FS], &gains, &self->dt,
                                     &self->min_pivot, &self->use_integral, &self->use_force_feedback, &self->ff_mode,
                                     &self->ff_damping, &self->ff_vel_eps, &self->ff_threshold, &self->ff_dw,
                                     &self->filt_on, &self->filt_beta, &self->fs_on, &fs_params))
        return -1;
    if (kernel_setpoint_params("KhatibKernel", fs_params, &self->fs) < 0) return -1;
    if (kernel_read_fields("KhatibKernel", "gains", gains, KHATIB_GAINS, N_KHATIB_GAINS, &g) < 0) return -1;
    if (self->ff_mode < 0 || self->ff_mode > 3) {
        PyErr_SetString(PyExc_ValueError,
                        "KhatibKernel: ff_mode must be 0 (off), 1 (torque), 2 (velocity) or 3 (hybrid)");
        return -1;
    }
    /* −d and 1/m, 1/m_rot: one negation and two correctly rounded divisions, as the Python path's */
    self->md = -g.d; self->k = g.k; self->inv_m = 1.0 / g.m; self->k_rot = g.k_rot; self->d_rot = g.d_rot;
    self->inv_mrot = 1.0 / g.m_rot; self->dn = g.d_null; self->k_i = g.k_i; self->f_i_max = g.f_i_max;
    self->f_contact = g.contact_threshold;
    /* nv from tau, then every size checked against it */
    Py_buffer probe;
    if (kernel_bind("KhatibKernel", o[B_TAU], &probe, -1, 1, BUF_NAMES[B_TAU]) == NULL) return -1;
    Py_ssize_t nv = probe.len / 8;
    PyBuffer_Release(&probe);
    if (nv < 1 || nv > 64) {
        PyErr_Format(PyExc_ValueError, "KhatibKernel: tau must hold 1..64 floats, got %zd", nv);
        return -1;
    }
    self->nv = (int)nv;
    const Py_ssize_t ndiag = self->fs_on ? 8 : 4; /* F_I, frozen [, s, F_d, f_a, I] */
    const Py_ssize_t sizes[NBUF] = {16, 6, 24, 6, 8 * nv, nv * nv, 6, 3, 3, 1, nv, ndiag, 6, nv, nv, nv, nv,
                                    3, 4, KERNEL_SETPOINT_NSTATE};
    const int writable[NBUF] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1};
    self->bound = 0;
    kernel_release(self->views, NBUF); /* __init__ called again */
    for (int i = 0; i < NBUF; i++) {
        self->p[i] = kernel_bind("KhatibKernel", o[i], &self->views[i], sizes[i], writable[i], BUF_NAMES[i]);
        if (self->p[i] == NULL) return -1;
    }
    PyMem_Free(self->work);
    self->work = PyMem_Malloc(sizeof(double) * (size_t)(6 * nv + 42 + 36 + 6 + nv));
    if (self->work == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->bound = 1;
    return 0;
}

static PyMethodDef KhatibKernel_methods[] = {
    {"step", (PyCFunction)KhatibKernel_step, METH_O,
     "step(t) -> int: one control step at the snapshot's time t [s] into the bound arrays; returns 0, or 1 "
     "(singular Λ⁻¹, nothing written)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject KhatibKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "controllers._khatib_kernel.KhatibKernel",
    .tp_basicsize = sizeof(KhatibKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Khatib impedance step bound to one run's arrays (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)KhatibKernel_init,
    .tp_dealloc = (destructor)KhatibKernel_dealloc,
    .tp_methods = KhatibKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_khatib_kernel",
                                    "Compiled Khatib impedance step (controllers/khatib.py is the reference).",
                                    -1, NULL};

PyMODINIT_FUNC PyInit__khatib_kernel(void) { return kernel_module(&module, &KhatibKernelType, "KhatibKernel"); }
