/* Native timing replay of mtia_sim.timing (see engine.py, fluid.py, sram_cache.py, costs.py there:
 * this is a line-by-line port of them, and they are the reference). Shared declarations. */
#ifndef KTIMING_H
#define KTIMING_H

#include <stdint.h>
#include <stddef.h>

typedef int64_t i64;

enum { LV_LOCAL = 0, LV_REMOTE = 1, LV_SRAM = 2, LV_DRAM = 3, NLV = 4 };
enum { U_CORE = 0, U_DMA = 1, U_DPE = 2, U_SIMD = 3, U_RED = 4, U_MLU = 5, NUNIT = 6 };
enum { EV_CORE = 0, EV_CMD = 1, EV_FENCE = 2, EV_END = 3 };
enum { OP_DMA_ATOMIC = 0x103, OP_RED_ACCUMULATE = 0x402 };
enum { MODE_CACHE = 0, MODE_RESIDENT = 1, MODE_OFF = 2 };

/* A small insertion-ordered dict MemLevel -> bytes (Python dicts keep insertion order, and the
 * order of a command's levels decides the order of its bandwidth shares). */
typedef struct { int n; int key[NLV]; double val[NLV]; } LDict;

typedef struct {
    int level, write, ndims;
    i64 base, row_bytes;
    i64 dims_lo;    /* into counts/strides pool */
    i64 starts_lo;  /* into starts pool, -1: none */
    i64 nstarts;
} Span;

typedef struct {   /* one CommandEvent (static facts) */
    int unit, op, dtype, misaligned, transc, remote, has_mnk;
    i64 elements, flops, mnk[3];
    LDict br, bw;
    i64 range_lo; int nreads, nwrites;  /* into ranges pool: reads then writes (start, end) */
    i64 span_lo; int nspans;
} CmdStatic;

typedef struct { int pe, core; i64 ev_lo, ev_hi; } ProgStatic;

typedef struct { void *p; size_t n, cap, size; } Vec;  /* growable array of `size`-byte items */

typedef struct Trace {   /* a launch's traces, flattened */
    Vec progs;      /* ProgStatic */
    Vec ev_kind;    /* int8 */
    Vec ev_arg;     /* i64: instructions / command index / fence mask */
    Vec ev_mem;     /* i64: core events: index into mem pool (-1: none) */
    Vec ev_nmem;    /* int32 */
    Vec mem;        /* i64 triples (level 0 dram / 1 sram, count, bytes) */
    Vec cmds;       /* CmdStatic */
    Vec ranges;     /* i64 pairs */
    Vec spans;      /* Span */
    Vec dims;       /* i64 pairs (count, stride) */
    Vec starts;     /* i64 */
} Trace;

/* machine parameters, in the order mtia_sim/timing/native/loader.py writes them */
enum {
    P_CPI, P_ISSUE, P_QDEPTH, P_DMA_SLOTS, P_DRAM_LAT, P_SRAM_LAT, P_HOP_LAT, P_DMA_SETUP, P_DPE_SETUP,
    P_SIMD_SETUP, P_RED_SETUP, P_MLU_SETUP, P_TRANSC, P_RED_RATE, P_MLU_RATE, P_DRAM_BPC, P_SRAM_BPC,
    P_LS_BPC, P_NOC_BPC, P_BURST, P_MISALIGNED, P_ROWS, P_COLS, P_NPES, P_CORES, P_TILE_M, P_TILE_N,
    P_TILE_K, P_MODE, P_CAP_LINES, P_LINE, P_DRAM_BASE_LINE, P_WIDTHS, /* then DPE rates, SIMD rates */
};
#define NWIDTH 17

void vec_init(Vec *v, size_t size);
void *vec_push(Vec *v);   /* NULL when out of memory */
int vec_reserve(Vec *v, size_t n);
void vec_free(Vec *v);
#define VAT(v, T, i) (((T *)(v).p)[i])

void trace_init(Trace *t);
void trace_free(Trace *t);

/* SRAM cache (cache.c) */
typedef struct {
    int mode, shift; i64 capacity, line, base_line;
    int32_t *stamps; i64 nstamps;
    i64 clock, resident;
    double read_hit, read_miss, write_bytes;
    i64 hit_lines, miss_lines, evicted;
    i64 placed_r, placed_w;    /* resident mode: lines placed by reads / by writes */
    i64 *buf; size_t bufcap;   /* scratch for lines */
    i64 *hist; i64 nhist;      /* lines per positive stamp (LRU threshold without sorting) */
    i64 npos;                  /* lines with a positive stamp (resident, not in flight) */
} Cache;

typedef struct {   /* a command's bytes after the cache (Routed) */
    LDict read, written;
    double sram_fill;
    i64 fill_id;
    i64 *fill_lines; i64 nfill;   /* lines claimed by this command's fill (until it completes) */
    i64 *waits; int nwaits, capwaits;
} Routed;

int cache_init(Cache *c, int mode, i64 capacity_lines, i64 line, i64 base_line);
void cache_free(Cache *c);
/* returns 1 routed, 0 not routed (None), -1 out of memory */
int cache_route(Cache *c, const Trace *t, const CmdStatic *cs, i64 fill_id, Routed *r);
int cache_fill(Cache *c, Routed *r);   /* -1: out of memory */

void ld_set(LDict *d, int key, double v);
double ld_get(const LDict *d, int key);
int ld_has(const LDict *d, int key);

#endif
