"""Generated MTIA documents, programming model: memory map, registers, commands, SIMD ops, dtypes,
descriptor, ABI and errors from `mtia_sim/isa.py`, and the compiler options the search may change
(`mtia_docs` puts them into the markdown)."""

from __future__ import annotations

from kegen.knowledge.mtia_format import (
    DEFAULT_MACHINE,
    _bytes,
    _default,
    _table,
)
from mtia_sim import isa

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
        raise KeyError(f"mtia_docs: no description for registers {missing}; "
                       f"add them to _REG_NOTES in kegen/knowledge/mtia_isa_tables.py")
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
        "`tl.load` with non-affine pointers (indirect indices); indirect rows of contiguous columns "
        "use the row form",
        "dst[i] ← *src1[i] where mask src2[i], else imm0; src1 holds 64-bit addresses. subop "
        "`GatherForm.ROWS`: one address per row, dst[r, j] ← *(src1[r] + j · itemsize) inside the "
        "`valid` box where mask",
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
        raise KeyError(f"mtia_docs: no description for opcodes {missing}; "
                       f"add them to _OP_NOTES in kegen/knowledge/mtia_isa_tables.py")
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
    """The mtia compile options the search may change, with defaults (lowering/options.py)."""
    from dataclasses import fields

    from lowering.options import MtiaOptions
    from lowering.pipeline import search_space

    space = search_space()
    defaults = {f.name: f.default for f in fields(MtiaOptions)}
    rows = [
        [f"`{name}`", f"`{defaults[name]!r}`", ", ".join(f"`{v!r}`" for v in values)]
        for name, values in space.items()
    ]
    return _table(["option", "default", "values the search tries"], rows)
