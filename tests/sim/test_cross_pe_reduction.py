"""RED_ACCUMULATE: reductions across PEs over the reduction network (functional, timing, counters)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import AddrRange, CommandEvent, EndEvent, MemLevel, ProgramTrace
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Flags, Op, ReduceOp, SimdOp, Unit, UnitMask
from mtia_sim.timing import costs, simulate
from mtia_sim.units.red_accumulate import may_alias
from tests.sim.rv import KernelIR
from tests.sim.units_helpers import L, np_of, put

ONE = [0, 0, 0, 1]
WINDOW_OFF = 256 * 1024  # where PE 0's shared accumulator lives in its local store


def acc_cmd(dst: int, src0: int, n: int, dt: DType, op: ReduceOp, *, src_dt: DType = DType.NONE,
            flags: Flags = Flags.NONE, dst_stride: list[int] | None = None) -> D:
    return D(Op.RED_ACCUMULATE, subop=op, flags=flags, dtype_out=dt, dtype_in0=src_dt, dst=dst, src0=src0,
             shape=D.dims([n]), dst_stride=ONE if dst_stride is None else dst_stride, src0_stride=ONE)


def _random(rng: np.random.Generator, dt: DType, n: int) -> np.ndarray:
    npd = np_of(dt)
    if npd.kind in "iu":
        info = np.iinfo(npd)
        return rng.integers(info.min, info.max, n, dtype=npd, endpoint=True)
    return rng.uniform(-4, 4, n).astype(npd)


def _reference(old: np.ndarray, new: np.ndarray, dt: DType, op: ReduceOp) -> np.ndarray:
    """What the isa promises: floats combined in fp32 (fp64 for F64), ints in their own width."""
    npd = np_of(dt)
    ct = np.float64 if dt == DType.F64 else np.float32 if npd.kind not in "iu" else npd
    a, b = old.astype(ct), new.astype(ct)
    fn = {ReduceOp.SUM: np.add, ReduceOp.PROD: np.multiply, ReduceOp.MAX: np.fmax, ReduceOp.MIN: np.fmin,
          ReduceOp.AND: np.bitwise_and, ReduceOp.OR: np.bitwise_or, ReduceOp.XOR: np.bitwise_xor}[op]
    with np.errstate(all="ignore"):
        return fn(a, b).astype(npd)


# ---- direct execution: every subop and dtype, every destination ---------------------------------
FLOAT_CASES: list[tuple[ReduceOp, DType]] = [(op, dt) for op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD)
               for dt in (DType.F32, DType.F16, DType.BF16, DType.F64, DType.F8E4M3, DType.F8E5M2)]
INT_CASES: list[tuple[ReduceOp, DType]] = [(op, dt) for op in ReduceOp if op not in (ReduceOp.ARGMAX, ReduceOp.ARGMIN)
             for dt in (DType.I8, DType.U8, DType.I16, DType.U16, DType.I32, DType.U32, DType.I64, DType.U64)]


@pytest.mark.parametrize(("op", "dt"), FLOAT_CASES + INT_CASES, ids=lambda v: v.name)
def test_accumulate_every_subop_and_dtype(sim: Simulator, op: ReduceOp, dt: DType) -> None:
    rng = np.random.default_rng(int(op) * 100 + int(dt))
    n = 200
    src, old = _random(rng, dt, n), _random(rng, dt, n)
    put(sim, src, 0, pe=5)
    dst = sim.to_device(old)
    ev = sim.execute(acc_cmd(dst, L, n, dt, op), pe=5)
    got = sim.from_device(dst, n, np_of(dt))
    np.testing.assert_array_equal(got.view(np.uint8), _reference(old, src, dt, op).view(np.uint8))
    nbytes = n * np_of(dt).itemsize
    assert ev.op == Op.RED_ACCUMULATE and ev.elements == n and ev.flops == n
    assert ev.bytes_read == {MemLevel.LOCAL: nbytes, MemLevel.DRAM: nbytes}
    assert ev.bytes_written == {MemLevel.DRAM: nbytes}
    sim.free(dst)


@pytest.mark.parametrize("where", ["dram", "sram", "remote", "own_window", "local"])
def test_accumulate_into_every_memory(sim: Simulator, where: str) -> None:
    n, pe = 64, 9
    src = np.arange(n, dtype=np.int32) - 20
    old = np.full(n, 1000, np.int32)
    put(sim, src, 0, pe=pe)
    if where in ("dram", "sram"):
        dst = sim.to_device(old, level=where)
        host = dst
    else:
        owner = {"remote": 0, "own_window": pe, "local": pe}[where]
        put(sim, old, 4096, pe=owner)
        host = sim.local_address(owner, 4096)
        dst = L + 4096 if where == "local" else host
    ev = sim.execute(acc_cmd(dst, L, n, DType.I32, ReduceOp.SUM), pe=pe)
    np.testing.assert_array_equal(sim.from_device(host, n, np.int32), old + src)
    level = {"dram": MemLevel.DRAM, "sram": MemLevel.SRAM, "remote": MemLevel.REMOTE_LOCAL}.get(where,
                                                                                                 MemLevel.LOCAL)
    assert ev.bytes_written == {level: 4 * n}
    assert ev.remote_pe == (0 if where == "remote" else None)
    # the command processor tracks src0 (read) and a local dst (read and written)
    assert isa.LOCAL_BASE in [r.start for r in ev.reads]
    if level == MemLevel.LOCAL:
        assert [(w.start, w.end) for w in ev.writes] == [(L + 4096, L + 4096 + 4 * n)]
        assert ev.bytes_read == {MemLevel.LOCAL: 8 * n}
    else:
        assert ev.writes == [] and ev.bytes_read == {MemLevel.LOCAL: 4 * n, level: 4 * n}
        m = sim.machine
        volume, shares = costs.transfer_demands(m, pe, ev, 0)
        assert volume == 8 * n  # read + write at the destination
        if where == "remote":
            assert dict((r, w) for r, w, _ in shares)[("red_port", 0)] == 0.5  # src0 crosses the port once
            assert costs.fixed_cycles(m, pe, ev) == pytest.approx(
                m.red_setup_cycles + n / m.red_elements_per_cycle + m.hops(pe, 0) * m.noc_hop_latency_cycles)


def test_float_into_wider_float_and_flags(sim: Simulator) -> None:
    n = 32
    src = (np.arange(n) * 0.37 - 3).astype(np.float16)
    old = np.linspace(-1, 1, n).astype(np.float32)
    put(sim, src, 0)
    dst = sim.to_device(old)
    sim.execute(acc_cmd(dst, L, n, DType.F32, ReduceOp.SUM, src_dt=DType.F16))
    np.testing.assert_array_equal(sim.from_device(dst, n, np.float32), old + src.astype(np.float32))
    # MAX ignores NaN unless PROPAGATE_NAN
    nan_src = np.where(np.arange(n) % 3 == 0, np.nan, 1.0).astype(np.float32)
    put(sim, nan_src, 0)
    sim.write(dst, np.zeros(n, np.float32))
    sim.execute(acc_cmd(dst, L, n, DType.F32, ReduceOp.MAX))
    assert not np.isnan(sim.from_device(dst, n, np.float32)).any()
    sim.execute(acc_cmd(dst, L, n, DType.F32, ReduceOp.MAX, flags=Flags.PROPAGATE_NAN))
    assert np.isnan(sim.from_device(dst, n, np.float32)).sum() == len(range(0, n, 3))
    # UNSIGNED: signed storage compared as unsigned
    put(sim, np.array([-1, 5], np.int8), 0)
    d8 = sim.to_device(np.array([3, 7], np.int8))
    sim.execute(acc_cmd(d8, L, 2, DType.I8, ReduceOp.MAX, flags=Flags.UNSIGNED))
    np.testing.assert_array_equal(sim.from_device(d8, 2, np.int8), [-1, 7])
    sim.free(dst)
    sim.free(d8)


def test_aliasing_dst_receives_every_source_in_index_order(sim: Simulator) -> None:
    """A broadcast dst (stride 0) folds a reduction into the accumulate: dst[j] += sum_i src[i, j]."""
    rows, cols = 8, 16
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 7
    put(sim, src, 0)
    old = np.full(cols, 0.5, np.float32)
    dst = sim.to_device(old)
    sim.execute(D(Op.RED_ACCUMULATE, subop=ReduceOp.SUM, dtype_out=DType.F32, dst=dst, src0=L,
                  shape=D.dims([rows, cols]), dst_stride=[0, 0, 0, 1], src0_stride=[0, 0, cols, 1]))
    want = old.copy()
    for r in range(rows):  # index order, fp32 each step
        want = (want + src[r]).astype(np.float32)
    np.testing.assert_array_equal(sim.from_device(dst, cols, np.float32), want)
    # a transposed src into a contiguous dst does not alias
    assert not may_alias((1, 1, rows, cols), [0, 0, cols, 1]) and may_alias((1, 1, rows, cols), [0, 0, 0, 1])
    assert may_alias((1, 1, 4, 4), [0, 0, 2, 1])  # overlapping rows
    sim.free(dst)


def test_illegal_accumulates_raise_clear_errors(sim: Simulator) -> None:
    put(sim, np.ones(16, np.float32), 0)
    dram = sim.to_device(np.zeros(16, np.float32))
    with pytest.raises(IllegalCommandError, match=r"src0 .* is in dram memory; it must be in this PE's local"):
        sim.execute(acc_cmd(dram, dram, 16, DType.F32, ReduceOp.SUM))
    with pytest.raises(IllegalCommandError, match=r"src0 .* is in remote_local memory"):
        sim.execute(acc_cmd(dram, sim.local_address(1), 16, DType.F32, ReduceOp.SUM), pe=0)
    for op in (ReduceOp.AND, ReduceOp.OR, ReduceOp.XOR):
        with pytest.raises(IllegalCommandError, match=f"RED_ACCUMULATE {op.name} needs an integer type, got F32"):
            sim.execute(acc_cmd(dram, L, 16, DType.F32, op))
    with pytest.raises(IllegalCommandError, match="cannot combine with ARGMAX"):
        sim.execute(acc_cmd(dram, L, 16, DType.F32, ReduceOp.ARGMAX))
    with pytest.raises(IllegalCommandError, match="unknown ReduceOp 42"):
        sim.execute(acc_cmd(dram, L, 16, DType.F32, 42))  # type: ignore[arg-type]
    with pytest.raises(IllegalCommandError, match="does not convert I32 -> F32"):
        sim.execute(acc_cmd(dram, L, 16, DType.F32, ReduceOp.SUM, src_dt=DType.I32))
    with pytest.raises(IllegalCommandError, match="I1"):
        sim.execute(acc_cmd(dram, L, 16, DType.I1, ReduceOp.MAX))
    sim.free(dram)


# ---- RISC-V programs over a grid ---------------------------------------------------------------
BLOCK = 1024


def partials_kernel(block: int = BLOCK) -> bytes:
    """Program p: loads row p of x, then sum(x*x) -> DRAM, max(x) -> PE 0's store, sum(int(x)) -> SRAM."""
    k = KernelIR()
    x, out_sum, acc_max, out_isum = (k.arg(i) for i in range(4))
    row = k.binop("add", x, k.binop("mul", k.pid(0), block * 4))
    shape = D.dims([block])
    l0, l1, l2 = L, L + 4 * block, L + 8 * block
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, dst=l0, shape=shape, dst_stride=ONE, src0_stride=ONE), src0=row)
    k.command(D(Op.SIMD_BINARY, subop=SimdOp.MUL, dtype_out=DType.F32, dst=l1, src0=l0, src1=l0, shape=shape,
                dst_stride=ONE, src0_stride=ONE, src1_stride=ONE))
    k.command(acc_cmd(0, l1, block, DType.F32, ReduceOp.SUM), dst=out_sum)
    k.command(acc_cmd(0, l0, block, DType.F32, ReduceOp.MAX), dst=acc_max)
    k.command(D(Op.SIMD_CAST, dtype_out=DType.I32, dtype_in0=DType.F32, dst=l2, src0=l0, shape=shape,
                dst_stride=ONE, src0_stride=ONE))
    k.command(acc_cmd(0, l2, block, DType.I32, ReduceOp.SUM), dst=out_isum)
    k.fence(int(UnitMask.RED))
    return k.compile()


