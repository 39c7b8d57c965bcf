"""Reduction engine, memory layout unit, dot-product engine and DMA against numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mtia_sim import IllegalCommandError, LocalStoreOverflowError, MemoryFaultError, Simulator, isa
from mtia_sim.events import MemLevel
from mtia_sim.isa import AtomicOp, DType, Flags, Op, ReduceOp, ScanOp
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.units.dtypes import encode_immediate
from tests.sim.units_helpers import L, get, put, strides_of

RNG = np.random.default_rng(1)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
S4 = strides_of(X.shape)

REDUCE = {ReduceOp.SUM: np.sum, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min, ReduceOp.PROD: np.prod}


def reduce_cmd(op, axis, out_dt=DType.F32, in_dt=DType.NONE, src=L, dst=L + 0x8000, shape=X.shape):
    dst_shape = list(shape)
    dst_shape[axis] = 1
    return D(Op.RED_REDUCE, subop=op, axis=axis, dtype_out=out_dt, dtype_in0=in_dt, src0=src, dst=dst,
             shape=list(shape), src0_stride=strides_of(shape), dst_stride=strides_of(dst_shape))


@pytest.mark.parametrize("axis", range(4))
def test_reduce_each_axis(sim: Simulator, axis: int) -> None:
    put(sim, X, 0)
    for op, fn in REDUCE.items():
        ev = sim.execute(reduce_cmd(op, axis))
        want = fn(X, axis=axis, keepdims=True)
        np.testing.assert_allclose(get(sim, 0x8000, want.shape, np.float32), want, rtol=1e-5, atol=1e-6)
        assert ev.elements == X.size
    for op, fn in ((ReduceOp.ARGMAX, np.argmax), (ReduceOp.ARGMIN, np.argmin)):
        sim.execute(reduce_cmd(op, axis, out_dt=DType.I32, in_dt=DType.F32))
        want = fn(X, axis=axis, keepdims=True)
        np.testing.assert_array_equal(get(sim, 0x8000, want.shape, np.int32), want)


def test_reduce_int_bitwise_and_bf16(sim: Simulator) -> None:
    xi = RNG.integers(0, 1 << 20, (3, 7)).astype(np.int32)
    put(sim, xi, 0)
    for op, uf in ((ReduceOp.AND, np.bitwise_and), (ReduceOp.OR, np.bitwise_or), (ReduceOp.XOR, np.bitwise_xor),
                   (ReduceOp.SUM, np.add)):
        sim.execute(reduce_cmd(op, 3, out_dt=DType.I32, shape=D.dims([3, 7])))
        np.testing.assert_array_equal(get(sim, 0x8000, (3,), np.int32), uf.reduce(xi, axis=1))
    xb = X.reshape(6, 20).astype(ml_dtypes.bfloat16)
    put(sim, xb, 0)
    sim.execute(reduce_cmd(ReduceOp.SUM, 3, out_dt=DType.F32, in_dt=DType.BF16, shape=D.dims([6, 20])))
    np.testing.assert_allclose(get(sim, 0x8000, (6,), np.float32), xb.astype(np.float32).sum(1), rtol=1e-5)


@pytest.mark.parametrize("axis", range(4))
def test_scan_each_axis(sim: Simulator, axis: int) -> None:
    put(sim, X, 0)
    fns = {ScanOp.SUM: np.cumsum, ScanOp.PROD: np.cumprod,
           ScanOp.MAX: lambda x, axis: np.maximum.accumulate(x, axis=axis),
           ScanOp.MIN: lambda x, axis: np.minimum.accumulate(x, axis=axis)}
    for op, fn in fns.items():
        for rev in (False, True):
            d = D(Op.RED_SCAN, subop=op, axis=axis, flags=Flags.REVERSE if rev else Flags.NONE,
                  dtype_out=DType.F32, src0=L, dst=L + 0x8000, shape=list(X.shape), src0_stride=S4, dst_stride=S4)
            sim.execute(d)
            x = np.flip(X, axis) if rev else X
            want = fn(x, axis=axis)
            want = np.flip(want, axis) if rev else want
            np.testing.assert_allclose(get(sim, 0x8000, X.shape, np.float32), want, rtol=1e-5, atol=1e-6)


def test_mlu_transpose_and_bitcast(sim: Simulator) -> None:
    a = RNG.standard_normal((6, 10)).astype(np.float32)
    put(sim, a, 0)
    sim.execute(D(Op.MLU_COPY, dtype_out=DType.F32, src0=L, dst=L + 0x1000, shape=D.dims([10, 6]),
                  src0_stride=[0, 0, 1, 10], dst_stride=[0, 0, 6, 1]))
    np.testing.assert_array_equal(get(sim, 0x1000, (10, 6), np.float32), a.T)
    sim.execute(D(Op.MLU_BITCAST, dtype_out=DType.I32, dtype_in0=DType.F32, src0=L, dst=L + 0x2000,
                  shape=D.dims([60]), src0_stride=[0, 0, 0, 1], dst_stride=[0, 0, 0, 1]))
    np.testing.assert_array_equal(get(sim, 0x2000, (60,), np.int32), a.reshape(-1).view(np.int32))
    with pytest.raises(IllegalCommandError, match="SIMD_CAST"):
        sim.execute(D(Op.MLU_COPY, dtype_out=DType.F16, dtype_in0=DType.F32, src0=L, dst=L + 0x2000,
                      shape=D.dims([4]), src0_stride=[0, 0, 0, 1], dst_stride=[0, 0, 0, 1]))


def matmul_cmd(m, n, k, a_dt, out_dt, a_strides=None, flags=Flags.NONE, b_dt=None):
    sa = a_strides or (k, 1)  # (m, k) element strides of A
    return D(Op.DPE_MATMUL, flags=flags, dtype_out=out_dt, dtype_in0=a_dt, dtype_in1=b_dt or a_dt,
             src0=L, src1=L + 0x10000, dst=L + 0x20000, shape=[m, n, k, 1],
             src0_stride=[sa[0], 0, sa[1], 0], src1_stride=[0, 1, n, 0], dst_stride=[n, 1, 0, 0])


@pytest.mark.parametrize("dt,npd", [(DType.F32, np.float32), (DType.F16, np.float16),
                                    (DType.BF16, ml_dtypes.bfloat16), (DType.I8, np.int8)])
def test_matmul(sim: Simulator, dt: DType, npd) -> None:
    m, n, k = 16, 24, 40
    if dt == DType.I8:
        a = RNG.integers(-128, 128, (m, k)).astype(np.int8)
        b = RNG.integers(-128, 128, (k, n)).astype(np.int8)
        out_dt, out_np = DType.I32, np.int32
        want = a.astype(np.int32) @ b.astype(np.int32)
    else:
        a = RNG.standard_normal((m, k)).astype(npd)
        b = RNG.standard_normal((k, n)).astype(npd)
        out_dt, out_np = DType.F32, np.float32
        want = a.astype(np.float32) @ b.astype(np.float32)
    put(sim, a, 0)
    put(sim, b, 0x10000)
    ev = sim.execute(matmul_cmd(m, n, k, dt, out_dt))
    got = get(sim, 0x20000, (m, n), out_np)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert ev.matmul_mnk == (m, n, k) and ev.flops == 2 * m * n * k and ev.dtype_bytes == a.itemsize
    sim.execute(matmul_cmd(m, n, k, dt, out_dt, flags=Flags.ACCUMULATE))
    np.testing.assert_allclose(get(sim, 0x20000, (m, n), out_np), 2 * want, rtol=1e-5, atol=1e-3)


def test_matmul_transposed_operand(sim: Simulator) -> None:
    m, n, k = 8, 8, 12
    at = RNG.standard_normal((k, m)).astype(np.float32)  # A stored transposed
    b = RNG.standard_normal((k, n)).astype(np.float32)
    put(sim, at, 0)
    put(sim, b, 0x10000)
    sim.execute(matmul_cmd(m, n, k, DType.F32, DType.F32, a_strides=(1, m)))
    np.testing.assert_allclose(get(sim, 0x20000, (m, n), np.float32), at.T @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(IllegalCommandError, match="DPE_MATMUL"):
        sim.execute(matmul_cmd(m, n, k, DType.F32, DType.I32))


# -- DMA -----------------------------------------------------------------------------------------
def copy_cmd(dst, src, shape, dst_stride, src_stride, dt=DType.F32, valid=(0, 0, 0, 0), mask=0, fill=0.0):
    return D(Op.DMA_COPY, dtype_out=dt, dst=dst, src0=src, src2=mask, shape=D.dims(list(shape)),
             valid=list(valid), dst_stride=dst_stride, src0_stride=src_stride,
             src2_stride=strides_of(shape), imm0=encode_immediate(fill))


def test_dma_2d_tile_with_bounds(sim: Simulator) -> None:
    big = RNG.standard_normal((20, 30)).astype(np.float32)
    addr = sim.to_device(big)
    # load the 8x8 tile at rows 16.., cols 24..: only 4 x 6 are in bounds, the rest is filled with -1
    src = addr + (16 * 30 + 24) * 4
    ev = sim.execute(copy_cmd(L, src, (8, 8), strides_of((8, 8)), [0, 0, 30, 1], valid=(0, 0, 4, 6), fill=-1.0))
    tile = get(sim, 0, (8, 8), np.float32)
    want = np.full((8, 8), -1, np.float32)
    want[:4, :6] = big[16:, 24:]
    np.testing.assert_array_equal(tile, want)
    assert ev.bytes_read == {MemLevel.DRAM: 4 * 24} and ev.bytes_written == {MemLevel.LOCAL: 4 * 64}
    assert ev.misaligned == bool(src % isa.ALIGNMENT)
    # store it back transposed into a fresh buffer with bounds: only 4 x 6 are written
    out = sim.to_device(np.zeros((8, 8), np.float32))
    ev = sim.execute(copy_cmd(out, L, (8, 8), [0, 0, 1, 8], strides_of((8, 8)), valid=(0, 0, 4, 6)))
    got = sim.from_device(out, (8, 8), np.float32)
    assert np.all(got.T[:4, :6] == big[16:, 24:]) and np.all(got.T[4:] == 0) and np.all(got.T[:, 6:] == 0)
    assert ev.bytes_written == {MemLevel.DRAM: 4 * 24}


def test_dma_masked_load_and_store(sim: Simulator) -> None:
    n = 64
    data = np.arange(n, dtype=np.int32)
    addr = sim.to_device(data)
    mask = (np.arange(n) % 3 == 0).astype(np.uint8)
    m = put(sim, mask, 0x3000)
    sim.execute(copy_cmd(L, addr, (n,), [0, 0, 0, 1], [0, 0, 0, 1], dt=DType.I32, mask=m, fill=0.0))
    np.testing.assert_array_equal(get(sim, 0, (n,), np.int32), np.where(mask, data, 0))
    put(sim, -data, 0)
    sim.execute(copy_cmd(addr, L, (n,), [0, 0, 0, 1], [0, 0, 0, 1], dt=DType.I32, mask=m))
    np.testing.assert_array_equal(sim.from_device(addr, (n,), np.int32), np.where(mask, -data, data))


def test_dma_levels_and_remote_pe(sim: Simulator) -> None:
    a = np.arange(32, dtype=np.float32)
    s = sim.to_device(a, level="sram")
    assert isa.SRAM_BASE <= s < isa.DRAM_BASE
    ev = sim.execute(copy_cmd(L, s, (32,), [0, 0, 0, 1], [0, 0, 0, 1]))
    assert ev.bytes_read == {MemLevel.SRAM: 128}
    # PE 0 pushes into PE 5's local store through its window
    remote = isa.PE_WINDOW_BASE + 5 * isa.PE_WINDOW_STRIDE + 0x100
    ev = sim.execute(copy_cmd(remote, L, (32,), [0, 0, 0, 1], [0, 0, 0, 1]))
    assert ev.remote_pe == 5 and ev.bytes_written == {MemLevel.REMOTE_LOCAL: 128}
    np.testing.assert_array_equal(get(sim, 0x100, (32,), np.float32, pe=5), a)
    sim.free(s)


def test_gather_scatter(sim: Simulator) -> None:
    table = RNG.standard_normal(100).astype(np.float32)
    t = sim.to_device(table)
    idx = RNG.integers(0, 100, 16)
    addrs = (t + 4 * idx).astype(np.uint64)
    mask = (np.arange(16) % 4 != 1).astype(np.uint8)
    put(sim, addrs, 0x1000)
    put(sim, mask, 0x2000)
    one = [0, 0, 0, 1]
    ev = sim.execute(D(Op.DMA_GATHER, dtype_out=DType.F32, dst=L, src1=L + 0x1000, src2=L + 0x2000,
                       shape=D.dims([16]), dst_stride=one, src1_stride=one, src2_stride=one,
                       imm0=encode_immediate(9.0)))
    np.testing.assert_array_equal(get(sim, 0, (16,), np.float32), np.where(mask, table[idx], 9.0))
    assert ev.bytes_read[MemLevel.DRAM] == 4 * int(mask.sum())
    out = sim.to_device(np.zeros(100, np.float32))
    perm = RNG.permutation(100)[:16]
    put(sim, (out + 4 * perm).astype(np.uint64), 0x1000)
    sim.execute(D(Op.DMA_SCATTER, dtype_out=DType.F32, src0=L, src1=L + 0x1000, src2=L + 0x2000,
                  shape=D.dims([16]), src0_stride=one, src1_stride=one, src2_stride=one))
    want = np.zeros(100, np.float32)
    vals = get(sim, 0, (16,), np.float32)
    want[perm[mask == 1]] = vals[mask == 1]
    np.testing.assert_array_equal(sim.from_device(out, (100,), np.float32), want)
    put(sim, np.array([0xDEAD0000], np.uint64), 0x1000)
    with pytest.raises(MemoryFaultError, match="0xdead0000"):
        sim.execute(D(Op.DMA_GATHER, dtype_out=DType.F32, dst=L, src1=L + 0x1000, shape=D.dims([1]),
                      dst_stride=one, src1_stride=one))


def test_row_gather(sim: Simulator) -> None:
    """GatherForm.ROWS: one address per row, contiguous elements, valid box and a per-row mask."""
    table = RNG.standard_normal((50, 12)).astype(np.float16)
    t = sim.to_device(table)
    idx = RNG.integers(0, 50, 8)
    idx[3] = idx[2]  # duplicates
    put(sim, (t + 2 * 12 * idx + 2 * 1).astype(np.uint64), 0x1000)  # rows from column 1
    mask = (np.arange(8) % 3 != 1).astype(np.uint8)
    put(sim, mask, 0x2000)
    ev = sim.execute(D(Op.DMA_GATHER, subop=isa.GatherForm.ROWS, dtype_out=DType.F16, dst=L, src1=L + 0x1000,
                       src2=L + 0x2000, shape=D.dims([8, 16]), valid=D.dims([7, 10], 0), dst_stride=D.dims([16, 1], 0),
                       src1_stride=D.dims([1, 0], 0), src2_stride=D.dims([1, 0], 0), imm0=encode_immediate(-2.0)))
    want = np.full((8, 16), -2.0, np.float16)
    keep = (mask == 1) & (np.arange(8) < 7)
    want[keep, :10] = table[idx[keep], 1:11]
    np.testing.assert_array_equal(get(sim, 0, (8, 16), np.float16), want)
    assert ev.bytes_read[MemLevel.DRAM] == 2 * 10 * int(keep.sum())
    assert ev.bytes_read[MemLevel.LOCAL] == 8 * 8 + 8  # one address and one mask byte per row
    assert [s.row_bytes for s in ev.spans if s.level == MemLevel.DRAM] == [20]
    put(sim, np.array([0xDEAD0000], np.uint64), 0x1000)
    with pytest.raises(MemoryFaultError, match="0xdead0000"):
        sim.execute(D(Op.DMA_GATHER, subop=isa.GatherForm.ROWS, dtype_out=DType.F32, dst=L, src1=L + 0x1000,
                      shape=D.dims([1, 4]), dst_stride=D.dims([4, 1], 0)))
    with pytest.raises(IllegalCommandError, match="GatherForm"):
        sim.execute(D(Op.DMA_GATHER, subop=7, dtype_out=DType.F32, dst=L, src1=L + 0x1000, shape=D.dims([1])))


@pytest.mark.parametrize("op", list(AtomicOp))
def test_atomics(sim: Simulator, op: AtomicOp) -> None:
    counters = np.array([5, 10, 15, 20], np.int32)
    c = sim.to_device(counters)
    slots = np.array([0, 1, 1, 3, 0, 2], np.int64)  # repeated addresses apply in order
    vals = np.array([1, 2, 3, 4, 5, 15], np.int32)
    put(sim, (c + 4 * slots).astype(np.uint64), 0x1000)
    put(sim, vals, 0x2000)
    one = [0, 0, 0, 1]
    sim.execute(D(Op.DMA_ATOMIC, subop=op, flags=Flags.IMM_IS_INT, dtype_out=DType.I32, dst=L + 0x3000,
                  src0=L + 0x2000, src1=L + 0x1000, shape=D.dims([6]), dst_stride=one, src0_stride=one,
                  src1_stride=one, imm0=encode_immediate(15)))
    mem = counters.astype(np.int64).copy()
    old = []
    for s, v in zip(slots, vals):
        o = mem[s]
        old.append(o)
        mem[s] = {AtomicOp.ADD: o + v, AtomicOp.MAX: max(o, v), AtomicOp.MIN: min(o, v), AtomicOp.XCHG: v,
                  AtomicOp.AND: o & v, AtomicOp.OR: o | v, AtomicOp.XOR: o ^ v,
                  AtomicOp.CAS: v if o == 15 else o}[op]
    np.testing.assert_array_equal(get(sim, 0x3000, (6,), np.int32), old)
    np.testing.assert_array_equal(sim.from_device(c, (4,), np.int32), mem)


def test_float_atomic_add_unique(sim: Simulator) -> None:
    acc = sim.to_device(np.zeros(8, np.float32))
    put(sim, (acc + 4 * np.arange(8)).astype(np.uint64), 0x1000)
    put(sim, np.full(8, 0.5, np.float32), 0x2000)
    one = [0, 0, 0, 1]
    for _ in range(3):
        sim.execute(D(Op.DMA_ATOMIC, subop=AtomicOp.ADD, dtype_out=DType.F32, src0=L + 0x2000, src1=L + 0x1000,
                      shape=D.dims([8]), src0_stride=one, src1_stride=one))
    np.testing.assert_array_equal(sim.from_device(acc, (8,), np.float32), np.full(8, 1.5))


def test_operand_errors(sim: Simulator) -> None:
    limit = sim.memory.local_limit
    with pytest.raises(LocalStoreOverflowError, match="outside the local store") as e:
        sim.execute(copy_cmd(L + limit - 64, L, (32,), [0, 0, 0, 1], [0, 0, 0, 1]))
    assert "DMA_COPY" in str(e.value) and "pe 0" in str(e.value)
    with pytest.raises(MemoryFaultError, match="not inside one mapped memory"):
        sim.execute(copy_cmd(L, 0x5000_0000, (32,), [0, 0, 0, 1], [0, 0, 0, 1]))
    with pytest.raises(IllegalCommandError, match="element type"):
        sim.execute(copy_cmd(L, L + 256, (32,), [0, 0, 0, 1], [0, 0, 0, 1], dt=DType.NONE))


def test_random_descriptors_only_raise_simulation_errors(sim: Simulator) -> None:
    """Hostile input: random descriptors either execute or raise a SimulationError subclass."""
    import random

    from mtia_sim import SimulationError
    from mtia_sim.isa import CommandDescriptor

    rng = random.Random(7)
    scratch = sim.alloc(1 << 16)
    put(sim, np.full(256, scratch + 64, np.uint64), 0x2000)
    ok = 0
    for _ in range(1500):
        op = rng.choice(list(Op))
        d = CommandDescriptor(
            op, subop=rng.randrange(0, 64), flags=Flags(rng.randrange(0, 128)),
            dtype_out=rng.choice(list(DType)), dtype_in0=rng.choice(list(DType)),
            dtype_in1=rng.choice(list(DType)), dtype_in2=rng.choice(list(DType)), axis=rng.randrange(0, 5),
            dst=L + 0x8000, src0=rng.choice([L + 0x1000, scratch, 0, L + (1 << 20)]), src1=L + 0x2000,
            src2=rng.choice([0, L + 0x3000]), shape=[rng.randint(0, 4) for _ in range(4)],
            valid=[rng.randint(0, 3) for _ in range(4)],
            dst_stride=[rng.randint(-2, 4) for _ in range(4)], src0_stride=[rng.randint(-4, 4) for _ in range(4)],
            src1_stride=[rng.randint(0, 4) for _ in range(4)], src2_stride=[rng.randint(0, 4) for _ in range(4)],
            imm0=rng.getrandbits(64), imm1=rng.getrandbits(64))
        try:
            sim.execute(d)
            ok += 1
        except SimulationError:
            pass
    assert ok > 100  # plenty of the random commands are legal and run
    sim.free(scratch)
