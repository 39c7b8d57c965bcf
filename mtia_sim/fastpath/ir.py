"""LLVM IR of the doorbell fast path (see `mtia_sim.fastpath.doorbells`), JIT-compiled for the host.

`mtia_fast_write(state, offset, value, pc)` runs inside the MMIO store of a command register. For a
DOORBELL write (`mtia_fast_doorbell`) it hashes the descriptor on the stack, looks (descriptor, PE)
up in a table of plans Python registered, runs the plan's ops (strided byte copies, fills, a numpy
ufunc inner loop) and appends a row (plan, pc, instruction count, scalar-access totals) to a queue
Python turns into trace events later; it returns 0, touching nothing but the hash word, when Python
must handle the doorbell. A FENCE write becomes a queue row (plan -1, pc, instructions, access
totals, mask) the same way. The ops themselves are in `ops_ir.py`, the word layout in `layout.py`.
"""

from __future__ import annotations

from mtia_sim import isa
from mtia_sim.fastpath.layout import (
    ADDR_FIRST,
    ADDR_LAST,
    ANY_PE,
    DELTA_ALIGN,
    F_ACCESS_PTR,
    F_BUDGET,
    F_COUNT_PTR,
    F_ENABLED,
    F_HASH,
    F_KEYS,
    F_MASK,
    F_META,
    F_OPS,
    F_PE,
    F_QCAP,
    F_QCOUNT,
    F_QUEUE,
    F_STACK_BASE,
    F_STACK_HOST,
    F_STACK_SIZE,
    F_TABLE,
    FENCE_ROW,
    HASH_MUL,
    HASH_SEED,
    KEY_WORDS,
    M_ADDR0,
    M_DMAX,
    M_DMIN,
    M_GROUP,
    M_LOCAL,
    M_LSTRIDE,
    M_PE0,
    M_RELOC,
    META_WORDS,
    N_ADDR,
    OP_WORDS,
    OPS_PER_PLAN,
    ROW_WORDS,
    load_word,
)
from mtia_sim.fastpath.ops_ir import ops_ir


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def _doorbell() -> str:
    w = load_word
    return f"""
define internal i32 @mtia_fast_doorbell(ptr %st, i64 %addr, i64 %pc) {{
entry:
  %deltas = alloca [{N_ADDR} x i64], align 8
  %pdeltas = alloca [{N_ADDR} x i64], align 8
  %scratch = alloca [{OPS_PER_PLAN * OP_WORDS} x i64], align 8
  %hp = getelementptr i64, ptr %st, i64 {F_HASH}
  store i64 -1, ptr %hp
{w("en", "%st", F_ENABLED)}  %on = icmp ne i64 %en, 0
  %al = and i64 %addr, {isa.DESC_ALIGNMENT - 1}
  %alok = icmp eq i64 %al, 0
  %go = and i1 %on, %alok
  br i1 %go, label %range, label %miss
range:
{w("sbase", "%st", F_STACK_BASE)}{w("ssize", "%st", F_STACK_SIZE)}  %off = sub i64 %addr, %sbase
  %lim = sub i64 %ssize, {isa.DESC_BYTES}
  %inr = icmp ule i64 %off, %lim
  br i1 %inr, label %hash, label %miss
hash:
{w("shost", "%st", F_STACK_HOST)}{w("pe", "%st", F_PE)}  %hostp = inttoptr i64 %shost to ptr
  %desc = getelementptr i8, ptr %hostp, i64 %off
  br label %hloop
hloop:
  %i = phi i64 [ 0, %hash ], [ %i1, %hloop ]
  %h = phi i64 [ {_signed(HASH_SEED)}, %hash ], [ %hn, %hloop ]
  %wp = getelementptr i64, ptr %desc, i64 %i
  %wv0 = load i64, ptr %wp, align 8
  %ia = icmp uge i64 %i, {ADDR_FIRST}
  %ib = icmp ule i64 %i, {ADDR_LAST}
  %iaddr = and i1 %ia, %ib
  %wv = select i1 %iaddr, i64 0, i64 %wv0
  %hx = xor i64 %h, %wv
  %hm = mul i64 %hx, {HASH_MUL}
  %hs = lshr i64 %hm, 29
  %hn = xor i64 %hm, %hs
  %i1 = add i64 %i, 1
  %hmore = icmp slt i64 %i1, {isa.DESC_WORDS}
  br i1 %hmore, label %hloop, label %hashed
hashed:
  %hf = and i64 %hn, 9223372036854775807
  store i64 %hf, ptr %hp
{w("qn", "%st", F_QCOUNT)}{w("qcap", "%st", F_QCAP)}{w("budget", "%st", F_BUDGET)}\
  %room = icmp slt i64 %qn, %qcap
  %bud = icmp slt i64 %qn, %budget
  %ok = and i1 %room, %bud
  br i1 %ok, label %probe0, label %miss
probe0:
{w("tablei", "%st", F_TABLE)}{w("mask", "%st", F_MASK)}{w("keysi", "%st", F_KEYS)}\
  %table = inttoptr i64 %tablei to ptr
  %keys = inttoptr i64 %keysi to ptr
  %slot0 = and i64 %hf, %mask
  br label %probe
probe:
  %slot = phi i64 [ %slot0, %probe0 ], [ %slotn, %next ]
  %ti = shl i64 %slot, 1
  %thp = getelementptr i64, ptr %table, i64 %ti
  %th = load i64, ptr %thp
  %ti1 = add i64 %ti, 1
  %tpp = getelementptr i64, ptr %table, i64 %ti1
  %tplan = load i64, ptr %tpp
  %empty = icmp eq i64 %tplan, 0
  br i1 %empty, label %miss, label %cmph
cmph:
  %same = icmp eq i64 %th, %hf
  br i1 %same, label %cmpk0, label %next
cmpk0:
  %plan = sub i64 %tplan, 1
  %kbase = mul i64 %plan, {KEY_WORDS}
  %kp = getelementptr i64, ptr %keys, i64 %kbase
  %kpep = getelementptr i64, ptr %kp, i64 {isa.DESC_WORDS}
  %kpe = load i64, ptr %kpep
  %pesame0 = icmp eq i64 %kpe, %pe
  %anype = icmp eq i64 %kpe, {ANY_PE}
  %pesame = or i1 %pesame0, %anype
  br i1 %pesame, label %cmpk, label %next
cmpk:
  %j = phi i64 [ 0, %cmpk0 ], [ %j1, %cmpk1 ]
  %kwp = getelementptr i64, ptr %kp, i64 %j
  %kw = load i64, ptr %kwp
  %dwp = getelementptr i64, ptr %desc, i64 %j
  %dw0 = load i64, ptr %dwp, align 8
  %ja = icmp uge i64 %j, {ADDR_FIRST}
  %jb = icmp ule i64 %j, {ADDR_LAST}
  %jaddr = and i1 %ja, %jb
  %dw = select i1 %jaddr, i64 0, i64 %dw0
  %eq = icmp eq i64 %kw, %dw
  br i1 %eq, label %cmpk1, label %next
cmpk1:
  %j1 = add i64 %j, 1
  %jmore = icmp slt i64 %j1, {isa.DESC_WORDS}
  br i1 %jmore, label %cmpk, label %reloc
reloc:
{w("metai", "%st", F_META)}  %metab = inttoptr i64 %metai to ptr
  %mbase = mul i64 %plan, {META_WORDS}
  %meta = getelementptr i64, ptr %metab, i64 %mbase
  %fits = call i1 @relocate(ptr %meta, ptr %desc, ptr %deltas, ptr %pdeltas, i64 %pe)
  br i1 %fits, label %hit, label %next
next:
  %slotp = add i64 %slot, 1
  %slotn = and i64 %slotp, %mask
  br label %probe
hit:
{w("opsi", "%st", F_OPS)}  %ops = inttoptr i64 %opsi to ptr
  %obase = mul i64 %plan, {OPS_PER_PLAN * OP_WORDS}
  %op = getelementptr i64, ptr %ops, i64 %obase
  call void @reloc_ops(ptr %op, ptr %meta, ptr %pdeltas, ptr %scratch)
  call void @run_ops(ptr %scratch)
  call void @log_row(ptr %st, i64 %qn, i64 %plan, i64 %pc, i64 0, ptr %deltas)
  ret i32 1
miss:
  ret i32 0
}}
"""


