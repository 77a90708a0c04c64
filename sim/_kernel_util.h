/*
 * Shared by the compiled kernels (sim/kernels.py): binding a kernel to the numpy arrays of one run, and
 * reading its gains by name (kernel_read_fields, below).
 *
 * kernel_bind() takes a Py_buffer on a contiguous float64 array (C or Fortran order: the kernels read
 * vectors, row-major matrices and exactly symmetric matrices, for which the order does not matter) and
 * checks its size; the kernel keeps the buffer (and so the array) for its lifetime and releases it in
 * its dealloc. Errors name the kernel and the argument.
 */
#ifndef DOCKBENCH_KERNEL_UTIL_H
#define DOCKBENCH_KERNEL_UTIL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#ifndef KERNEL_SOURCE_SHA256
#define KERNEL_SOURCE_SHA256 "unknown"
#endif
#ifndef KERNEL_REFERENCE_SHA256
#define KERNEL_REFERENCE_SHA256 ""
#endif

/* A pointer to the n doubles of obj (any number if n < 0; writable if asked), or NULL with an exception
 * set (TypeError for a non-float64 or read-only array, ValueError for a wrong size). */
static inline double *kernel_bind(const char *kernel, PyObject *obj, Py_buffer *view, Py_ssize_t n, int writable,
                           const char *name) {
    int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a contiguous%s float64 array", kernel, name,
                     writable ? " writable" : "");
        view->obj = NULL;
        return NULL;
    }
    if (view->format == NULL || strcmp(view->format, "d") != 0 || view->itemsize != 8) {
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_Format(PyExc_TypeError, "%s: %s must be float64", kernel, name);
        return NULL;
    }
    if (n >= 0 && view->len != n * 8) {
        Py_ssize_t got = view->len / 8;
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_Format(PyExc_ValueError, "%s: %s must hold %zd floats, got %zd", kernel, name, n, got);
        return NULL;
    }
    return (double *)view->buf;
}

/* A pointer to the rows × cols float64 matrix obj in any memory layout (C or Fortran order, or a strided
 * view such as Pinocchio's column-major blocks); *rs and *cs receive the row and column strides in
 * doubles, so element (i, j) is p[i * rs + j * cs]. NULL with an exception set on a mismatch. */
static inline double *kernel_bind_matrix(const char *kernel, PyObject *obj, Py_buffer *view, Py_ssize_t rows,
                                  Py_ssize_t cols, int writable, const char *name, Py_ssize_t *rs, Py_ssize_t *cs) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a%s float64 array", kernel, name, writable ? " writable" : "");
        view->obj = NULL;
        return NULL;
    }
    const char *why = NULL;
    if (view->format == NULL || strcmp(view->format, "d") != 0 || view->itemsize != 8)
        why = "must be float64";
    else if (view->ndim != 2 || view->shape[0] != rows || view->shape[1] != cols)
        why = "has the wrong shape";
    else if (view->strides[0] % 8 != 0 || view->strides[1] % 8 != 0)
        why = "must have strides in whole float64 steps";
    if (why != NULL) {
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_Format(PyExc_ValueError, "%s: %s %s (expected a %zd x %zd float64 matrix)", kernel, name, why, rows,
                     cols);
        return NULL;
    }
    *rs = view->strides[0] / 8;
    *cs = view->strides[1] / 8;
    return (double *)view->buf;
}

/* Release every bound buffer (dealloc, or before binding again). */
static inline void kernel_release(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++)
        if (views[i].obj != NULL) {
            PyBuffer_Release(&views[i]);
            views[i].obj = NULL;
        }
}

/* The module of one kernel type: PyType_Ready, the module, its SOURCE_SHA256 and REFERENCE_SHA256
 * constants (setup.py: the digest of the C source and headers; "path=digest,..." of the Python reference
 * modules it ports) and the type under `name`. A new reference, or NULL with an exception set. */
