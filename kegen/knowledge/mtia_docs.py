"""Render the generated parts of `knowledge/hardware/mtia/*.md` from the simulator's own definitions.

Generated blocks sit between marker comments in the markdown:

    <!-- generated:begin NAME -->
    ...text rendered by RENDERERS[NAME]...
    <!-- generated:end NAME -->

Their sources are `mtia_sim/isa.py` (memory map, registers, ABI, commands) and the machine
descriptions (`mtia_sim/machine.py`, `mtia_sim/machines/*.toml`), so the documents cannot drift
from the simulator: `python -m kegen.knowledge.mtia_docs --write` rewrites the blocks, `--check`
(and the test suite) fails when the checked-in text differs from the rendering.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from kegen.knowledge.mtia_costs import CostExample, command_cycles, cost_examples, render_cost_model
from kegen.knowledge.mtia_figures import hand_written_figures, missing_figures
from kegen.knowledge.mtia_format import (
    DEFAULT_MACHINE,
    _bytes,
    _default,
    _machines,
    _rate,
    _table,
    _time,
)
from mtia_sim import isa

_BLOCK = re.compile(
    r"(<!-- generated:begin (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- generated:end (?P=name) -->)",
    re.DOTALL,
)

__all__ = [
    "DEFAULT_MACHINE", "RENDERERS", "CostExample", "block_names", "command_cycles", "cost_examples",
    "docs_dir", "hand_written_figures", "main", "missing_figures", "render_cost_model", "render_document",
    "stale_documents", "write_documents",
]


# ---------------------------------------------------------------------------------------------
# Machine figures
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Programming model (isa.py)
# ---------------------------------------------------------------------------------------------
_REGION_NOTES = {
    "EXIT_ADDR": "return address given to the kernel; reaching it ends the program",
    "CODE_BASE": f"the linked kernel image (text, rodata, data, bss), {_bytes(isa.CODE_SIZE)}",
    "STACK_BASE": f"the control core's stack, {_bytes(isa.STACK_SIZE)}; sp starts at the top",
    "MMIO_BASE": f"command-processor registers, {isa.MMIO_SIZE:#x} bytes (table below)",
    "LOCAL_BASE": "this PE's local store (size: machine description)",
    "PE_WINDOW_BASE": f"PE `p`'s local store at PE_WINDOW_BASE + p × {isa.PE_WINDOW_STRIDE:#x} (DMA only)",
    "SRAM_BASE": "on-chip SRAM shared by all PEs (size: machine description)",
    "DRAM_BASE": "off-chip DRAM; Triton tensor arguments live here",
}


def render_memory_map() -> str:
    rows = [[f"`{name}`", f"`{getattr(isa, name):#_x}`", note] for name, note in _REGION_NOTES.items()]
    rows.sort(key=lambda r: int(r[1].strip("`").replace("_", ""), 16))
    return _table(["name", "address", "what"], rows) + (
        f"\nAlignment: operands should start on {isa.ALIGNMENT}-byte boundaries for full-rate DMA; "
        f"command descriptors on {isa.DESC_ALIGNMENT}-byte boundaries (a misaligned doorbell is an error).\n"
    )


_REG_NOTES = {
    "DOORBELL": "write: address of a command descriptor → issue it",
    "FENCE": "write: unit mask → the core waits until those units are idle",
    "PROGRAM_ID_X": "read: `tl.program_id(0)`",
    "PROGRAM_ID_Y": "read: `tl.program_id(1)`",
    "PROGRAM_ID_Z": "read: `tl.program_id(2)`",
    "NUM_PROGRAMS_X": "read: `tl.num_programs(0)`",
    "NUM_PROGRAMS_Y": "read: `tl.num_programs(1)`",
    "NUM_PROGRAMS_Z": "read: `tl.num_programs(2)`",
    "PE_ID": "read: index of this PE (row-major over the grid)",
    "CORE_ID": "read: 0 or 1 (which control core of the PE)",
    "ARGS_PTR": "read: address of the argument block",
    "EXIT": "write: end the program now with this status (non-zero = failed device assert)",
    "PRINT": "write: a 64-bit value to the debug log (`tl.device_print`)",
}


def render_registers() -> str:
    missing = [r.name for r in isa.Reg if r.name not in _REG_NOTES]
    if missing:
        raise KeyError(f"mtia_docs: no description for registers {missing}; add them to _REG_NOTES")
    rows = [
        [f"`{r.name}`", f"`{isa.MMIO_BASE + r.value:#_x}` (+{r.value:#04x})", _REG_NOTES[r.name]]
        for r in isa.Reg
    ]
    return _table(["register", "address (offset)", "use"], rows)


_OP_NOTES: dict[str, tuple[str, str]] = {
    "DMA_COPY": (
        "`tl.load` / `tl.store` of an affine block; masks become bounds (`valid`)",
        "dst ← src0 over shape; indices ≥ valid are not read (dst gets the fill `imm0`) or not written",
    ),
    "DMA_GATHER": (
        "`tl.load` with non-affine pointers (indirect indices)",
        "dst[i] ← *src1[i] where mask src2[i], else imm0; src1 holds 64-bit addresses",
    ),
    "DMA_SCATTER": ("`tl.store` with non-affine pointers", "*src1[i] ← src0[i] where mask src2[i]"),
    "DMA_ATOMIC": (
        "`tl.atomic_*` whose result is used, xchg/cas, gathered pointers or a non-box mask",
        "old ← *addr; *addr ← op(*addr, src0[i]) where mask; dst ← old",
    ),
    "DPE_MATMUL": ("`tl.dot(a, b, acc)`", "dst[M,N] = (ACCUMULATE ? dst : 0) + src0[M,K] @ src1[K,N]"),
    "SIMD_UNARY": ("`tl.exp`, `tl.sqrt`, `-x`, `tl.abs`, libdevice math", "dst = subop(src0)"),
    "SIMD_BINARY": (
        "`+ - * / % & | ^ << >>`, `tl.maximum`, `tl.minimum`",
        "dst = subop(src0, src1); either source may be a scalar immediate",
    ),
    "SIMD_SELECT": ("`tl.where(c, a, b)`", "dst = src0 ? src1 : src2"),
    "SIMD_FMA": ("`tl.fma`, fused `a * b + c`", "dst = src0 × src1 + src2"),
    "SIMD_CAST": ("`x.to(dtype)`", "dst = convert(src0)"),
    "SIMD_FILL": ("`tl.zeros`, `tl.full`, splat of a scalar", "dst = imm0"),
    "SIMD_IOTA": ("`tl.arange`", "dst = imm0 + index along an axis"),
    "SIMD_CMP": ("`== != < <= > >=`", "dst (i1) = compare(src0, src1)"),
    "RED_REDUCE": (
        "`tl.sum`, `tl.max`, `tl.min`, `tl.argmax`, `tl.argmin`, `tl.reduce` of and/or/xor",
        "dst = reduce(src0) along one axis",
    ),
    "RED_SCAN": (
        "`tl.cumsum`, `tl.cumprod`, `tl.associative_scan` of sum/prod/max/min",
        "dst = scan(src0) along one axis (optionally reversed)",
    ),
    "RED_ACCUMULATE": (
        "`tl.atomic_add/max/min/and/or/xor` whose result is unused, on affine blocks with a box "
        "mask (or none) or a scalar pointer: split-K, grid-wide sums (option `red_accumulate`)",
        "dst[i] ← op(dst[i], src0[i]) across PEs: src0 in the local store, dst in any PE's store, "
        "SRAM or DRAM; atomic per command",
    ),
    "MLU_COPY": (
        "`tl.trans`, `tl.reshape`, `tl.broadcast_to`, `tl.join`/`split`, slices",
        "dst = src0 re-laid out by strides",
    ),
    "MLU_BITCAST": ("`x.to(dtype, bitcast=True)`", "dst = src0's bytes reinterpreted"),
}

_UNIT_NAMES = {
    isa.Unit.DMA: "DMA / fabric interface",
    isa.Unit.DPE: "dot-product engine (DPE)",
    isa.Unit.SIMD: "SIMD engine",
    isa.Unit.RED: "reduction engine",
    isa.Unit.MLU: "memory layout unit (MLU)",
}


def render_commands() -> str:
    missing = [op.name for op in isa.Op if op.name not in _OP_NOTES]
    if missing:
        raise KeyError(f"mtia_docs: no description for opcodes {missing}; add them to _OP_NOTES")
    rows = [
        [f"`{op.name}` `{op.value:#x}`", _UNIT_NAMES[op.unit], _OP_NOTES[op.name][0], _OP_NOTES[op.name][1]]
        for op in isa.Op
    ]
    return _table(["command (opcode)", "unit", "Triton source", "semantics"], rows)


def render_simd_ops() -> str:
    fast = [op.name.lower() for op in isa.SimdOp if op not in isa.TRANSCENDENTAL]
    slow = [op.name.lower() for op in isa.SimdOp if op in isa.TRANSCENDENTAL]
    factor = _default().simd_transcendental_factor
    return (
        f"- ALU rate (one pass): {', '.join(fast)}.\n"
        f"- Transcendental (lookup table + polynomial, ×{factor:g} the cost on `{DEFAULT_MACHINE}`): "
        f"{', '.join(slow)}.\n"
        f"- Reductions: {', '.join(r.name.lower() for r in isa.ReduceOp)}. "
        f"Scans: {', '.join(s.name.lower() for s in isa.ScanOp)}. "
        f"Atomics: {', '.join(a.name.lower() for a in isa.AtomicOp)}.\n"
    )


def render_dtypes() -> str:
    rows = [[f"`{d.name}`", str(d.value), str(isa.ITEMSIZE[d])] for d in isa.DType if d is not isa.DType.NONE]
    return _table(["dtype", "code", "bytes"], rows)


def render_descriptor() -> str:
    names = {f: f.name for f in isa.Field}
    rows = []
    fields = sorted(isa.Field, key=lambda f: f.value)
    for i, f in enumerate(fields):
        end = fields[i + 1].value if i + 1 < len(fields) else isa.DESC_WORDS
        words = f"{f.value}" if end - f.value == 1 else f"{f.value}–{end - 1}"
        rows.append([f"`{names[f]}`", words, f"{f.value * 8}"])
    return (
        f"A descriptor is {isa.DESC_WORDS} little-endian 64-bit words ({isa.DESC_BYTES} bytes), "
        f"{isa.DESC_ALIGNMENT}-byte aligned; tensors have up to {isa.MAX_DIMS} dimensions, "
        "innermost last.\n\n" + _table(["field", "word(s)", "byte offset"], rows)
    )


def render_abi() -> str:
    return (
        "```c\n"
        "void kernel(uint64_t *args, int32 pid_x, int32 pid_y, int32 pid_z,\n"
        "            int32 num_x, int32 num_y, int32 num_z);   // RISC-V LP64D calling convention\n"
        "```\n"
        "- `args`: one 64-bit slot per runtime argument in signature order (constexpr arguments are "
        "compiled in, not passed): pointers as absolute DRAM addresses, integers sign-extended, "
        "floats as IEEE double bits.\n"
        f"- The kernel returns to `EXIT_ADDR` ({isa.EXIT_ADDR:#_x}, in `ra`); "
        "returning waits for every unit.\n"
        f"- Program ids and grid size also read from `PROGRAM_ID_*` / `NUM_PROGRAMS_*` at "
        f"{isa.MMIO_BASE + isa.Reg.PROGRAM_ID_X:#_x}…; `ARGS_PTR` gives `args`.\n"
        f"- Issue a command: write a descriptor ({isa.DESC_BYTES} bytes) to the stack or local store, "
        f"store its address to `DOORBELL` ({isa.MMIO_BASE + isa.Reg.DOORBELL:#_x}); the descriptor memory "
        "is free again at once. Before the core itself touches data a unit produces, "
        "store a unit mask to `FENCE`.\n"
        "- Units: " + ", ".join(f"{m.name}={m.value:#x}" for m in isa.UnitMask if m.name != "ALL") + ".\n"
    )


def render_errors() -> str:
    """The simulator's error classes with their docstrings and hints (mtia_sim/errors.py)."""
    from mtia_sim import errors

    classes = sorted(
        (
            c
            for c in vars(errors).values()
            if isinstance(c, type)
            and issubclass(c, errors.SimulationError)
            and c is not errors.SimulationError
        ),
        key=lambda c: c.__name__,
    )
    rows = [[f"`{c.__name__}`", (c.__doc__ or "").strip().splitlines()[0], c.hint or "—"] for c in classes]
    return _table(["error", "meaning", "hint printed with it"], rows)


