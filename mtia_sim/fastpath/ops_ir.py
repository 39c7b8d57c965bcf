"""LLVM IR of the fast path's ops (see `mtia_sim.fastpath.doorbells`): strided byte copies and fills in up
to four dims, and a call of a numpy ufunc's inner loop; `run_ops` runs a plan's op records in order.

Op records (OP_WORDS int64 words; pointers are host addresses):
- copy: K_COPY, itemsize, dst, src, counts[4], dst strides[4], src strides[4] (bytes, outer first);
- fill: K_FILL, itemsize, dst, value bits, counts[4], dst strides[4];
- ufunc: K_UFUNC, loop, loop data, n, 3 pointers (inputs, then the output), 3 byte steps.
"""

from __future__ import annotations

from mtia_sim.fastpath.layout import OP_WORDS, OPS_PER_PLAN
from mtia_sim.fastpath.layout import load_word as _word


def _typed_loops() -> str:
    """Row copy / fill loops for element sizes 1, 2, 4, 8 (unaligned accesses)."""
    out = []
    for size in (1, 2, 4, 8):
        t = f"i{8 * size}"
        out.append(f"""
define internal void @copy_row_{size}(ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss) {{
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %done
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %od = mul i64 %i, %ds
  %os = mul i64 %i, %ss
  %pd = getelementptr i8, ptr %dst, i64 %od
  %ps = getelementptr i8, ptr %src, i64 %os
  %v = load {t}, ptr %ps, align 1
  store {t} %v, ptr %pd, align 1
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}

define internal void @fill_row_{size}(ptr %dst, i64 %n, i64 %ds, i64 %value) {{
entry:
  %v = trunc i64 %value to {t}
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %done
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %od = mul i64 %i, %ds
  %pd = getelementptr i8, ptr %dst, i64 %od
  store {t} %v, ptr %pd, align 1
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
""".replace("trunc i64 %value to i64", "add i64 %value, 0"))
    return "".join(out)


def _switch_rows() -> str:
    return """
define internal void @row(i64 %kind, i64 %isz, ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss, i64 %value) {
entry:
  %isfill = icmp eq i64 %kind, 2
  br i1 %isfill, label %fill, label %copy
copy:
  %dc = icmp eq i64 %ds, %isz
  %sc = icmp eq i64 %ss, %isz
  %contig = and i1 %dc, %sc
  br i1 %contig, label %memcpy, label %copysw
memcpy:
  %bytes = mul i64 %n, %isz
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %bytes, i1 false)
  ret void
copysw:
  switch i64 %isz, label %copyany [ i64 1, label %c1
                                    i64 2, label %c2
                                    i64 4, label %c4
                                    i64 8, label %c8 ]
c1:
  call void @copy_row_1(ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss)
  ret void
c2:
  call void @copy_row_2(ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss)
  ret void
c4:
  call void @copy_row_4(ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss)
  ret void
c8:
  call void @copy_row_8(ptr %dst, ptr %src, i64 %n, i64 %ds, i64 %ss)
  ret void
copyany:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %aloop, label %adone
aloop:
  %i = phi i64 [ 0, %copyany ], [ %i1, %aloop ]
  %od = mul i64 %i, %ds
  %os = mul i64 %i, %ss
  %pd = getelementptr i8, ptr %dst, i64 %od
  %ps = getelementptr i8, ptr %src, i64 %os
  call void @llvm.memcpy.p0.p0.i64(ptr %pd, ptr %ps, i64 %isz, i1 false)
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %aloop, label %adone
adone:
  ret void
fill:
  switch i64 %isz, label %fdone [ i64 1, label %f1
                                  i64 2, label %f2
                                  i64 4, label %f4
                                  i64 8, label %f8 ]
f1:
  call void @fill_row_1(ptr %dst, i64 %n, i64 %ds, i64 %value)
  ret void
f2:
  call void @fill_row_2(ptr %dst, i64 %n, i64 %ds, i64 %value)
  ret void
f4:
  call void @fill_row_4(ptr %dst, i64 %n, i64 %ds, i64 %value)
  ret void
f8:
  call void @fill_row_8(ptr %dst, i64 %n, i64 %ds, i64 %value)
  ret void
fdone:
  ret void
}
"""


