/* The event-driven replay: a port of mtia_sim/timing/engine.py (the reference): same events, same
 * order (time, priority, sequence), same run-ahead, the same float operations in the same order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "replay.h"

#define COMPLETE 0
#define CORE 1
#define SAME_TIME 1e-6
#define OOM(x) do { if (x) { R->status = -1; return; } } while (0)

void fluid_advance(Replay *R, double now);
int fluid_new(Replay *R, int owner_kind, int owner, double remaining, const Demand *d);
int fluid_add(Replay *R, int id, double now);
int fluid_is_private(const Replay *R, int id);
double fluid_next_finish(const Replay *R);
void fluid_remove_flagged(Replay *R);
double fluid_rebalance(Replay *R);

/* ---- the event queue: a binary heap ordered by (time, prio, seq) ---------------------------- */
static int before(const HeapItem *a, const HeapItem *b) {
    if (a->time != b->time) return a->time < b->time;
    if (a->prio != b->prio) return a->prio < b->prio;
    return a->seq < b->seq;
}

void kt_push(Replay *R, double time, int prio, int kind, int obj, i64 version) {
    if (R->status) return;
    if (R->nheap == R->capheap) {
        i64 cap = R->capheap ? 2 * R->capheap : 256;
        HeapItem *p = realloc(R->heap, (size_t)cap * sizeof(HeapItem));
        OOM(!p);
        R->heap = p; R->capheap = cap;
    }
    HeapItem it = {time, R->seq++, prio, kind, obj, version};
    i64 i = R->nheap++;
    while (i > 0) {
        i64 parent = (i - 1) / 2;
        if (!before(&it, &R->heap[parent])) break;
        R->heap[i] = R->heap[parent];
        i = parent;
    }
    R->heap[i] = it;
}

static HeapItem pop(Replay *R) {
    HeapItem top = R->heap[0];
    HeapItem last = R->heap[--R->nheap];
    i64 n = R->nheap, i = 0;
    while (1) {
        i64 l = 2 * i + 1, r = l + 1, m = i;
        const HeapItem *cur = &last;
        if (l < n && before(&R->heap[l], cur)) { m = l; cur = &R->heap[l]; }
        if (r < n && before(&R->heap[r], cur)) { m = r; }
        if (m == i) break;
        R->heap[i] = R->heap[m];
        i = m;
    }
    if (n) R->heap[i] = last;
    return top;
}

/* ---- cores -------------------------------------------------------------------------------- */
void kt_next_program(Replay *R, Core *c, double start) {
    if (c->next >= c->programs.n) { c->prog = -1; return; }
    int i = c->programs.p[c->next++];
    const ProgStatic *ps = &VAT(R->t->progs, ProgStatic, i);
    ProgRec *pr = &R->progs[R->nprogs];
    memset(pr, 0, sizeof *pr);
    pr->program = i; pr->pe = c->pe; pr->core = c->core; pr->start = start;
    c->prog = R->nprogs++;
    c->ev = ps->ev_lo; c->ev_hi = ps->ev_hi;
    c->time = start;
    c->paid = 0;
    for (int u = 0; u < NUNIT; u++) c->issued[u].n = 0;
}

static void block(Replay *R, Core *c, int reason) { c->blocked = reason; c->blocked_since = R->now; }

static void unblock(Replay *R, Core *c) {
    if (!c->blocked) return;
    int reason = c->blocked == B_SCALAR ? 0 : 1 + (c->blocked - 1) * NUNIT + (c->wake_unit < 0 ? 0 : c->wake_unit);
    double waited = R->now - c->blocked_since;
    if (waited > 0) R->progs[c->prog].stalls[reason] += waited;
    c->blocked = B_NONE;
    c->wake_unit = -1;
}

/* Block c until the not-done commands among its issued ones on `mask` units are done; 0 when none. */
static int wait_for(Replay *R, Core *c, int mask, int reason) {
    int pending = 0;
    for (int u = 1; u < NUNIT; u++) {   /* prune finished commands */
        IVec *v = &c->issued[u];
        int j = 0;
        for (int k = 0; k < v->n; k++) if (!R->cmds[v->p[k]].done) v->p[j++] = v->p[k];
        v->n = j;
    }
    int ci = (int)(c - R->cores);
    for (int u = 1; u < NUNIT; u++) {
        if (!(mask & (1 << u))) continue;
        IVec *v = &c->issued[u];
        for (int k = 0; k < v->n; k++) {
            pending++;
            if (iv_push(&R->cmds[v->p[k]].waiters, ci)) { R->status = -1; return 1; }
        }
    }
    if (!pending) return 0;
    c->waiting = pending;
    block(R, c, reason);
    return 1;
}

