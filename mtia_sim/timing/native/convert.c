/* Flattens a launch's mtia_sim.events records (Python objects) into a Trace, through the Python C
 * API (the library is loaded with ctypes.PyDLL, so the GIL is held). Anything unusual (a subclass,
 * an unknown level, a malformed span) is refused with a reason: the caller then replays in Python,
 * which either handles it or raises its own error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "ktiming.h"

static char err[256];
const char *kt_error(void) { return err; }

typedef struct {
    PyTypeObject *core_t, *cmd_t, *fence_t, *end_t;
    PyObject *levels[NLV];   /* MemLevel members, in LV_* order */
    int npes, ncores;
} Spec;

static PyObject *s_pe, *s_core, *s_events, *s_instructions, *s_mem_accesses, *s_op, *s_unit, *s_elements,
    *s_flops, *s_bytes_read, *s_bytes_written, *s_reads, *s_writes, *s_dtype_bytes, *s_misaligned,
    *s_remote_pe, *s_matmul_mnk, *s_transcendental, *s_spans, *s_start, *s_end, *s_unit_mask, *s_level,
    *s_write, *s_base, *s_row_bytes, *s_counts, *s_strides, *s_starts;

static int intern_names(void) {
    if (s_pe) return 0;
#define I(v, s) if (!(v = PyUnicode_InternFromString(s))) return -1;
    I(s_pe, "pe") I(s_core, "core") I(s_events, "events") I(s_instructions, "instructions")
    I(s_mem_accesses, "mem_accesses") I(s_op, "op") I(s_unit, "unit") I(s_elements, "elements")
    I(s_flops, "flops") I(s_bytes_read, "bytes_read") I(s_bytes_written, "bytes_written") I(s_reads, "reads")
    I(s_writes, "writes") I(s_dtype_bytes, "dtype_bytes") I(s_misaligned, "misaligned")
    I(s_remote_pe, "remote_pe") I(s_matmul_mnk, "matmul_mnk") I(s_transcendental, "transcendental")
    I(s_spans, "spans") I(s_start, "start") I(s_end, "end") I(s_unit_mask, "unit_mask") I(s_level, "level")
    I(s_write, "write") I(s_base, "base") I(s_row_bytes, "row_bytes") I(s_counts, "counts")
    I(s_strides, "strides") I(s_starts, "starts")
#undef I
    return 0;
}

#define FAIL(...) do { snprintf(err, sizeof err, __VA_ARGS__); goto fail; } while (0)

static int as_int(PyObject *v, i64 *out) {
    int overflow = 0;
    PyObject *idx = NULL;
    if (!PyLong_Check(v)) {   /* numpy integers and other __index__ objects */
        if (PyBool_Check(v) || !(idx = PyNumber_Index(v))) { PyErr_Clear(); return -1; }
        v = idx;
    }
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_XDECREF(idx);
    if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
    *out = x;
    return 0;
}

/* an int attribute; -1 on error (with err set) */
static int get_int(PyObject *o, PyObject *name, i64 *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) { PyErr_Clear(); snprintf(err, sizeof err, "no attribute %s", PyUnicode_AsUTF8(name)); return -1; }
    int rc = as_int(v, out);
    Py_DECREF(v);
    if (rc) snprintf(err, sizeof err, "attribute %s is not an int", PyUnicode_AsUTF8(name));
    return rc;
}

static int get_bool(PyObject *o, PyObject *name, int *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int b = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (b < 0) return -1;
    *out = b;
    return 0;
}

static int level_code(const Spec *sp, PyObject *key) {
    for (int i = 0; i < NLV; i++) if (key == sp->levels[i]) return i;
    if (!PyUnicode_Check(key)) return -1;
    for (int i = 0; i < NLV; i++) {
        int eq = PyUnicode_Compare(key, sp->levels[i]);
        if (eq == 0) return i;
        if (eq == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    }
    return -1;
}

static int get_ldict(const Spec *sp, PyObject *o, PyObject *name, LDict *d) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    if (!PyDict_Check(v)) { Py_DECREF(v); snprintf(err, sizeof err, "bytes table is not a dict"); return -1; }
    Py_ssize_t pos = 0;
    PyObject *k, *val;
    d->n = 0;
    while (PyDict_Next(v, &pos, &k, &val)) {
        int code = level_code(sp, k);
        i64 x;
        if (code < 0 || as_int(val, &x) || x < 0 || d->n >= NLV) {
            Py_DECREF(v);
            snprintf(err, sizeof err, "bytes table entry is not (MemLevel, int >= 0)");
            return -1;
        }
        d->key[d->n] = code; d->val[d->n] = (double)x; d->n++;
    }
    Py_DECREF(v);
    return 0;
}