def render_compiler_options() -> str:
    """The mtia compile options the search may change, with defaults (lowering/backend/options.py)."""
    from dataclasses import fields

    from lowering.backend.options import MtiaOptions

    space = MtiaOptions.search_space()
    defaults = {f.name: f.default for f in fields(MtiaOptions)}
    rows = [
        [f"`{name}`", f"`{defaults[name]!r}`", ", ".join(f"`{v!r}`" for v in values)]
        for name, values in space.items()
    ]
    return _table(["option", "default", "values the search tries"], rows)


RENDERERS: dict[str, Callable[[], str]] = {
    "cost-model": render_cost_model,
    "errors": render_errors,
    "compiler-options": render_compiler_options,
    "machine-table": render_machine_table,
    "derived-numbers": render_derived_numbers,
    "memory-map": render_memory_map,
    "registers": render_registers,
    "commands": render_commands,
    "simd-ops": render_simd_ops,
    "dtypes": render_dtypes,
    "descriptor": render_descriptor,
    "abi": render_abi,
}


# ---------------------------------------------------------------------------------------------
# Rewriting and checking documents
# ---------------------------------------------------------------------------------------------
def docs_dir() -> Path:
    from kegen.knowledge.store import shipped_root

    return shipped_root() / "hardware" / "mtia"


