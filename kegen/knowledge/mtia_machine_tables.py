"""Generated MTIA documents, machine figures: every shipped machine description side by side and the
numbers derived from the default one (`mtia_docs` puts them into the markdown)."""

from __future__ import annotations

from collections.abc import Callable

from kegen.knowledge.mtia_format import (
    DEFAULT_MACHINE,
    _bytes,
    _default,
    _machines,
    _rate,
    _table,
    _time,
)


def render_machine_table() -> str:
    """Every shipped machine description side by side (what the simulator uses)."""
    ms = _machines()
    rows: list[tuple[str, Callable]] = [
        ("clock", lambda m: f"{m.clock_hz / 1e9:g} GHz"),
        ("PE grid (PEs)", lambda m: f"{m.pe_rows}×{m.pe_cols} ({m.num_pes})"),
        ("RISC-V cores per PE", lambda m: str(m.cores_per_pe)),
        (
            "local store per PE",
            lambda m: (
                f"{_bytes(m.local_store_bytes)}, {_rate(m.local_store_bw)} "
                f"({m.local_store_bytes_per_cycle:.0f} B/cycle)"
            ),
        ),
        (
            "on-chip SRAM (shared)",
            lambda m: (
                f"{_bytes(m.sram_bytes)}, {_rate(m.sram_bw)} "
                f"({m.sram_bytes_per_cycle:.0f} B/cycle), {m.sram_latency_ns:g} ns"
            ),
        ),
        (
            "DRAM (shared)",
            lambda m: (
                f"{m.dram_kind} {_bytes(m.dram_bytes)}, {m.dram_channels} ch, "
                f"{_rate(m.dram_bw)} ({m.dram_bytes_per_cycle:.0f} B/cycle), "
                f"{m.dram_latency_ns:g} ns"
            ),
        ),
        ("NoC", lambda m: f"{m.noc_hop_latency_cycles:g} cycles/hop, {_rate(m.noc_link_bw)}/link"),
        (
            "DMA",
            lambda m: (
                f"{m.dma_setup_cycles:g} cycles setup; misaligned +{m.dma_misaligned_penalty:.0%} bytes; "
                f"{m.dma_max_in_flight} in flight per PE; atomics ≥ {m.dma_burst_bytes} B/element"
            ),
        ),
        (
            "DPE FLOP/cycle/PE fp16, bf16",
            lambda m: f"{m.dpe_flops_per_cycle_fp16:g}, {m.dpe_flops_per_cycle_bf16:g}",
        ),
        (
            "DPE FLOP/cycle/PE int8, fp8, fp32",
            lambda m: ", ".join(f"{m.dpe_flops_per_cycle(d):g}" for d in ("int8", "fp8", "fp32")),
        ),
        (
            "DPE tile (M×N×K), setup",
            lambda m: f"{m.dpe_tile_m}×{m.dpe_tile_n}×{m.dpe_tile_k}, {m.dpe_setup_cycles:g} cycles",
        ),
        (
            "chip DPE peak fp16 / fp32",
            lambda m: f"{m.peak_flops('fp16') / 1e12:.1f} / {m.peak_flops('fp32') / 1e12:.1f} TFLOP/s",
        ),
        (
            "SIMD elements/cycle/PE (1, 2, 4, 8 B)",
            lambda m: ", ".join(f"{m.simd_elements_per_cycle(w):g}" for w in (1, 2, 4, 8)),
        ),
        (
            "SIMD transcendental cost, setup",
            lambda m: f"×{m.simd_transcendental_factor:g}, {m.simd_setup_cycles:g} cycles",
        ),
        (
            "reduction engine",
            lambda m: f"{m.red_elements_per_cycle:g} elements/cycle, {m.red_setup_cycles:g} cycles setup",
        ),
        (
            "memory layout unit",
            lambda m: f"{m.mlu_bytes_per_cycle:g} B/cycle, {m.mlu_setup_cycles:g} cycles setup",
        ),
        (
            "control core",
            lambda m: (
                f"CPI {m.core_cpi:g}; command issue {m.command_issue_cycles:g} cycles; "
                f"queue depth {m.command_queue_depth}"
            ),
        ),
        ("launch, job replacement", lambda m: f"{m.launch_overhead_ns:g} ns, {m.job_replacement_ns:g} ns"),
    ]
    header = ["", *[f"`{m.name}`" + (" (default)" if m.name == DEFAULT_MACHINE else "") for m in ms]]
    return _table(header, [[label, *[fmt(m) for m in ms]] for label, fmt in rows])


