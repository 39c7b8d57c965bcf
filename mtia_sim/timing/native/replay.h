/* The replay's state (a port of mtia_sim/timing/engine.py and fluid.py). */
#ifndef KT_REPLAY_H
#define KT_REPLAY_H
#include "ktiming.h"

/* bandwidth resources: DRAM, SRAM, each PE's local store, each PE's reduction port; a transfer's
 * own NoC link is RES_LINK (nobody else uses it) */
#define RES_DRAM 0
#define RES_SRAM 1
#define RES_LS(pe) (2 + (pe))
#define RES_PORT(npes, pe) (2 + (npes) + (pe))
#define RES_LINK (-1)
#define MAXSHARES 6

typedef struct { int n; int key[MAXSHARES]; double val[MAXSHARES]; double cap[MAXSHARES]; } Demand;

double cost_ideal(const double *P, const CmdStatic *cs);
double cost_fixed(const double *P, int pe, const CmdStatic *cs, const Routed *r);
double cost_transfer(const double *P, int npes, int pe, const CmdStatic *cs, const Routed *r, Demand *d);
double uncontended_rate(const Demand *d);
int has_shared_traffic(const CmdStatic *cs);

typedef struct { int *p; int n, cap; } IVec;

/* core stall reasons: scalar_mem, then {queue_full, fence_wait, end_wait} x {ANY, DMA..MLU} */
#define NSTALL 19
enum { B_NONE = 0, B_QUEUE = 1, B_FENCE = 2, B_END = 3, B_SCALAR = 4 };

typedef struct {
    int pe, core, prog, slot, routed_flag, has_head, done, deps_left, merge_left;
    double issue, start, end, wait_unit, wait_dep, wait_bw, ideal, head_at, transfer_start, transfer_alone;
    i64 lo, hi;
    IVec dependents, waiters, merged;
    Routed routed;
} Cmd;

typedef struct { IVec q; int head; int *running; int nslots; IVec blocked; } UnitQ;

typedef struct { UnitQ units[NUNIT]; IVec outstanding; } PE;

typedef struct {
    int pe, core;
    IVec programs; int next;   /* trace indices, run in order */
    int prog;                   /* index into progrecs, -1: none */
    i64 ev, ev_hi;
    double time;
    int paid, blocked, wake_unit, waiting;
    double blocked_since;
    i64 mem_next, mem_left;     /* scalar accesses still to make (into the mem pool) */
    IVec issued[NUNIT];
} Core;

typedef struct {
    int program, pe, core;
    double start, end, busy;
    i64 instructions, mem_accesses;
    double mem_bytes[2];
    double stalls[NSTALL];
} ProgRec;

typedef struct {
    int owner_kind, owner;      /* 0: command, 1: scalar access */
    int frozen, nshares;
    double remaining, last, rate, cap, dram_w, sram_w;
    int res[MAXSHARES]; double w[MAXSHARES], c[MAXSHARES];
} Transfer;

typedef struct { int core, level; double traffic; } Scalar;

typedef struct { double time; i64 seq; int prio, kind, obj; i64 version; } HeapItem;

typedef struct Replay {
    const Trace *t;
    double P[P_WIDTHS + 2 * NWIDTH];
    int npes, ncores_per_pe;
    Cache cache;
    Cmd *cmds; i64 ncmds;
    IVec order;                 /* commands in issue order */
    PE *pes;
    Core *cores; int ncores;
    ProgRec *progs; int nprogs;
    HeapItem *heap; i64 nheap, capheap; i64 seq;
    double now; i64 events;
    Transfer *tr; int ntr, captr; IVec free_tr; IVec active;
    int *users; int nres;
    int fluid_dirty; i64 epoch; double fluid_clock, dram_rate, sram_rate;
    Scalar *scalars; int nscalars, capscalars;
    IVec fillers;               /* fill id -> command, -1 gone */
    i64 fill_seq;
    double *timeline; i64 ntimeline, captimeline;
    double makespan;
    int status;                 /* 0 ok, 1 deadlock, 2 unsupported, -1 out of memory */
    /* rebalance scratch */
    int *slot_of; double *rem, *load; int *cnt, *head, *tail, *slot_res; int nslot;
    int *enext, *et; double *ew; int nent, capent;
    int *pending; int cappending;
} Replay;

int iv_push(IVec *v, int x);
void kt_push(Replay *R, double time, int prio, int kind, int obj, i64 version);
void kt_next_program(Replay *R, Core *c, double start);
void iv_free(IVec *v);

#endif
