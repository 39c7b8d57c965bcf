/* What one command costs on its unit: a port of mtia_sim/timing/costs.py (the reference). */
#include <math.h>
#include <stdlib.h>
#include "ktiming.h"
#include "replay.h"

static double rate_for(const double *table, int width) {
    return (width >= 0 && width < NWIDTH && table[width] > 0) ? table[width] : table[4];
}

static double dpe_flops(const CmdStatic *cs) {
    if (cs->flops) return (double)cs->flops;
    if (cs->has_mnk) return 2.0 * (double)cs->mnk[0] * (double)cs->mnk[1] * (double)cs->mnk[2];
    return 0.0;
}

static double mlu_bytes(const CmdStatic *cs) {
    double moved = ld_get(&cs->bw, LV_LOCAL);
    if (moved == 0) moved = ld_get(&cs->br, LV_LOCAL);
    if (moved == 0) moved = (double)cs->elements * (double)cs->dtype;
    return moved;
}

double cost_ideal(const double *P, const CmdStatic *cs) {
    switch (cs->unit) {
    case U_DPE: return dpe_flops(cs) / rate_for(P + P_WIDTHS, cs->dtype);
    case U_SIMD: return (double)cs->elements / rate_for(P + P_WIDTHS + NWIDTH, cs->dtype);
    case U_RED: return (double)cs->elements / P[P_RED_RATE];
    case U_MLU: return mlu_bytes(cs) / P[P_MLU_RATE];
    default: return 0.0;
    }
}

static i64 padded(i64 x, i64 tile) { return ((x + tile - 1) / tile) * tile; }

static int hops(const double *P, int a, int b) {
    int cols = (int)P[P_COLS];
    return abs(a / cols - b / cols) + abs(a % cols - b % cols);
}

int has_shared_traffic(const CmdStatic *cs) {
    for (int i = 0; i < cs->br.n; i++) if (cs->br.key[i] != LV_LOCAL) return 1;
    for (int i = 0; i < cs->bw.n; i++) if (cs->bw.key[i] != LV_LOCAL) return 1;
    return 0;
}

static double transfer_latency(const double *P, int pe, const CmdStatic *cs, const Routed *r) {
    int lv[NLV] = {0};
    if (!r) {
        for (int i = 0; i < cs->br.n; i++) lv[cs->br.key[i]] = 1;
        for (int i = 0; i < cs->bw.n; i++) lv[cs->bw.key[i]] = 1;
    } else {
        for (int i = 0; i < r->read.n; i++) if (r->read.val[i] > 0) lv[r->read.key[i]] = 1;
        for (int i = 0; i < r->written.n; i++) if (r->written.val[i] > 0) lv[r->written.key[i]] = 1;
    }
    double latency = 0.0;
    if (lv[LV_DRAM] && P[P_DRAM_LAT] > latency) latency = P[P_DRAM_LAT];
    if (lv[LV_SRAM] && P[P_SRAM_LAT] > latency) latency = P[P_SRAM_LAT];
    if (lv[LV_REMOTE]) {
        double h = cs->remote >= 0 ? (double)hops(P, pe, cs->remote) : P[P_ROWS] + P[P_COLS] - 2;
        double l = h * P[P_HOP_LAT];
        if (l > latency) latency = l;
    }
    return latency;
}

