"""Hand-built program traces: for timing-model tests, peak benchmarks and quick what-if studies.

Each builder returns the `mtia_sim.events` records the functional model would produce for one
command, so the timing model can be exercised without running RISC-V code.
"""

from __future__ import annotations

import random

from mtia_sim import isa
from mtia_sim.events import (
    AddrRange,
    CommandEvent,
    CoreEvent,
    EndEvent,
    Event,
    FenceEvent,
    MemLevel,
    MemSpan,
    ProgramTrace,
)
from mtia_sim.isa import Op, ReduceOp, SimdOp, Unit, UnitMask
from mtia_sim.machine import MachineDescription


def dma(nbytes: int, *, src: MemLevel = MemLevel.DRAM, dst: MemLevel = MemLevel.LOCAL, local_addr: int = 0,
        local_src_addr: int | None = None, remote_pe: int | None = None, misaligned: bool = False,
        dtype_bytes: int = 4, tag: int = 0, mem_addr: int | None = None) -> CommandEvent:
    """A DMA copy of `nbytes` from `src` to `dst`; local-store ends get address ranges. With
    `mem_addr` (a device address), the DRAM/SRAM end also records its span (for the SRAM cache)."""
    reads: list[AddrRange] = []
    writes: list[AddrRange] = []
    spans: list[MemSpan] = []
    if mem_addr is not None:
        for level, write in ((src, False), (dst, True)):
            if level in (MemLevel.DRAM, MemLevel.SRAM):
                spans.append(MemSpan(level, write, mem_addr, nbytes))
    if src == MemLevel.LOCAL:
        start = local_addr if local_src_addr is None else local_src_addr
        reads.append(AddrRange(start, start + nbytes))
    if dst == MemLevel.LOCAL:
        writes.append(AddrRange(local_addr, local_addr + nbytes))
    return CommandEvent(op=Op.DMA_COPY, unit=Unit.DMA, subop=0, elements=nbytes // dtype_bytes,
                        bytes_read={src: nbytes}, bytes_written={dst: nbytes}, reads=reads, writes=writes,
                        dtype_bytes=dtype_bytes, misaligned=misaligned, remote_pe=remote_pe, tag=tag,
                        spans=spans)


def scalar(instructions: int, level: MemLevel = MemLevel.DRAM, accesses: int = 0,
           nbytes: int | None = None) -> CoreEvent:
    """Core instructions that made `accesses` scalar loads/stores (4 bytes each by default) to `level`."""
    if not accesses:
        return CoreEvent(instructions)
    return CoreEvent(instructions, mem_accesses=((level.value, accesses, 4 * accesses if nbytes is None
                                                  else nbytes),))


def matmul(m: int, n: int, k: int, *, a: int = 0, b: int | None = None, c: int | None = None,
           dtype_bytes: int = 2, acc_bytes: int = 4, tag: int = 0) -> CommandEvent:
    """A DPE matmul C[m,n] (+)= A[m,k] @ B[k,n] on local-store operands at a, b, c."""
    b = a + m * k * dtype_bytes if b is None else b
    c = b + k * n * dtype_bytes if c is None else c
    return CommandEvent(
        op=Op.DPE_MATMUL, unit=Unit.DPE, subop=0, elements=m * n * k, flops=2 * m * n * k,
        bytes_read={MemLevel.LOCAL: (m * k + k * n) * dtype_bytes},
        bytes_written={MemLevel.LOCAL: m * n * acc_bytes},
        reads=[AddrRange(a, a + m * k * dtype_bytes), AddrRange(b, b + k * n * dtype_bytes)],
        writes=[AddrRange(c, c + m * n * acc_bytes)], dtype_bytes=dtype_bytes, matmul_mnk=(m, n, k), tag=tag)


def simd(elements: int, *, src: int = 0, dst: int | None = None, dtype_bytes: int = 4,
         op: SimdOp = SimdOp.ADD, tag: int = 0) -> CommandEvent:
    """An element-wise SIMD command reading `elements` at src and writing them at dst."""
    nbytes = elements * dtype_bytes
    dst = src + nbytes if dst is None else dst
    kind = Op.SIMD_UNARY if op >= SimdOp.NEG else Op.SIMD_BINARY
    return CommandEvent(op=kind, unit=Unit.SIMD, subop=int(op), elements=elements, flops=elements,
                        bytes_read={MemLevel.LOCAL: nbytes},
                        bytes_written={MemLevel.LOCAL: nbytes}, reads=[AddrRange(src, src + nbytes)],
                        writes=[AddrRange(dst, dst + nbytes)], dtype_bytes=dtype_bytes,
                        transcendental=op in _TRANSCENDENTAL, tag=tag)


_TRANSCENDENTAL = {SimdOp.EXP, SimdOp.LOG, SimdOp.TANH, SimdOp.SIGMOID, SimdOp.SQRT, SimdOp.DIV}


def reduce(elements: int, *, src: int = 0, dst: int | None = None, out_elements: int = 1,
           dtype_bytes: int = 4, tag: int = 0) -> CommandEvent:
    """A reduction of `elements` at src into `out_elements` at dst."""
    nbytes = elements * dtype_bytes
    dst = src + nbytes if dst is None else dst
    return CommandEvent(op=Op.RED_REDUCE, unit=Unit.RED, subop=int(ReduceOp.SUM), elements=elements,
                        flops=elements, bytes_read={MemLevel.LOCAL: nbytes},
                        bytes_written={MemLevel.LOCAL: out_elements * dtype_bytes},
                        reads=[AddrRange(src, src + nbytes)],
                        writes=[AddrRange(dst, dst + out_elements * dtype_bytes)], dtype_bytes=dtype_bytes,
                        tag=tag)


