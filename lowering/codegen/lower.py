"""Tile IR → LLVM IR for the PE control core: scalars in registers, tensors as unit commands.

`KernelLowering` walks the kernel's ops in program order and calls the rule registered for each
op name (`lowering.codegen.rules`). Rules read operands through `scalar()` / `tensor()` / `buf()`,
produce results with `bind()`, and issue commands with `command()`. Buffers come from the
local-store allocator and are released after each value's last use (`LivenessAnalysis`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.commands import CommandIssuer, Operand
from lowering.codegen.emitter import I1, I32, I64, CoreEmitter, Word
from lowering.codegen.local_alloc import Buffer, LocalStoreAllocator
from lowering.codegen.values import Buf, DeferredScalar, Lowered, Splat, Symbolic, row_major
from lowering.errors import LoweringError, UnsupportedError
from lowering.ir.core import Block, Operation, Value
from lowering.ir.module import Function
from lowering.passes.liveness import Liveness
from lowering.passes.pointer_analysis import PointerInfo
from mtia_sim import isa
from mtia_sim.isa import DType


@dataclass
class LoweringPlan:
    """What the passes decided, as the code generator needs it."""

    pointers: PointerInfo
    liveness: Liveness
    stages: dict[int, int] = field(default_factory=dict)  # id(load op) -> ring depth (multi-buffering)
    units: dict[int, str] = field(default_factory=dict)  # id(op) -> unit name


@dataclass
class LoweredKernel:
    """The result of lowering one kernel."""

    name: str
    llir: str
    arg_types: list[str]
    local_store_peak: int
    buffers: list[tuple[str, int, int]]
    commands: int
    tags: list[str]
    placement: str = "spread"  # the local-store plan it was lowered with (D38, D87)


def core_share(capacity: int, dual_core: bool) -> int:
    """The local-store bytes one program may use: all of it, or (dual_core) an aligned half, since
    the two cores of a PE share its local store."""
    if not dual_core:
        return capacity
    return capacity // 2 // isa.ALIGNMENT * isa.ALIGNMENT


def triton_arg_type(v: Value) -> str:
    """Triton signature spelling of a kernel argument type (`*fp32`, `i32`, `fp32`...)."""
    t = v.type
    names = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64"}
    if t.is_pointer:
        pointee = t.element_type.pointee  # type: ignore[attr-defined]
        return "*" + names.get(str(pointee), str(pointee))
    s = str(t)
    return names.get(s, s)


class KernelLowering(CommandIssuer):
    """Lower one tile-IR function (a Triton kernel) to an LLVM module."""

    def __init__(
        self,
        fn: Function,
        plan: LoweringPlan,
        rules: Mapping[str, Callable[[KernelLowering, Operation], None]],
        *,
        capacity: int,
        options: Any,
        constexprs: Mapping[str, Any] | None = None,
        placement: str = "spread",
    ) -> None:
        self.fn = fn
        # the local-store plan (docs/DECISIONS.md D38, D87): "spread" places next-fit with rotating slots
        # for carried tiles computed ahead; "packed" places first-fit and keeps the rotating slots;
        # "compact" places first-fit with one slot per carried tensor (the last fallback)
        self.placement = placement
        self.rotate_carried = placement != "compact"
        self.plan = plan
        self.rules = rules  # op name -> rule (`lowering.codegen.rules.RULES`)
        self.options = options
        self.em = CoreEmitter(fn.name)
        self.b = self.em.builder
        self.dual_core = bool(getattr(options, "dual_core", False))
        self.core_share = core_share(capacity, self.dual_core)
        self.alloc = LocalStoreAllocator(
            self.core_share,
            fn.name,
            dict(constexprs or {}),
            dual_core=self.dual_core,
            next_fit=placement == "spread",
        )
        self.core_offset: ir.Value | None = None  # dual_core: byte offset of this core's half
        self.env: dict[int, Lowered] = {}
        self.temps: list[Buffer] = []
        self.tags: list[str] = []
        self.current: Operation | None = None
        self.yield_handlers: list[Any] = []  # what scf.yield / scf.condition do in the current region
        self.rings: dict[int, tuple[Buffer, int, int, ir.Value]] = {}  # load -> (ring, bytes, depth, counter)
        self.cfg_blocks: dict[int, ir.Block] = {}  # tile Block -> LLVM block (multi-block bodies)
        self.cfg_slots: dict[int, list[Any]] = {}  # tile Block -> slots of its arguments
        self.no_reuse = False
        self.dest_hints: dict[int, Buf] = {}  # value -> where to compute it (a loop's rotating slot half)
        self.carry_slots: dict[int, ir.Value] = {}  # carried pointer arg -> i64 stack slot of its step sum
        self.program_latch: ir.Block | None = None  # blocked PE mapping: where a return continues
        self.accumulated = False  # a RED_ACCUMULATE was issued (core reads of memory fence RED too)
        self.fused_casts: set[int] = set()  # casts computed by their operand's SIMD command (arith rules)
        self.unit_writes = {}  # buffer -> units writing it; each scalar read's fence (CommandIssuer)
        self.scalar_fences = []

    # -- driving ------------------------------------------------------------------------------
    def lower(self) -> LoweredKernel:
        if self.dual_core:
            core = self.em.mmio_read(isa.Reg.CORE_ID)
            self.core_offset = self.b.mul(self.b.and_(core, I64(1)), I64(self.core_share), name="core_offset")
        for i, arg in enumerate(self.fn.args):
            slot = self.em.arg_slot(i)
            self.bind(arg, self.from_slot(slot, arg))
        blocks = self.fn.body.blocks
        exit_bb = (
            self._program_loop() if getattr(self.options, "pe_mapping", "round_robin") == "blocked" else None
        )
        if len(blocks) == 1:
            self.emit_block(self.fn.entry)
        else:
            self._emit_cfg(blocks)
        if exit_bb is not None:
            if not self.b.block.is_terminated:
                self.b.branch(self.program_latch)
            self.b.position_at_end(exit_bb)
        self.resolve_fences()
        llir = self.em.finish()
        return LoweredKernel(
            self.fn.name,
            llir,
            [triton_arg_type(a) for a in self.fn.args],
            self.alloc.peak,
            list(self.alloc.log),
            self.em.command_count,
            self.tags,
            self.placement,
        )

    def from_slot(self, slot: ir.Value, v: Value) -> ir.Value:
        ty = dt.core_type(v.type)
        b = self.b
        if isinstance(ty, ir.IntType):
            return slot if ty.width == 64 else b.trunc(slot, ty)
        d = b.bitcast(slot, ir.DoubleType())
        return d if isinstance(ty, ir.DoubleType) else b.fptrunc(d, ty)

    def _program_loop(self) -> ir.Block:
        """Blocked PE mapping: this core runs program ids pid_x*k .. pid_x*k+k-1 (k and the real
        grid size come in two extra argument slots), one iteration of the kernel body each."""
        b = self.b
        n = len(self.fn.args)
        k = b.trunc(self.em.arg_slot(n), I32)
        real_x = b.trunc(self.em.arg_slot(n + 1), I32)
        j_slot = self.alloca(I32, "vprogram")
        b.store(I32(0), j_slot)
        fn = b.function
        head = fn.append_basic_block("program.head")
        body = fn.append_basic_block("program.body")
        latch = fn.append_basic_block("program.next")
        done = fn.append_basic_block("program.end")
        b.branch(head)
        b.position_at_end(head)
        j = b.load(j_slot)
        vpid = b.add(b.mul(self.em.program_ids[0], k), j)
        b.cbranch(b.and_(b.icmp_signed("<", j, k), b.icmp_signed("<", vpid, real_x)), body, done)
        b.position_at_end(latch)
        b.store(b.add(b.load(j_slot), I32(1)), j_slot)
        b.branch(head)
        b.position_at_end(body)
        self.em.program_ids[0] = vpid
        self.em.num_programs[0] = real_x
        self.program_latch = latch
        return done

    def _emit_cfg(self, blocks: Sequence[Block]) -> None:
        """A function body with several blocks (cf.br / cf.cond_br from early returns): one LLVM
        block per tile block; block arguments live in slots. Buffers are never reused here."""
        from lowering.codegen.slots import bind_slots, make_slots

        self.no_reuse = True
        fn = self.b.function
        for i, block in enumerate(blocks):
            if i:
                self.cfg_blocks[id(block)] = fn.append_basic_block(f"bb{i}")
                self.cfg_slots[id(block)] = make_slots(self, block.args, f"bb{i}")
        for i, block in enumerate(blocks):
            if i:
                self.b.position_at_end(self.cfg_blocks[id(block)])
                bind_slots(self, self.cfg_slots[id(block)], block.args)
            self.emit_block(block)
            if not self.b.block.is_terminated:
                self.b.unreachable()

    def emit_block(self, block: Block) -> None:
        for op in block.ops:
            self.emit_op(op)

    def emit_op(self, op: Operation) -> None:
        rule = self.rules.get(op.name)
        self.current = op
        try:
            if rule is None:
                raise UnsupportedError(
                    f"no MTIA lowering for op {op.name}",
                    hint="rewrite the kernel without it, or report it to the kegen team",
                )
            if self._skippable(op):
                for r in op.results:
                    self.env[id(r)] = Symbolic(r.shape)
            else:
                rule(self, op)
        except LoweringError as exc:
            raise exc.located(self.fn.name, op) from None
        except (ValueError, TypeError, KeyError, AssertionError, IndexError) as exc:
            raise LoweringError(
                f"internal lowering error: {type(exc).__name__}: {exc}", kernel=self.fn.name, op=op
            ) from exc
        self.current = op
        self._release_temps()
        for v in self.plan.liveness.values_dying_after(op):
            self.release(v)

    def _skippable(self, op: Operation) -> bool:
        """Pure tensor ops whose results only feed block-DMA addressing are not emitted."""
        if not op.results or op.regions or op.name.startswith(("tt.load", "tt.atomic", "scf.")):
            return False
        return all(r.type.is_tensor and not self.plan.pointers.needs_buffer(r) for r in op.results)

    def tag(self, op: Operation | None = None) -> int:
        op = op or self.current
        if op is None:
            return 0
        self.tags.append(f"{op.name} {op.location.source_position()}")
        return len(self.tags)

    # -- values -------------------------------------------------------------------------------
    def bind(self, v: Value, lowered: Lowered) -> None:
        self.env[id(v)] = lowered
        if isinstance(lowered, Buf):
            lowered.buffer.refs.add(id(v))
            # a row gather reads this tensor without being one of its users: keep it until then
            lowered.buffer.pinned += self.plan.pointers.row_values.get(id(v), 0)
        elif isinstance(lowered, DeferredScalar):
            lowered.buf.buffer.refs.add(id(v))

    def lookup(self, v: Value) -> Lowered:
        try:
            return self.env[id(v)]
        except KeyError:
            raise LoweringError(f"value %{v.name_hint} used before it was lowered") from None

    def scalar(self, v: Value) -> ir.Value:
        x = self.lookup(v)
        if isinstance(x, DeferredScalar):
            return self.read_scalar(x.buf, x.ty)
        if not isinstance(x, ir.Value):
            raise LoweringError(f"expected %{v.name_hint} to be a scalar, got a tensor")
        return x

    def tensor(self, v: Value) -> Buf | Splat:
        x = self.lookup(v)
        if isinstance(x, Symbolic):
            raise LoweringError(f"tensor %{v.name_hint} was not materialised (pointer analysis)")
        if isinstance(x, ir.Value):
            raise LoweringError(f"expected %{v.name_hint} to be a tensor")
        return x

    def deferred(self, v: Value) -> DeferredScalar | None:
        """The unit-produced scalar `v` still in the local store, or None."""
        x = self.env.get(id(v))
        return x if isinstance(x, DeferredScalar) else None

    def scalar_operand(self, v: Value, shape: tuple[int, ...], dtype: DType) -> Buf | Splat:
        """Scalar `v` as a uniform tensor operand: a stride-0 view of a deferred scalar, else a splat."""
        d = self.deferred(v)
        if d is not None:
            return d.buf.view(shape, tuple(0 for _ in shape))
        return Splat(self.scalar(v), shape, dtype)

    def buf(self, v: Value) -> Buf:
        """The tensor in the local store (a splat becomes a 1-element buffer seen with stride 0)."""
        x = self.tensor(v)
        if isinstance(x, Splat):
            return self.materialize(x)
        return x

    def materialize(self, s: Splat) -> Buf:
        tmp = self.alloc.allocate(isa.ITEMSIZE[s.dtype], "splat")
        self.temps.append(tmp)
        one = Buf(tmp, (1,), (0,), s.dtype)
        self.fill(one, s.scalar, s.dtype)
        return one.view(s.shape, tuple(0 for _ in s.shape))

    def release(self, v: Value) -> None:
        if self.no_reuse:
            return
        x = self.env.get(id(v))
        if isinstance(x, DeferredScalar):
            x = x.buf
        if isinstance(x, Buf):
            x.buffer.refs.discard(id(v))
            self.alloc.release(x.buffer)

    def _release_temps(self) -> None:
        for t in self.temps:
            self.alloc.release(t)
        self.temps.clear()

    # -- buffers ------------------------------------------------------------------------------
    def new_buf(self, v: Value | None, shape: tuple[int, ...], dtype: DType, name: str | None = None) -> Buf:
        hint = self.dest_hints.pop(id(v), None) if v is not None and name is None else None
        same_width = hint is not None and isa.ITEMSIZE[hint.dtype] == isa.ITEMSIZE[dtype]
        if hint is not None and same_width and hint.shape == tuple(shape):
            return hint.view(hint.shape, hint.strides, dtype)
        n = 1
        for d in shape:
            n *= d
        label = name or (f"%{v.name_hint}" if v is not None and v.name_hint else self._anonymous_label())
        if v is not None:
            label += f" {'x'.join(map(str, shape))}x{dtype.name.lower()}"
        buffer = self.alloc.allocate(n * isa.ITEMSIZE[dtype], label)
        if v is None:
            self.temps.append(buffer)
        return Buf(buffer, tuple(shape), row_major(tuple(shape)), dtype)

    def _anonymous_label(self) -> str:
        op = self.current
        if op is None:
            return "tmp"
        line = op.location.outermost().line if op.location.is_known else 0
        return f"<{op.name}{f' line {line}' if line else ''}>"

    def result_buf(self, op: Operation, res: Value, dtype: DType, reuse: Sequence[Value] = ()) -> Buf:
        """A dense buffer for `res`, reusing a dying operand's buffer in place when legal (or the
        rotating loop slot `res` is to be computed in, when it has one)."""
        if id(res) in self.dest_hints:
            return self.new_buf(res, tuple(res.shape), dtype)
        dying = set() if self.no_reuse else {id(v) for v in self.plan.liveness.values_dying_after(op)}
        for v in reuse:
            x = self.env.get(id(v))
            if (
                isinstance(x, Buf)
                and id(v) in dying
                and x.is_dense
                and x.dyn_base is None
                and x.shape == tuple(res.shape)
                and isa.ITEMSIZE[x.dtype] == isa.ITEMSIZE[dtype]
                and x.buffer.refs == {id(v)}
            ):
                return x.view(x.shape, x.strides, dtype)
        return self.new_buf(res, tuple(res.shape), dtype)

    # -- commands -----------------------------------------------------------------------------
    def local_addr(self, x: Buf) -> Word:
        """The device address of local-store view `x` for this program: with dual_core, shifted
        into this core's half of the store (a static int when no shift is needed)."""
        if x.dyn_base is not None:  # ring-buffer addresses are built from `local_base` already
            return self.b.add(x.dyn_base, I64(x.byte_offset)) if x.byte_offset else x.dyn_base
        addr = x.addr
        if self.core_offset is None:
            return addr
        return self.b.add(I64(addr), self.core_offset)

    def local_base(self, offset: int) -> Word:
        """The device address of local-store byte `offset` (allocator offsets) for this program."""
        if self.core_offset is None:
            return isa.LOCAL_BASE + offset
        return self.b.add(I64(isa.LOCAL_BASE + offset), self.core_offset)

    def operand(self, x: Operand, rank_shape: int) -> tuple[Word, list[Word]]:
        if isinstance(x, Buf):
            addr, strides = self.local_addr(x), list(x.strides)
        else:
            addr, strides = x[0], list(x[1])
        if len(strides) != rank_shape:
            raise LoweringError(f"operand rank {len(strides)} does not match command rank {rank_shape}")
        return addr, [0] * (isa.MAX_DIMS - len(strides)) + strides

    def ring_view(
        self, ring: Buffer, stride: int, index: ir.Value, shape: tuple[int, ...], dtype: DType
    ) -> Buf:
        """Entry `index` (a runtime value) of `ring`, whose entries lie `stride` bytes apart: a load's
        multi-buffer stage, or a half of a rotating loop slot."""
        addr = self.b.add(self.i64(self.local_base(ring.offset)), self.b.mul(index, I64(stride)))
        return Buf(ring, shape, row_major(shape), dtype, dyn_base=addr)

    def i64(self, x: ir.Value | int, unsigned: bool = False) -> ir.Value:
        if isinstance(x, int):
            return I64(x)
        if x.type == I64:
            return x
        if x.type == I1 or unsigned:
            return self.b.zext(x, I64)
        return self.b.sext(x, I64)

    def alloca(self, ty: ir.Type, name: str = "") -> ir.Value:
        """A stack slot in the entry block (mem2reg turns it into registers)."""
        b = self.b
        with b.goto_entry_block():
            b.position_after(self.em.desc)
            slot = b.alloca(ty, name=name)
        return slot
