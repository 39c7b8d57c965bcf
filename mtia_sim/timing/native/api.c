/* The library's entry points (ctypes): replay a converted launch, then read its results as arrays. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "replay.h"

int kt_replay_init(Replay *R, const Trace *t, const double *params);
int kt_replay_run(Replay *R);
void kt_replay_free(Replay *R);

#define NCOLS_CMD 23
#define NCOLS_PROG (10 + NSTALL)
#define NCOLS_UNIT 24

/* 0 ok, 1 deadlock, -1 out of memory; the replay is kept for the getters until kt_free */
Replay *kt_run(const Trace *t, const double *params, int *status) {
    Replay *R = calloc(1, sizeof(Replay));
    if (!R) { *status = -1; return NULL; }
    int rc = kt_replay_init(R, t, params);
    if (!rc) rc = kt_replay_run(R);
    *status = rc;
    return R;
}

void kt_free(Replay *R) { if (R) { kt_replay_free(R); free(R); } }

/* makespan, events, commands issued, programs, timeline samples, then the cache's stats: clock-free
 * read_hit_bytes, read_miss_bytes, write_bytes, hit_lines, miss_lines, evicted_lines, placed lines by
 * reads, placed lines by writes */
void kt_info(const Replay *R, double *out) {
    out[0] = R->makespan; out[1] = (double)R->events; out[2] = (double)R->order.n; out[3] = (double)R->nprogs;
    out[4] = (double)R->ntimeline;
    out[5] = R->cache.read_hit; out[6] = R->cache.read_miss; out[7] = R->cache.write_bytes;
    out[8] = (double)R->cache.hit_lines; out[9] = (double)R->cache.miss_lines; out[10] = (double)R->cache.evicted;
    out[11] = (double)R->cache.placed_r; out[12] = (double)R->cache.placed_w;
}

/* one row per command in issue order: trace command index, pe, core, program (trace index), issue,
 * start, end, wait_unit, wait_dependency, wait_bandwidth, ideal, slot, routed, sram_fill, fill_id,
 * routed read bytes per level (NaN: absent) x4, routed written bytes per level x4 */
void kt_commands(const Replay *R, double *out) {
    for (int i = 0; i < R->order.n; i++) {
        int id = R->order.p[i];
        const Cmd *c = &R->cmds[id];
        double *o = out + (size_t)i * NCOLS_CMD;
        o[0] = id; o[1] = c->pe; o[2] = c->core; o[3] = R->progs[c->prog].program; o[4] = c->issue;
        o[5] = c->start; o[6] = c->end; o[7] = c->wait_unit; o[8] = c->wait_dep; o[9] = c->wait_bw;
        o[10] = c->ideal; o[11] = c->slot; o[12] = c->routed_flag; o[13] = c->routed.sram_fill;
        o[14] = (double)c->routed.fill_id;
        for (int l = 0; l < NLV; l++) { o[15 + l] = NAN; o[19 + l] = NAN; }
        if (c->routed_flag) {
            for (int k = 0; k < c->routed.read.n; k++) o[15 + c->routed.read.key[k]] = c->routed.read.val[k];
            for (int k = 0; k < c->routed.written.n; k++) o[19 + c->routed.written.key[k]] = c->routed.written.val[k];
        }
    }
}

/* one row per program in start order: trace index, pe, core, start, end, instructions, busy,
 * scalar accesses, scalar DRAM bytes, scalar SRAM bytes, stalls (see NSTALL) */
void kt_programs(const Replay *R, double *out) {
    for (int i = 0; i < R->nprogs; i++) {
        const ProgRec *p = &R->progs[i];
        double *o = out + (size_t)i * NCOLS_PROG;
        o[0] = p->program; o[1] = p->pe; o[2] = p->core; o[3] = p->start; o[4] = p->end;
        o[5] = (double)p->instructions; o[6] = p->busy; o[7] = (double)p->mem_accesses;
        o[8] = p->mem_bytes[0]; o[9] = p->mem_bytes[1];
        for (int s = 0; s < NSTALL; s++) o[10 + s] = p->stalls[s];
    }
}

/* per (PE, unit) over the commands in issue order, as mtia_sim.counters does: busy (union of the
 * command intervals), commands, flops, ideal cycles, elements, bytes read per level x4, bytes
 * written per level x4, waits (unit, dependency, bandwidth), then per level x4 read / x4 written:
 * 1 if a cache-routed (float) figure contributed */