static void try_start(Replay *R, int pe, int unit);

static int conflicts(const Trace *t, const CmdStatic *a, const CmdStatic *b) {
    const i64 *ra = &VAT(t->ranges, i64, 2 * a->range_lo), *rb = &VAT(t->ranges, i64, 2 * b->range_lo);
    const i64 *aw = ra + 2 * a->nreads, *bw = rb + 2 * b->nreads;
    for (int i = 0; i < a->nwrites; i++) {
        i64 ws = aw[2 * i], we = aw[2 * i + 1];
        for (int j = 0; j < b->nreads; j++) if (ws < rb[2 * j + 1] && rb[2 * j] < we) return 1;
        for (int j = 0; j < b->nwrites; j++) if (ws < bw[2 * j + 1] && bw[2 * j] < we) return 1;
    }
    for (int i = 0; i < a->nreads; i++) {
        i64 rs = ra[2 * i], re = ra[2 * i + 1];
        for (int j = 0; j < b->nwrites; j++) if (bw[2 * j] < re && rs < bw[2 * j + 1]) return 1;
    }
    return 0;
}

static void issue(Replay *R, Core *c, int id) {
    const CmdStatic *cs = &VAT(R->t->cmds, CmdStatic, id);
    Cmd *cmd = &R->cmds[id];
    cmd->pe = c->pe; cmd->core = c->core; cmd->prog = c->prog;
    cmd->issue = R->now;
    cmd->ideal = cost_ideal(R->P, cs);
    OOM(iv_push(&R->order, id));
    PE *pe = &R->pes[c->pe];
    int nr = cs->nreads + cs->nwrites;
    if (nr) {
        const i64 *rg = &VAT(R->t->ranges, i64, 2 * cs->range_lo);
        i64 lo = rg[0], hi = rg[1];
        for (int i = 1; i < nr; i++) {
            if (rg[2 * i] < lo) lo = rg[2 * i];
            if (rg[2 * i + 1] > hi) hi = rg[2 * i + 1];
        }
        cmd->lo = lo; cmd->hi = hi;
        IVec *out = &pe->outstanding;
        int j = 0;
        for (int k = 0; k < out->n; k++) if (!R->cmds[out->p[k]].done) out->p[j++] = out->p[k];
        out->n = j;
        int in_order = pe->units[cs->unit].nslots == 1;
        for (int k = 0; k < out->n; k++) {
            int oid = out->p[k];
            Cmd *other = &R->cmds[oid];
            const CmdStatic *os = &VAT(R->t->cmds, CmdStatic, oid);
            if (other->lo < hi && lo < other->hi && (os->unit != cs->unit || !in_order)
                    && conflicts(R->t, cs, os)) {
                cmd->deps_left++;
                OOM(iv_push(&other->dependents, id));
            }
        }
    }
    OOM(iv_push(&pe->outstanding, id));
    OOM(iv_push(&c->issued[cs->unit], id));
    OOM(iv_push(&pe->units[cs->unit].q, id));
    try_start(R, c->pe, cs->unit);
}

static void scalar_access(Replay *R, Core *c) {
    const i64 *m = &VAT(R->t->mem, i64, 3 * c->mem_next);
    c->mem_next++; c->mem_left--;
    int level = (int)m[0];
    i64 count = m[1], nbytes = m[2];
    ProgRec *pr = &R->progs[c->prog];
    if (nbytes) pr->mem_bytes[level] += (double)nbytes;
    pr->mem_accesses += count;
    double latency = level == 0 ? R->P[P_DRAM_LAT] : R->P[P_SRAM_LAT];
    double traffic;
    if (count) {
        double burst = (double)count * R->P[P_BURST];
        traffic = (double)nbytes > burst ? (double)nbytes : burst;
    } else {
        traffic = (double)nbytes;
    }
    block(R, c, B_SCALAR);
    if (R->nscalars == R->capscalars) {
        int cap = R->capscalars ? 2 * R->capscalars : 64;
        Scalar *p = realloc(R->scalars, (size_t)cap * sizeof(Scalar));
        OOM(!p);
        R->scalars = p; R->capscalars = cap;
    }
    Scalar *s = &R->scalars[R->nscalars];
    s->core = (int)(c - R->cores); s->level = level; s->traffic = traffic;
    kt_push(R, R->now + (double)count * latency, COMPLETE, 3, R->nscalars++, 0);
}

