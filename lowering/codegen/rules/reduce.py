"""tt.reduce / tt.scan with a recognised combiner region -> reduction engine commands."""

from __future__ import annotations

from lowering.codegen import dtypes as dt
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, DeferredScalar, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import DType, Flags, Op, ReduceOp, ScanOp

_COMBINERS: dict[str, tuple[ReduceOp, int]] = {
    "arith.addf": (ReduceOp.SUM, 0),
    "arith.addi": (ReduceOp.SUM, 0),
    "arith.mulf": (ReduceOp.PROD, 0),
    "arith.muli": (ReduceOp.PROD, 0),
    "arith.maxnumf": (ReduceOp.MAX, 0),
    "arith.maximumf": (ReduceOp.MAX, Flags.PROPAGATE_NAN),
    "arith.maxsi": (ReduceOp.MAX, 0),
    "arith.maxui": (ReduceOp.MAX, Flags.UNSIGNED),
    "arith.minnumf": (ReduceOp.MIN, 0),
    "arith.minimumf": (ReduceOp.MIN, Flags.PROPAGATE_NAN),
    "arith.minsi": (ReduceOp.MIN, 0),
    "arith.minui": (ReduceOp.MIN, Flags.UNSIGNED),
    "arith.andi": (ReduceOp.AND, 0),
    "arith.ori": (ReduceOp.OR, 0),
    "arith.xori": (ReduceOp.XOR, 0),
}
_SCANS = {
    ReduceOp.SUM: ScanOp.SUM,
    ReduceOp.PROD: ScanOp.PROD,
    ReduceOp.MAX: ScanOp.MAX,
    ReduceOp.MIN: ScanOp.MIN,
}


def combiner(op: Operation) -> list[tuple[ReduceOp, int]]:
    """The reduction of each operand, recognised from the combiner region, or UnsupportedError."""
    block = op.regions[0].entry
    body = [o for o in block.ops if not o.name.endswith(".return")]
    n = len(op.operands)
    if n == 1 and len(body) == 1 and body[0].name in _COMBINERS:
        c = body[0]
        if set(map(id, c.operands)) <= set(map(id, block.args)):
            return [_COMBINERS[c.name]]
    if n == 2 and op.name == "tt.reduce":
        values = {id(block.args[0]), id(block.args[2])}
        preds = [
            str(o.attr("predicate"))
            for o in body
            if o.name in ("arith.cmpf", "arith.cmpi") and {id(v) for v in o.operands} == values
        ]
        if any("gt" in p for p in preds) and not any("lt" in p for p in preds):
            return [(ReduceOp.MAX, 0), (ReduceOp.ARGMAX, 0)]
        if any("lt" in p for p in preds) and not any("gt" in p for p in preds):
            return [(ReduceOp.MIN, 0), (ReduceOp.ARGMIN, 0)]
    names = ", ".join(o.name for o in body) or "nothing"
    raise UnsupportedError(
        f"the combine function ({names}) is not one the reduction engine has",
        hint="use tl.sum / tl.max / tl.min / tl.argmax / tl.argmin / tl.cumsum / tl.cumprod, "
        "or a combine_fn that is one add, mul, max, min, and, or, xor",
    )


@rule("tt.reduce")
def _reduce(ctx: KernelLowering, op: Operation) -> None:
    axis = int(op.attr("axis"))
    kinds = combiner(op)
    src = ctx.buf(op.operands[0])
    shape = src.shape
    for res, (kind, flags) in zip(op.results, kinds, strict=True):
        out_dtype = DType.I32 if kind in (ReduceOp.ARGMAX, ReduceOp.ARGMIN) else dt.to_dtype(res.type)
        out_shape = tuple(res.shape) if res.type.is_tensor else ()
        dst = ctx.new_buf(res if out_shape else None, out_shape or (1,), out_dtype)
        strides = list(dst.strides) if out_shape else []
        strides.insert(axis, 0)
        if not out_shape:
            strides = [0] * len(shape)
        ctx.command(
            Op.RED_REDUCE,
            shape=shape,
            dst=dst.view(shape, tuple(strides)),
            srcs=(src,),
            dtypes=(out_dtype, src.dtype),
            subop=kind,
            flags=flags,
            axis=axis,
        )
        if out_shape:
            ctx.bind(res, dst)
        else:
            temp = dst.buffer
            if temp in ctx.temps:
                ctx.temps.remove(temp)  # now owned by the deferred scalar (released after its last use)
            ctx.bind(res, DeferredScalar(dst, dt.core_type(res.type)))


@rule("tt.scan")
def _scan(ctx: KernelLowering, op: Operation) -> None:
    axis = int(op.attr("axis"))
    reverse = bool(op.attr("reverse", False))
    kinds = combiner(op)
    x = ctx.tensor(op.operands[0])
    src = x if isinstance(x, Buf) else ctx.materialize(x) if isinstance(x, Splat) else x
    res = op.results[0]
    kind, flags = kinds[0]
    if kind not in _SCANS:
        raise UnsupportedError(
            f"scan with combiner {kind.name}", hint="use an add, mul, max or min combine_fn"
        )
    out_dtype = dt.to_dtype(res.type)
    dst = ctx.result_buf(op, res, out_dtype, reuse=[op.operands[0]])
    ctx.command(
        Op.RED_SCAN,
        shape=tuple(res.shape),
        dst=dst,
        srcs=(src,),
        dtypes=(out_dtype, src.dtype),
        subop=_SCANS[kind],
        flags=flags | (Flags.REVERSE if reverse else 0),
        axis=axis,
    )
    ctx.bind(res, dst)


@rule("tt.reduce.return", "tt.scan.return")
def _combiner_return(ctx: KernelLowering, op: Operation) -> None:
    raise UnsupportedError("combiner regions are not lowered op by op")
