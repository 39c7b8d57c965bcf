"""The mtia compilation pipeline as an ordered dict of stages: ttir → tile → llir → rvasm → elf.

Usable without Triton's runtime: `compile_ttir(text, options)` runs every stage on TTIR text and
returns a `CompiledKernel` holding every artifact. The Triton backend (`lowering.backend.compiler`)
calls the same stage functions (`stage_tile`, `stage_llir`, `stage_rvasm`, `stage_elf`).
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lowering.backend.options import MtiaOptions
from lowering.codegen import target
from lowering.codegen.errors import LoweringError
from lowering.codegen.lower import KernelLowering, LoweredKernel, LoweringPlan
from lowering.ir.module import Function, Module
from lowering.passes.inline_calls import InlineCalls
from lowering.passes.liveness import LivenessAnalysis
from lowering.passes.multibuffer import MultiBuffering
from lowering.passes.pointer_analysis import PointerAnalysis
from lowering.passes.unit_mapping import UnitMapping

PIPELINE_VERSION = "1"
STAGES = ("ttir", "tile", "llir", "rvasm", "elf")


@dataclass
class CompiledKernel:
    """Every artifact of one compilation (`artifacts[stage]`) and the facts the driver needs."""

    name: str
    artifacts: dict[str, str | bytes] = field(default_factory=dict)
    arg_types: list[str] = field(default_factory=list)
    local_store_peak: int = 0
    commands: int = 0
    options: MtiaOptions = field(default_factory=MtiaOptions)

    @property
    def elf(self) -> bytes:
        data = self.artifacts["elf"]
        assert isinstance(data, bytes)
        return data


@functools.cache
def local_store_capacity(machine: str) -> int:
    from mtia_sim.machine import load_machine

    return int(load_machine(machine).local_store_bytes)


def _kernel(module: Module) -> Function:
    kernels = [f for f in module.kernels if not f.is_declaration]
    if not kernels:
        raise LoweringError("the TTIR module has no kernel (public tt.func)")
    return kernels[0]


@dataclass
class TileResult:
    """The tile stage's product: the function after the passes, the plan, and the lowered kernel."""

    fn: Function
    plan: LoweringPlan
    lowered: LoweredKernel
    listing: str
    optimized_llir: str | None = None


def run_passes(fn: Function, options: MtiaOptions) -> LoweringPlan:
    """Pointer analysis, liveness, multi-buffering and unit mapping over one kernel."""
    pointers = PointerAnalysis(enabled=options.block_dma, accumulate=options.red_accumulate).apply(fn)
    liveness = LivenessAnalysis().apply(fn)
    stages = MultiBuffering(options.num_stages).apply(fn, pointers)
    units = UnitMapping(accumulate=options.red_accumulate).apply(fn, pointers)
    return LoweringPlan(pointers, liveness, stages, units)


def tile_listing(fn: Function, plan: LoweringPlan, lowered: LoweredKernel) -> str:
    """The tile stage's text: the tile IR, then one line per op with its unit and block access,
    then the local-store allocation."""
    from lowering.ir.printer import Printer, print_function

    lines = [print_function(fn), "", f"// kernel {fn.name}: units per op"]
    printer = Printer()
    for a in fn.args:
        printer.define(a)

    def name(v: Any) -> str:
        n = printer.names.get(id(v))
        return "%" + n if n is not None else "%?"

    def walk(ops: list[Any], depth: int) -> None:
        for op in ops:
            res = ", ".join(printer.define(r) for r in op.results)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        printer.define(arg)
            unit = plan.units.get(id(op), "?")
            text = f"//{'  ' * (depth + 1)}{res + ' = ' if res else ''}{op.name} -> {unit}"
            acc = plan.pointers.access(op)
            if acc is not None:
                text += " " + acc.describe().replace("%?", name(acc.base))
            if id(op) in plan.stages:
                text += f" stages={plan.stages[id(op)]}"
            lines.append(text)
            for region in op.regions:
                for block in region.blocks:
                    walk(block.ops, depth + 1)

    for i, block in enumerate(fn.body.blocks):
        if i:
            args = ", ".join(printer.define(a) for a in block.args)
            lines.append(f"// ^bb{i}({args}):" if args else f"// ^bb{i}:")
        walk(block.ops, 0)
    lines.append(f"// local store: peak {lowered.local_store_peak} B")
    for label, offset, size in lowered.buffers:
        lines.append(f"//   {offset:>7} +{size:<7} {label}")
    lines.append(f"// commands issued (static): {lowered.commands}")
    return "\n".join(lines) + "\n"