static void run_core(Replay *R, Core *c) {
    if (c->blocked) unblock(R, c);
    double now = R->now;
    const double *P = R->P;
    const Trace *t = R->t;
    if (now > c->time) c->time = now;
    if (c->mem_left) { scalar_access(R, c); return; }
    int ci = (int)(c - R->cores);
    while (c->prog >= 0 && !R->status) {
        ProgRec *pr = &R->progs[c->prog];
        int kind = c->ev < c->ev_hi ? VAT(t->ev_kind, int8_t, c->ev) : EV_END;
        if (kind == EV_CORE) {
            i64 n = VAT(t->ev_arg, i64, c->ev);
            double cyc = (double)n * P[P_CPI];
            c->time += cyc;
            pr->busy += cyc;
            pr->instructions += n;
            int nm = VAT(t->ev_nmem, int32_t, c->ev);
            if (nm) { c->mem_next = VAT(t->ev_mem, i64, c->ev); c->mem_left = nm; }
            c->ev++;
            if (c->mem_left) {
                if (c->time > now) { kt_push(R, c->time, CORE, 0, ci, 0); return; }
                scalar_access(R, c);
                return;
            }
            continue;
        }
        if (kind == EV_CMD && !c->paid) {
            c->time += P[P_ISSUE];
            pr->busy += P[P_ISSUE];
            c->paid = 1;
        }
        if (c->time > now) {
            if (R->fluid_dirty || (R->nheap && R->heap[0].time <= c->time)) {
                kt_push(R, c->time, CORE, 0, ci, 0);
                return;
            }
            R->now = now = c->time;
            R->events++;
        }
        if (kind == EV_CMD) {
            int id = (int)VAT(t->ev_arg, i64, c->ev);
            int unit = VAT(t->cmds, CmdStatic, id).unit;
            UnitQ *uq = &R->pes[c->pe].units[unit];
            if (uq->q.n - uq->head >= (int)P[P_QDEPTH]) {
                OOM(iv_push(&uq->blocked, ci));
                c->wake_unit = unit;
                block(R, c, B_QUEUE);
                return;
            }
            issue(R, c, id);
            c->paid = 0;
            c->ev++;
            continue;
        }
        if (kind == EV_FENCE) {
            int mask = (int)VAT(t->ev_arg, i64, c->ev);
            c->ev++;
            if (wait_for(R, c, mask, B_FENCE)) return;
            continue;
        }
        /* the end (or a trace without EndEvent) */
        if (wait_for(R, c, 0x3e, B_END)) return;
        pr->end = now;
        kt_next_program(R, c, now);
    }
}

/* ---- commands ----------------------------------------------------------------------------- */
static void try_start(Replay *R, int pe, int unit) {
    UnitQ *uq = &R->pes[pe].units[unit];
    int started = 0;
    while (uq->q.n > uq->head && !R->status) {
        int slot = -1;
        for (int s = 0; s < uq->nslots; s++) if (uq->running[s] < 0) { slot = s; break; }
        if (slot < 0) break;
        int id = uq->q.p[uq->head];
        Cmd *head = &R->cmds[id];
        if (!head->has_head) { head->has_head = 1; head->head_at = R->now; }
        if (head->deps_left) break;
        uq->head++;
        if (uq->head > 64 && uq->head * 2 > uq->q.n) {   /* compact the queue */
            memmove(uq->q.p, uq->q.p + uq->head, (size_t)(uq->q.n - uq->head) * sizeof(int));
            uq->q.n -= uq->head; uq->head = 0;
        }
        uq->running[slot] = id;
        head->slot = slot;
        head->start = R->now;
        head->wait_unit = head->head_at - head->issue;
        head->wait_dep = R->now - head->head_at;
        const CmdStatic *cs = &VAT(R->t->cmds, CmdStatic, id);
        if (cs->nspans && (ld_has(&cs->br, LV_DRAM) || ld_has(&cs->bw, LV_DRAM))) {
            int rc = cache_route(&R->cache, R->t, cs, R->fill_seq + 1, &head->routed);
            OOM(rc < 0);
            head->routed_flag = rc;
            if (rc && head->routed.nfill) {
                R->fill_seq++;
                OOM(iv_push(&R->fillers, id));   /* fillers.p[fill_id - 1] */
            }
        }
        double fixed = cost_fixed(R->P, pe, cs, head->routed_flag ? &head->routed : NULL);
        kt_push(R, R->now + fixed, COMPLETE, 1, id, 0);
        started = 1;
    }
    if (started && uq->blocked.n) {
        int n = uq->blocked.n;
        uq->blocked.n = 0;
        int *copy = malloc((size_t)n * sizeof(int));
        OOM(!copy);
        memcpy(copy, uq->blocked.p, (size_t)n * sizeof(int));
        for (int i = 0; i < n; i++) kt_push(R, R->now, CORE, 0, copy[i], 0);
        free(copy);
    }
}

