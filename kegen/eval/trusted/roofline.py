"""The roofline of a problem: its minimum DRAM bytes and FLOPs, over a machine's bandwidth and peak.

Minimum bytes = every input tensor and model parameter/buffer read once + every output written
once (or the problem's own `Model.roofline_bytes(inputs, outputs)`); a tensor the reference reads only
as the table of a gather (embedding, embedding bag, index_select, gather, advanced indexing) counts
only the rows its indices touch (`GatherReads`: a problem that does not state its own minimum must
not have a correct gathering kernel judged faster than the hardware). FLOPs come from
torch.utils.flop_counter.FlopCounterMode on the reference (matmul/conv/attention; elementwise ops
count 0, so such problems are memory-bound). Peaks are optimistic on purpose (the fastest dtype
path the chip has for the inputs' dtype), so the roofline time is a true lower bound.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
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
    """Bytes of every tensor in `values` (a tensor, or nested lists and tuples of them)."""
    return sum(t.numel() * t.element_size() for t in _tensors([values]))


class GatherReads(TorchDispatchMode):
    """Within: which storages the aten ops read in full, and which only as a gather's table (with
    the bytes of the distinct rows or elements its indices touch)."""

    def __init__(self) -> None:
        super().__init__()
        self.dense: set[int] = set()
        self.gathered: dict[int, int] = {}  # storage -> bytes touched (summed over gathers, capped)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        table, touched = _gather_table(func, args)
        for t in _tensors(args) + _tensors(list(kwargs.values())):
            if t is not table:
                self.dense.add(_storage(t))
        if table is not None:
            key = _storage(table)
            full = table.untyped_storage().nbytes()
            self.gathered[key] = min(full, self.gathered.get(key, 0) + touched)
        return func(*args, **kwargs)

    def read_bytes(self, t: torch.Tensor, full: int) -> int:
        """Bytes of `t` a forward must read: all of it unless only gathers read it."""
        key = _storage(t)
        if key in self.dense or key not in self.gathered:
            return full
        return min(full, self.gathered[key])


def _storage(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def _tensors(values: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, list | tuple):
            out += _tensors(v)
    return out


_ROW_GATHERS = ("embedding", "_embedding_bag", "_embedding_bag_forward_only", "embedding_bag")


def _gather_table(func: Any, args: Any) -> tuple[torch.Tensor | None, int]:
    """(the table a gather reads, the bytes of what it touches), or (None, 0) for other ops."""
    name = func.__name__.split(".")[0]
    if name in _ROW_GATHERS and len(args) >= 2 and _is_index(args[1]) and args[0].dim() == 2:
        table, idx = args[0], args[1]
    elif name == "index_select" and len(args) >= 3 and args[1] == 0 and _is_index(args[2]):
        table, idx = args[0], args[2]
    elif name == "index" and len(args) >= 2 and args[1] and _is_index(args[1][0]) and \
            all(i is None for i in args[1][1:]):  # fmt: skip
        table, idx = args[0], args[1][0]
    elif name == "gather" and len(args) >= 3 and _is_index(args[2]):
        table, idx = args[0], args[2]
        return table, min(idx.numel(), table.numel()) * table.element_size()
    else:
        return None, 0
    rows = int(torch.unique(idx.detach().reshape(-1).cpu()).numel())
    row_bytes = table[0].numel() * table.element_size() if table.dim() > 0 and table.shape[0] else 0
    return table, rows * row_bytes


def _is_index(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.int32, torch.int64)


def problem_bytes(
    model: torch.nn.Module, inputs: list[Any], outputs: Any, reads: GatherReads | None = None
) -> int:
    """Minimum DRAM bytes of one forward: Model.roofline_bytes(inputs, outputs) where the problem
    defines it, else every input and every parameter/buffer of the model (a linear layer's weight)
    read once + every output written once; with `reads` (the reference's forward run under
    GatherReads), a tensor read only as a gather's table counts the rows its indices touch."""
    own = getattr(model, "roofline_bytes", None)
    if callable(own):
        nbytes = own(list(inputs), list(outputs) if isinstance(outputs, list | tuple) else [outputs])
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise ValueError(f"Model.roofline_bytes returned {nbytes!r}: it must return a positive int")
        return nbytes
    return _read_bytes(inputs, reads) + tensor_bytes(outputs) + model_bytes(model, reads)


def _read_bytes(values: Any, reads: GatherReads | None) -> int:
    if reads is None:
        return tensor_bytes(values)
    return sum(reads.read_bytes(t, tensor_bytes(t)) for t in _tensors([values]))


def model_bytes(model: torch.nn.Module, reads: GatherReads | None = None) -> int:
    """Bytes of the model's parameters and buffers (each tensor once, shared ones too; with `reads`,
    a gather's table counts the rows its indices touch)."""
    seen: dict[int, int] = {}
    for t in [*model.parameters(), *model.buffers()]:
        seen.setdefault(id(t), _read_bytes([t], reads))
    return sum(seen.values())


def count_flops(model: torch.nn.Module, inputs: list[Any], reads: GatherReads | None = None) -> int:
    """FLOPs of one forward of `model` by FlopCounterMode (0 for ops it does not count); with `reads`,
    the same forward also records what it gathers."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, reads if reads is not None else contextlib.nullcontext():
        model(*inputs)
    return int(counter.get_total_flops())


def problem_roofline(model: torch.nn.Module, inputs: list[Any], outputs: Any, peak: MachinePeak) -> Roofline:
    """Roofline of one forward: inputs and parameters read once + outputs written once; FLOPs from
    the reference.

    A reference that reads only part of an input (an embedding bag gathers a few rows of a large
    table) may state its own minimum with a method `roofline_bytes(inputs, outputs) -> int` on Model
    (both lists of the forward's tensors); without one, the rows its gathers touch are counted.
    """
    # the gathers are recorded only where the problem does not state its own minimum bytes
    reads = None if callable(getattr(model, "roofline_bytes", None)) else GatherReads()
    flops = count_flops(model, inputs, reads)
    nbytes = problem_bytes(model, inputs, outputs, reads)
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
