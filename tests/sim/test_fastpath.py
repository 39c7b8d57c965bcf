"""The native doorbell fast path (mtia_sim/fastpath/) gives exactly what the Python path gives:
the same bytes in every memory, the same trace events, the same errors."""

from __future__ import annotations

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from mtia_sim.errors import RunawayError, SimulationError
from mtia_sim.fastpath.encode import encode
from mtia_sim.fastpath.ufuncs import ufunc_loop
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Flags, Op, SimdOp
from mtia_sim.units.dtypes import NP_DTYPE, encode_immediate
from mtia_sim.units.native import CopyOp, UfuncOp
from tests.sim.rv import KernelIR
from tests.sim.test_replay import _descriptors, counting_kernel
from tests.sim.units_helpers import L, strides_of

ONE = [0, 0, 0, 1]
LOCAL_BYTES = 64 * 1024
DRAM_BYTES = 1 << 16
FLOAT_BINARY = [SimdOp.ADD, SimdOp.SUB, SimdOp.MUL, SimdOp.DIV, SimdOp.MIN, SimdOp.MAX]
INT_BINARY = [SimdOp.ADD, SimdOp.SUB, SimdOp.MUL, SimdOp.MIN, SimdOp.MAX, SimdOp.AND, SimdOp.XOR]
FLOAT_UNARY = [SimdOp.EXP, SimdOp.NEG, SimdOp.ABS, SimdOp.SQRT, SimdOp.TANH, SimdOp.FLOOR]
DTYPES = [DType.F32, DType.F64, DType.I32, DType.I16, DType.I8, DType.F16, DType.I64]

pytestmark = pytest.mark.skipif(Simulator("mtia-2i", dram_arena_bytes=1 << 20).core.fast is None,
                                reason="no host JIT: no fast path")


def _strides(rng: np.random.Generator, dims: list[int], src: bool) -> list[int]:
    st = strides_of(dims)
    pick = int(rng.integers(6 if src else 4))  # half of them contiguous
    if pick == 3:  # gaps
        return [2 * s for s in st]
    if pick == 4:  # broadcast an axis
        axis = int(rng.integers(4))
        return [0 if k == axis else s for k, s in enumerate(st)]
    if pick == 5:  # transposed inner axes
        return [st[0], st[1], 1, dims[2]] if dims[3] > 1 else st
    return st


