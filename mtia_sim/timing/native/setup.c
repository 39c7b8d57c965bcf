/* Setting a replay up (placing programs on cores, as engine.Replay._place) and freeing it. */
#include <stdlib.h>
#include <string.h>
#include "replay.h"

#define CORE 1

static int cmp_core(const void *a, const void *b) {
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static int place(Replay *R) {
    const Trace *t = R->t;
    int np = (int)t->progs.n;
    int *keys = malloc((size_t)(np ? np : 1) * 3 * sizeof(int));
    if (!keys) return -1;
    for (int i = 0; i < np; i++) {
        const ProgStatic *ps = &VAT(t->progs, ProgStatic, i);
        keys[3 * i] = ps->pe; keys[3 * i + 1] = ps->core; keys[3 * i + 2] = i;
    }
    /* stable: sort (pe, core, index) triples */
    qsort(keys, (size_t)np, 3 * sizeof(int), cmp_core);
    for (int i = 1; i < np; i++) {   /* qsort is not stable: restore list order within a core */
        int j = i;
        while (j > 0 && keys[3 * j - 3] == keys[3 * j] && keys[3 * j - 2] == keys[3 * j + 1]
               && keys[3 * j - 1] > keys[3 * j + 2]) {
            for (int k = 0; k < 3; k++) { int x = keys[3 * j + k]; keys[3 * j + k] = keys[3 * j - 3 + k]; keys[3 * j - 3 + k] = x; }
            j--;
        }
    }
    R->cores = calloc((size_t)(np ? np : 1), sizeof(Core));
    if (!R->cores) { free(keys); return -1; }
    for (int i = 0; i < np; i++) {
        if (i == 0 || keys[3 * i] != keys[3 * i - 3] || keys[3 * i + 1] != keys[3 * i - 2]) {
            Core *c = &R->cores[R->ncores++];
            c->pe = keys[3 * i]; c->core = keys[3 * i + 1]; c->prog = -1; c->wake_unit = -1;
        }
        if (iv_push(&R->cores[R->ncores - 1].programs, keys[3 * i + 2])) { free(keys); return -1; }
    }
    free(keys);
    for (int i = 0; i < R->ncores; i++) {
        Core *c = &R->cores[i];
        kt_next_program(R, c, 0.0);
        kt_push(R, 0.0, CORE, 0, i, 0);
    }
    return R->status;
}

int kt_replay_init(Replay *R, const Trace *t, const double *params) {
    memset(R, 0, sizeof *R);
    R->t = t;
    memcpy(R->P, params, sizeof R->P);
    R->npes = (int)params[P_NPES];
    R->fluid_clock = -1.0;
    cache_init(&R->cache, (int)params[P_MODE], (i64)params[P_CAP_LINES], (i64)params[P_LINE],
               (i64)params[P_DRAM_BASE_LINE]);
    R->ncmds = (i64)t->cmds.n;
    R->cmds = calloc((size_t)(R->ncmds ? R->ncmds : 1), sizeof(Cmd));
    R->progs = calloc(t->progs.n ? t->progs.n : 1, sizeof(ProgRec));
    R->pes = calloc((size_t)R->npes, sizeof(PE));
    R->nres = 2 + 2 * R->npes;
    R->users = calloc((size_t)R->nres, sizeof(int));
    R->slot_of = malloc((size_t)R->nres * sizeof(int));
    R->rem = malloc((size_t)R->nres * sizeof(double));
    R->load = malloc((size_t)R->nres * sizeof(double));
    R->cnt = malloc((size_t)R->nres * sizeof(int));
    R->head = malloc((size_t)R->nres * sizeof(int));
    R->tail = malloc((size_t)R->nres * sizeof(int));
    R->slot_res = malloc((size_t)R->nres * sizeof(int));
    if (!R->cmds || !R->progs || !R->pes || !R->users || !R->slot_of || !R->rem || !R->load || !R->cnt
            || !R->head || !R->tail || !R->slot_res)
        return -1;
    for (int i = 0; i < R->nres; i++) R->slot_of[i] = -1;
    int slots = (int)params[P_DMA_SLOTS];
    for (int p = 0; p < R->npes; p++)
        for (int u = 1; u < NUNIT; u++) {
            UnitQ *uq = &R->pes[p].units[u];
            uq->nslots = u == U_DMA ? slots : 1;
            uq->running = malloc((size_t)uq->nslots * sizeof(int));
            if (!uq->running) return -1;
            for (int s = 0; s < uq->nslots; s++) uq->running[s] = -1;
        }
    return place(R);
}

void kt_replay_free(Replay *R) {
    for (i64 i = 0; i < R->ncmds; i++) {
        Cmd *c = &R->cmds[i];
        iv_free(&c->dependents); iv_free(&c->waiters); iv_free(&c->merged);
        free(c->routed.fill_lines); free(c->routed.waits);
    }
    free(R->cmds);
    if (R->pes) for (int p = 0; p < R->npes; p++)
        for (int u = 1; u < NUNIT; u++) {
            UnitQ *uq = &R->pes[p].units[u];
            free(uq->running); iv_free(&uq->q); iv_free(&uq->blocked);
            if (u == 1) iv_free(&R->pes[p].outstanding);
        }
    free(R->pes);
    for (int i = 0; i < R->ncores; i++) {
        iv_free(&R->cores[i].programs);
        for (int u = 0; u < NUNIT; u++) iv_free(&R->cores[i].issued[u]);
    }
    free(R->cores); free(R->progs); free(R->heap); free(R->tr);
    iv_free(&R->free_tr); iv_free(&R->active); iv_free(&R->order); iv_free(&R->fillers);
    free(R->users); free(R->scalars); free(R->timeline);
    free(R->slot_of); free(R->rem); free(R->load); free(R->cnt); free(R->head); free(R->tail); free(R->slot_res);
    free(R->enext); free(R->et); free(R->ew); free(R->pending);
    cache_free(&R->cache);
}