@pytest.fixture(scope="module")
def partials(sim: Simulator):
    return sim.load_image(partials_kernel(), entry="kernel")


@pytest.mark.parametrize("programs", [64, 96])
def test_grid_accumulates_into_dram_sram_and_pe0(sim: Simulator, partials, programs: int) -> None:
    rng = np.random.default_rng(programs)
    x = (rng.standard_normal((programs, BLOCK)) * 50).astype(np.float32)
    init = rng.standard_normal(BLOCK).astype(np.float32)
    xa, out_sum = sim.to_device(x), sim.to_device(init)
    out_isum = sim.to_device(np.arange(BLOCK, dtype=np.int32), level="sram")
    acc_max = sim.local_address(0, WINDOW_OFF)
    sim.write(acc_max, np.full(BLOCK, -np.inf, np.float32))
    res = sim.launch(partials, (programs, 1, 1), [xa, out_sum, acc_max, out_isum], sram_mode="off")  # bytes as addressed
    # float SUM: program order, i.e. PE by PE and, within a PE, grid order (mtia_sim/simulator.py)
    order = sorted(range(programs), key=lambda i: (i % sim.num_pes, i))
    want = init.copy()
    for p in order:
        want = (want + x[p] * x[p]).astype(np.float32)
    np.testing.assert_array_equal(sim.from_device(out_sum, BLOCK, np.float32), want)
    np.testing.assert_allclose(sim.from_device(out_sum, BLOCK, np.float32),
                               init + (x.astype(np.float64) ** 2).sum(0), rtol=1e-5)
    np.testing.assert_array_equal(sim.from_device(acc_max, BLOCK, np.float32), x.max(0))
    np.testing.assert_array_equal(sim.from_device(out_isum, BLOCK, np.int32),
                                  np.arange(BLOCK, dtype=np.int32) + np.trunc(x).astype(np.int32).sum(0))
    # counters: bytes by level on the reduction engine
    red = res.counters.totals["RED"]
    nbytes = programs * BLOCK * 4
    on_pe0 = sum(1 for t in res.traces if t.pe == 0)
    remote = (programs - on_pe0) * BLOCK * 4
    assert red.commands == 3 * programs and red.flops == 3 * programs * BLOCK
    assert red.bytes_read == {"local": 3 * nbytes + on_pe0 * BLOCK * 4, "dram": nbytes, "sram": nbytes,
                              "remote_local": remote}
    assert red.bytes_written == {"dram": nbytes, "sram": nbytes, "remote_local": remote,
                                 "local": on_pe0 * BLOCK * 4}
    for addr in (xa, out_sum, out_isum):
        sim.free(addr)