static inline PyObject *kernel_module(PyModuleDef *def, PyTypeObject *type, const char *name) {
    if (PyType_Ready(type) < 0) return NULL;
    PyObject *m = PyModule_Create(def);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", KERNEL_SOURCE_SHA256) < 0 ||
        PyModule_AddStringConstant(m, "REFERENCE_SHA256", KERNEL_REFERENCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) { /* steals the reference only on success */
        Py_DECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------------------------------------------
 * Gains and parameters by name
 *
 * A kernel's gains are a named C struct; a static table {name, offset, kind, n} of its fields says which
 * key of the Python mapping fills which field. kernel_read_fields() fills the struct from a dict of
 * name → value and fails, naming the kernel, the argument and the key, on a missing key, an unknown key or
 * a value of the wrong type: nothing is ever read by position. Adding a gain is one field, one table entry
 * and one entry of the law's mapping (docs/architecture.md, "Gains by name").
 * ------------------------------------------------------------------------------------------------ */
#include <stddef.h>

typedef enum {
    KERNEL_F64,       /* a float → double */
    KERNEL_BOOL,      /* a truth value → int (0 or 1) */
    KERNEL_F64_ARRAY, /* a sequence of n floats → double[n] */
} KernelFieldKind;

typedef struct {
    const char *name;  /* the key in the mapping */
    size_t offset;     /* offsetof(struct, field) */
    KernelFieldKind kind;
    Py_ssize_t n;      /* KERNEL_F64_ARRAY: its length (else 1) */
} KernelField;

#define KERNEL_FIELD_F64(type, key, field) {key, offsetof(type, field), KERNEL_F64, 1}
#define KERNEL_FIELD_BOOL(type, key, field) {key, offsetof(type, field), KERNEL_BOOL, 1}
#define KERNEL_FIELD_ARRAY(type, key, field, len) {key, offsetof(type, field), KERNEL_F64_ARRAY, len}

/* The table's keys "a, b, c" into buf (truncated with "..." if it does not fit). */
static inline void kernel_field_names(const KernelField *fields, int nfields, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nfields; i++) {
        int w = PyOS_snprintf(buf + used, size - used, "%s%s", i ? ", " : "", fields[i].name);
        if (w < 0 || (size_t)w >= size - used) {
            if (size > 4) strcpy(buf + size - 4, "...");
            return;
        }
        used += (size_t)w;
    }
}

/* Fill the struct at out from the dict `mapping` (the argument `arg` of `kernel`): every key of the table
 * must be there and no other. 0, or -1 with a ValueError (missing or unknown key, wrong length) or a
 * TypeError (not a dict, a value that is not a float / truth value) naming kernel, argument and key. */
static inline int kernel_read_fields(const char *kernel, const char *arg, PyObject *mapping,
                                     const KernelField *fields, int nfields, void *out) {
    char names[1024];
    if (!PyDict_Check(mapping)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a dict of name -> value, got %s", kernel, arg,
                     Py_TYPE(mapping)->tp_name);
        return -1;
    }
    /* an unknown key first: a misspelt gain names itself rather than the gain it was meant to be */
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(mapping, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (k == NULL) {
            PyErr_Clear();
            kernel_field_names(fields, nfields, names, sizeof(names));
            PyErr_Format(PyExc_ValueError, "%s: %s has a key %R that is not a gain name (expected: %s)", kernel, arg,
                         key, names);
            return -1;
        }
        int known = 0;
        for (int i = 0; i < nfields && !known; i++) known = strcmp(k, fields[i].name) == 0;
        if (!known) {
            kernel_field_names(fields, nfields, names, sizeof(names));
            PyErr_Format(PyExc_ValueError, "%s: %s has an unknown key '%s' (expected: %s)", kernel, arg, k, names);
            return -1;
        }
    }
    for (int i = 0; i < nfields; i++) {
        const KernelField *f = &fields[i];
        char *dst = (char *)out + f->offset;
        PyObject *v = PyDict_GetItemString(mapping, f->name); /* borrowed */
        if (v == NULL) {
            kernel_field_names(fields, nfields, names, sizeof(names));
            PyErr_Format(PyExc_ValueError, "%s: %s is missing the key '%s' (expected: %s)", kernel, arg, f->name,
                         names);
            return -1;
        }
        if (f->kind == KERNEL_BOOL) {
            int b = PyObject_IsTrue(v);
            if (b < 0) return -1;
            *(int *)dst = b;
        } else if (f->kind == KERNEL_F64) {
            double x = PyFloat_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "%s: %s['%s'] must be a float, got %s", kernel, arg, f->name,
                             Py_TYPE(v)->tp_name);
                return -1;
            }
            *(double *)dst = x;
        } else {
            PyObject *seq = PySequence_Fast(v, "");
            if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != f->n) {
                Py_XDECREF(seq);
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "%s: %s['%s'] must be a sequence of %zd floats", kernel, arg, f->name,
                             f->n);
                return -1;
            }
            double *a = (double *)dst;
            for (Py_ssize_t j = 0; j < f->n; j++) {
                a[j] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, j));
                if (a[j] == -1.0 && PyErr_Occurred()) {
                    Py_DECREF(seq);
                    PyErr_Clear();
                    PyErr_Format(PyExc_TypeError, "%s: %s['%s'][%zd] must be a float", kernel, arg, f->name, j);
                    return -1;
                }
            }
            Py_DECREF(seq);
        }
    }
    return 0;
}

#endif
