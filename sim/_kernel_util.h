/*
 * Shared by the compiled kernels (sim/kernels.py): binding a kernel to the numpy arrays of one run.
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

#endif
