"""The knobs of one evaluation (a frozen dataclass; defaults come from kegen.settings)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kegen.targets import TARGETS

GPU_PROFILES = ("full", "auto", "timing")

# Default tolerances by dtype name (atol, rtol). Anything else falls back to fp32's.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-6, 1e-6),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass(frozen=True)
class EvalConfig:
    """How to evaluate a candidate.

    target: "mtia" (simulated MTIA through the lowering backend), "nvidia", "amd" (a GPU), or "cpu"
    (Triton's CPU interpreter, TRITON_INTERPRET=1, host wall clock; for development and tests: no
    roofline, no hardware counters).
    atol/rtol: None = by the reference output's dtype (fp32 1e-4, fp16/bf16 1e-2).
    allow_ops: torch ops a candidate's forward may compute with, as aten names ("aten.mm") or
    overload packets; "*" allows every op (plain-PyTorch candidates in tests). Tensor creation,
    views and copies are always allowed.
    fresh_process: start a new interpreter per evaluation instead of forking the warm zygote.
    compile_baseline: time torch.compile of the reference on GPU targets (default on).
    mtia_compile_baseline: on mtia, time torch.compile of the reference on the simulated chip
    (`kegen eval --baseline compile`); the primary speedup is then over the compiler.
    gpu_profile: the GPU profile's depth (kegen.eval.trusted.profile_gpu): "full" (torch.profiler kernel
    table + ncu metrics; `kegen eval`/`kegen profile`), "auto" (kernel table; ncu only for a
    candidate faster than `extra["ncu_if_faster_than"]` seconds, else than every earlier candidate
    of the problem this process evaluated: the ones a search expands), "timing" (no kernel profile).
    """

    target: str = "mtia"
    machine: str = "mtia-2i"
    trials: int = 3
    seed: int = 42
    atol: float | None = None
    rtol: float | None = None
    timeout_s: float = 300.0
    memory_limit_mb: int = 8192
    allow_ops: tuple[str, ...] = ()
    check_cheats: bool = True
    profile: bool = True
    edge_shapes: bool = False
    timing_runs: int = 3
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    roofline_slack: float = 0.9
    compile_baseline: bool = True
    mtia_compile_baseline: bool = False
    fresh_process: bool = False
    gpu_profile: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r}: choose one of {', '.join(TARGETS)}")
        if self.trials < 1:
            raise ValueError(f"trials must be at least 1 (got {self.trials})")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive (got {self.timeout_s})")
        if self.gpu_profile not in GPU_PROFILES:
            choices = ", ".join(GPU_PROFILES)
            raise ValueError(f"unknown gpu_profile {self.gpu_profile!r}: choose one of {choices}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["allow_ops"] = list(self.allow_ops)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalConfig:
        data = dict(data)
        data["allow_ops"] = tuple(data.get("allow_ops") or ())
        return cls(**data)

    @classmethod
    def from_settings(cls, **overrides: Any) -> EvalConfig:
        """Defaults from the environment (KEGEN_EVAL_*, KEGEN_MACHINE), then `overrides`."""
        from kegen.settings import load_settings

        s = load_settings()
        base: dict[str, Any] = {
            "machine": s.sim.machine,
            "trials": s.eval.trials,
            "seed": s.eval.seed,
            "timeout_s": s.eval.timeout_s,
            "memory_limit_mb": s.eval.memory_limit_mb,
        }
        base.update(overrides)
        return cls(**base)

    def tolerances(self, dtype_name: str) -> tuple[float, float]:
        """(atol, rtol) for outputs of this dtype, honouring overrides."""
        atol, rtol = DEFAULT_TOLERANCES.get(dtype_name, DEFAULT_TOLERANCES["float32"])
        return (self.atol if self.atol is not None else atol, self.rtol if self.rtol is not None else rtol)
