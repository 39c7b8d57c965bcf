"""The roofline of a problem: its minimum DRAM bytes and FLOPs, over a machine's bandwidth and peak.

Minimum bytes = every input tensor and model parameter/buffer read once + every output written
once (or the problem's own `Model.roofline_bytes(inputs, outputs)`). FLOPs come from
torch.utils.flop_counter.FlopCounterMode on the reference (matmul/conv/attention; elementwise ops
count 0, so such problems are memory-bound). Peaks are optimistic on purpose (the fastest dtype
path the chip has for the inputs' dtype), so the roofline time is a true lower bound.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class MachinePeak:
    """What the roofline needs of a machine."""

    name: str
    dram_bw: float  # bytes/s
    peak_flops: dict[str, float]  # dtype name -> FLOP/s
    launch_overhead_s: float = 0.0

    def flops_peak(self, dtype: torch.dtype) -> float:
        key = str(dtype).removeprefix("torch.")
        return self.peak_flops.get(key, max(self.peak_flops.values()))


# Published figures (dense). fp32 on GPUs uses the TF32 tensor-core rate Triton's tl.dot defaults to.
GPU_PEAKS: dict[str, MachinePeak] = {
    "H200": MachinePeak(
        "NVIDIA H200",
        4.8e12,
        {"float32": 494.7e12, "float16": 989.4e12, "bfloat16": 989.4e12, "float64": 66.9e12},
    ),
    "H100": MachinePeak(
        "NVIDIA H100 SXM",
        3.35e12,
        {"float32": 494.7e12, "float16": 989.4e12, "bfloat16": 989.4e12, "float64": 66.9e12},
    ),
    "A100": MachinePeak(
        "NVIDIA A100",
        2.039e12,
        {"float32": 156e12, "float16": 312e12, "bfloat16": 312e12, "float64": 19.5e12},
    ),
    "MI300X": MachinePeak(
        "AMD MI300X",
        5.3e12,
        {"float32": 653.7e12, "float16": 1307.4e12, "bfloat16": 1307.4e12, "float64": 163.4e12},
    ),
}


def mtia_peak(machine: str) -> MachinePeak:
    """Peaks from mtia_sim's machine description (DRAM bandwidth, DPE peak per dtype, launch overhead)."""
    from mtia_sim.machine import load_machine

    m = load_machine(machine)
    best = max(m.peak_flops(d) for d in ("fp16", "bf16", "fp32"))
    # Optimistic: a float32 problem could be run on the fp16 path, so every dtype gets the best rate.
    peaks = {"float32": best, "float16": best, "bfloat16": best, "float64": best}
    return MachinePeak(m.name, float(m.dram_bw), peaks, float(m.launch_overhead_ns) * 1e-9)


def gpu_peak() -> MachinePeak | None:
    """The table entry for the current GPU, or None if unknown."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    for key, peak in GPU_PEAKS.items():
        if key in name.replace(" ", "").upper() or key in name.upper():
            return peak
    return None


@dataclass
class Roofline:
    """A problem's roofline on a machine."""

    machine: str
    bytes: int
    flops: int
    dram_bw: float
    peak_flops: float
    memory_time_s: float
    compute_time_s: float

    @property
    def time_s(self) -> float:
        return max(self.memory_time_s, self.compute_time_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_time_s > self.memory_time_s else "memory"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(time_s=self.time_s, bound=self.bound, intensity=self.intensity)
        return data


def tensor_bytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, list | tuple):
        return sum(tensor_bytes(v) for v in values)
    return 0


def problem_bytes(model: torch.nn.Module, inputs: list[Any], outputs: Any) -> int:
    """Minimum DRAM bytes of one forward: Model.roofline_bytes(inputs, outputs) where the problem
    defines it, else every input and every parameter/buffer of the model (a linear layer's weight)
    read once + every output written once."""
    own = getattr(model, "roofline_bytes", None)
    if callable(own):
        nbytes = own(list(inputs), list(outputs) if isinstance(outputs, list | tuple) else [outputs])
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise ValueError(f"Model.roofline_bytes returned {nbytes!r}: it must return a positive int")
        return nbytes
    return tensor_bytes(inputs) + tensor_bytes(outputs) + model_bytes(model)


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers (each tensor once, shared ones too)."""
    seen: dict[int, int] = {}
    for t in [*model.parameters(), *model.buffers()]:
        seen.setdefault(id(t), tensor_bytes(t))
    return sum(seen.values())


def count_flops(model: torch.nn.Module, inputs: list[Any]) -> int:
    """FLOPs of one forward of `model` by FlopCounterMode (0 for ops it does not count)."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*inputs)
    return int(counter.get_total_flops())


def problem_roofline(model: torch.nn.Module, inputs: list[Any], outputs: Any, peak: MachinePeak) -> Roofline:
    """Roofline of one forward: inputs and parameters read once + outputs written once; FLOPs from
    the reference.

    A reference that reads only part of an input (an embedding bag gathers a few rows of a large
    table) states its own minimum with a method `roofline_bytes(inputs, outputs) -> int` on Model
    (both lists of the forward's tensors).
    """
    nbytes = problem_bytes(model, inputs, outputs)
    flops = count_flops(model, inputs)
    dtype = next(
        (x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()), torch.float32
    )
    fpeak = peak.flops_peak(dtype)
    return Roofline(
        machine=peak.name,
        bytes=nbytes,
        flops=flops,
        dram_bw=peak.dram_bw,
        peak_flops=fpeak,
        memory_time_s=nbytes / peak.dram_bw,
        compute_time_s=flops / fpeak if fpeak else 0.0,
    )
