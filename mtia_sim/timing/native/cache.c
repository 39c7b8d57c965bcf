/* The SRAM as a memory-side LRU cache in front of DRAM: a port of mtia_sim/timing/sram_cache.py
 * (the reference; same line states, clock, batched eviction and merged misses). */
#include <stdlib.h>
#include <string.h>
#include "ktiming.h"

void ld_set(LDict *d, int key, double v) {
    for (int i = 0; i < d->n; i++)
        if (d->key[i] == key) { d->val[i] = v; return; }
    d->key[d->n] = key; d->val[d->n] = v; d->n++;
}

double ld_get(const LDict *d, int key) {
    for (int i = 0; i < d->n; i++)
        if (d->key[i] == key) return d->val[i];
    return 0.0;
}

int ld_has(const LDict *d, int key) {
    for (int i = 0; i < d->n; i++)
        if (d->key[i] == key) return 1;
    return 0;
}

static void ld_drop_zero(LDict *d) {
    int j = 0;
    for (int i = 0; i < d->n; i++)
        if (d->val[i] != 0.0) { d->key[j] = d->key[i]; d->val[j] = d->val[i]; j++; }
    d->n = j;
}

static i64 floordiv(i64 a, i64 b) {
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

int cache_init(Cache *c, int mode, i64 capacity_lines, i64 line, i64 base_line) {
    memset(c, 0, sizeof *c);
    c->mode = mode; c->capacity = capacity_lines; c->line = line; c->base_line = base_line;
    c->shift = -1;
    for (int k = 0; k < 62; k++) if (((i64)1 << k) == line) c->shift = k;
    return 0;
}

/* floor(a / line): a shift when the line is a power of two (the usual case) */
static inline i64 line_of(const Cache *c, i64 a) {
    if (c->shift >= 0) return a >> c->shift;   /* arithmetic shift: floor also below zero */
    return floordiv(a, c->line);
}

void cache_free(Cache *c) {
    free(c->stamps); free(c->buf); free(c->hist);
    c->stamps = NULL; c->buf = NULL; c->hist = NULL;
}

static int buf_need(Cache *c, size_t n) {
    if (n <= c->bufcap) return 0;
    size_t cap = c->bufcap ? c->bufcap : 1024;
    while (cap < n) cap *= 2;
    i64 *p = realloc(c->buf, cap * sizeof(i64));
    if (!p) return -1;
    c->buf = p; c->bufcap = cap;
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    i64 x = *(const i64 *)a, y = *(const i64 *)b;
    return (x > y) - (x < y);
}

/* Lines of one span appended to c->buf at *n (relative to DRAM's first line); clears *sorted when
 * they do not keep c->buf strictly increasing. */
static int span_rows_lines(Cache *c, const Trace *t, const Span *sp, size_t *n, int *sorted) {
    i64 line = c->line;
    i64 nrows = 1;
    const i64 *dims = sp->ndims ? &VAT(t->dims, i64, 2 * sp->dims_lo) : NULL;
    if (sp->starts_lo >= 0) nrows = sp->nstarts;
    else for (int d = 0; d < sp->ndims; d++) nrows *= dims[2 * d];
    if (nrows <= 0) return 0;
    i64 per_max = floordiv(line - 1 + sp->row_bytes + line - 1, line) + 1;  /* bound on lines per row */
    if (buf_need(c, *n + (size_t)nrows * (size_t)per_max)) return -1;
    if (sp->starts_lo < 0 && sp->ndims <= 1) {   /* the usual case: one strided run of rows */
        i64 stride = sp->ndims ? dims[1] : 0, start = sp->base, base = c->base_line;
        i64 *out = c->buf + *n;
        i64 prev = *n ? out[-1] : INT64_MIN;
        for (i64 r = 0; r < nrows; r++, start += stride) {
            i64 first = line_of(c, start) - base, last = line_of(c, start + sp->row_bytes - 1) - base;
            if (first <= prev) *sorted = 0;
            for (i64 l = first; l <= last; l++) *out++ = l;
            prev = last;
        }
        *n = (size_t)(out - c->buf);
        return 0;
    }
    i64 idx[16] = {0};
    for (i64 r = 0; r < nrows; r++) {
        i64 start;
        if (sp->starts_lo >= 0) start = VAT(t->starts, i64, sp->starts_lo + r);
        else {  /* row r in C order over dims (outer first), as MemSpan.row_starts */
            start = sp->base;
            for (int d = 0; d < sp->ndims; d++) start += idx[d] * dims[2 * d + 1];
            for (int d = sp->ndims - 1; d >= 0; d--) {
                if (++idx[d] < dims[2 * d]) break;
                idx[d] = 0;
            }
        }
        i64 first = line_of(c, start) - c->base_line, last = line_of(c, start + sp->row_bytes - 1) - c->base_line;
        if (*n && first <= c->buf[*n - 1]) *sorted = 0;
        for (i64 l = first; l <= last; l++) c->buf[(*n)++] = l;
    }
    return 0;
}

/* The lines of the DRAM spans with `write`, relative to DRAM's first line, sorted and unique, in
 * c->buf; returns their count, 0 when the piece is None (no lines, or below DRAM), -1 no memory. */
static i64 piece_lines(Cache *c, const Trace *t, const CmdStatic *cs, int write) {
    const Span *sp0 = NULL;
    int nsel = 0;
    for (int i = 0; i < cs->nspans; i++) {
        const Span *sp = &VAT(t->spans, Span, cs->span_lo + i);
        if (sp->level == LV_DRAM && sp->write == write) { if (!nsel) sp0 = sp; nsel++; }
    }
    if (!nsel) return 0;
    size_t n = 0;
    if (nsel == 1 && sp0->starts_lo < 0 && sp0->ndims == 0) {
        i64 lo = line_of(c, sp0->base) - c->base_line;
        i64 hi = line_of(c, sp0->base + sp0->row_bytes - 1) - c->base_line + 1;
        if (hi <= lo || lo < 0) return 0;
        if (buf_need(c, (size_t)(hi - lo))) return -1;
        for (i64 l = lo; l < hi; l++) c->buf[n++] = l;
        return (i64)n;
    }
    int sorted = 1;
    for (int i = 0; i < cs->nspans; i++) {
        const Span *sp = &VAT(t->spans, Span, cs->span_lo + i);
        if (sp->level == LV_DRAM && sp->write == write && span_rows_lines(c, t, sp, &n, &sorted)) return -1;
    }
    if (!n) return 0;
    if (!sorted) {
        qsort(c->buf, n, sizeof(i64), cmp_i64);
        size_t j = 1;
        for (size_t i = 1; i < n; i++)
            if (c->buf[i] != c->buf[j - 1]) c->buf[j++] = c->buf[i];
        n = j;
    }
    if (c->buf[0] < 0) return 0;
    return (i64)n;
}

static int grow_stamps(Cache *c, i64 top) {
    if (top <= c->nstamps) return 0;
    i64 size = top > 2 * c->nstamps ? top : 2 * c->nstamps;
    int32_t *p = realloc(c->stamps, (size_t)size * sizeof(int32_t));
    if (!p) return -1;
    memset(p + c->nstamps, 0, (size_t)(size - c->nstamps) * sizeof(int32_t));
    c->stamps = p; c->nstamps = size;
    return 0;
}

/* Lines per positive stamp (clock value), so that eviction finds the LRU threshold without
 * sorting: the k-th smallest stamp is where the running count reaches k. */
static int hist_need(Cache *c, i64 clock) {
    if (clock < c->nhist) return 0;
    i64 size = c->nhist ? c->nhist : 1024;
    while (size <= clock) size *= 2;
    i64 *p = realloc(c->hist, (size_t)size * sizeof(i64));
    if (!p) return -1;
    memset(p + c->nhist, 0, (size_t)(size - c->nhist) * sizeof(i64));
    c->hist = p; c->nhist = size;
    return 0;
}

/* SramCache._evict: drop the least recently used lines until 7/8 of the capacity is in use (lines
 * in flight are never evicted); the threshold is the (drop)-th smallest positive stamp, as
 * np.partition finds it, and every line at or below it goes. */
static void evict(Cache *c) {
    i64 keep = c->capacity - c->capacity / 8;
    i64 drop = c->npos - keep;
    if (drop <= 0) return;
    i64 threshold = 0;
    if (keep > 0) {
        i64 seen = 0;
        for (threshold = 1; threshold <= c->clock; threshold++) {
            seen += c->hist[threshold];
            if (seen >= drop) break;
        }
    } else {
        for (threshold = c->clock; threshold > 0 && !c->hist[threshold]; threshold--) {}
    }
    i64 evicted = 0;
    int32_t *st = c->stamps;
    for (i64 i = 0; i < c->nstamps; i++) {
        int32_t s = st[i];
        if (s > 0 && s <= threshold) { c->hist[s]--; st[i] = 0; evicted++; }
    }
    c->npos -= evicted;
    c->resident -= evicted;
    c->evicted += evicted;
}

static int add_wait(Routed *r, i64 fid) {
    for (int i = 0; i < r->nwaits; i++)
        if (r->waits[i] == fid) return 0;
    if (r->nwaits == r->capwaits) {
        int cap = r->capwaits ? 2 * r->capwaits : 4;
        i64 *p = realloc(r->waits, (size_t)cap * sizeof(i64));
        if (!p) return -1;
        r->waits = p; r->capwaits = cap;
    }
    r->waits[r->nwaits++] = fid;
    return 0;
}

/* SramCache._access: the fraction of the lines served by the SRAM; -1.0 on out of memory. */
static double access(Cache *c, const Trace *t, const CmdStatic *cs, int write, i64 fill_id, Routed *r) {
    i64 total = piece_lines(c, t, cs, write);
    if (total < 0) return -1.0;
    if (total == 0) return 0.0;
    if (grow_stamps(c, c->buf[total - 1] + 1) || hist_need(c, c->clock + 1)) return -1.0;
    c->clock += 1;
    i64 n_new = 0;
    int32_t *st = c->stamps;
    int32_t last_wait = 0;
    for (i64 i = 0; i < total; i++) {
        int32_t s = st[c->buf[i]];
        if (s == 0) n_new++;
        else if (s < 0 && s != last_wait) {   /* runs of lines share one fill */
            if (add_wait(r, -(i64)s)) return -1.0;
            last_wait = s;
        }
    }
    int placed = c->mode == MODE_RESIDENT && c->resident + n_new <= c->capacity;
    i64 value = placed ? c->clock : -fill_id;
    if (placed) { if (write) c->placed_w += n_new; else c->placed_r += n_new; }
    i64 missed = value < 0 ? n_new : 0;
    if (missed) {
        i64 *p = realloc(r->fill_lines, (size_t)(r->nfill + missed) * sizeof(i64));
        if (!p) return -1.0;
        r->fill_lines = p;
    }
    i64 now_used = 0;
    for (i64 i = 0; i < total; i++) {
        i64 l = c->buf[i];
        if (st[l] > 0) { c->hist[st[l]]--; st[l] = (int32_t)c->clock; now_used++; }
        else if (st[l] == 0) {
            st[l] = (int32_t)value;
            if (missed) r->fill_lines[r->nfill++] = l;
            else now_used++;   /* placed at once (resident mode) */
        }
    }
    c->hist[c->clock] += now_used;
    if (value > 0) c->npos += n_new;
    c->resident += n_new;
    if (missed) r->fill_id = fill_id;
    c->hit_lines += total - missed;
    c->miss_lines += missed;
    if (c->resident > c->capacity) evict(c);
    return (double)(total - missed) / (double)total;
}

int cache_route(Cache *c, const Trace *t, const CmdStatic *cs, i64 fill_id, Routed *r) {
    double dram_r = ld_get(&cs->br, LV_DRAM), dram_w = ld_get(&cs->bw, LV_DRAM);
    if (c->mode == MODE_OFF || !(dram_r != 0 || dram_w != 0) || !cs->nspans) return 0;
    r->read = cs->br; r->written = cs->bw;
    r->sram_fill = 0.0; r->fill_id = 0; r->nfill = 0; r->nwaits = 0;
    if (dram_r != 0) {
        i64 missed_before = c->miss_lines;
        double f = access(c, t, cs, 0, fill_id, r);
        if (f < 0) return -1;
        double hit = dram_r * f;
        /* a missed line is filled whole: DRAM moves at least its bytes (sram_cache.route) */
        double fills = (double)((c->miss_lines - missed_before) * c->line);
        double miss = dram_r - hit > fills ? dram_r - hit : fills;
        ld_set(&r->read, LV_DRAM, miss);
        ld_set(&r->read, LV_SRAM, ld_get(&r->read, LV_SRAM) + hit);
        c->read_hit += hit;
        c->read_miss += miss;
        r->sram_fill += miss;
    }
    if (dram_w != 0) {
        double f = access(c, t, cs, 1, fill_id, r);
        if (f < 0) return -1;
        double kept = dram_w * f;
        c->write_bytes += dram_w;
        if (c->mode == MODE_RESIDENT) {
            ld_set(&r->written, LV_DRAM, dram_w - kept);
            ld_set(&r->written, LV_SRAM, ld_get(&r->written, LV_SRAM) + kept);
        } else {
            r->sram_fill += dram_w;
        }
    }
    ld_drop_zero(&r->read);
    ld_drop_zero(&r->written);
    for (int i = 0; i < r->nwaits; i++)
        if (r->waits[i] == fill_id) { r->waits[i] = r->waits[--r->nwaits]; break; }
    return 1;
}

int cache_fill(Cache *c, Routed *r) {
    if (hist_need(c, c->clock + 1)) return -1;
    c->clock += 1;
    i64 filled = 0;
    for (i64 i = 0; i < r->nfill; i++)
        if (c->stamps[r->fill_lines[i]] == -r->fill_id) { c->stamps[r->fill_lines[i]] = (int32_t)c->clock; filled++; }
    c->hist[c->clock] += filled;
    c->npos += filled;
    free(r->fill_lines);
    r->fill_lines = NULL;
    r->nfill = 0;
    return 0;
}