def mlu(nbytes: int, *, src: int = 0, dst: int | None = None, dtype_bytes: int = 4,
        tag: int = 0) -> CommandEvent:
    """A memory-layout copy (e.g. a transpose) of nbytes in the local store."""
    dst = src + nbytes if dst is None else dst
    return CommandEvent(op=Op.MLU_COPY, unit=Unit.MLU, subop=0, elements=nbytes // dtype_bytes,
                        bytes_read={MemLevel.LOCAL: nbytes}, bytes_written={MemLevel.LOCAL: nbytes},
                        reads=[AddrRange(src, src + nbytes)], writes=[AddrRange(dst, dst + nbytes)],
                        dtype_bytes=dtype_bytes, tag=tag)


def fence(mask: int = UnitMask.ALL) -> FenceEvent:
    return FenceEvent(int(mask))


def program(pe: int, events: list[Event], *, core: int = 0, program_id: tuple[int, int, int] | None = None,
            end: bool = True) -> ProgramTrace:
    """A program trace on (pe, core); appends EndEvent unless `end` is False."""
    evs = list(events) + ([EndEvent()] if end else [])
    return ProgramTrace(program_id=program_id or (pe, 0, 0), pe=pe, core=core, events=evs)


def dram_stream(machine: MachineDescription, bytes_per_pe: int, *, pes: int | None = None,
                chunk: int = 64 * 1024) -> list[ProgramTrace]:
    """Every PE streams `bytes_per_pe` from DRAM into two alternating local-store buffers."""
    traces = []
    for pe in range(machine.num_pes if pes is None else pes):
        evs: list[Event] = [CoreEvent(20)]
        for i in range(max(1, bytes_per_pe // chunk)):
            evs += [CoreEvent(8), dma(chunk, local_addr=(i % 2) * chunk)]
        traces.append(program(pe, evs))
    return traces


def gemm_tiles(machine: MachineDescription, tile: int = 128, steps: int = 32, *, dtype_bytes: int = 2,
               pes: int | None = None) -> list[ProgramTrace]:
    """Every PE runs `steps` accumulating tile x tile x tile matmuls out of its local store."""
    traces = []
    for pe in range(machine.num_pes if pes is None else pes):
        evs: list[Event] = [CoreEvent(50)]
        for _ in range(steps):
            evs += [CoreEvent(6), matmul(tile, tile, tile, dtype_bytes=dtype_bytes)]
        traces.append(program(pe, evs))
    return traces


def random_traces(rng: random.Random, machine: MachineDescription, *, programs: int = 12,
                  commands: int = 12) -> list[ProgramTrace]:
    """Random but well-formed programs (any unit, level, size, fence) for property tests."""
    traces = []
    ls = min(machine.local_store_bytes, 64 * 1024)
    for i in range(programs):
        pe = rng.randrange(machine.num_pes)
        evs: list[Event] = []
        for _ in range(commands):
            if rng.random() < 0.15:
                evs.append(scalar(rng.randrange(0, 200), rng.choice([MemLevel.DRAM, MemLevel.SRAM]),
                                  rng.randrange(1, 64)))
            else:
                evs.append(CoreEvent(rng.randrange(0, 200)))
            kind = rng.randrange(7)
            addr = rng.randrange(0, ls // 2, 32)
            if kind == 0:
                n = rng.choice([256, 4096, 16384])
                src = rng.choice([MemLevel.DRAM, MemLevel.SRAM, MemLevel.LOCAL, MemLevel.REMOTE_LOCAL])
                dst = MemLevel.LOCAL if src != MemLevel.LOCAL else rng.choice(
                    [MemLevel.DRAM, MemLevel.SRAM, MemLevel.LOCAL])
                remote = rng.randrange(machine.num_pes) if MemLevel.REMOTE_LOCAL in (src, dst) else None
                evs.append(dma(n, src=src, dst=dst, local_addr=addr, remote_pe=remote,
                               local_src_addr=ls // 2 + addr // 2 if src == dst else None,
                               misaligned=rng.random() < 0.2,
                               mem_addr=isa.DRAM_BASE + rng.randrange(0, 1 << 20, 64)))
            elif kind == 1:
                d = rng.choice([8, 32, 64])
                evs.append(matmul(d, d, d, a=addr, dtype_bytes=rng.choice([1, 2, 4])))
            elif kind == 2:
                evs.append(simd(rng.choice([64, 1000, 4096]), src=addr, dtype_bytes=rng.choice([1, 2, 4, 8]),
                                op=rng.choice([SimdOp.ADD, SimdOp.EXP])))
            elif kind == 3:
                evs.append(reduce(rng.choice([128, 2048]), src=addr))
            elif kind == 4:
                evs.append(mlu(rng.choice([512, 8192]), src=addr))
            elif kind == 5:
                evs.append(fence(rng.choice([UnitMask.DMA, UnitMask.DPE | UnitMask.SIMD, UnitMask.ALL])))
            else:
                evs.append(dma(4096, src=MemLevel.LOCAL, dst=MemLevel.DRAM, local_addr=addr,
                               mem_addr=isa.DRAM_BASE + rng.randrange(0, 1 << 20, 64)))
        traces.append(program(pe, evs, core=rng.randrange(machine.cores_per_pe), program_id=(i, 0, 0)))
    return traces
