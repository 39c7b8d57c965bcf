"""Figures written by hand in the MTIA documents' prose, recomputed from the machine description so
`--check` fails when the prose and the simulator disagree."""

from __future__ import annotations

from pathlib import Path

from kegen.knowledge.mtia_format import _default


def hand_written_figures() -> dict[str, list[str]]:
    """Figures quoted in the prose of MTIA documents, as they must read for the default machine.

    Keys are paths relative to the knowledge root. A test checks each string is present, so an edit
    of the machine description that changes a figure fails until the prose is updated too.
    """
    m = _default()
    ls_kib = f"{m.local_store_bytes // 1024} KiB"
    simd_chip = m.simd_elements_per_cycle(4) * m.num_pes * m.clock_hz
    elementwise = m.dram_bw / 12
    quarter = {0.25: "a quarter", 0.5: "half"}.get(
        m.dpe_flops_per_cycle_fp32 / m.dpe_flops_per_cycle_fp16,
        f"{m.dpe_flops_per_cycle_fp32 / m.dpe_flops_per_cycle_fp16:g}",
    )
    tile = f"{m.dpe_tile_m}×{m.dpe_tile_n}×{m.dpe_tile_k}"
    misaligned = f"{m.dma_misaligned_penalty:.0%} more bytes"
    setups = (
        m.dma_setup_cycles,
        m.dpe_setup_cycles,
        m.simd_setup_cycles,
        m.red_setup_cycles,
        m.mlu_setup_cycles,
    )
    return {
        "hardware/mtia/architecture.md": [
            f"{m.pe_rows}×{m.pe_cols} = {m.num_pes} on the default `{m.name}`",
            f"each PE gets about {m.dram_bw / m.num_pes / 1e9:.0f} GB/s when all stream",
        ],
        "hardware/mtia/programming.md": [
            f"({ls_kib} on `{m.name}`)",
            f"fixed setup ({min(setups):g}–{max(setups):g} cycles by unit",
            f"at least one memory burst ({m.dma_burst_bytes} B on `{m.name}`)",
            f"replacement ({m.job_replacement_ns:g} ns on `{m.name}`)",
        ],
        "hardware/mtia/optimization.md": [
            f"{m.dram_bw / 1e9:g} GB/s shared by {m.num_pes} PEs, {ls_kib} local store per PE",
            f"DPE {m.dpe_flops_per_cycle_fp16:g} fp16 FLOP/cycle per PE",
            f"SIMD\n{m.simd_elements_per_cycle(4):g} elements/cycle per PE, {m.clock_hz / 1e9:g} GHz",
            f"~{elementwise / 1e9:.0f} G elements/s",
            f"~{round(simd_chip / elementwise, -1):.0f}× faster",
            f"{m.local_store_bytes // 4:,} fp32 elements fit in {ls_kib}",
            f"~{m.dma_setup_cycles:g} cycles of setup",
            misaligned,
            f"a PE runs {_count_word(m.dma_max_in_flight)} DMA command"
            + ("s" if m.dma_max_in_flight > 1 else "")
            + " at a time",
            f"works on {tile} tiles",
            f"~{m.dpe_setup_cycles:g} cycles setup",
            f"{quarter} of the fp16 rate",
            f"cost {m.simd_transcendental_factor:g}× an add",
            f"~{m.launch_overhead_ns / 1000:g} µs ({m.launch_overhead_cycles:,.0f} cycles)",
            f"at least {m.num_pes} programs",
            f"the job replacement ({m.job_replacement_ns:g} ns on `{m.name}`)",
            f"ridge point against DRAM is ~{m.peak_flops('fp16') / m.dram_bw:.0f} FLOP/byte",
        ],
        "constraints/mtia-rules.md": [
            f"local store ({ls_kib})",
            misaligned,
            f"works in {tile} tiles",
            f"PE count ({m.num_pes})",
        ],
    }


def _count_word(n: int) -> str:
    return {1: "one", 2: "two", 3: "three", 4: "four"}.get(n, str(n))


def missing_figures(root: Path | None = None) -> list[str]:
    """`path: expected text` for each hand-written figure not found in its document."""
    from kegen.knowledge.store import shipped_root

    root = root or shipped_root()
    missing = []
    for rel, figures in hand_written_figures().items():
        text = " ".join((root / rel).read_text(encoding="utf-8").split())
        for figure in figures:
            if " ".join(figure.split()) not in text:
                missing.append(f"{rel}: {figure!r}")
    return missing