double cost_fixed(const double *P, int pe, const CmdStatic *cs, const Routed *r) {
    double base;
    switch (cs->unit) {
    case U_DMA: return P[P_DMA_SETUP] + transfer_latency(P, pe, cs, r);
    case U_DPE: {
        double rate = rate_for(P + P_WIDTHS, cs->dtype);
        if (cs->has_mnk) {
            double work = 2.0 * (double)padded(cs->mnk[0], (i64)P[P_TILE_M])
                * (double)padded(cs->mnk[1], (i64)P[P_TILE_N]) * (double)padded(cs->mnk[2], (i64)P[P_TILE_K]);
            double f = dpe_flops(cs);
            base = P[P_DPE_SETUP] + (work > f ? work : f) / rate;
        } else {
            base = P[P_DPE_SETUP] + dpe_flops(cs) / rate;
        }
        break;
    }
    case U_SIMD: {
        double factor = cs->transc ? P[P_TRANSC] : 1.0;
        base = P[P_SIMD_SETUP] + factor * cost_ideal(P, cs);
        break;
    }
    case U_RED: base = P[P_RED_SETUP] + cost_ideal(P, cs); break;
    default: base = P[P_MLU_SETUP] + cost_ideal(P, cs); break;
    }
    if (has_shared_traffic(cs)) base += transfer_latency(P, pe, cs, r);
    return base;
}

static void demand_add(Demand *d, int key, double v, double cap) {
    for (int i = 0; i < d->n; i++)
        if (d->key[i] == key) { d->val[i] += v; d->cap[i] = cap; return; }
    d->key[d->n] = key; d->val[d->n] = v; d->cap[d->n] = cap; d->n++;
}

/* costs.transfer_demands: volume (0: no transfer phase) and the shares in d. */
double cost_transfer(const double *P, int npes, int pe, const CmdStatic *cs, const Routed *r, Demand *d) {
    d->n = 0;
    if (cs->unit != U_DMA && !has_shared_traffic(cs)) return 0.0;
    LDict per = {0};
    int per_element = cs->op == OP_DMA_ATOMIC;
    const LDict *tables[2] = {r ? &r->read : &cs->br, r ? &r->written : &cs->bw};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < tables[t]->n; i++) {
            int level = tables[t]->key[i];
            double nbytes = tables[t]->val[i];
            if (per_element && nbytes > 0 && (level == LV_DRAM || level == LV_SRAM)) {
                double m = (double)cs->elements * P[P_BURST];
                if (m > nbytes) nbytes = m;
            }
            ld_set(&per, level, ld_get(&per, level) + nbytes);
        }
    }
    if (r && r->sram_fill > 0) ld_set(&per, LV_SRAM, ld_get(&per, LV_SRAM) + r->sram_fill);
    for (int i = 0; i < per.n; i++) {
        int level = per.key[i];
        double nbytes = per.val[i];
        if (nbytes <= 0) continue;
        if (level == LV_DRAM) demand_add(d, RES_DRAM, nbytes, P[P_DRAM_BPC]);
        else if (level == LV_SRAM) demand_add(d, RES_SRAM, nbytes, P[P_SRAM_BPC]);
        else if (level == LV_LOCAL) demand_add(d, RES_LS(pe), nbytes, P[P_LS_BPC]);
        else if (cs->op == OP_RED_ACCUMULATE && cs->remote >= 0) {
            double payload = ld_get(&cs->br, LV_LOCAL);
            if (payload == 0) payload = ld_get(&cs->bw, level);
            demand_add(d, RES_PORT(npes, cs->remote), payload, P[P_NOC_BPC]);
            demand_add(d, RES_LS(cs->remote), nbytes, P[P_LS_BPC]);
        } else {
            demand_add(d, RES_LINK, nbytes, P[P_NOC_BPC]);
            if (cs->remote >= 0) demand_add(d, RES_LS(cs->remote), nbytes, P[P_LS_BPC]);
        }
    }
    if (!d->n) return 0.0;
    double volume = d->val[0];
    for (int i = 1; i < d->n; i++) if (d->val[i] > volume) volume = d->val[i];
    for (int i = 0; i < d->n; i++) d->val[i] = d->val[i] / volume;  /* bytes per volume byte */
    double scale = 1.0 + (cs->misaligned ? P[P_MISALIGNED] : 0.0);
    return volume * scale;
}

double uncontended_rate(const Demand *d) {
    double best = INFINITY;
    for (int i = 0; i < d->n; i++)
        if (d->val[i] > 0 && d->cap[i] / d->val[i] < best) best = d->cap[i] / d->val[i];
    return best;
}