def test_illegal_accumulate_in_a_program_names_the_program(sim: Simulator) -> None:
    """Program 2 passes a DRAM src0 (the others their local store): the error names program 2."""
    k = KernelIR()
    buf_arg = k.arg(0)
    is2, src = k.tmp(), k.tmp()
    k.emit(f"{is2} = icmp eq i64 {k.pid(0)}, 2", f"{src} = select i1 {is2}, i64 {buf_arg}, i64 {L}")
    k.command(acc_cmd(0, 0, 16, DType.F32, ReduceOp.SUM), dst=buf_arg, src0=src)
    image = sim.load_image(k.compile(), entry="kernel")
    buf = sim.to_device(np.zeros(16, np.float32))
    with pytest.raises(IllegalCommandError, match=r"must be in this PE's local store.*program \(2, 0, 0\)"):
        sim.launch(image, (3, 1, 1), [buf])
    sim.free(buf)


# ---- timing: contention on the destination -----------------------------------------------------
TILE = 4096  # f32 elements: 16 KiB per PE


def iota_accumulate_kernel(tile: int = TILE) -> bytes:
    """Program p: partial[i] = i + p in its local store, RED_ACCUMULATE SUM into arg 0."""
    k = KernelIR()
    dst = k.arg(0)
    f, bits = k.tmp(), k.tmp()
    k.emit(f"{f} = sitofp i64 {k.pid(0)} to double", f"{bits} = bitcast double {f} to i64")
    k.command(D(Op.SIMD_IOTA, subop=3, dtype_out=DType.F32, dst=L, shape=D.dims([tile]), dst_stride=ONE),
              imm0=bits)
    k.command(acc_cmd(0, L, tile, DType.F32, ReduceOp.SUM), dst=dst)
    k.fence(int(UnitMask.RED))
    return k.compile()