static void complete(Replay *R, int id);

static void fixed_done(Replay *R, int id) {
    Cmd *cmd = &R->cmds[id];
    const CmdStatic *cs = &VAT(R->t->cmds, CmdStatic, id);
    Demand d;
    double volume = cost_transfer(R->P, R->npes, cmd->pe, cs, cmd->routed_flag ? &cmd->routed : NULL, &d);
    if (volume <= 0) { complete(R, id); return; }
    int tid = fluid_new(R, 0, id, volume, &d);
    OOM(tid < 0);
    double alone = uncontended_rate(&d);
    cmd->transfer_start = R->now;
    cmd->transfer_alone = volume / alone;
    OOM(fluid_add(R, tid, R->now));
    if (fluid_is_private(R, tid)) {
        Transfer *t = &R->tr[tid];
        t->rate = alone;
        kt_push(R, R->now + t->remaining / t->rate, COMPLETE, 2, -1, R->epoch);
    } else {
        R->fluid_dirty = 1;
    }
}

static void scalar_latency_done(Replay *R, int sid) {
    Scalar *s = &R->scalars[sid];
    if (s->traffic <= 0) { kt_push(R, R->now, CORE, 0, s->core, 0); return; }
    Demand d;
    d.n = 1;
    d.key[0] = s->level == 0 ? RES_DRAM : RES_SRAM;
    d.val[0] = 1.0;
    d.cap[0] = s->level == 0 ? R->P[P_DRAM_BPC] : R->P[P_SRAM_BPC];
    int tid = fluid_new(R, 1, s->core, s->traffic, &d);
    OOM(tid < 0);
    fluid_advance(R, R->now);
    OOM(fluid_add(R, tid, R->now));
    R->fluid_dirty = 1;
}

static void transfers_done(Replay *R) {
    fluid_advance(R, R->now);
    double tol = SAME_TIME + R->now * 1e-12;
    int nfin = 0, priv = 1;
    for (int i = 0; i < R->active.n; i++) {
        Transfer *t = &R->tr[R->active.p[i]];
        if (t->remaining <= t->rate * tol) {
            nfin++;
            if (priv && !fluid_is_private(R, R->active.p[i])) priv = 0;
        }
    }
    if (!nfin) { R->fluid_dirty = 1; return; }
    int *fin = malloc((size_t)nfin * sizeof(int));
    OOM(!fin);
    int k = 0;
    for (int i = 0; i < R->active.n; i++) {
        Transfer *t = &R->tr[R->active.p[i]];
        if (t->remaining <= t->rate * tol) { fin[k++] = R->active.p[i]; t->frozen = 2; }
    }
    fluid_remove_flagged(R);
    for (int i = 0; i < nfin && !R->status; i++) {
        Transfer *t = &R->tr[fin[i]];
        int kind = t->owner_kind, owner = t->owner;
        if (iv_push(&R->free_tr, fin[i])) { R->status = -1; break; }
        if (kind == 1) { kt_push(R, R->now, CORE, 0, owner, 0); continue; }
        Cmd *cmd = &R->cmds[owner];
        double bw = (R->now - cmd->transfer_start) - cmd->transfer_alone;
        cmd->wait_bw = bw > 0.0 ? bw : 0.0;
        complete(R, owner);
    }
    free(fin);
    if (!priv) R->fluid_dirty = 1;
    else if (!R->fluid_dirty) {
        double f = fluid_next_finish(R);
        if (f < INFINITY) kt_push(R, R->now + f, COMPLETE, 2, -1, R->epoch);
    }
}

