"""Program ids, ranges, splats, pointer arithmetic and layout ops (views when possible, MLU copies else)."""

from __future__ import annotations

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I64
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat, row_major
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import ITEMSIZE, DType, Flags, Op, SimdOp

_AXES = {"x": 0, "y": 1, "z": 2}


def _axis(op: Operation) -> int:
    a = op.attr("axis", 0)
    return _AXES[a] if isinstance(a, str) else int(a)


@rule("tt.get_program_id")
def _program_id(ctx: KernelLowering, op: Operation) -> None:
    ctx.bind(op.results[0], ctx.em.program_ids[_axis(op)])


@rule("tt.get_num_programs")
def _num_programs(ctx: KernelLowering, op: Operation) -> None:
    ctx.bind(op.results[0], ctx.em.num_programs[_axis(op)])


@rule("tt.make_range")
def _make_range(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    dst = ctx.new_buf(res, tuple(res.shape), DType.I32)
    ctx.command(
        Op.SIMD_IOTA,
        shape=tuple(res.shape),
        dst=dst,
        dtypes=(DType.I32,),
        subop=3,
        imm0=int(op.attr("start", 0)),
        flags=Flags.IMM_IS_INT,
    )
    ctx.bind(res, dst)


@rule("tt.splat")
def _splat(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    ctx.bind(res, ctx.scalar_operand(op.operands[0], tuple(res.shape), dt.to_dtype(res.type)))


@rule("tt.broadcast")
def _broadcast(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    x = ctx.tensor(op.operands[0])
    shape = tuple(res.shape)
    if isinstance(x, Splat):
        ctx.bind(res, Splat(x.scalar, shape, x.dtype))
        return
    strides = tuple(
        0 if s == 1 and d != 1 else st for s, d, st in zip(x.shape, shape, x.strides, strict=True)
    )
    ctx.bind(res, x.view(shape, strides))


@rule("tt.expand_dims")
def _expand_dims(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    axis = int(op.attr("axis"))
    x = ctx.tensor(op.operands[0])
    if isinstance(x, Splat):
        ctx.bind(res, Splat(x.scalar, tuple(res.shape), x.dtype))
        return
    strides = list(x.strides)
    strides.insert(axis, 0)
    ctx.bind(res, x.view(tuple(res.shape), tuple(strides)))


def dense(ctx: KernelLowering, op: Operation, x: Buf) -> Buf:
    """`x` as a dense row-major buffer (an MLU copy when it is a strided view)."""
    if x.is_dense:
        return x
    tmp = ctx.new_buf(None, x.shape, x.dtype)
    ctx.copy(tmp, x)
    return tmp


@rule("tt.reshape")
def _reshape(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    shape = tuple(res.shape)
    x = ctx.tensor(op.operands[0])
    if isinstance(x, Splat):
        ctx.bind(res, Splat(x.scalar, shape, x.dtype))
        return
    if x.is_dense:
        ctx.bind(res, x.view(shape, row_major(shape)))
        return
    d = ctx.new_buf(res, x.shape, x.dtype)
    ctx.copy(d, x)
    ctx.bind(res, d.view(shape, row_major(shape)))


@rule("tt.trans")
def _trans(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    order = [int(i) for i in op.attr("order")]
    x = ctx.tensor(op.operands[0])
    if isinstance(x, Splat):
        ctx.bind(res, Splat(x.scalar, tuple(res.shape), x.dtype))
        return
    ctx.bind(res, x.view(tuple(x.shape[i] for i in order), tuple(x.strides[i] for i in order)))


@rule("tt.join")
def _join(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    dst = ctx.new_buf(res, tuple(res.shape), dtype)
    size = ITEMSIZE[dtype]
    for k, v in enumerate(op.operands):
        part = dst.view(tuple(res.shape[:-1]), dst.strides[:-1], byte_offset=k * size)
        ctx.store_into(part, ctx.tensor(v))
    ctx.bind(res, dst)


@rule("tt.split")
def _split(ctx: KernelLowering, op: Operation) -> None:
    x = ctx.buf(op.operands[0])
    size = ITEMSIZE[x.dtype]
    for k, r in enumerate(op.results):
        ctx.bind(r, x.view(tuple(r.shape), x.strides[:-1], byte_offset=k * size * x.strides[-1]))


@rule("tt.cat")
def _cat(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    dst = ctx.new_buf(res, tuple(res.shape), dtype)
    offset = 0
    for v in op.operands:
        n = v.shape[0]
        part = dst.view(tuple(v.shape), dst.strides, byte_offset=offset * dst.strides[0] * ITEMSIZE[dtype])
        ctx.store_into(part, ctx.tensor(v))
        offset += n
    ctx.bind(res, dst)


@rule("tt.addptr")
def _addptr(ctx: KernelLowering, op: Operation) -> None:
    p, off = op.operands
    res = op.results[0]
    size = ITEMSIZE[dt.to_dtype(res.type.element_type.pointee)]  # type: ignore[attr-defined]
    b = ctx.b
    if not res.type.is_tensor:
        ctx.bind(res, b.add(ctx.scalar(p), b.mul(ctx.i64(ctx.scalar(off)), I64(size))))
        return
    tp, to = ctx.tensor(p), ctx.tensor(off)
    shape = tuple(res.shape)
    if isinstance(tp, Splat) and isinstance(to, Splat):
        ctx.bind(res, Splat(b.add(tp.scalar, b.mul(ctx.i64(to.scalar), I64(size))), shape, DType.U64))
        return
    if isinstance(to, Splat):
        assert isinstance(tp, Buf)
        scaled = b.mul(ctx.i64(to.scalar), I64(size))
        dst = ctx.result_buf(op, res, DType.U64, reuse=[p])
        ctx.command(
            Op.SIMD_BINARY,
            shape=shape,
            dst=dst,
            srcs=(tp,),
            dtypes=(DType.I64, DType.I64, DType.I64),
            subop=SimdOp.ADD,
            flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
            imm1=scaled,
        )
        ctx.bind(res, dst.view(dst.shape, dst.strides, DType.U64))
        return
    # offsets (any int type) -> I64 bytes, then + pointer
    off_dtype = dt.to_dtype(off.type)
    dst = ctx.result_buf(op, res, DType.I64, reuse=[off])
    assert isinstance(to, Buf)
    src: Buf = to
    if off_dtype != DType.I64:
        ctx.command(Op.SIMD_CAST, shape=shape, dst=dst, srcs=(to,), dtypes=(DType.I64, off_dtype))
        src = dst
    ctx.command(
        Op.SIMD_BINARY,
        shape=shape,
        dst=dst,
        srcs=(src,),
        dtypes=(DType.I64, DType.I64, DType.I64),
        subop=SimdOp.MUL,
        flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
        imm1=size,
    )
    if isinstance(tp, Splat):
        ctx.command(
            Op.SIMD_BINARY,
            shape=shape,
            dst=dst,
            srcs=(dst,),
            dtypes=(DType.I64, DType.I64, DType.I64),
            subop=SimdOp.ADD,
            flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
            imm1=tp.scalar,
        )
    else:
        ctx.command(
            Op.SIMD_BINARY,
            shape=shape,
            dst=dst,
            srcs=(tp, dst),
            dtypes=(DType.I64, DType.I64, DType.I64),
            subop=SimdOp.ADD,
        )
    ctx.bind(res, dst.view(dst.shape, dst.strides, DType.U64))


@rule(
    "tt.make_tensor_ptr",
    "tt.advance",
    "tt.elementwise_inline_asm",
    "tt.experimental_descriptor_load",
)
def _unsupported(ctx: KernelLowering, op: Operation) -> None:
    hints = {
        "tt.make_tensor_ptr": "block pointers should have been rewritten by Triton's passes; "
        "use plain pointers",
        "tt.elementwise_inline_asm": "inline assembly targets a GPU ISA; use tl.* math instead",
        "tt.histogram": "compute the histogram with tl.atomic_add instead",
    }
    raise UnsupportedError(
        f"{op.name} has no MTIA lowering", hint=hints.get(op.name, "rewrite the kernel without it")
    )
