"""What one command costs on its unit, from the machine description (no state, no time).

A command runs in up to two phases: a fixed phase (setup, latency, compute at the unit's throughput)
and, when it moves bytes through shared memories, a transfer phase whose rate the fluid bandwidth
model (`fluid.py`) sets while other transfers are in flight.

RED_ACCUMULATE (reductions across PEs) is a RED command with a transfer phase: its fixed phase is
setup + elements / reduction rate + the destination's latency (NoC hops x hop latency, or the
SRAM/DRAM latency); its transfer reads src0 from this PE's local store and reads and writes dst at
the destination (a read-modify-write: SRAM/DRAM bandwidth shared chip-wide, or the destination
PE's local store). Into a PE's local store the src0 bytes also cross that PE's reduction-network
input port ("red_port", at the NoC link bandwidth), which every accumulate into that PE shares.
"""

from __future__ import annotations

import math

from mtia_sim.events import CommandEvent, MemLevel
from mtia_sim.isa import Op, Unit
from mtia_sim.machine import MachineDescription
from mtia_sim.timing.sram_cache import Routed

Resource = str | tuple[str, int]
"""A bandwidth resource: "dram", "sram", ("ls", pe) for a PE's local store, ("link", n) for one
transfer's own NoC path, ("red_port", pe) for a PE's reduction-network input port."""