static int get_ranges(Trace *t, PyObject *o, PyObject *name, int *count) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    PyObject *seq = PySequence_Fast(v, "ranges");
    Py_DECREF(v);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (vec_reserve(&t->ranges, t->ranges.n + 2 * (size_t)n)) { Py_DECREF(seq); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        i64 s, e;
        if (get_int(r, s_start, &s) || get_int(r, s_end, &e)) { Py_DECREF(seq); return -1; }
        VAT(t->ranges, i64, t->ranges.n++) = s;
        VAT(t->ranges, i64, t->ranges.n++) = e;
    }
    *count = (int)n;
    Py_DECREF(seq);
    return 0;
}

static int get_int_tuple(PyObject *o, PyObject *name, i64 *out, int max, int *n) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    PyObject *seq = PySequence_Fast(v, "tuple");
    Py_DECREF(v);
    if (!seq) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k > max) { Py_DECREF(seq); snprintf(err, sizeof err, "too many dims"); return -1; }
    for (Py_ssize_t i = 0; i < k; i++)
        if (as_int(PySequence_Fast_GET_ITEM(seq, i), &out[i])) { Py_DECREF(seq); return -1; }
    *n = (int)k;
    Py_DECREF(seq);
    return 0;
}

static int get_spans(const Spec *spc, Trace *t, PyObject *o, CmdStatic *cs) {
    PyObject *v = PyObject_GetAttr(o, s_spans);
    if (!v) return -1;
    PyObject *seq = PySequence_Fast(v, "spans");
    Py_DECREF(v);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    cs->span_lo = (i64)t->spans.n;
    cs->nspans = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        Span *sp = vec_push(&t->spans);
        if (!sp) goto fail;
        PyObject *lv = PyObject_GetAttr(s, s_level);
        if (!lv) goto fail;
        sp->level = level_code(spc, lv);
        Py_DECREF(lv);
        if (sp->level < 0) FAIL("span level is not a MemLevel");
        if (get_bool(s, s_write, &sp->write) || get_int(s, s_base, &sp->base)
                || get_int(s, s_row_bytes, &sp->row_bytes))
            goto fail;
        if (sp->row_bytes <= 0) FAIL("span with row_bytes <= 0");
        i64 counts[16], strides[16];
        int nc, ns;
        if (get_int_tuple(s, s_counts, counts, 16, &nc) || get_int_tuple(s, s_strides, strides, 16, &ns))
            goto fail;
        if (nc != ns) FAIL("span counts and strides differ in length");
        for (int d = 0; d < nc; d++) if (counts[d] < 0) FAIL("span with a negative count");
        sp->ndims = nc;
        sp->dims_lo = (i64)(t->dims.n / 2);
        if (vec_reserve(&t->dims, t->dims.n + 2 * (size_t)nc)) goto fail;
        for (int d = 0; d < nc; d++) {
            VAT(t->dims, i64, t->dims.n++) = counts[d];
            VAT(t->dims, i64, t->dims.n++) = strides[d];
        }
        sp->starts_lo = -1;
        PyObject *st = PyObject_GetAttr(s, s_starts);
        if (!st) goto fail;
        if (st != Py_None) {
            Py_buffer b;
            if (PyObject_GetBuffer(st, &b, PyBUF_STRIDES | PyBUF_FORMAT)) {
                PyErr_Clear();
                Py_DECREF(st);
                FAIL("span starts is not an int64 array");
            }
            const char *f = b.format ? b.format : "B";
            if (*f == '<' || *f == '=' || *f == '@') f++;
            if (b.itemsize != 8 || b.ndim != 1 || (strcmp(f, "q") && strcmp(f, "l"))) {
                PyBuffer_Release(&b); Py_DECREF(st);
                FAIL("span starts is not a one-dimensional int64 array");
            }
            i64 cnt = (i64)b.shape[0];
            sp->starts_lo = (i64)t->starts.n;
            sp->nstarts = cnt;
            if (vec_reserve(&t->starts, t->starts.n + (size_t)cnt)) { PyBuffer_Release(&b); Py_DECREF(st); goto fail; }
            for (i64 k = 0; k < cnt; k++)   /* any stride (a reversed or sliced view) */
                memcpy((i64 *)t->starts.p + t->starts.n + k, (const char *)b.buf + k * b.strides[0], 8);
            t->starts.n += (size_t)cnt;
            PyBuffer_Release(&b);
        }
        Py_DECREF(st);
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

static int convert_command(const Spec *sp, Trace *t, PyObject *ev) {
    size_t id = t->cmds.n;
    CmdStatic *cs = vec_push(&t->cmds);
    if (!cs) return -1;
    i64 x;
    if (get_int(ev, s_op, &x)) return -1;
    cs->op = (int)x;
    if (get_int(ev, s_unit, &x)) return -1;
    if (x < U_DMA || x > U_MLU) { snprintf(err, sizeof err, "command unit %lld", (long long)x); return -1; }
    cs->unit = (int)x;
    if (get_int(ev, s_elements, &cs->elements) || get_int(ev, s_flops, &cs->flops)) return -1;
    if (get_int(ev, s_dtype_bytes, &x)) return -1;
    cs->dtype = (int)x;
    if (get_bool(ev, s_misaligned, &cs->misaligned) || get_bool(ev, s_transcendental, &cs->transc)) return -1;
    PyObject *v = PyObject_GetAttr(ev, s_remote_pe);
    if (!v) return -1;
    cs->remote = -1;
    if (v != Py_None) {
        if (as_int(v, &x) || x < 0 || x >= sp->npes) {
            Py_DECREF(v); snprintf(err, sizeof err, "remote_pe out of range"); return -1;
        }
        cs->remote = (int)x;
    }
    Py_DECREF(v);
    v = PyObject_GetAttr(ev, s_matmul_mnk);
    if (!v) return -1;
    cs->has_mnk = 0;
    if (v != Py_None) {
        int truth = PyObject_IsTrue(v);
        if (truth) {
            PyObject *seq = PySequence_Fast(v, "mnk");
            if (!seq || PySequence_Fast_GET_SIZE(seq) != 3) {
                Py_XDECREF(seq); Py_DECREF(v); snprintf(err, sizeof err, "matmul_mnk is not (m, n, k)"); return -1;
            }
            for (int i = 0; i < 3; i++)
                if (as_int(PySequence_Fast_GET_ITEM(seq, i), &cs->mnk[i])) {
                    Py_DECREF(seq); Py_DECREF(v); return -1;
                }
            Py_DECREF(seq);
            cs->has_mnk = 1;
        } else if (truth < 0) { Py_DECREF(v); return -1; }
    }
    Py_DECREF(v);
    if (get_ldict(sp, ev, s_bytes_read, &cs->br) || get_ldict(sp, ev, s_bytes_written, &cs->bw)) return -1;
    cs->range_lo = (i64)(t->ranges.n / 2);
    if (get_ranges(t, ev, s_reads, &cs->nreads) || get_ranges(t, ev, s_writes, &cs->nwrites)) return -1;
    if (get_spans(sp, t, ev, cs)) return -1;
    i64 *arg = vec_push(&t->ev_arg);
    if (!arg) return -1;
    *arg = (i64)id;
    return 0;
}

static int convert_core_event(const Spec *sp, Trace *t, PyObject *ev) {
    (void)sp;
    i64 n;
    if (get_int(ev, s_instructions, &n)) return -1;
    i64 *arg = vec_push(&t->ev_arg);
    if (!arg) return -1;
    *arg = n;
    PyObject *v = PyObject_GetAttr(ev, s_mem_accesses);
    if (!v) return -1;
    PyObject *seq = PySequence_Fast(v, "mem_accesses");
    Py_DECREF(v);
    if (!seq) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    VAT(t->ev_mem, i64, t->ev_kind.n - 1) = (i64)(t->mem.n / 3);
    VAT(t->ev_nmem, int32_t, t->ev_kind.n - 1) = (int32_t)k;
    if (vec_reserve(&t->mem, t->mem.n + 3 * (size_t)k)) { Py_DECREF(seq); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *a = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *as = PySequence_Fast(a, "access");
        i64 cnt, nb;
        if (!as || PySequence_Fast_GET_SIZE(as) != 3) { Py_XDECREF(as); Py_DECREF(seq); snprintf(err, sizeof err, "mem access is not (level, count, bytes)"); return -1; }
        PyObject *lv = PySequence_Fast_GET_ITEM(as, 0);
        int level = -1;
        if (PyUnicode_Check(lv)) {
            if (PyUnicode_CompareWithASCIIString(lv, "dram") == 0) level = 0;
            else if (PyUnicode_CompareWithASCIIString(lv, "sram") == 0) level = 1;
        }
        if (level < 0 || as_int(PySequence_Fast_GET_ITEM(as, 1), &cnt) || as_int(PySequence_Fast_GET_ITEM(as, 2), &nb)) {
            Py_DECREF(as); Py_DECREF(seq); snprintf(err, sizeof err, "scalar access not to dram/sram"); return -1;
        }
        Py_DECREF(as);
        VAT(t->mem, i64, t->mem.n++) = level;
        VAT(t->mem, i64, t->mem.n++) = cnt;
        VAT(t->mem, i64, t->mem.n++) = nb;
    }
    Py_DECREF(seq);
    return 0;
}

static int convert_events(const Spec *sp, Trace *t, PyObject *events) {
    PyObject *seq = PySequence_Fast(events, "events");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ev = PySequence_Fast_GET_ITEM(seq, i);
        PyTypeObject *ty = Py_TYPE(ev);
        int8_t *kind = vec_push(&t->ev_kind);
        i64 *mem = vec_push(&t->ev_mem);
        int32_t *nmem = vec_push(&t->ev_nmem);
        if (!kind || !mem || !nmem) goto fail;
        *mem = -1;
        int rc;
        if (ty == sp->core_t) { *kind = EV_CORE; rc = convert_core_event(sp, t, ev); }
        else if (ty == sp->cmd_t) { *kind = EV_CMD; rc = convert_command(sp, t, ev); }
        else if (ty == sp->fence_t) {
            *kind = EV_FENCE;
            i64 mask;
            i64 *arg = vec_push(&t->ev_arg);
            rc = !arg || get_int(ev, s_unit_mask, &mask);
            if (!rc) *arg = mask;
        } else if (ty == sp->end_t) {
            *kind = EV_END;
            rc = vec_push(&t->ev_arg) == NULL;
        } else FAIL("event of type %s", ty->tp_name);
        if (rc) goto fail;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* spec: (CoreEvent, CommandEvent, FenceEvent, EndEvent, LOCAL, REMOTE_LOCAL, SRAM, DRAM) */
Trace *kt_convert(PyObject *traces, PyObject *spec, int npes, int ncores) {
    err[0] = 0;
    Spec sp;
    if (intern_names() || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 8) {
        PyErr_Clear(); snprintf(err, sizeof err, "bad spec"); return NULL;
    }
    sp.core_t = (PyTypeObject *)PyTuple_GET_ITEM(spec, 0);
    sp.cmd_t = (PyTypeObject *)PyTuple_GET_ITEM(spec, 1);
    sp.fence_t = (PyTypeObject *)PyTuple_GET_ITEM(spec, 2);
    sp.end_t = (PyTypeObject *)PyTuple_GET_ITEM(spec, 3);
    for (int i = 0; i < NLV; i++) sp.levels[i] = PyTuple_GET_ITEM(spec, 4 + i);
    sp.npes = npes; sp.ncores = ncores;
    Trace *t = calloc(1, sizeof(Trace));
    if (!t) return NULL;
    trace_init(t);
    PyObject *seq = PySequence_Fast(traces, "traces");
    if (!seq) goto fail_nodecref;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tr = PySequence_Fast_GET_ITEM(seq, i);
        i64 pe, core;
        if (get_int(tr, s_pe, &pe) || get_int(tr, s_core, &core)) goto fail;
        if (pe < 0 || pe >= npes || core < 0 || core >= ncores) FAIL("program on PE %lld core %lld", (long long)pe, (long long)core);
        ProgStatic *ps = vec_push(&t->progs);
        if (!ps) goto fail;
        ps->pe = (int)pe; ps->core = (int)core; ps->ev_lo = (i64)t->ev_kind.n;
        PyObject *evs = PyObject_GetAttr(tr, s_events);
        if (!evs) goto fail;
        int rc = convert_events(&sp, t, evs);
        Py_DECREF(evs);
        if (rc) goto fail;
        VAT(t->progs, ProgStatic, i).ev_hi = (i64)t->ev_kind.n;
    }
    Py_DECREF(seq);
    return t;
fail:
    Py_DECREF(seq);
fail_nodecref:
    if (!err[0]) snprintf(err, sizeof err, "out of memory or a malformed record");
    PyErr_Clear();
    trace_free(t);
    free(t);
    return NULL;
}

void kt_trace_free(Trace *t) { if (t) { trace_free(t); free(t); } }
