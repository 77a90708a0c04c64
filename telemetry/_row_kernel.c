/*
 * The telemetry row of one control step (telemetry/rows.py is the reference): the five step scalars
 * (t, saturated, tool contacts, all contacts, manipulability) written into the bound scalar array, then every
 * bound source array copied, in order, into row `row` of the bound block. The same bytes as the reference's
 * `numpy.concatenate(sources, out=block[row])` (a copy of float64 values), without one numpy call per source.
 */
#include "../sim/_kernel_util.h"

#define NFIXED 4 /* block, scal, tau_cmd, tau */

typedef struct {
    PyObject_HEAD
    int bound;
    Py_ssize_t n;        /* number of sources */
    Py_ssize_t rows;     /* rows of the block */
    Py_ssize_t width;    /* columns of the block = the sources' total length */
    Py_ssize_t nv;       /* length of tau_cmd and tau */
    double *block, *scal, *tau_cmd, *tau;
    double **src;        /* the sources' data */
    Py_ssize_t *len;     /* the sources' lengths in doubles */
    Py_buffer fixed[NFIXED];
    Py_buffer *views;    /* the sources' buffers */
} RowKernel;

static void RowKernel_release(RowKernel *self) {
    kernel_release(self->fixed, NFIXED);
    if (self->views != NULL) {
        kernel_release(self->views, (int)self->n);
        PyMem_Free(self->views);
        self->views = NULL;
    }
    PyMem_Free(self->src);
    PyMem_Free(self->len);
    self->src = NULL;
    self->len = NULL;
    self->bound = 0;
}

static void RowKernel_dealloc(RowKernel *self) {
    RowKernel_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* write(row, t, tool_contacts, contacts, manipulability) */
static PyObject *RowKernel_write(RowKernel *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!self->bound) {
        PyErr_SetString(PyExc_RuntimeError, "RowKernel: not bound");
        return NULL;
    }
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "RowKernel.write(row, t, tool_contacts, contacts, manipulability)");
        return NULL;
    }
    Py_ssize_t row = PyLong_AsSsize_t(args[0]);
    if (row == -1 && PyErr_Occurred()) return NULL;
    if (row < 0 || row >= self->rows) {
        PyErr_Format(PyExc_IndexError, "RowKernel: row %zd outside the block's %zd rows", row, self->rows);
        return NULL;
    }
    double v[5];
    v[0] = PyFloat_AsDouble(args[1]);
    v[2] = PyFloat_AsDouble(args[2]);
    v[3] = PyFloat_AsDouble(args[3]);
    v[4] = PyFloat_AsDouble(args[4]);
    if (PyErr_Occurred()) return NULL;
    /* saturated: clipping changed a joint torque (a NaN compares unequal, as in the reference) */
    int saturated = 0;
    for (Py_ssize_t k = 0; k < self->nv; k++)
        if (!(self->tau_cmd[k] == self->tau[k])) saturated = 1;
    v[1] = saturated ? 1.0 : 0.0;
    memcpy(self->scal, v, sizeof(v));
    double *out = self->block + row * self->width;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        memcpy(out, self->src[i], (size_t)self->len[i] * sizeof(double));
        out += self->len[i];
    }
    Py_RETURN_NONE;
}

static int RowKernel_init(RowKernel *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"sources", "block", "scal", "tau_cmd", "tau", NULL};
    PyObject *sources, *o[NFIXED];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO", kwlist, &sources, &o[0], &o[1], &o[2], &o[3])) return -1;
    RowKernel_release(self);
    Py_ssize_t rs, cs;
    Py_buffer probe;
    /* the block: a C-contiguous rows × width float64 matrix */
    if (PyObject_GetBuffer(o[0], &probe, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
        PyErr_SetString(PyExc_TypeError, "RowKernel: block must be a float64 matrix");
        return -1;
    }
    Py_ssize_t rows = probe.ndim == 2 ? probe.shape[0] : -1, width = probe.ndim == 2 ? probe.shape[1] : -1;
    PyBuffer_Release(&probe);
    if (rows < 0) {
        PyErr_SetString(PyExc_ValueError, "RowKernel: block must be a 2-D matrix");
        return -1;
    }
    self->block = kernel_bind_matrix("RowKernel", o[0], &self->fixed[0], rows, width, 1, "block", &rs, &cs);
    if (self->block == NULL) return -1;
    if (cs != 1 || rs != width) {
        RowKernel_release(self);
        PyErr_SetString(PyExc_ValueError, "RowKernel: block must be C-contiguous");
        return -1;
    }
    self->scal = kernel_bind("RowKernel", o[1], &self->fixed[1], 5, 1, "scal");
    if (self->scal == NULL) { RowKernel_release(self); return -1; }
    self->tau_cmd = kernel_bind("RowKernel", o[2], &self->fixed[2], -1, 0, "tau_cmd");
    if (self->tau_cmd == NULL) { RowKernel_release(self); return -1; }
    self->nv = self->fixed[2].len / 8;
    self->tau = kernel_bind("RowKernel", o[3], &self->fixed[3], self->nv, 0, "tau");
    if (self->tau == NULL) { RowKernel_release(self); return -1; }
    PyObject *seq = PySequence_Fast(sources, "RowKernel: sources must be a sequence of arrays");
    if (seq == NULL) { RowKernel_release(self); return -1; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->views = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_buffer));
    self->src = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(double *));
    self->len = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_ssize_t));
    if (self->views == NULL || self->src == NULL || self->len == NULL) {
        Py_DECREF(seq);
        RowKernel_release(self);
        PyErr_NoMemory();
        return -1;
    }
    self->n = n;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "sources[%zd]", i);
        self->src[i] = kernel_bind("RowKernel", PySequence_Fast_GET_ITEM(seq, i), &self->views[i], -1, 0, name);
        if (self->src[i] == NULL) {
            Py_DECREF(seq);
            RowKernel_release(self);
            return -1;
        }
        self->len[i] = self->views[i].len / 8;
        total += self->len[i];
    }
    Py_DECREF(seq);
    if (total != width) {
        RowKernel_release(self);
        PyErr_Format(PyExc_ValueError, "RowKernel: the sources hold %zd floats, the block's rows %zd", total, width);
        return -1;
    }
    self->rows = rows;
    self->width = width;
    self->bound = 1;
    return 0;
}

static PyMethodDef RowKernel_methods[] = {
    {"write", (PyCFunction)(void (*)(void))RowKernel_write, METH_FASTCALL,
     "write(row, t, tool_contacts, contacts, manipulability): the step scalars, then every source into block[row]."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject RowKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "telemetry._row_kernel.RowKernel",
    .tp_basicsize = sizeof(RowKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One telemetry row per control step, bound to the run's sources and block (telemetry/rows.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RowKernel_init,
    .tp_dealloc = (destructor)RowKernel_dealloc,
    .tp_methods = RowKernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_row_kernel",
                                    "Compiled telemetry row copy (telemetry/rows.py is the reference).", -1, NULL};

PyMODINIT_FUNC PyInit__row_kernel(void) { return kernel_module(&module, &RowKernelType, "RowKernel"); }
