/* Shared bandwidth as a fluid, max-min fair: a port of mtia_sim/timing/fluid.py (the reference). */
#include <math.h>
#include <stdlib.h>
#include "replay.h"

int iv_push(IVec *v, int x) {
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 4;
        int *p = realloc(v->p, (size_t)cap * sizeof(int));
        if (!p) return -1;
        v->p = p; v->cap = cap;
    }
    v->p[v->n++] = x;
    return 0;
}

void iv_free(IVec *v) { free(v->p); v->p = NULL; v->n = v->cap = 0; }

static int users_of(const Replay *R, int res) { return res == RES_LINK ? 1 : R->users[res]; }

void fluid_advance(Replay *R, double now) {
    if (now == R->fluid_clock) return;
    R->fluid_clock = now;
    for (int i = 0; i < R->active.n; i++) {
        Transfer *t = &R->tr[R->active.p[i]];
        if (now > t->last) {
            double r = t->remaining - t->rate * (now - t->last);
            t->remaining = r > 0.0 ? r : 0.0;
        }
        t->last = now;
    }
}

/* a new transfer (rate 0) from the pool; -1 out of memory */
int fluid_new(Replay *R, int owner_kind, int owner, double remaining, const Demand *d) {
    int id;
    if (R->free_tr.n) id = R->free_tr.p[--R->free_tr.n];
    else {
        if (R->ntr == R->captr) {
            int cap = R->captr ? 2 * R->captr : 64;
            Transfer *p = realloc(R->tr, (size_t)cap * sizeof(Transfer));
            if (!p) return -1;
            R->tr = p; R->captr = cap;
        }
        id = R->ntr++;
    }
    Transfer *t = &R->tr[id];
    t->owner_kind = owner_kind; t->owner = owner; t->remaining = remaining;
    t->last = 0.0; t->rate = 0.0; t->cap = INFINITY; t->frozen = 0;
    t->dram_w = t->sram_w = 0.0;
    t->nshares = d->n;
    for (int i = 0; i < d->n; i++) {
        t->res[i] = d->key[i]; t->w[i] = d->val[i]; t->c[i] = d->cap[i];
        if (d->key[i] == RES_DRAM) t->dram_w = d->val[i];
        else if (d->key[i] == RES_SRAM) t->sram_w = d->val[i];
    }
    return id;
}

int fluid_add(Replay *R, int id, double now) {
    Transfer *t = &R->tr[id];
    t->last = now;
    if (iv_push(&R->active, id)) return -1;
    for (int i = 0; i < t->nshares; i++)
        if (t->res[i] != RES_LINK) R->users[t->res[i]]++;
    return 0;
}

int fluid_is_private(const Replay *R, int id) {
    const Transfer *t = &R->tr[id];
    for (int i = 0; i < t->nshares; i++) {
        int res = t->res[i];
        if (users_of(R, res) != 1 || res == RES_DRAM || res == RES_SRAM) return 0;
    }
    return 1;
}

double fluid_next_finish(const Replay *R) {   /* INFINITY: none */
    double best = INFINITY;
    for (int i = 0; i < R->active.n; i++) {
        const Transfer *t = &R->tr[R->active.p[i]];
        if (t->rate > 0 && t->remaining / t->rate < best) best = t->remaining / t->rate;
    }
    return best;
}

/* drop the transfers flagged done (frozen == 2), keeping the order of the others */
void fluid_remove_flagged(Replay *R) {
    int j = 0;
    for (int i = 0; i < R->active.n; i++) {
        int id = R->active.p[i];
        Transfer *t = &R->tr[id];
        if (t->frozen == 2) {
            for (int k = 0; k < t->nshares; k++)
                if (t->res[k] != RES_LINK) R->users[t->res[k]]--;
        } else {
            R->active.p[j++] = id;
        }
    }
    R->active.n = j;
}

static int scratch(Replay *R) {
    int need = 0;
    for (int i = 0; i < R->active.n; i++) need += R->tr[R->active.p[i]].nshares;
    if (need > R->capent) {
        int cap = need * 2;
        int *a = realloc(R->enext, (size_t)cap * sizeof(int));
        if (!a) return -1;
        R->enext = a;
        int *b = realloc(R->et, (size_t)cap * sizeof(int));
        if (!b) return -1;
        R->et = b;
        double *c = realloc(R->ew, (size_t)cap * sizeof(double));
        if (!c) return -1;
        R->ew = c;
        R->capent = cap;
    }
    if (R->active.n > R->cappending) {
        int cap = R->active.n * 2;
        int *p = realloc(R->pending, (size_t)cap * sizeof(int));
        if (!p) return -1;
        R->pending = p; R->cappending = cap;
    }
    return 0;
}

