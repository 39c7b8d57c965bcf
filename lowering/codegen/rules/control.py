"""Structured control flow stays on the control core: scf.for / scf.while / scf.if.

Loop-carried scalars live in stack slots (LLVM's mem2reg makes them registers); loop-carried
tensors live in local-store slots pinned for the loop. Loads marked by the multi-buffering pass
rotate through a ring of `num_stages` buffers so the DMA of the next iteration does not wait for
the compute of the current one.

A carried tensor whose next value is computed while the current one is still needed (a tile
computed one iteration ahead: `s_next = dot(q, k_next) ... use s ... yield s_next`) cannot be
computed in place in its slot, and copying it into the slot at the yield puts a copy between two
iterations. Such a value gets a rotating slot instead (modulo variable expansion, docs/DECISIONS.md
D38): two halves, the current value in half `iteration % 2` and the next one computed directly into
the other half; the yield only advances the iteration counter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I1, I64
from lowering.codegen.local_alloc import Buffer, align
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.slots import bind_slots, make_slots, store_slots, unpin
from lowering.codegen.values import Buf, row_major
from lowering.errors import UnsupportedError
from lowering.ir.core import Block, Operation, Value
from mtia_sim.isa import ITEMSIZE, Op, ReduceOp, Reg, UnitMask


def produced_by_units(v: Value, loop_args: set[int], depth: int = 0) -> bool:
    """Whether scalar `v` comes (through scalar float/int ops) from a reduction: then carrying it
    in the local store avoids a fence per iteration."""
    owner = v.owner
    if depth > 16 or not isinstance(owner, Operation):
        return False
    if owner.name == "tt.reduce":
        return True
    if owner.regions or owner.name.startswith(("scf.", "tt.load", "tt.atomic")):
        return False
    return any(
        not o.type.is_tensor and id(o) not in loop_args and produced_by_units(o, loop_args, depth + 1)
        for o in owner.operands
    )


def _with_yield(ctx: KernelLowering, handler: Callable[[Operation], None], block: Block) -> None:
    ctx.yield_handlers.append(handler)
    try:
        ctx.emit_block(block)
    finally:
        ctx.yield_handlers.pop()


@rule("scf.yield", "scf.condition")
def _yield(ctx: KernelLowering, op: Operation) -> None:
    if not ctx.yield_handlers:
        raise UnsupportedError(f"{op.name} outside a structured region")
    ctx.yield_handlers[-1](op)


def _rings(ctx: KernelLowering, body: Block, counter: ir.Value) -> list[Buffer]:
    rings = []
    for o in body.ops:
        depth = ctx.plan.stages.get(id(o), 1)
        if o.name != "tt.load" or depth <= 1 or not o.results[0].type.is_tensor:
            continue
        if ctx.plan.pointers.access(o) is None:
            continue
        res = o.results[0]
        nbytes = align(res.type.numel * ITEMSIZE[dt.to_dtype(res.type)])
        ring = ctx.alloc.allocate(nbytes * depth, f"%{res.name_hint or '?'} x{depth} stages")
        ring.pinned += 1
        ctx.rings[id(o)] = (ring, nbytes, depth, counter)
        rings.append(ring)
    return rings


def _uses(op: Operation, v: Value) -> bool:
    """`op` or an op nested in its regions reads `v`."""
    return any(any(o is v for o in inner.operands) for inner in op.walk())


def rotating_candidates(
    body: Block, carried: Sequence[Value], yielded: Sequence[Value], keep: Sequence[int]
) -> list[int]:
    """The carried tensors (indices into `carried`) that get a rotating slot: the yielded value is the
    result of a plain op directly in the body, yielded once, and the carried value is still read by a
    later op of the body (so it cannot be computed in place in a single slot)."""
    out = []
    position = {id(o): k for k, o in enumerate(body.ops)}
    for i in keep:
        if i >= len(yielded) or not carried[i].type.is_tensor:
            continue
        y = yielded[i]
        owner = y.owner
        if not isinstance(owner, Operation) or id(owner) not in position or owner.regions:
            continue
        if owner.name.startswith("scf.") or sum(1 for x in yielded if x is y) != 1:
            continue
        if y.type != carried[i].type or len(carried[i].shape) > 4:
            continue
        later = body.ops[position[id(owner)] + 1:]
        if any(_uses(o, carried[i]) for o in later):
            out.append(i)
    return out


def _release_inits(ctx: KernelLowering, op: Operation, body: Block, stored: list[Value]) -> None:
    """Free the initial values now in their slots whose last use is this loop and which its body does
    not read (liveness keeps a loop's operands alive to its end: a score tile computed before a
    pipelined loop held a tile of the local store through every iteration)."""
    read = {id(o) for inner in body.walk() for o in inner.operands}
    for v in ctx.plan.liveness.values_dying_after(op):
        if v.type.is_tensor and id(v) not in read and any(v is x for x in stored):
            ctx.release(v)


class _Rotating:
    """A rotating slot: a ring of two halves; `current`/`following` are views at this iteration."""

    def __init__(self, ctx: KernelLowering, v: Value) -> None:
        self.shape = tuple(v.shape)
        self.dtype = dt.to_dtype(v.type)
        self.nbytes = align(v.type.numel * ITEMSIZE[self.dtype])
        self.ring = ctx.alloc.allocate(2 * self.nbytes, f"rotating %{v.name_hint or '?'} x2")
        self.ring.pinned += 1

    def half(self, ctx: KernelLowering, parity: ir.Value) -> Buf:
        return ctx.ring_view(self.ring, self.nbytes, parity, self.shape, self.dtype)

    def static_half(self) -> Buf:
        return Buf(self.ring, self.shape, row_major(self.shape), self.dtype)


@rule("scf.for")
def _for(ctx: KernelLowering, op: Operation) -> None:
    from lowering.codegen.rules.memory import sexpr
    from lowering.codegen.values import Symbolic

    b = ctx.b
    lb, ub, step = (ctx.scalar(v) for v in op.operands[:3])
    inits = list(op.operands[3:])
    body = op.regions[0].entry
    iv_arg, carried = body.args[0], list(body.args[1:])
    moving = ctx.plan.pointers.carried.get(id(op), {})  # pointer tensors that move by a uniform step
    keep = [i for i in range(len(carried)) if i not in moving]
    term = body.terminator
    yielded = list(term.operands) if term is not None and term.name == "scf.yield" else []
    loop_args = {id(a) for a in body.args}
    rotate = rotating_candidates(body, carried, yielded, keep) if ctx.rotate_carried else []
    rotating = {i: _Rotating(ctx, carried[i]) for i in rotate}
    keep_rotating = [i for i in keep if i in rotating]
    keep = [i for i in keep if i not in rotating]
    on_units = [
        bool(yielded) and not carried[i].type.is_tensor and produced_by_units(yielded[i], loop_args)
        for i in keep
    ]
    slots = make_slots(ctx, [carried[i] for i in keep], "iter", on_units)
    for i in keep_rotating:  # the initial value goes to half 0 (read before any slot store below)
        ctx.store_into(rotating[i].static_half(), ctx.tensor(inits[i]))
    store_slots(ctx, slots, [inits[i] for i in keep])
    if ctx.rotate_carried:
        _release_inits(ctx, op, body, [inits[i] for i in [*keep, *keep_rotating]])
    for c in moving.values():
        slot = ctx.alloca(I64, name="ptr.step")
        b.store(I64(0), slot)
        ctx.carry_slots[id(c.arg)] = slot
    iv_slot = ctx.alloca(lb.type, name="iv")
    b.store(lb, iv_slot)
    counter = ctx.alloca(I64, name="iteration")
    b.store(I64(0), counter)
    rings = _rings(ctx, body, counter)
    fn = b.function
    head = fn.append_basic_block("for.head")
    loop = fn.append_basic_block("for.body")
    done = fn.append_basic_block("for.end")
    b.branch(head)
    b.position_at_end(head)
    iv = b.load(iv_slot)
    unsigned = bool(op.attr("unsignedCmp", False))
    cond = b.icmp_unsigned("<", iv, ub) if unsigned else b.icmp_signed("<", iv, ub)
    b.cbranch(cond, loop, done)
    b.position_at_end(loop)
    ctx.bind(iv_arg, iv)
    bind_slots(ctx, slots, [carried[i] for i in keep])
    following: dict[int, Buf] = {}
    if rotating:
        parity = b.and_(b.load(counter), I64(1))
        next_parity = b.xor(parity, I64(1))
        for i, r in rotating.items():
            ctx.bind(carried[i], r.half(ctx, parity))
            following[i] = r.half(ctx, next_parity)
            ctx.dest_hints[id(yielded[i])] = following[i]
    for c in moving.values():
        ctx.env[id(c.arg)] = Symbolic(tuple(c.arg.shape))

    def on_yield(y: Operation | None) -> None:
        values = list(y.operands) if y is not None else []
        for i in keep_rotating:  # first: they write only the halves nothing else reads
            ctx.dest_hints.pop(id(yielded[i]), None)
            ctx.store_into(following[i], ctx.tensor(values[i]))
        steps = [(ctx.carry_slots[id(c.arg)], sexpr(ctx, c.delta)) for c in moving.values()]
        store_slots(ctx, slots, [values[i] for i in keep] if values else [])
        for slot, delta in steps:
            b.store(b.add(b.load(slot), delta), slot)
        b.store(b.add(b.load(iv_slot), step), iv_slot)
        b.store(b.add(b.load(counter), I64(1)), counter)
        b.branch(head)

    _with_yield(ctx, on_yield, body)
    if not b.block.is_terminated:  # a yield without values is implicit in MLIR's pretty form
        on_yield(None)
    b.position_at_end(done)
    for ring in rings:
        ring.pinned -= 1
        ctx.alloc.release(ring)
    bind_slots(ctx, slots, [op.results[i] for i in keep])
    if rotating:
        final = b.and_(b.load(counter), I64(1))  # the half the last yield wrote (half 0: no iteration)
        for i, r in rotating.items():
            ctx.bind(op.results[i], r.half(ctx, final))
            r.ring.pinned -= 1
            ctx.alloc.release(r.ring)
    for c in moving.values():
        ctx.env[id(c.result)] = Symbolic(tuple(c.result.shape))
    unpin(ctx, slots)


@rule("scf.while")
def _while(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.b
    before, after = op.regions[0].entry, op.regions[1].entry
    carried = make_slots(ctx, before.args, "while")
    store_slots(ctx, carried, list(op.operands))
    forwarded = make_slots(ctx, after.args, "while.fwd")
    fn = b.function
    head = fn.append_basic_block("while.head")
    loop = fn.append_basic_block("while.body")
    done = fn.append_basic_block("while.end")
    b.branch(head)
    b.position_at_end(head)
    bind_slots(ctx, carried, before.args)

    def on_condition(c: Operation) -> None:
        store_slots(ctx, forwarded, list(c.operands[1:]))
        b.cbranch(ctx.scalar(c.operands[0]), loop, done)

    _with_yield(ctx, on_condition, before)
    b.position_at_end(loop)
    bind_slots(ctx, forwarded, after.args)

    def on_yield(y: Operation) -> None:
        store_slots(ctx, carried, list(y.operands))
        b.branch(head)

    _with_yield(ctx, on_yield, after)
    b.position_at_end(done)
    bind_slots(ctx, forwarded, op.results)
    unpin(ctx, carried)
    unpin(ctx, forwarded)


@rule("scf.if")
def _if(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.b
    cond = ctx.scalar(op.operands[0])
    slots = make_slots(ctx, op.results, "if")
    fn = b.function
    then_bb = fn.append_basic_block("if.then")
    else_bb = fn.append_basic_block("if.else")
    end_bb = fn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)

    def on_yield(y: Operation) -> None:
        store_slots(ctx, slots, list(y.operands))
        b.branch(end_bb)

    for region, bb in zip(op.regions, (then_bb, else_bb), strict=False):
        b.position_at_end(bb)
        if region.blocks:
            _with_yield(ctx, on_yield, region.entry)
        if not b.block.is_terminated:
            b.branch(end_bb)
    if len(op.regions) < 2:
        b.position_at_end(else_bb)
        b.branch(end_bb)
    b.position_at_end(end_bb)
    bind_slots(ctx, slots, op.results)
    unpin(ctx, slots)


@rule("tt.return")
def _return(ctx: KernelLowering, op: Operation) -> None:
    if op.operands:
        raise UnsupportedError("kernels cannot return values")
    if ctx.program_latch is not None and (op.parent is not ctx.fn.entry or len(ctx.fn.body.blocks) > 1):
        ctx.b.branch(ctx.program_latch)  # the next program id of this core
    elif op.parent is not ctx.fn.entry or len(ctx.fn.body.blocks) > 1:
        ctx.b.ret_void()


@rule("tt.assert")
def _assert(ctx: KernelLowering, op: Operation) -> None:
    c = op.operands[0]
    b = ctx.b
    if c.type.is_tensor:
        src = ctx.buf(c)
        if not src.is_dense:  # reduce over all elements: make it one dense row first
            dense = ctx.new_buf(None, src.shape, src.dtype)
            ctx.copy(dense, src)
            src = dense
        flat = src.view((src.numel,), (1,))
        one = ctx.new_buf(None, (1,), src.dtype)
        ctx.command(
            Op.RED_REDUCE,
            shape=flat.shape,
            dst=one.view(flat.shape, (0,)),
            srcs=(flat,),
            dtypes=(src.dtype, src.dtype),
            subop=ReduceOp.MIN,
            axis=0,
        )
        ok = ctx.read_scalar(one, I1)
    else:
        ok = ctx.scalar(c)
    with b.if_then(b.not_(ok)):
        ctx.em.fence(UnitMask.ALL)
        ctx.em.mmio_write(Reg.EXIT, 1)


@rule("tt.print")
def _print(ctx: KernelLowering, op: Operation) -> None:
    for v in op.operands:
        if not v.type.is_tensor:
            ctx.em.mmio_write(Reg.PRINT, ctx.scalar(v))


@rule("cf.br")
def _br(ctx: KernelLowering, op: Operation) -> None:
    target = op.successors[0]
    store_slots(ctx, ctx.cfg_slots[id(target)], list(op.operands))
    ctx.b.branch(ctx.cfg_blocks[id(target)])


@rule("cf.cond_br")
def _cond_br(ctx: KernelLowering, op: Operation) -> None:
    t, f = op.successors
    ops = list(op.operands)
    cond, rest = ops[0], ops[1:]
    n_true = len(t.args)
    b = ctx.b
    then_bb = b.function.append_basic_block("cond.true")
    else_bb = b.function.append_basic_block("cond.false")
    b.cbranch(ctx.scalar(cond), then_bb, else_bb)
    for bb, target, vals in ((then_bb, t, rest[:n_true]), (else_bb, f, rest[n_true:])):
        b.position_at_end(bb)
        store_slots(ctx, ctx.cfg_slots[id(target)], vals)
        b.branch(ctx.cfg_blocks[id(target)])


@rule("gpu.barrier")
def _barrier(ctx: KernelLowering, op: Operation) -> None:
    """tl.debug_barrier: one program runs per core, so a barrier waits for the PE's units."""
    ctx.em.fence(UnitMask.ALL)


@rule("ub.poison")
def _poison(ctx: KernelLowering, op: Operation) -> None:
    from lowering.codegen.values import Splat

    res = op.results[0]
    ty = dt.core_type(res.type)
    zero = ty(0) if isinstance(ty, ir.IntType) else ty(0.0)
    if res.type.is_tensor:
        ctx.bind(res, Splat(zero, tuple(res.shape), dt.to_dtype(res.type)))
    else:
        ctx.bind(res, zero)
