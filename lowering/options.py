"""Compile options of the mtia target: a frozen dataclass with a stable hash.

The lowering core's options. They are plain values: the machine a kernel compiles for is the
`machine` field (default mtia-2i), handed in by whoever compiles; nothing here reads the
environment. The Triton adapter (`lowering.backend.options`) turns Triton's option dict and target
into these options. The performance options the search varies are the passes' declared parameters
(`lowering.pipeline.search_space()`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from typing import Any

LOCAL_STORE_PLANS = ("spread", "packed", "compact")  # densest last: the fallback order
PE_MAPPINGS = ("round_robin", "blocked")  # as lowering.passes.pe_mapping.PE_MAPPINGS
SRAM_MODES = ("cache", "resident", "off")  # as mtia_sim.timing.sram_cache.SRAM_MODES
MACHINE_PREFIX = "mtia-"
DEFAULT_MACHINE = "mtia-2i"


def machine_arch(machine: str) -> str:
    """The Triton target arch of a machine: "mtia-2i" -> "2i"; a machine given as a TOML path or
    under another name is its own arch."""
    return machine.removeprefix(MACHINE_PREFIX) if machine.startswith(MACHINE_PREFIX) else machine


@dataclass(frozen=True)
class MtiaOptions:
    """Options of one mtia compilation.

    Performance options (the search's moves): `num_stages` (multi-buffering depth of loads in
    loops; 1 = single buffer), `pe_mapping` (program ids -> cores: "round_robin" launches one
    program per grid point, dealt to PEs in turn; "blocked" launches one program per core that loops
    over a contiguous block of program ids), `dual_core` (program ids fill both cores of each PE: PE-major
    over 2 x 64 slots instead of 64), `block_dma` (pointer analysis turns affine loads/stores into
    strided block DMA; False forces gather/scatter), `machine` (machine description name,
    a value: default mtia-2i; `arch` follows it unless given),
    `opt_level` (LLVM optimisation level for the control code, 2 or 3), `red_accumulate` (atomics
    whose result is unused, on affine blocks with a box mask or on scalar pointers, become one
    RED_ACCUMULATE over the reduction network instead of per-element DMA_ATOMIC),
    `local_store_plan` ("spread": next-fit placement and rotating slots for carried tiles computed
    ahead; "packed": first-fit placement, rotating slots kept; "compact": first-fit placement and one
    slot per carried tensor; a plan that does not fit falls back to the next, in that order;
    docs/DECISIONS.md D38, D87).
    The other fields are what Triton's frontend reads from every backend's options.
    """

    num_stages: int = 1
    pe_mapping: str = "round_robin"
    dual_core: bool = False
    block_dma: bool = True
    machine: str = DEFAULT_MACHINE
    opt_level: int = 2
    red_accumulate: bool = True
    sram_mode: str = "cache"  # how the on-chip SRAM serves DRAM tensors: mtia_sim.timing.sram_cache
    local_store_plan: str = "spread"
    # fields Triton's frontend and runtime read
    num_warps: int = 1
    num_ctas: int = 1
    num_buffers_warp_spec: int = 0
    num_consumer_groups: int = 0
    reg_dec_producer: int = 0
    reg_inc_consumer: int = 0
    warp_size: int = 1
    debug: bool = False
    sanitize_overflow: bool = False
    enable_fp_fusion: bool = True
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    supported_fp8_dtypes: tuple[str, ...] = ("fp8e5", "fp8e4nv")
    deprecated_fp8_dot_operand_dtypes: tuple[str, ...] = ()
    default_dot_input_precision: str = "ieee"
    # Accepted so kernels written for GPUs compile unchanged. Because "tf32" is listed, Triton's
    # `tl.dot` marks an fp32 dot without `input_precision` as tf32 in the TTIR; the MTIA DPE has no
    # reduced-precision fp32 mode, so every fp32 dot runs as IEEE fp32 whatever the attribute says.
    allowed_dot_input_precisions: tuple[str, ...] = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    extern_libs: tuple[tuple[str, str], ...] | None = None
    backend_name: str = "mtia"
    arch: str = ""
    instrumentation_mode: str = ""
    ir_override: str | None = None

    def __post_init__(self) -> None:
        if self.pe_mapping not in PE_MAPPINGS:
            raise ValueError(f"pe_mapping must be one of {PE_MAPPINGS}, got {self.pe_mapping!r}")
        if self.num_stages < 1:
            raise ValueError(f"num_stages must be >= 1, got {self.num_stages}")
        if self.sram_mode not in SRAM_MODES:
            raise ValueError(f"sram_mode must be one of {SRAM_MODES}, got {self.sram_mode!r}")
        if self.local_store_plan not in LOCAL_STORE_PLANS:
            raise ValueError(
                f"local_store_plan must be one of {LOCAL_STORE_PLANS}, got {self.local_store_plan!r}"
            )
        if self.opt_level < 2 or self.opt_level > 3:
            raise ValueError(f"opt_level must be 2 or 3, got {self.opt_level}")
        if not self.arch:
            object.__setattr__(self, "arch", machine_arch(self.machine))
        if isinstance(self.extern_libs, dict):
            object.__setattr__(self, "extern_libs", tuple(sorted(self.extern_libs.items())))

    def hash(self) -> str:
        """A stable hex digest of every field (part of Triton's cache key)."""
        key = "_".join(
            f"{f.name}-{getattr(self, f.name)}" for f in sorted(fields(self), key=lambda f: f.name)
        )
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def from_dict(cls, opts: dict[str, Any]) -> MtiaOptions:
        """Build from Triton's option dict (unknown keys are ignored, None means default)."""
        names = {f.name for f in fields(cls)}
        args = {k: v for k, v in opts.items() if k in names and v is not None}
        for k in (
            "supported_fp8_dtypes",
            "deprecated_fp8_dot_operand_dtypes",
            "allowed_dot_input_precisions",
        ):
            if k in args:
                args[k] = tuple(args[k])
        return cls(**args)