static void rebalance(Replay *R) {
    R->fluid_dirty = 0;
    fluid_advance(R, R->now);
    double finish = fluid_rebalance(R);
    OOM(finish == -2.0);
    R->epoch++;
    double *tl = R->timeline;
    i64 n = R->ntimeline;
    if (n && tl[3 * (n - 1)] == R->now) {
        tl[3 * (n - 1) + 1] = R->dram_rate; tl[3 * (n - 1) + 2] = R->sram_rate;
    } else if (!n || tl[3 * (n - 1) + 1] != R->dram_rate || tl[3 * (n - 1) + 2] != R->sram_rate) {
        if (n == R->captimeline) {
            i64 cap = n ? 2 * n : 256;
            double *p = realloc(R->timeline, (size_t)cap * 3 * sizeof(double));
            OOM(!p);
            R->timeline = p; R->captimeline = cap;
        }
        R->timeline[3 * n] = R->now; R->timeline[3 * n + 1] = R->dram_rate; R->timeline[3 * n + 2] = R->sram_rate;
        R->ntimeline++;
    }
    if (finish < INFINITY) kt_push(R, R->now + finish, COMPLETE, 2, -1, R->epoch);
}

static void complete(Replay *R, int id) {
    Cmd *cmd = &R->cmds[id];
    Routed *r = cmd->routed_flag ? &cmd->routed : NULL;
    if (r && r->nwaits) {   /* merged misses: done when those fills are */
        int n = r->nwaits;
        r->nwaits = 0;
        for (int i = 0; i < n; i++) {
            i64 fid = r->waits[i];
            int filler = fid >= 1 && fid <= R->fillers.n ? R->fillers.p[fid - 1] : -1;
            if (filler >= 0 && !R->cmds[filler].done) {
                cmd->merge_left++;
                OOM(iv_push(&R->cmds[filler].merged, id));
            }
        }
        if (cmd->merge_left) return;
    }
    cmd->end = R->now;
    cmd->done = 1;
    if (r && r->nfill) {
        R->fillers.p[r->fill_id - 1] = -1;
        OOM(cache_fill(&R->cache, r));
    }
    if (cmd->merged.n) {
        IVec merged = cmd->merged;
        cmd->merged.p = NULL; cmd->merged.n = cmd->merged.cap = 0;
        for (int i = 0; i < merged.n && !R->status; i++) {
            Cmd *other = &R->cmds[merged.p[i]];
            if (!--other->merge_left) complete(R, merged.p[i]);
        }
        iv_free(&merged);
    }
    const CmdStatic *cs = &VAT(R->t->cmds, CmdStatic, id);
    cmd = &R->cmds[id];
    UnitQ *uq = &R->pes[cmd->pe].units[cs->unit];
    uq->running[cmd->slot] = -1;
    for (int i = 0; i < cmd->waiters.n; i++) {
        Core *core = &R->cores[cmd->waiters.p[i]];
        core->waiting--;
        if (!core->waiting && core->blocked) {
            core->wake_unit = cs->unit;
            kt_push(R, R->now, CORE, 0, cmd->waiters.p[i], 0);
        }
    }
    iv_free(&cmd->waiters);
    try_start(R, cmd->pe, cs->unit);
    IVec deps = cmd->dependents;
    cmd->dependents.p = NULL; cmd->dependents.n = cmd->dependents.cap = 0;
    for (int i = 0; i < deps.n && !R->status; i++) {
        Cmd *d = &R->cmds[deps.p[i]];
        if (!--d->deps_left) try_start(R, d->pe, VAT(R->t->cmds, CmdStatic, deps.p[i]).unit);
    }
    iv_free(&deps);
}

/* ---- the main loop ---------------------------------------------------------------------- */
int kt_replay_run(Replay *R) {
    while (R->nheap && !R->status) {
        if (R->fluid_dirty && R->heap[0].time > R->now + SAME_TIME) { rebalance(R); continue; }
        HeapItem it = pop(R);
        if (it.time > R->now) R->now = it.time;
        R->events++;
        if (it.kind == 0) run_core(R, &R->cores[it.obj]);
        else if (it.kind == 1) fixed_done(R, it.obj);
        else if (it.kind == 3) scalar_latency_done(R, it.obj);
        else if (it.version == R->epoch) transfers_done(R);
        if (!R->nheap && R->fluid_dirty && !R->status) rebalance(R);
    }
    if (R->status) return R->status;
    for (int i = 0; i < R->ncores; i++) if (R->cores[i].prog >= 0) return R->status = 1;
    R->makespan = R->now;
    return 0;
}
