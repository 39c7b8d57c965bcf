"""The cost-model block of the MTIA documents: each command's stated formula checked against the
simulator's own cost code (`mtia_sim.timing.costs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kegen.knowledge.mtia_format import _default, _table


def command_cycles(m: Any, cmd: Any) -> float:
    """Cycles of one command alone on an idle chip, from the simulator's own cost code."""
    from mtia_sim.timing import costs

    fixed = costs.fixed_cycles(m, 0, cmd)
    volume, shares = costs.transfer_demands(m, 0, cmd, 0)
    return fixed + (volume / costs.uncontended_rate(shares) if volume else 0.0)


@dataclass(frozen=True)
class CostExample:
    """One row of the cost table: a command, the formula the docs state, and that formula as code."""

    label: str
    formula: str
    predicted: Callable[[Any], float]
    event: Callable[[], Any]


def _pad(x: int, tile: int) -> int:
    return -(-x // tile) * tile


def cost_examples() -> list[CostExample]:
    """Commands whose cost the docs quote; a test checks `predicted` against the simulator's cost code."""
    from mtia_sim.events import MemLevel
    from mtia_sim.isa import SimdOp
    from mtia_sim.timing import synthetic as syn

    kib = 1024
    dram = "dma.setup + dram.latency + bytes / min(dram B/cycle, local-store B/cycle)"

    def dma_cycles(m: Any, nbytes: int, misaligned: bool = False) -> float:
        rate = min(m.dram_bytes_per_cycle, m.local_store_bytes_per_cycle)
        extra = 1 + (m.dma_misaligned_penalty if misaligned else 0)
        return m.dma_setup_cycles + m.dram_latency_cycles + nbytes * extra / rate

    def dpe_cycles(m: Any, mm: int, nn: int, kk: int, width: int) -> float:
        padded = 2 * _pad(mm, m.dpe_tile_m) * _pad(nn, m.dpe_tile_n) * _pad(kk, m.dpe_tile_k)
        return m.dpe_setup_cycles + padded / m.dpe_flops_per_cycle_for_width(width)

    return [
        CostExample(
            "DMA 4 KiB DRAM → local store", dram, lambda m: dma_cycles(m, 4 * kib), lambda: syn.dma(4 * kib)
        ),
        CostExample(
            "DMA 64 KiB DRAM → local store",
            dram,
            lambda m: dma_cycles(m, 64 * kib),
            lambda: syn.dma(64 * kib),
        ),
        CostExample(
            "same, operand not 32-byte aligned",
            "as above, bytes × (1 + dma.misaligned_penalty)",
            lambda m: dma_cycles(m, 64 * kib, True),
            lambda: syn.dma(64 * kib, misaligned=True),
        ),
        CostExample(
            "DMA 64 KiB local store → DRAM",
            dram,
            lambda m: dma_cycles(m, 64 * kib),
            lambda: syn.dma(64 * kib, src=MemLevel.LOCAL, dst=MemLevel.DRAM),
        ),
        CostExample(
            "`tl.dot` 128×128×64, fp16 inputs",
            "dpe.setup + 2·M·N·K (each padded to the DPE tile) / FLOP per cycle",
            lambda m: dpe_cycles(m, 128, 128, 64, 2),
            lambda: syn.matmul(128, 128, 64),
        ),
        CostExample(
            "`tl.dot` 16×16×16, fp16 inputs",
            "same: padded to one full tile",
            lambda m: dpe_cycles(m, 16, 16, 16, 2),
            lambda: syn.matmul(16, 16, 16),
        ),
        CostExample(
            "`tl.dot` 128×128×64, fp32 inputs",
            "same, fp32 rate",
            lambda m: dpe_cycles(m, 128, 128, 64, 4),
            lambda: syn.matmul(128, 128, 64, dtype_bytes=4),
        ),
        CostExample(
            "SIMD add, 4096 fp32",
            "simd.setup + elements / SIMD elements per cycle",
            lambda m: m.simd_setup_cycles + 4096 / m.simd_elements_per_cycle(4),
            lambda: syn.simd(4096),
        ),
        CostExample(
            "SIMD exp, 4096 fp32",
            "simd.setup + transcendental_factor × elements / rate",
            lambda m: (
                m.simd_setup_cycles + m.simd_transcendental_factor * 4096 / m.simd_elements_per_cycle(4)
            ),
            lambda: syn.simd(4096, op=SimdOp.EXP),
        ),
        CostExample(
            "reduction of 4096 fp32",
            "reduction.setup + elements / reduction rate",
            lambda m: m.red_setup_cycles + 4096 / m.red_elements_per_cycle,
            lambda: syn.reduce(4096),
        ),
        CostExample(
            "MLU transpose of 64 KiB",
            "mlu.setup + bytes / MLU bytes per cycle",
            lambda m: m.mlu_setup_cycles + 64 * kib / m.mlu_bytes_per_cycle,
            lambda: syn.mlu(64 * kib),
        ),
    ]


def render_cost_model() -> str:
    """Cycles of single commands on the default machine, computed by the simulator's cost code."""
    m = _default()
    rows = [[c.label, c.formula, f"{command_cycles(m, c.event()):,.0f}"] for c in cost_examples()]
    return (
        f"One command alone on an idle `{m.name}` (add {m.command_issue_cycles:g} cycles for the core to "
        f"issue it; a PE queues up to {m.command_queue_depth} commands per unit):\n\n"
        + _table(["command", "cycles =", "cycles"], rows)
        + "\nWhen several PEs move data at once they share DRAM and SRAM bandwidth fairly (max-min), so a "
        "DMA's transfer part stretches with the number of PEs streaming; the fixed part does not.\n"
    )