def _nest() -> str:
    """Three outer loops around `row` (copy and fill ops: counts, dst strides, src strides)."""
    names = "kind isz dst src c0 c1 c2 c3 d0 d1 d2 d3 s0 s1 s2 s3".split()
    loads = "".join(_word(n, "%op", i) for i, n in enumerate(names))
    return f"""
define internal void @nest(ptr %op) {{
entry:
{loads}  %dstp = inttoptr i64 %dst to ptr
  %srcp = inttoptr i64 %src to ptr
  %any0 = icmp sgt i64 %c0, 0
  %any1 = icmp sgt i64 %c1, 0
  %any2 = icmp sgt i64 %c2, 0
  %a01 = and i1 %any0, %any1
  %a012 = and i1 %a01, %any2
  br i1 %a012, label %l0, label %done
l0:
  %i0 = phi i64 [ 0, %entry ], [ %i0n, %e1 ]
  %o0d = mul i64 %i0, %d0
  %o0s = mul i64 %i0, %s0
  br label %l1
l1:
  %i1 = phi i64 [ 0, %l0 ], [ %i1n, %e2 ]
  %o1d0 = mul i64 %i1, %d1
  %o1s0 = mul i64 %i1, %s1
  %o1d = add i64 %o0d, %o1d0
  %o1s = add i64 %o0s, %o1s0
  br label %l2
l2:
  %i2 = phi i64 [ 0, %l1 ], [ %i2n, %l2 ]
  %o2d0 = mul i64 %i2, %d2
  %o2s0 = mul i64 %i2, %s2
  %o2d = add i64 %o1d, %o2d0
  %o2s = add i64 %o1s, %o2s0
  %pd = getelementptr i8, ptr %dstp, i64 %o2d
  %ps = getelementptr i8, ptr %srcp, i64 %o2s
  call void @row(i64 %kind, i64 %isz, ptr %pd, ptr %ps, i64 %c3, i64 %d3, i64 %s3, i64 %src)
  %i2n = add i64 %i2, 1
  %m2 = icmp slt i64 %i2n, %c2
  br i1 %m2, label %l2, label %e2
e2:
  %i1n = add i64 %i1, 1
  %m1 = icmp slt i64 %i1n, %c1
  br i1 %m1, label %l1, label %e1
e1:
  %i0n = add i64 %i0, 1
  %m0 = icmp slt i64 %i0n, %c0
  br i1 %m0, label %l0, label %done
done:
  ret void
}}
"""


def _ufunc() -> str:
    return """
define internal void @ufunc(ptr %op) {
entry:
  %args = alloca [3 x i64], align 8
  %fnp = getelementptr i64, ptr %op, i64 1
  %fni = load i64, ptr %fnp
  %fn = inttoptr i64 %fni to ptr
  %datap = getelementptr i64, ptr %op, i64 2
  %datai = load i64, ptr %datap
  %data = inttoptr i64 %datai to ptr
  %dims = getelementptr i64, ptr %op, i64 3
  %steps = getelementptr i64, ptr %op, i64 7
  %a0p = getelementptr i64, ptr %op, i64 4
  %a0 = load i64, ptr %a0p
  store i64 %a0, ptr %args
  %a1p = getelementptr i64, ptr %op, i64 5
  %a1 = load i64, ptr %a1p
  %x1 = getelementptr i64, ptr %args, i64 1
  store i64 %a1, ptr %x1
  %a2p = getelementptr i64, ptr %op, i64 6
  %a2 = load i64, ptr %a2p
  %x2 = getelementptr i64, ptr %args, i64 2
  store i64 %a2, ptr %x2
  call void %fn(ptr %args, ptr %dims, ptr %steps, ptr %data)
  ret void
}

define internal void @run_ops(ptr %ops) {
entry:
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %next ]
  %off = mul i64 %k, OP_WORDS
  %op = getelementptr i64, ptr %ops, i64 %off
  %kind = load i64, ptr %op
  switch i64 %kind, label %done [ i64 1, label %nest
                                  i64 2, label %nest
                                  i64 3, label %uf ]
nest:
  call void @nest(ptr %op)
  br label %next
uf:
  call void @ufunc(ptr %op)
  br label %next
next:
  %k1 = add i64 %k, 1
  %more = icmp slt i64 %k1, OPS_PER_PLAN
  br i1 %more, label %loop, label %done
done:
  ret void
}
""".replace("OP_WORDS", str(OP_WORDS)).replace("OPS_PER_PLAN", str(OPS_PER_PLAN))


def ops_ir() -> str:
    """The op functions (`run_ops(ptr ops)` and what it calls)."""
    return _typed_loops() + _switch_rows() + _nest() + _ufunc()