def _write() -> str:
    return f"""
define internal void @log_row(ptr %st, i64 %qn, i64 %plan, i64 %pc, i64 %extra, ptr %deltas) {{
entry:
{load_word("queuei", "%st", F_QUEUE)}{load_word("cntpi", "%st", F_COUNT_PTR)}\
{load_word("accpi", "%st", F_ACCESS_PTR)}\
  %queue = inttoptr i64 %queuei to ptr
  %rbase = mul i64 %qn, {ROW_WORDS}
  %row = getelementptr i64, ptr %queue, i64 %rbase
  store i64 %plan, ptr %row
  %r1 = getelementptr i64, ptr %row, i64 1
  store i64 %pc, ptr %r1
  %cntp = inttoptr i64 %cntpi to ptr
  %cnt = load i64, ptr %cntp
  %r2 = getelementptr i64, ptr %row, i64 2
  store i64 %cnt, ptr %r2
  %racc = getelementptr i64, ptr %row, i64 3
  %accp = inttoptr i64 %accpi to ptr
  call void @llvm.memcpy.p0.p0.i64(ptr %racc, ptr %accp, i64 32, i1 false)
  %r7 = getelementptr i64, ptr %row, i64 7
  store i64 %extra, ptr %r7
  %r8 = getelementptr i64, ptr %row, i64 8
  call void @llvm.memcpy.p0.p0.i64(ptr %r8, ptr %deltas, i64 {8 * N_ADDR}, i1 false)
  %qn1 = add i64 %qn, 1
  %qnp = getelementptr i64, ptr %st, i64 {F_QCOUNT}
  store i64 %qn1, ptr %qnp
  ret void
}}

define i32 @mtia_fast_write(ptr %st, i64 %offset, i64 %value, i64 %pc) {{
entry:
  %zeros = alloca [{N_ADDR} x i64], align 8
  call void @llvm.memset.p0.i64(ptr %zeros, i8 0, i64 {8 * N_ADDR}, i1 false)
  %isdb = icmp eq i64 %offset, {int(isa.Reg.DOORBELL)}
  br i1 %isdb, label %doorbell, label %other
doorbell:
  %r = call i32 @mtia_fast_doorbell(ptr %st, i64 %value, i64 %pc)
  ret i32 %r
other:
  %isfence = icmp eq i64 %offset, {int(isa.Reg.FENCE)}
{load_word("en", "%st", F_ENABLED)}{load_word("qn", "%st", F_QCOUNT)}{load_word("qcap", "%st", F_QCAP)}\
  %on = icmp ne i64 %en, 0
  %room = icmp slt i64 %qn, %qcap
  %go0 = and i1 %isfence, %on
  %go = and i1 %go0, %room
  br i1 %go, label %fence, label %miss
fence:
  call void @log_row(ptr %st, i64 %qn, i64 {FENCE_ROW}, i64 %pc, i64 %value, ptr %zeros)
  ret i32 1
miss:
  ret i32 0
}}
"""