@pytest.fixture(scope="module")
def iota_acc(sim: Simulator):
    return sim.load_image(iota_accumulate_kernel(), entry="kernel")


def _run(sim: Simulator, image, where: str, programs: int):
    if where == "pe0":
        dst = sim.local_address(0, WINDOW_OFF)
        sim.write(dst, np.zeros(TILE, np.float32))
    else:
        dst = sim.to_device(np.zeros(TILE, np.float32), level=where)
    res = sim.launch(image, (programs, 1, 1), [dst], sram_mode="off")  # DRAM as addressed: no SRAM cache
    got = sim.from_device(dst, TILE, np.float32)
    np.testing.assert_array_equal(got, programs * np.arange(TILE) + programs * (programs - 1) // 2)
    if where != "pe0":
        sim.free(dst)
    acc = [c for c in res.timing.commands if c.event.op == Op.RED_ACCUMULATE]
    span = max(c.end for c in acc) - min(c.start for c in acc)
    return res, span


@pytest.mark.parametrize("where", ["dram", "sram", "pe0"])
def test_more_pes_accumulating_contend_on_the_destination(sim: Simulator, iota_acc, where: str) -> None:
    spans = {g: _run(sim, iota_acc, where, g)[1] for g in (1, 4, 16, 64)}
    assert spans[1] < spans[4] < spans[16] < spans[64], spans
    m = sim.machine
    res, span = _run(sim, iota_acc, where, 64)
    payload = TILE * 4
    if where in ("dram", "sram"):  # every accumulate reads and writes dst: 2 x 64 x 16 KiB through the level
        rate = m.dram_bytes_per_cycle if where == "dram" else m.sram_bytes_per_cycle
        floor = 2 * 64 * payload / rate
        assert res.counters.bandwidth[where]["bytes"] == 2 * 64 * payload
    else:  # 63 remote PEs through PE 0's reduction-network port; PE 0 accumulates locally
        floor = 63 * payload / m.noc_link_bytes_per_cycle
        assert res.counters.bandwidth["remote_local"]["bytes"] == 2 * 63 * payload
    assert floor <= span <= floor * 1.05 + 500, (span, floor)
    stalls = res.counters.totals["RED"].stall_cycles
    assert stalls.get("shared_bandwidth", 0) > 0


def test_timing_figures_64_pes_into_dram(sim: Simulator, iota_acc) -> None:
    """The figure quoted in the report: 64 PEs x 16 KiB accumulated into one DRAM tensor."""
    res, span = _run(sim, iota_acc, "dram", 64)
    m = sim.machine
    payload_bw = 64 * TILE * 4 / m.cycles_to_seconds(span)
    dram_bw = 2 * 64 * TILE * 4 / m.cycles_to_seconds(span)
    assert dram_bw == pytest.approx(m.dram_bw, rel=0.05)  # DRAM-bound: read + write at peak
    assert payload_bw == pytest.approx(m.dram_bw / 2, rel=0.05)
    assert math.isclose(res.counters.totals["RED"].flops, 64 * TILE)
    single = [c for c in res.traces[0].events if isinstance(c, CommandEvent) and c.op == Op.RED_ACCUMULATE]
    assert single[0].bytes_read[MemLevel.LOCAL] == TILE * 4


def _remote_accumulate(pe: int, target: int, nbytes: int) -> ProgramTrace:
    ev = CommandEvent(op=Op.RED_ACCUMULATE, unit=Unit.RED, subop=int(ReduceOp.SUM), elements=nbytes // 4,
                      flops=nbytes // 4, bytes_read={MemLevel.LOCAL: nbytes, MemLevel.REMOTE_LOCAL: nbytes},
                      bytes_written={MemLevel.REMOTE_LOCAL: nbytes}, reads=[AddrRange(L, L + nbytes)],
                      remote_pe=target)
    return ProgramTrace(program_id=(pe, 0, 0), pe=pe, core=0, events=[ev, EndEvent()])


def test_only_accumulates_into_the_same_pe_share_its_port(sim: Simulator) -> None:
    """16 PEs into PE 0 queue on PE 0's reduction-network port; into 16 different PEs they do not."""
    m, nbytes = sim.machine, 16 * 1024
    alone = simulate(m, [_remote_accumulate(1, 0, nbytes)], launch_overhead=False).cycles
    same = simulate(m, [_remote_accumulate(p, 0, nbytes) for p in range(1, 17)], launch_overhead=False).cycles
    spread = simulate(m, [_remote_accumulate(p, p + 16, nbytes) for p in range(1, 17)],
                      launch_overhead=False).cycles
    port = nbytes / m.noc_link_bytes_per_cycle
    assert alone == pytest.approx(m.command_issue_cycles + m.red_setup_cycles + nbytes / 4 / m.red_elements_per_cycle
                                  + m.noc_hop_latency_cycles + port)
    assert spread < alone + m.noc_hop_latency_cycles * (m.pe_rows + m.pe_cols)  # only hop counts differ
    assert same >= 16 * port and same < 16 * port + alone
