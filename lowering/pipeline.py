"""The mtia compilation pipeline: ttir → tile → llir → rvasm → elf, each stage a pure function of the
previous stage's artifact (Triton's ``make_X(src, metadata, options)``).

- `make_tile`: TTIR text → tile IR text. Parses the TTIR, runs the pass pipeline (`DEFAULT_PASSES`,
  the one list of the default passes, run by `lowering.passes.manager`), prints the module with
  locations (it parses back) and the analyses' findings as comments.
- `make_llir`: tile IR text → LLVM IR text. Parses the tile IR, re-runs the (deterministic) passes,
  generates the control code and runs LLVM's -O pipeline; the local-store layout heads the text as
  `;` comments. Sets the metadata the driver needs (name, argument types, local-store peak, tags).
- `make_rvasm`: LLVM IR text → RISC-V assembly text (LLVM codegen only, the IR is already optimised).
- `make_elf`: assembly text → an executable ELF image linked at the code base (`llvm-mc`, then
  `mtia_sim.loader.link`), which the simulator loads as is.

`compile_ttir(text, options)` runs every stage without Triton's runtime; `compile_from(stage, text,
options)` starts from any stage's (edited) artifact. The Triton adapter (`lowering.backend.compiler`)
calls the same stage functions. `instrument(...)` turns on the pass manager's callbacks (print after
passes, verify each) for the compilations inside a `with` block.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from lowering.errors import LocalStoreOverflowError, LoweringError
from lowering.options import LOCAL_STORE_PLANS, MtiaOptions
from lowering.passes.inline_calls import InlineCalls
from lowering.passes.liveness import LivenessAnalysis
from lowering.passes.manager import (
    Pass,
    PassContext,
    PassPipeline,
    check_name,
    extra_passes,
)
from lowering.passes.manager import (
    UnknownOptionError as UnknownOptionError,  # re-exported: the error of a bad option name
)
from lowering.passes.multibuffer import MultiBuffering
from lowering.passes.pe_mapping import PEMapping
from lowering.passes.pointer_analysis import PointerAnalysis
from lowering.passes.unit_mapping import UnitMapping

PIPELINE_VERSION = "2"
STAGES = ("ttir", "tile", "llir", "rvasm", "elf")
TEXT_STAGES = ("ttir", "tile", "llir", "rvasm")
Stage = Callable[[Any, dict[str, Any]], Any]

#: The default pass pipeline, in the order it runs (each pass's `requires` is checked against it).
DEFAULT_PASSES: tuple[type[Pass], ...] = (
    InlineCalls,
    LivenessAnalysis,
    PointerAnalysis,
    MultiBuffering,
    PEMapping,
    UnitMapping,
)
#: Launch options the search varies besides the passes' declared parameters.
LAUNCH_SPACE: dict[str, tuple[Any, ...]] = {"sram_mode": ("cache", "resident")}


def default_pipeline(options: Any = None) -> PassPipeline:
    """`DEFAULT_PASSES` configured from `options` (an options object or a mapping)."""
    return PassPipeline.build(DEFAULT_PASSES, options)


def known_passes() -> dict[str, type[Pass]]:
    """Every pass a textual pipeline may name: the default ones in order, then those made known
    with `register_pass` (or by `kegen.lowering.passes` entry points)."""
    known: dict[str, type[Pass]] = {p.name: p for p in DEFAULT_PASSES}
    for name, cls in extra_passes().items():
        if name in known and known[name] is not cls:
            raise TypeError(f"pass {cls.__qualname__} takes the name {name!r} of a default pass")
        known[name] = cls
    return known


def parse_pipeline(spec: str, options: Any = None) -> PassPipeline:
    """A pipeline from ``"inline-calls,pointer-analysis{block_dma=false},liveness"`` (names from
    `known_passes()`; options converted by their fields' declared types)."""
    return PassPipeline.parse(spec, known_passes(), options)


def search_space() -> dict[str, tuple[Any, ...]]:
    """The performance options and their candidate values, for the search to enumerate: the default
    passes' declared parameters (`Pass.schedule_space()`), then the launch's SRAM mode."""
    space: dict[str, tuple[Any, ...]] = {}
    for cls in DEFAULT_PASSES:
        for name, values in cls.schedule_space().items():
            if name in space and space[name] != values:
                raise TypeError(f"option {name!r} has two candidate lists: {space[name]} and {values}")
            space[name] = values
    return {**space, **LAUNCH_SPACE}


def option_names() -> set[str]:
    """Every option a default pass reads."""
    return {n for cls in DEFAULT_PASSES for n in cls.option_names()}


def check_option_names(names: Iterable[str], known: Iterable[str] = ()) -> None:
    """Raise `UnknownOptionError` for a name that is neither a pass option nor in `known`, naming the
    closest valid names and listing them all (``num_stage`` -> did you mean ``num_stages``?)."""
    valid = option_names() | set(known)
    for name in names:
        check_name(name, valid, "unknown option")


@dataclass(frozen=True)
class Instrumentation:
    """Pass-manager hooks for the tile stage: print the IR after every pass (`print_after_all`) or
    after the named ones, and run the verifier after every pass (`verify_each`)."""

    print_after_all: bool = False
    print_after: frozenset[str] = frozenset()
    verify_each: bool = False
    pipeline: str | None = None  # an explicit pass list (`parse_pipeline`), else `DEFAULT_PASSES`
    stream: TextIO | None = None

    def callback(self) -> Callable[[Pass, PassContext], None] | None:
        if not (self.print_after_all or self.print_after):
            return None

        def show(p: Pass, ctx: PassContext) -> None:
            if self.print_after_all or p.name in self.print_after:
                from lowering.listing import tile_text

                out = self.stream or sys.stderr
                out.write(f"// -----// IR Dump After {p.name} ({type(p).__name__}) //----- //\n")
                out.write(tile_text(ctx.module, ctx))
                out.flush()

        return show


_INSTRUMENTATION: contextvars.ContextVar[Instrumentation | None] = contextvars.ContextVar(
    "kegen_lowering_instrumentation", default=None
)
_NO_HOOKS = Instrumentation()


@contextlib.contextmanager
def instrument(instrumentation: Instrumentation) -> Iterator[Instrumentation]:
    """Compilations inside the block run the pass pipeline with these hooks."""
    token = _INSTRUMENTATION.set(instrumentation)
    try:
        yield instrumentation
    finally:
        _INSTRUMENTATION.reset(token)


def current_instrumentation() -> Instrumentation:
    """The hooks of the innermost `instrument` block (none outside one)."""
    return _INSTRUMENTATION.get() or _NO_HOOKS


@functools.cache
def local_store_capacity(machine: str) -> int:
    from mtia_sim.machine import load_machine

    return int(load_machine(machine).local_store_bytes)


def pass_pipeline(options: Any) -> PassPipeline:
    """The pass pipeline for `options` (the instrumentation's explicit list, else the default)."""
    spec = current_instrumentation().pipeline
    return parse_pipeline(spec, options) if spec else default_pipeline(options)


def run_passes(text: str, options: Any, *, instrumented: bool) -> PassContext:
    """Parse TTIR / tile IR text and run the pass pipeline over it; the context holds the results."""
    from lowering.ttir.parser import parse_ttir

    ctx = PassContext(parse_ttir(text), options)
    ctx.kernel  # noqa: B018 - fails clearly when there is no kernel
    hooks = current_instrumentation()
    callback = hooks.callback() if instrumented else None
    pass_pipeline(options).run(ctx, callback, verify=hooks.verify_each)
    return ctx


# -- stages -----------------------------------------------------------------------------------------
def make_tile(src: str, metadata: dict[str, Any], options: Any) -> str:
    """TTIR text → tile IR text (the module after the passes, then the analyses as comments)."""
    from lowering.listing import tile_text

    ctx = run_passes(src, options, instrumented=True)
    metadata["name"] = ctx.kernel.name
    metadata["shared"] = 0
    return tile_text(ctx.module, ctx)


@dataclass
class LlirResult:
    """What lowering one kernel gives besides the LLVM IR text."""

    name: str
    llir: str
    arg_types: list[str]
    local_store_peak: int
    commands: int
    tags: list[str] = field(default_factory=list)


def lower_tile(src: str, options: Any, constexprs: Mapping[str, Any] | None = None) -> LlirResult:
    """Tile IR (or TTIR) text → optimised LLVM IR text and the facts the driver needs."""
    from lowering.codegen import target
    from lowering.codegen.lower import KernelLowering, LoweringPlan
    from lowering.codegen.rules import RULES

    ctx = run_passes(src, options, instrumented=False)
    fn = ctx.kernel
    plan = LoweringPlan(
        ctx.result("pointer-analysis"),
        ctx.result("liveness"),
        ctx.result("multi-buffering"),
        ctx.result("unit-mapping"),
    )

    def lowering(placement: str) -> KernelLowering:
        return KernelLowering(
            fn,
            plan,
            RULES,
            capacity=local_store_capacity(options.machine),
            options=options,
            constexprs=constexprs,
            placement=placement,
        )

    lowered = _lower_first_fitting(lowering, getattr(options, "local_store_plan", "spread"))
    header = [
        f"; kernel {fn.name}",
        f"; local store: peak {lowered.local_store_peak} B, plan {lowered.placement}",
    ]
    header += [f";   {offset:>7} +{size:<7} {label}" for label, offset, size in lowered.buffers]
    header.append(f"; commands issued (static): {lowered.commands}")
    optimized = target.optimize(lowered.llir, options.opt_level)
    return LlirResult(
        fn.name,
        "\n".join(header) + "\n" + optimized,
        list(lowered.arg_types),
        lowered.local_store_peak,
        lowered.commands,
        list(lowered.tags),
    )


def _lower_first_fitting(lowering: Callable[[str], Any], first: str) -> Any:
    """Lower with the local-store plan `first`, then with each denser plan while the blocks do not fit:
    spread -> packed -> compact (docs/DECISIONS.md D38, D87); the last plan's overflow is the error."""
    plans = LOCAL_STORE_PLANS[LOCAL_STORE_PLANS.index(first) :]
    for placement in plans[:-1]:
        try:
            return lowering(placement).lower()
        except LocalStoreOverflowError:
            continue
    return lowering(plans[-1]).lower()


def make_llir(
    src: str, metadata: dict[str, Any], options: Any, constexprs: Mapping[str, Any] | None = None
) -> str:
    """Tile IR text → optimised LLVM IR text; fills the driver's metadata."""
    result = lower_tile(str(src), options, constexprs if constexprs is not None else _caller_constexprs())
    metadata["name"] = result.name
    metadata["shared"] = 0
    metadata["mtia_arg_types"] = result.arg_types
    metadata["mtia_local_store_peak"] = result.local_store_peak
    metadata["mtia_tags"] = result.tags
    metadata["mtia_pe_mapping"] = options.pe_mapping
    return result.llir


def make_rvasm(src: str, metadata: dict[str, Any], options: Any) -> str:
    """LLVM IR text (already optimised) → RISC-V assembly text."""
    from lowering.codegen import target

    return target.emit_assembly(str(src), options.opt_level, optimized=True)


def make_elf(src: str, metadata: dict[str, Any], options: Any) -> bytes:
    """RISC-V assembly text → executable ELF image linked at the code base (entry: the kernel)."""
    from lowering.codegen.assembler import assemble
    from lowering.codegen.elf_image import link_executable

    entry = metadata.get("name") or _first_global(str(src))
    try:
        return link_executable([assemble(str(src), entry)], entry)
    except LoweringError:
        raise
    except Exception as exc:  # the loader's LinkError and friends: say which stage failed
        raise LoweringError(f"linking kernel {entry} failed: {exc}") from exc


def _first_global(asm: str) -> str:
    for line in asm.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == ".globl":
            return parts[1]
    raise LoweringError("the rvasm has no .globl symbol to use as the kernel entry")


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


def make_stages(options: Any, constexprs: Mapping[str, Any] | None = None) -> dict[str, Stage]:
    """The stages after ttir, in order (each takes the previous artifact and the metadata dict)."""
    return {
        "tile": lambda src, md: make_tile(str(src), md, options),
        "llir": lambda src, md: make_llir(str(src), md, options, constexprs),
        "rvasm": lambda src, md: make_rvasm(str(src), md, options),
        "elf": lambda src, md: make_elf(str(src), md, options),
    }


# -- without Triton's runtime -----------------------------------------------------------------------
@dataclass
class CompiledKernel:
    """Every artifact of one compilation (`artifacts[stage]`) and the facts the driver needs."""

    name: str
    artifacts: dict[str, str | bytes] = field(default_factory=dict)
    arg_types: list[str] = field(default_factory=list)
    local_store_peak: int = 0
    commands: int = 0
    options: Any = None

    @property
    def elf(self) -> bytes:
        data = self.artifacts["elf"]
        assert isinstance(data, bytes)
        return data


def compile_from(
    stage: str, text: str, options: Any, constexprs: Mapping[str, Any] | None = None
) -> CompiledKernel:
    """Run the stages after `stage` on its artifact `text` (e.g. an edited tile IR or rvasm file).
    Starting after `tile` or later leaves the driver's metadata (argument types...) unknown."""
    if stage not in TEXT_STAGES:
        raise LoweringError(f"cannot start from stage {stage!r}: choose one of {', '.join(TEXT_STAGES)}")
    metadata: dict[str, Any] = {}
    artifacts: dict[str, str | bytes] = {stage: text}
    current: Any = text
    stages = make_stages(options, dict(constexprs or {}))
    for name in STAGES[STAGES.index(stage) + 1 :]:
        current = stages[name](current, metadata)
        artifacts[name] = current
    return CompiledKernel(
        str(metadata.get("name", "")),
        artifacts,
        list(metadata.get("mtia_arg_types", [])),
        int(metadata.get("mtia_local_store_peak", 0)),
        0,
        options,
    )


def compile_ttir(
    text: str, options: Any = None, constexprs: Mapping[str, Any] | None = None
) -> CompiledKernel:
    """Compile TTIR text through every stage; every artifact is kept in `artifacts`. `options`:
    an `MtiaOptions` (default: its defaults, machine mtia-2i)."""
    if options is None:
        options = MtiaOptions()
    return compile_from("ttir", text, options, constexprs)