def _relocate() -> str:
    """Address deltas of a matching descriptor against its plan: each within the plan's bounds, a
    multiple of DELTA_ALIGN and equal across address words in the same memory, and the host pointer
    deltas (plus the local-store move to this PE); then the plan's op words with those added, in
    `scratch`."""
    checks = []
    for k in range(N_ADDR):
        checks.append(f"""
  %a{k}p = getelementptr i64, ptr %desc, i64 {ADDR_FIRST + k}
  %a{k} = load i64, ptr %a{k}p, align 8
  %b{k}p = getelementptr i64, ptr %meta, i64 {M_ADDR0 + k}
  %b{k} = load i64, ptr %b{k}p
  %d{k} = sub i64 %a{k}, %b{k}
  %dp{k} = getelementptr i64, ptr %deltas, i64 {k}
  store i64 %d{k}, ptr %dp{k}
  %lo{k}p = getelementptr i64, ptr %meta, i64 {M_DMIN + k}
  %lo{k} = load i64, ptr %lo{k}p
  %hi{k}p = getelementptr i64, ptr %meta, i64 {M_DMAX + k}
  %hi{k} = load i64, ptr %hi{k}p
  %ge{k} = icmp sge i64 %d{k}, %lo{k}
  %le{k} = icmp sle i64 %d{k}, %hi{k}
  %al{k}m = and i64 %d{k}, {DELTA_ALIGN - 1}
  %al{k} = icmp eq i64 %al{k}m, 0
  %in{k}a = and i1 %ge{k}, %le{k}
  %in{k} = and i1 %in{k}a, %al{k}
  %lf{k}p = getelementptr i64, ptr %meta, i64 {M_LOCAL + k}
  %lf{k} = load i64, ptr %lf{k}p
  %lm{k} = mul i64 %lf{k}, %pemove
  %pd{k} = add i64 %d{k}, %lm{k}
  %pdp{k} = getelementptr i64, ptr %pdeltas, i64 {k}
  store i64 %pd{k}, ptr %pdp{k}""")
    groups = []
    for k in range(N_ADDR):
        groups.append(f"""
  %g{k}p = getelementptr i64, ptr %meta, i64 {M_GROUP + k}
  %g{k} = load i64, ptr %g{k}p
  %gd{k}p = getelementptr i64, ptr %deltas, i64 %g{k}
  %gd{k} = load i64, ptr %gd{k}p
  %same{k} = icmp eq i64 %gd{k}, %d{k}""")
    ok = ["%in0"] + [f"%in{k}" for k in range(1, N_ADDR)] + [f"%same{k}" for k in range(N_ADDR)]
    ands = []
    acc = ok[0]
    for i, v in enumerate(ok[1:]):
        ands.append(f"  %ok{i} = and i1 {acc}, {v}")
        acc = f"%ok{i}"
    words = OPS_PER_PLAN * OP_WORDS
    return f"""
define internal i1 @relocate(ptr %meta, ptr %desc, ptr %deltas, ptr %pdeltas, i64 %pe) {{
entry:
  %pe0p = getelementptr i64, ptr %meta, i64 {M_PE0}
  %pe0 = load i64, ptr %pe0p
  %strp = getelementptr i64, ptr %meta, i64 {M_LSTRIDE}
  %stride = load i64, ptr %strp
  %dpe = sub i64 %pe, %pe0
  %pemove = mul i64 %dpe, %stride{"".join(checks)}{"".join(groups)}
{chr(10).join(ands)}
  ret i1 {acc}
}}

define internal void @reloc_ops(ptr %ops, ptr %meta, ptr %deltas, ptr %scratch) {{
entry:
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %store ]
  %wp = getelementptr i64, ptr %ops, i64 %j
  %w = load i64, ptr %wp
  %rj = add i64 %j, {M_RELOC}
  %rp = getelementptr i64, ptr %meta, i64 %rj
  %r = load i64, ptr %rp
  %has = icmp sge i64 %r, 0
  br i1 %has, label %add, label %store
add:
  %dp = getelementptr i64, ptr %deltas, i64 %r
  %d = load i64, ptr %dp
  %wd = add i64 %w, %d
  br label %store
store:
  %v = phi i64 [ %w, %loop ], [ %wd, %add ]
  %sp = getelementptr i64, ptr %scratch, i64 %j
  store i64 %v, ptr %sp
  %j1 = add i64 %j, 1
  %more = icmp slt i64 %j1, {words}
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def fast_ir() -> str:
    """The whole module."""
    return ("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n"
            "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n" + ops_ir() + _relocate() + _doorbell()
            + _write())