void kt_unit_counters(const Replay *R, double *out) {
    memset(out, 0, (size_t)R->npes * NUNIT * NCOLS_UNIT * sizeof(double));
    double *covered = calloc((size_t)R->npes * NUNIT, sizeof(double));
    if (!covered) return;
    for (int i = 0; i < R->order.n; i++) {
        int id = R->order.p[i];
        const Cmd *c = &R->cmds[id];
        const CmdStatic *cs = &VAT(R->t->cmds, CmdStatic, id);
        size_t key = (size_t)c->pe * NUNIT + (size_t)cs->unit;
        double *o = out + key * NCOLS_UNIT;
        if (c->end > covered[key]) {
            o[0] += c->end - (c->start > covered[key] ? c->start : covered[key]);
            covered[key] = c->end;
        }
        o[1] += 1;
        if (cs->flops) { o[2] += (double)cs->flops; o[3] += c->ideal; }
        o[4] += (double)cs->elements;
        const LDict *rd = c->routed_flag ? &c->routed.read : &cs->br;
        const LDict *wr = c->routed_flag ? &c->routed.written : &cs->bw;
        for (int k = 0; k < rd->n; k++) if (rd->val[k] != 0) {
            o[5 + rd->key[k]] += rd->val[k];
            if (c->routed_flag) o[16 + rd->key[k]] = 1;
        }
        for (int k = 0; k < wr->n; k++) if (wr->val[k] != 0) {
            o[9 + wr->key[k]] += wr->val[k];
            if (c->routed_flag) o[20 + wr->key[k]] = 1;
        }
        o[13] += c->wait_unit; o[14] += c->wait_dep; o[15] += c->wait_bw;
    }
    free(covered);
}

/* per PE: the control core's counters over its programs (in start order, as mtia_sim.counters):
 * busy, programs, instructions, scalar DRAM bytes, scalar SRAM bytes, stalls x NSTALL; then one
 * row for all cores: busy, stalls x NSTALL, idle (after each core's last program), cores used */
void kt_core_counters(const Replay *R, double *out) {
    size_t w = 5 + NSTALL;
    memset(out, 0, ((size_t)R->npes * w + w + 2) * sizeof(double));
    double *all = out + (size_t)R->npes * w;
    for (int i = 0; i < R->nprogs; i++) {
        const ProgRec *p = &R->progs[i];
        double *o = out + (size_t)p->pe * w;
        o[0] += p->busy; o[1] += 1; o[2] += (double)p->instructions;
        if (p->mem_bytes[0]) o[3] += p->mem_bytes[0];
        if (p->mem_bytes[1]) o[4] += p->mem_bytes[1];
        all[0] += p->busy;
        for (int s = 0; s < NSTALL; s++) if (p->stalls[s] > 0) { o[5 + s] += p->stalls[s]; all[1 + s] += p->stalls[s]; }
    }
    /* idle: per (PE, core), kernel end - its last program's end, summed in first-seen order */
    size_t nslots = (size_t)R->npes * (size_t)R->P[P_CORES];
    double *last = malloc((nslots ? nslots : 1) * sizeof(double));
    int *seen = malloc((size_t)(R->nprogs ? R->nprogs : 1) * sizeof(int));
    double idle = 0.0;
    int used = 0;
    if (last && seen) {
        for (size_t k = 0; k < nslots; k++) last[k] = -1.0;
        for (int i = 0; i < R->nprogs; i++) {
            const ProgRec *p = &R->progs[i];
            size_t k = (size_t)p->pe * (size_t)R->P[P_CORES] + (size_t)p->core;
            if (last[k] < 0) { seen[used++] = (int)k; last[k] = 0.0; }
            if (p->end > last[k]) last[k] = p->end;
        }
        for (int i = 0; i < used; i++) idle += R->makespan - last[seen[i]];
    }
    free(last);
    free(seen);
    all[1 + NSTALL] = idle;
    all[2 + NSTALL] = used;
}

void kt_timeline(const Replay *R, double *out) {
    memcpy(out, R->timeline, (size_t)R->ntimeline * 3 * sizeof(double));
}