static void sort_by_cap(int *a, int n, const Replay *R) {   /* stable insertion/merge sort by cap */
    /* binary insertion sort is stable; pending lists are short (transfers on shared resources) */
    for (int i = 1; i < n; i++) {
        int x = a[i];
        double cx = R->tr[x].cap;
        int lo = 0, hi = i;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (R->tr[a[mid]].cap <= cx) lo = mid + 1; else hi = mid;
        }
        for (int k = i; k > lo; k--) a[k] = a[k - 1];
        a[lo] = x;
    }
}

static void fill(Replay *R, int *by_cap, int n) {
    int left = n, i = 0;
    while (left) {
        int best = -1;
        double level = INFINITY;
        for (int s = 0; s < R->nslot; s++) {
            if (R->cnt[s] > 0) {
                double rem = R->rem[s] > 0.0 ? R->rem[s] : 0.0;
                double ld = R->load[s] > 1e-12 ? R->load[s] : 1e-12;
                double lv = rem / ld;
                if (lv < level) { best = s; level = lv; }
            }
        }
        while (i < n && R->tr[by_cap[i]].frozen) i++;
        int single = -1;
        if (i < n && R->tr[by_cap[i]].cap <= level) { single = by_cap[i]; level = R->tr[single].cap; }
        else if (best < 0) break;
        /* the group: one transfer, or the unfrozen transfers on the best resource (in order) */
        if (single >= 0) {
            Transfer *t = &R->tr[single];
            t->rate = level; t->frozen = 1; left--;
            for (int k = 0; k < t->nshares; k++) {
                int res = t->res[k];
                int s = res == RES_LINK ? -1 : R->slot_of[res];
                if (s >= 0) { R->rem[s] -= level * t->w[k]; R->load[s] -= t->w[k]; R->cnt[s]--; }
            }
            continue;
        }
        int g = 0;   /* the unfrozen transfers on the best resource, in order */
        for (int e = R->head[best]; e >= 0; e = R->enext[e]) if (!R->tr[R->et[e]].frozen) R->pending[n + g++] = R->et[e];
        for (int q = 0; q < g; q++) {
            Transfer *t = &R->tr[R->pending[n + q]];
            t->rate = level; t->frozen = 1; left--;
            for (int k = 0; k < t->nshares; k++) {
                int res = t->res[k];
                int s = res == RES_LINK ? -1 : R->slot_of[res];
                if (s >= 0) { R->rem[s] -= level * t->w[k]; R->load[s] -= t->w[k]; R->cnt[s]--; }
            }
        }
    }
}

/* FluidBandwidth.rebalance: all rates, max-min fair; returns the time to the next finish (INFINITY:
 * none); -2.0 on out of memory */
double fluid_rebalance(Replay *R) {
    if (scratch(R)) return -2.0;
    /* pending needs room for the group list after the sorted transfers */
    if (2 * R->active.n > R->cappending) {
        int *p = realloc(R->pending, (size_t)(2 * R->active.n + 1) * sizeof(int));
        if (!p) return -2.0;
        R->pending = p; R->cappending = 2 * R->active.n + 1;
    }
    R->nslot = 0; R->nent = 0;
    int np = 0;
    for (int i = 0; i < R->active.n; i++) {
        int id = R->active.p[i];
        Transfer *t = &R->tr[id];
        double cap = INFINITY;
        int on_shared = 0;
        for (int k = 0; k < t->nshares; k++) {
            int res = t->res[k];
            double w = t->w[k], c = t->c[k];
            if (users_of(R, res) == 1) {
                if (c < cap * w) cap = c / w;
            } else {
                on_shared = 1;
                int s = R->slot_of[res];
                if (s < 0) {
                    s = R->slot_of[res] = R->nslot++;
                    R->slot_res[s] = res; R->rem[s] = c; R->load[s] = w; R->cnt[s] = 0;
                    R->head[s] = R->tail[s] = -1;
                } else {
                    R->load[s] += w;
                }
                int e = R->nent++;
                R->et[e] = id; R->ew[e] = w; R->enext[e] = -1;
                if (R->tail[s] >= 0) R->enext[R->tail[s]] = e; else R->head[s] = e;
                R->tail[s] = e;
                R->cnt[s]++;
            }
        }
        t->cap = cap;
        if (on_shared) { t->frozen = 0; R->pending[np++] = id; }
        else { t->rate = cap; t->frozen = 1; }
    }
    if (np) {
        sort_by_cap(R->pending, np, R);
        fill(R, R->pending, np);
    }
    for (int s = 0; s < R->nslot; s++) R->slot_of[R->slot_res[s]] = -1;
    double best = INFINITY, dram = 0.0, sram = 0.0;
    for (int i = 0; i < R->active.n; i++) {
        Transfer *t = &R->tr[R->active.p[i]];
        double rate = t->rate;
        if (rate > 0) {
            dram += rate * t->dram_w;
            sram += rate * t->sram_w;
            double dt = t->remaining / rate;
            if (dt < best) best = dt;
        }
    }
    R->dram_rate = dram; R->sram_rate = sram;
    return best;
}