def _padded(x: int, tile: int) -> int:
    return -(-x // tile) * tile


def dpe_flops(cmd: CommandEvent) -> int:
    """FLOPs a DPE command performs (from the event, or 2*M*N*K)."""
    if cmd.flops:
        return cmd.flops
    if cmd.matmul_mnk:
        m, n, k = cmd.matmul_mnk
        return 2 * m * n * k
    return 0


def ideal_cycles(m: MachineDescription, cmd: CommandEvent) -> float:
    """Throughput-bound cycles of a command's compute (no setup, no padding, no LUT factor).

    No unit can finish a command faster; the roofline's compute roof is built on this.
    """
    unit = cmd.unit
    if unit == Unit.DPE:
        return dpe_flops(cmd) / m.dpe_flops_per_cycle_for_width(cmd.dtype_bytes)
    if unit == Unit.SIMD:
        return cmd.elements / m.simd_elements_per_cycle(cmd.dtype_bytes)
    if unit == Unit.RED:
        return cmd.elements / m.red_elements_per_cycle
    if unit == Unit.MLU:
        return mlu_bytes(cmd) / m.mlu_bytes_per_cycle
    return 0.0


def mlu_bytes(cmd: CommandEvent) -> int:
    moved = cmd.bytes_written.get(MemLevel.LOCAL, 0) or cmd.bytes_read.get(MemLevel.LOCAL, 0)
    return moved or cmd.elements * cmd.dtype_bytes


def _dpe_cycles(m: MachineDescription, cmd: CommandEvent) -> float:
    rate = m.dpe_flops_per_cycle_for_width(cmd.dtype_bytes)
    if cmd.matmul_mnk:
        mm, nn, kk = cmd.matmul_mnk
        work = 2 * _padded(mm, m.dpe_tile_m) * _padded(nn, m.dpe_tile_n) * _padded(kk, m.dpe_tile_k)
        return m.dpe_setup_cycles + max(work, dpe_flops(cmd)) / rate
    return m.dpe_setup_cycles + dpe_flops(cmd) / rate


def transfer_latency(m: MachineDescription, pe: int, cmd: CommandEvent,
                     routed: Routed | None = None) -> float:
    """First-byte latency of the farthest memory level a command touches (after the SRAM cache)."""
    if routed is None:
        levels = set(cmd.bytes_read) | set(cmd.bytes_written)
    else:
        levels = {k for t in (routed.read, routed.written) for k, v in t.items() if v > 0}
    latency = 0.0
    if MemLevel.DRAM in levels:
        latency = max(latency, m.dram_latency_cycles)
    if MemLevel.SRAM in levels:
        latency = max(latency, m.sram_latency_cycles)
    if MemLevel.REMOTE_LOCAL in levels:
        hops = m.hops(pe, cmd.remote_pe) if cmd.remote_pe is not None else m.pe_rows + m.pe_cols - 2
        latency = max(latency, hops * m.noc_hop_latency_cycles)
    return latency


def fixed_cycles(m: MachineDescription, pe: int, cmd: CommandEvent, routed: Routed | None = None) -> float:
    """The fixed phase: setup, farthest-level latency and compute at the unit's throughput."""
    unit = cmd.unit
    if unit == Unit.DMA:
        return m.dma_setup_cycles + transfer_latency(m, pe, cmd, routed)
    if unit == Unit.DPE:
        base = _dpe_cycles(m, cmd)
    elif unit == Unit.SIMD:
        factor = m.simd_transcendental_factor if cmd.transcendental else 1.0
        base = m.simd_setup_cycles + factor * ideal_cycles(m, cmd)
    elif unit == Unit.RED:
        base = m.red_setup_cycles + ideal_cycles(m, cmd)
    elif unit == Unit.MLU:
        base = m.mlu_setup_cycles + ideal_cycles(m, cmd)
    else:
        raise ValueError(f"command {cmd.op!r} names unit {unit!r}, which takes no commands; "
                         "the functional model must report DMA, DPE, SIMD, RED or MLU")
    if has_shared_traffic(cmd):  # a compute unit reaching beyond its local store (not expected)
        base += transfer_latency(m, pe, cmd, routed)
    return base


def has_shared_traffic(cmd: CommandEvent) -> bool:
    return any(level != MemLevel.LOCAL for level in (*cmd.bytes_read, *cmd.bytes_written))


_PER_ELEMENT_DMA = frozenset({Op.DMA_ATOMIC})
"""DMA commands whose every element is its own memory access (a read-modify-write of at least one
burst). Gathers and scatters are charged their bytes: events do not say how many distinct bursts
their addresses touch, and row gathers are contiguous."""


def transfer_demands(m: MachineDescription, pe: int, cmd: CommandEvent, link_id: int,
                     routed: Routed | None = None) -> tuple[float, list[tuple[Resource, float, float]]]:
    """Transfer phase: (volume in bytes, [(resource, bytes per volume byte, capacity bytes/cycle)]).

    DMA commands always transfer (local-store copies load the PE's local store bandwidth); other
    units only when they touch memory outside their local store. The volume is the largest byte
    count on any one resource; a misaligned operand moves `dma_misaligned_penalty` more bytes.
    With `routed` (the SRAM cache's split), DRAM hits are served by the SRAM and misses and
    write-allocates also write the SRAM.
    """
    if cmd.unit != Unit.DMA and not has_shared_traffic(cmd):
        return 0.0, []
    per_level: dict[MemLevel, float] = {}
    per_element = cmd.op in _PER_ELEMENT_DMA
    tables = (cmd.bytes_read, cmd.bytes_written) if routed is None else (routed.read, routed.written)
    for table in tables:
        for level, nbytes in table.items():
            if per_element and nbytes > 0 and level in (MemLevel.DRAM, MemLevel.SRAM):
                nbytes = max(nbytes, cmd.elements * m.dma_burst_bytes)
            per_level[level] = per_level.get(level, 0) + nbytes
    if routed is not None and routed.sram_fill > 0:
        per_level[MemLevel.SRAM] = per_level.get(MemLevel.SRAM, 0) + routed.sram_fill
    demand: dict[Resource, float] = {}
    caps: dict[Resource, float] = {}
    for level, nbytes in per_level.items():
        if nbytes <= 0:
            continue
        if level == MemLevel.DRAM:
            keys: list[tuple[Resource, float]] = [("dram", m.dram_bytes_per_cycle)]
        elif level == MemLevel.SRAM:
            keys = [("sram", m.sram_bytes_per_cycle)]
        elif level == MemLevel.LOCAL:
            keys = [(("ls", pe), m.local_store_bytes_per_cycle)]
        elif cmd.op == Op.RED_ACCUMULATE and cmd.remote_pe is not None:
            # the network carries src0 once; the destination's store reads and writes dst
            payload = cmd.bytes_read.get(MemLevel.LOCAL, 0) or cmd.bytes_written.get(level, 0)
            port: Resource = ("red_port", cmd.remote_pe)
            demand[port] = demand.get(port, 0.0) + payload
            caps[port] = m.noc_link_bytes_per_cycle
            keys = [(("ls", cmd.remote_pe), m.local_store_bytes_per_cycle)]
        else:
            keys = [(("link", link_id), m.noc_link_bytes_per_cycle)]
            if cmd.remote_pe is not None:
                keys.append((("ls", cmd.remote_pe), m.local_store_bytes_per_cycle))
        for key, cap in keys:
            demand[key] = demand.get(key, 0.0) + nbytes
            caps[key] = cap
    if not demand:
        return 0.0, []
    volume = max(demand.values())
    scale = 1.0 + (m.dma_misaligned_penalty if cmd.misaligned else 0.0)
    shares = [(key, d / volume, caps[key]) for key, d in demand.items()]
    return volume * scale, shares


def uncontended_rate(shares: list[tuple[Resource, float, float]]) -> float:
    """Transfer rate (volume bytes/cycle) with no other transfer in flight."""
    return min((cap / w for _, w, cap in shares if w > 0), default=math.inf)