def block_names(text: str) -> list[str]:
    return [m["name"] for m in _BLOCK.finditer(text)]


def render_document(text: str) -> str:
    """`text` with every generated block replaced by its current rendering."""

    def replace(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in RENDERERS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(RENDERERS)}")
        return m.group(1) + RENDERERS[name]() + m.group(4)

    return _BLOCK.sub(replace, text)


def stale_documents(folder: Path | None = None) -> list[Path]:
    """Documents under `folder` whose generated blocks differ from the rendering."""
    folder = folder or docs_dir()
    return [
        p
        for p in sorted(folder.glob("*.md"))
        if render_document(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")
    ]


def write_documents(folder: Path | None = None) -> list[Path]:
    """Rewrite the generated blocks in place; returns the files that changed."""
    changed = []
    for path in stale_documents(folder):
        path.write_text(render_document(path.read_text(encoding="utf-8")), encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kegen.knowledge.mtia_docs", description=__doc__.split("\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if any generated block is out of date")
    mode.add_argument("--render", metavar="BLOCK", choices=sorted(RENDERERS), help="print one block")
    args = parser.parse_args(argv)
    if args.render:
        print(RENDERERS[args.render](), end="")
        return 0
    if args.write:
        for path in write_documents():
            print(f"rewrote {path}")
        return 0
    stale = stale_documents()
    for path in stale:
        print(
            f"{path}: generated blocks are out of date; run `python -m kegen.knowledge.mtia_docs --write`",
            file=sys.stderr,
        )
    missing = missing_figures()
    for line in missing:
        print(
            f"hand-written figure no longer matches the machine description, update the prose: {line}",
            file=sys.stderr,
        )
    return 1 if stale or missing else 0


if __name__ == "__main__":
    sys.exit(main())