def _random_descriptor(rng: np.random.Generator, dram: int) -> D:
    dt = DTYPES[int(rng.integers(len(DTYPES)))]
    size = NP_DTYPE[dt].itemsize
    dims = [int(x) for x in rng.integers(1, 4, 3)] + [int(rng.integers(1, 40))]
    shape = D.dims(dims)

    def local() -> int:
        return L + size * int(rng.integers(0, 0x8000 // size))

    kind = int(rng.integers(5))
    is_float = NP_DTYPE[dt].kind == "f"
    if kind == 0:
        ops = FLOAT_BINARY if is_float else INT_BINARY
        op = ops[int(rng.integers(len(ops)))]
        if rng.integers(3) == 0:
            imm = encode_immediate(1.5 if is_float else int(rng.integers(-3, 4)))
            flags = Flags.SRC1_IMM | (Flags.NONE if is_float else Flags.IMM_IS_INT)
            dst = local()
            src0, st = (dst, strides_of(dims)) if rng.integers(2) else (local(), _strides(rng, dims, True))
            return D(Op.SIMD_BINARY, subop=op, dtype_out=dt, dst=dst, src0=src0, imm1=imm, flags=flags,
                     shape=shape, dst_stride=strides_of(dims), src0_stride=st)
        return D(Op.SIMD_BINARY, subop=op, dtype_out=dt, dst=local(), src0=local(), src1=local(), shape=shape,
                 dst_stride=_strides(rng, dims, False), src0_stride=_strides(rng, dims, True),
                 src1_stride=_strides(rng, dims, True))
    if kind == 1:
        ops = FLOAT_UNARY if is_float else [SimdOp.NEG, SimdOp.ABS]
        return D(Op.SIMD_UNARY, subop=ops[int(rng.integers(len(ops)))], dtype_out=dt, dst=local(), src0=local(),
                 shape=shape, dst_stride=_strides(rng, dims, False), src0_stride=_strides(rng, dims, True))
    if kind == 2:
        return D(Op.SIMD_FILL, dtype_out=dt, dst=local(), imm0=encode_immediate(float(rng.normal())), shape=shape,
                 dst_stride=_strides(rng, dims, False))
    valid = [0 if rng.integers(2) else int(rng.integers(0, n + 1)) for n in shape]
    far = dram + size * int(rng.integers(0, (DRAM_BYTES - 0x4000) // size))
    src, dst = [(far, local()), (local(), far), (local(), local())][int(rng.integers(3))]
    return D(Op.DMA_COPY, dtype_out=dt, dst=dst, src0=src, shape=shape, valid=valid, imm0=encode_immediate(7),
             flags=Flags.IMM_IS_INT, dst_stride=_strides(rng, dims, False), src0_stride=_strides(rng, dims, True))


def _legal(descs: list[D], dram_offset: int) -> list[D]:
    """The descriptors a scratch simulator executes without an error."""
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    assert sim.alloc(DRAM_BYTES) == dram_offset
    out = []
    for d in descs:
        try:
            sim.execute(d)
        except SimulationError:
            continue
        out.append(d)
    return out


def _loop_kernel(descs: list[D]) -> bytes:
    """Ring every descriptor in order, arg0 times."""
    k = KernelIR()
    n = k.arg(0)
    k.emit("br label %l", "l:", "%i = phi i64 [0, %entry], [%i1, %l]")
    for i, d in enumerate(descs):
        k.command(d)
        if i % 7 == 6:
            k.fence(int(isa.UnitMask.SIMD) if i % 2 else int(isa.UnitMask.ALL))
    k.emit("%i1 = add i64 %i, 1", f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    return k.compile()


def _run(descs: list[D], fast: bool, seed: int, iterations: int = 4, grid: int = 2) -> tuple:
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    assert sim.core.fast is not None
    sim.core.fast.enabled = fast
    dram = sim.alloc(DRAM_BYTES)
    rng = np.random.default_rng(seed)
    for pe in range(grid):
        sim.memory.local(pe)[:LOCAL_BYTES] = rng.integers(0, 256, LOCAL_BYTES, dtype=np.uint8)
    sim.memory.view(dram, DRAM_BYTES)[:] = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    img = sim.load_image(_loop_kernel(descs), entry="kernel")
    res = sim.launch(img, (grid,), [iterations])
    state = b"".join(sim.memory.local(pe)[:LOCAL_BYTES].tobytes() for pe in range(grid))
    state += sim.memory.view(dram, DRAM_BYTES).tobytes()
    events = [list(t.events) for t in res.traces]
    return state, events, sim.core.fast.handled


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_path_equals_python_path_on_random_command_streams(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dram = isa.DRAM_BASE
    descs = _legal([_random_descriptor(rng, dram) for _ in range(60)], dram)
    assert len(descs) >= 30
    slow_state, slow_events, slow_handled = _run(descs, False, seed)
    fast_state, fast_events, fast_handled = _run(descs, True, seed)
    assert slow_handled == 0
    assert fast_handled >= len(descs)  # the later iterations ran natively
    assert fast_state == slow_state
    assert fast_events == slow_events


def test_fast_path_equals_python_path_on_the_replay_corpus() -> None:
    """The replay tests' descriptors (overlaps, broadcasts, reversed strides, fills, matmuls)."""
    dram = isa.DRAM_BASE
    descs = _legal(_descriptors(dram), dram)
    slow = _run(descs, False, 9, iterations=3, grid=1)
    fast = _run(descs, True, 9, iterations=3, grid=1)
    assert fast[2] > 0
    assert fast[:2] == slow[:2]


def _counting_sim(fast: bool, max_commands: int = 10_000_000) -> Simulator:
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20, max_commands=max_commands)
    assert sim.core.fast is not None
    sim.core.fast.enabled = fast
    sim.write(sim.local_address(0, 0), np.ones(64, np.float32))
    sim.write(sim.local_address(0, 0x400), np.zeros(64, np.float32))
    return sim


def test_the_core_sees_a_fast_command_s_result_at_once() -> None:
    logs = []
    for fast in (False, True):
        sim = _counting_sim(fast)
        res = sim.launch(sim.load_image(counting_kernel(True), entry="kernel"), (1,), [20])
        logs.append(res.debug_log)
        if fast:
            assert sim.core.fast is not None and sim.core.fast.handled > 0
    want = [((0, 0, 0), int(np.float32(i).view(np.uint32))) for i in range(2, 21)]
    assert logs[0] == logs[1] == want


def test_command_budget_stops_at_the_same_command() -> None:
    out = []
    for fast in (False, True):
        sim = _counting_sim(fast, max_commands=50)
        with pytest.raises(RunawayError, match="command budget of 50") as info:
            sim.launch(sim.load_image(counting_kernel(False), entry="kernel"), (1,), [200])
        out.append((sim.from_device(sim.local_address(0, 0x400), 64, np.float32).tolist(),
                    info.value.location.pc))
    assert out[0] == out[1]
    assert out[0][0] == [50.0] * 64


def test_ufunc_loops_are_numpy_s_and_unsafe_ones_are_refused() -> None:
    assert ufunc_loop(np.add, "ff->f") is not None
    assert ufunc_loop(np.exp, "d->d") is not None
    assert ufunc_loop(np.power, "ii->i") is None  # raises for negative exponents: numpy must run it
    assert ufunc_loop(np.power, "ff->f") is None


def test_overlapping_operands_stay_in_numpy() -> None:
    buf = np.zeros(64, np.float32)
    assert encode(CopyOp(buf[4:36], buf[:32])) is None  # overlapping copy
    assert encode(CopyOp(buf[32:64], buf[:32])) is not None
    assert encode(UfuncOp(np.add, (buf[1:33], buf[32:64]), buf[:32])) is None  # partial overlap
    assert encode(UfuncOp(np.add, (buf[:32], buf[32:64]), buf[:32])) is not None  # in place
    assert encode(UfuncOp(np.add, (buf[::2], buf[32:64]), buf[:32])) is None  # not contiguous


ADDR_FIELDS = ("dst", "src0", "src1")


def _moving(rng: np.random.Generator, desc: D, iterations: int) -> tuple[D, dict[str, int]] | None:
    """`desc` with per-iteration address steps (one for its local-store operands, one for DRAM),
    if every iteration's descriptor is legal."""
    local_step = int(rng.choice([0, 32, 64, 128, 40]))
    dram_step = int(rng.choice([32, 256, 1024, 48]))
    apart = rng.integers(3) == 0  # local operands moving apart (never accepted by one plan)
    steps = {}
    for f in ADDR_FIELDS:
        a = getattr(desc, f)
        if L <= a < L + LOCAL_BYTES:
            steps[f] = int(rng.choice([0, 32, 64])) if apart else local_step
        elif a >= isa.DRAM_BASE:
            steps[f] = dram_step
    moved = [D.from_bytes(desc.to_bytes()) for _ in range(iterations)]
    for i, m in enumerate(moved):
        for f, st in steps.items():
            setattr(m, f, getattr(desc, f) + i * st)
    return (desc, steps) if len(_legal(moved, isa.DRAM_BASE)) == iterations else None


def _moving_kernel(items: list[tuple[D, dict[str, int]]]) -> bytes:
    k = KernelIR()
    n = k.arg(0)
    k.emit("br label %l", "l:", "%i = phi i64 [0, %entry], [%i1, %l]")
    for desc, steps in items:
        dyn = {f: k.binop("add", getattr(desc, f), k.binop("mul", "%i", st)) for f, st in steps.items()}
        k.command(desc, **dyn)
    k.emit("%i1 = add i64 %i, 1", f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    return k.compile()


def _run_moving(items: list[tuple[D, dict[str, int]]], fast: bool, seed: int, iterations: int) -> tuple:
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    assert sim.core.fast is not None
    sim.core.fast.enabled = fast
    dram = sim.alloc(DRAM_BYTES)
    rng = np.random.default_rng(seed)
    sim.memory.local(0)[:LOCAL_BYTES] = rng.integers(0, 256, LOCAL_BYTES, dtype=np.uint8)
    sim.memory.view(dram, DRAM_BYTES)[:] = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    res = sim.launch(sim.load_image(_moving_kernel(items), entry="kernel"), (1,), [iterations])
    state = sim.memory.local(0)[:LOCAL_BYTES].tobytes() + sim.memory.view(dram, DRAM_BYTES).tobytes()
    return state, list(res.traces[0].events), sim.core.fast.handled


@pytest.mark.parametrize("seed", [4, 5])
def test_relocated_plans_equal_the_python_path(seed: int) -> None:
    """Commands whose addresses move every iteration (as across a grid) run from one relocatable
    native plan; memory and events (spans, local ranges) match the Python path exactly."""
    rng = np.random.default_rng(seed)
    iterations = 6
    items = []
    for _ in range(50):
        desc = _random_descriptor(rng, isa.DRAM_BASE)
        if desc.op == Op.DMA_COPY or rng.integers(3) == 0:
            got = _moving(rng, desc, iterations)
            if got is not None:
                items.append(got)
    assert len(items) >= 15
    slow = _run_moving(items, False, seed, iterations)
    fast = _run_moving(items, True, seed, iterations)
    assert fast[2] >= len(items)  # from the third iteration on, most commands ran natively
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]


def test_streaming_grid_runs_natively_from_its_first_launch() -> None:
    """A grid of programs moving different blocks (the evaluator's common case): relocatable plans
    shared by all PEs run most commands natively in the first launch; results and events match."""
    from tests.sim.test_programs import vector_add_kernel

    block, programs = 64, 200
    n = block * programs - 5  # a short last block: its own plan
    out = []
    for fast in (False, True):
        sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
        assert sim.core.fast is not None
        sim.core.fast.enabled = fast
        rng = np.random.default_rng(3)
        x, y = (sim.to_device(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
        z = sim.to_device(np.zeros(n, np.float32))
        res = sim.launch(sim.load_image(vector_add_kernel(block), entry="kernel"), (programs,), [x, y, z, n])
        out.append((sim.from_device(z, n, np.float32).tobytes(), [list(t.events) for t in res.traces],
                    sim.core.fast.handled / res.commands))
    assert out[0][:2] == out[1][:2]
    assert out[1][2] > 0.8


def test_a_relocated_command_is_bounded_like_the_python_path() -> None:
    """A DMA walking off the end of the DRAM arena faults at the same command on both paths."""
    out = []
    for fast in (False, True):
        sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
        assert sim.core.fast is not None
        sim.core.fast.enabled = fast
        top = isa.DRAM_BASE + sim.memory.dram_limit - 4 * 256  # three blocks below the arena's end
        desc = D(Op.DMA_COPY, dtype_out=DType.F32, dst=L, src0=top, shape=D.dims([256]), dst_stride=ONE,
                 src0_stride=ONE)
        img = sim.load_image(_moving_kernel([(desc, {"src0": -1024})]), entry="kernel")
        img2 = sim.load_image(_moving_kernel([(desc, {"src0": 1024})]), entry="kernel")
        sim.launch(img, (1,), [3])  # downwards: fine, builds the plan
        with pytest.raises(SimulationError) as info:
            sim.launch(img2, (1,), [3])
        out.append((type(info.value).__name__, info.value.location.pc is not None))
    assert out[0] == out[1]


def test_an_in_place_plan_does_not_serve_an_out_of_place_command() -> None:
    """dst == src0 when the plan was built: a later command with only dst moved reads src0 where it
    is, not at dst (both address words are tied to the one operand)."""
    add = D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=DType.F32, dst=L + 0x400, src0=L + 0x400,
            imm1=encode_immediate(1.5), flags=Flags.SRC1_IMM, shape=D.dims([64]), dst_stride=ONE,
            src0_stride=ONE)
    out = []
    for fast in (False, True):
        sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
        assert sim.core.fast is not None
        sim.core.fast.enabled = fast
        rng = np.random.default_rng(0)
        sim.memory.local(0)[:0x1000] = rng.integers(0, 256, 0x1000, dtype=np.uint8)
        in_place = _moving_kernel([(add, {})])
        moved = _moving_kernel([(add, {"dst": 0x400})])  # dst walks away from src0
        sim.launch(sim.load_image(in_place, entry="kernel"), (1,), [3])
        sim.launch(sim.load_image(moved, entry="kernel"), (1,), [3])
        out.append(sim.memory.local(0)[:0x1000].tobytes())
    assert out[0] == out[1]