def render_derived_numbers() -> str:
    """Figures a kernel writer reasons with, derived from the default machine."""
    m = _default()
    fp16_peak = m.peak_flops("fp16")
    fp32_peak = m.peak_flops("fp32")
    simd_chip = m.simd_elements_per_cycle(4) * m.num_pes * m.clock_hz
    ls_f32 = m.local_store_bytes // 4
    mib = 1 << 20
    rows = [
        [
            "DRAM bandwidth per PE when all PEs stream",
            f"{_rate(m.dram_bw / m.num_pes)} ({m.dram_bytes_per_cycle / m.num_pes:.2f} B/cycle)",
            "dram.bw / PEs",
        ],
        ["time to read 1 MiB from DRAM (whole chip)", _time(mib / m.dram_bw), "1 MiB / dram.bw"],
        ["time to read 1 MiB from SRAM (whole chip)", _time(mib / m.sram_bw), "1 MiB / sram.bw"],
        [
            "ridge point vs DRAM, fp16 dot",
            f"{fp16_peak / m.dram_bw:.0f} FLOP/byte",
            "chip fp16 peak / dram.bw",
        ],
        [
            "ridge point vs SRAM, fp16 dot",
            f"{fp16_peak / m.sram_bw:.1f} FLOP/byte",
            "chip fp16 peak / sram.bw",
        ],
        [
            "ridge point vs DRAM, fp32 dot",
            f"{fp32_peak / m.dram_bw:.0f} FLOP/byte",
            "chip fp32 peak / dram.bw",
        ],
        [
            "SIMD element rate, whole chip (4-byte)",
            f"{simd_chip / 1e12:.2f} T elements/s",
            "simd.elements_per_cycle.4b × PEs × clock",
        ],
        [
            "fp32 elementwise a+b from DRAM",
            f"{m.dram_bw / 12 / 1e9:.1f} G elements/s "
            f"(SIMD could do {simd_chip / (m.dram_bw / 12):.0f}× more)",
            "dram.bw / 12 bytes per element",
        ],
        [
            "local store in fp32 elements",
            f"{ls_f32} (= e.g. {ls_f32 // 4096} tiles of 64×64)",
            "local_store.bytes / 4",
        ],
        [
            "largest square fp32 tile with 3 live tiles",
            f"{_pow2_side(ls_f32 // 3)}×{_pow2_side(ls_f32 // 3)}",
            "power-of-two side s with 3·s² ≤ local store",
        ],
        [
            "DPE fp16 32×32×32 product",
            f"{2 * 32**3 / m.dpe_flops_per_cycle_fp16:g} cycles of work + {m.dpe_setup_cycles:g} setup",
            "2·32³ / dpe.flops_per_cycle.fp16",
        ],
        [
            "DPE fp16 128×128×64 product",
            f"{2 * 128 * 128 * 64 / m.dpe_flops_per_cycle_fp16:g} cycles of work + "
            f"{m.dpe_setup_cycles:g} setup",
            "2·128·128·64 / dpe.flops_per_cycle.fp16",
        ],
        [
            "SIMD op on 1024 fp32 elements",
            f"{1024 / m.simd_elements_per_cycle(4):g} cycles + {m.simd_setup_cycles:g} setup",
            "1024 / simd rate",
        ],
        [
            "same op if transcendental (exp, div, sqrt...)",
            f"{1024 / m.simd_elements_per_cycle(4) * m.simd_transcendental_factor:g} cycles + "
            f"{m.simd_setup_cycles:g} setup",
            "× simd.transcendental_factor",
        ],
        [
            "DMA of 4 KiB within the PE (local-store bound)",
            f"{m.dma_setup_cycles:g} setup + {4096 / m.local_store_bytes_per_cycle:.1f} cycles",
            "4096 / local-store bytes per cycle",
        ],
        [
            "DRAM DMA fixed cost (setup + first-byte latency)",
            f"{m.dma_setup_cycles + m.dram_latency_cycles:.0f} cycles",
            "dma.setup_cycles + dram.latency_ns × clock",
        ],
        [
            "bytes the DRAM delivers during that fixed cost",
            f"{_bytes(round((m.dma_setup_cycles + m.dram_latency_cycles) * m.dram_bytes_per_cycle))}",
            "fixed cost × dram bytes/cycle: move well above this per DMA",
        ],
        [
            "kernel launch",
            f"{m.launch_overhead_cycles:.0f} cycles ({m.launch_overhead_ns:g} ns)",
            "launch.overhead_ns × clock",
        ],
    ]
    return f"Machine `{m.name}` (clock {m.clock_hz / 1e9:g} GHz, {m.num_pes} PEs).\n\n" + _table(
        ["quantity", "value", "from"], rows
    )


def _pow2_side(elements: int) -> int:
    side = 1
    while (side * 2) ** 2 <= elements:
        side *= 2
    return side