def lower_ttir(text: str, options: MtiaOptions, constexprs: Mapping[str, Any] | None = None) -> TileResult:
    """Parse TTIR text, run the passes and generate the control code (kept for the later stages)."""
    from lowering.ttir.parser import parse_ttir

    module = parse_ttir(text)
    fn = _kernel(module)
    InlineCalls().apply(module, fn)
    plan = run_passes(fn, options)
    lowering = KernelLowering(
        fn, plan, capacity=local_store_capacity(options.machine), options=options, constexprs=constexprs
    )
    lowered = lowering.lower()
    return TileResult(fn, plan, lowered, tile_listing(fn, plan, lowered))


# -- stages (shared by compile_ttir and the Triton backend) ---------------------------------------
_IN_FLIGHT: dict[int, TileResult] = {}


def _caller_constexprs() -> dict[str, Any]:
    """Constexpr values of the kernel being compiled by triton.compile (for error hints only)."""
    frame = sys._getframe(1)
    while frame is not None:
        src = frame.f_locals.get("src")
        if src is not None and hasattr(src, "constants") and hasattr(src, "fn"):
            try:
                names = src.fn.arg_names
                out: dict[str, Any] = {}
                for k, v in src.constants.items():
                    idx = k[0] if isinstance(k, tuple) else k
                    out[names[idx] if isinstance(idx, int) else str(idx)] = v
                return out
            except Exception:  # noqa: BLE001 - hints only
                return {}
        frame = frame.f_back  # type: ignore[assignment]
    return {}


def stage_tile(
    src: str, metadata: dict[str, Any], options: MtiaOptions, constexprs: Mapping[str, Any] | None = None
) -> str:
    result = lower_ttir(src, options, constexprs if constexprs is not None else _caller_constexprs())
    metadata["name"] = result.fn.name
    metadata["shared"] = 0
    metadata["mtia_arg_types"] = result.lowered.arg_types
    metadata["mtia_local_store_peak"] = result.lowered.local_store_peak
    metadata["mtia_tags"] = result.lowered.tags
    metadata["mtia_pe_mapping"] = options.pe_mapping
    _IN_FLIGHT[id(metadata)] = result
    return result.listing


def _in_flight(metadata: dict[str, Any], stage: str) -> TileResult:
    try:
        return _IN_FLIGHT[id(metadata)]
    except KeyError:
        raise LoweringError(f"the {stage} stage needs the tile stage's result; compile from TTIR") from None


def stage_llir(src: str, metadata: dict[str, Any], options: MtiaOptions) -> str:
    """The control code as LLVM IR after LLVM's -O pipeline (the next stages only run codegen)."""
    result = _in_flight(metadata, "llir")
    optimized = target.optimize(result.lowered.llir, options.opt_level)
    result.optimized_llir = optimized
    return optimized


def stage_rvasm(src: str, metadata: dict[str, Any], options: MtiaOptions) -> str:
    return target.emit_assembly(src, options.opt_level, optimized=True)


def stage_elf(src: str, metadata: dict[str, Any], options: MtiaOptions) -> bytes:
    result = _IN_FLIGHT.pop(id(metadata), None)
    if result is None or result.optimized_llir is None:
        raise LoweringError("the elf stage needs the llir stage's result; compile from TTIR")
    return target.emit_object(result.optimized_llir, options.opt_level, optimized=True)


def make_stages(
    options: MtiaOptions, constexprs: Mapping[str, Any] | None = None
) -> OrderedDict[str, Callable[[Any, dict[str, Any]], Any]]:
    """The stages after ttir, in order (each takes the previous artifact and the metadata dict)."""
    stages: OrderedDict[str, Callable[[Any, dict[str, Any]], Any]] = OrderedDict()
    stages["tile"] = lambda src, md: stage_tile(str(src), md, options, constexprs)
    stages["llir"] = lambda src, md: stage_llir(src, md, options)
    stages["rvasm"] = lambda src, md: stage_rvasm(src, md, options)
    stages["elf"] = lambda src, md: stage_elf(src, md, options)
    return stages


def compile_ttir(
    text: str, options: MtiaOptions | None = None, constexprs: Mapping[str, Any] | None = None
) -> CompiledKernel:
    """Compile TTIR text through every stage; every artifact is kept in `artifacts`."""
    options = options or MtiaOptions()
    metadata: dict[str, Any] = {}
    artifacts: dict[str, str | bytes] = {"ttir": text}
    current: Any = text
    try:
        for name, fn in make_stages(options, dict(constexprs or {})).items():
            current = fn(current, metadata)
            artifacts[name] = current
    finally:
        _IN_FLIGHT.pop(id(metadata), None)
    return CompiledKernel(
        metadata["name"],
        artifacts,
        list(metadata["mtia_arg_types"]),
        int(metadata["mtia_local_store_peak"]),
        0,
        options,
    )
