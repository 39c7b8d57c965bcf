"""tt.dot -> DPE_MATMUL (accumulating into the accumulator's buffer when it dies here)."""

from __future__ import annotations

from lowering.codegen import dtypes as dt
from lowering.codegen.errors import UnsupportedError
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules import rule
from lowering.codegen.values import Buf, Splat
from lowering.ir.core import Operation
from mtia_sim.isa import ITEMSIZE, Flags, Op


def _is_zero(ctx: KernelLowering, s: Splat) -> bool:
    c = getattr(s.scalar, "constant", None)
    return c is not None and not isinstance(c, str) and float(c) == 0.0


@rule("tt.dot")
def _dot(ctx: KernelLowering, op: Operation) -> None:
    a_v, b_v, c_v = op.operands[:3]
    res = op.results[0]
    rank = len(res.shape)
    if rank not in (2, 3):
        raise UnsupportedError(f"tt.dot of rank {rank}")
    out_dtype = dt.to_dtype(res.type)
    a, b = ctx.buf(a_v), ctx.buf(b_v)
    c = ctx.tensor(c_v)
    flags = 0
    if isinstance(c, Splat):
        dst = ctx.new_buf(res, tuple(res.shape), out_dtype)
        if not _is_zero(ctx, c):
            ctx.fill(dst, c.scalar, out_dtype)
            flags = Flags.ACCUMULATE
    else:
        dst = ctx.result_buf(op, res, out_dtype, reuse=[c_v])
        if dst.buffer is not c.buffer or dst.strides != c.strides:
            ctx.copy(dst, c)
        flags = Flags.ACCUMULATE
    batches = res.shape[0] if rank == 3 else 1
    for i in range(batches):
        if rank == 3:
            av = a.view(a.shape[1:], a.strides[1:], byte_offset=i * a.strides[0] * ITEMSIZE[a.dtype])
            bv = b.view(b.shape[1:], b.strides[1:], byte_offset=i * b.strides[0] * ITEMSIZE[b.dtype])
            dv = dst.view(
                dst.shape[1:], dst.strides[1:], byte_offset=i * dst.strides[0] * ITEMSIZE[dst.dtype]
            )
        else:
            av, bv, dv = a, b, dst
        _matmul(ctx, av, bv, dv, flags)
    ctx.bind(res, dst)


def _matmul(ctx: KernelLowering, a: Buf, b: Buf, d: Buf, flags: int) -> None:
    m, k = a.shape
    n = b.shape[1]
    ctx.command(
        Op.DPE_MATMUL,
        shape=(m, n, k, 1),
        raw_dims=True,
        dst=(d.addr, [d.strides[0], d.strides[1], 0, 0]),
        srcs=((a.addr, [a.strides[0], 0, a.strides[1], 0]), (b.addr, [0, b.strides[1], b.strides[0], 0])),
        dtypes=(d.dtype, a.dtype, b.dtype),
        flags=flags,
    )
