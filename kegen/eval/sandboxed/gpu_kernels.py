"""In the worker (GPU targets): the torch profiler's kernel table of one forward and the candidate's
Triton kernel names -- the reply to the evaluator's "gpu_profile" request (plain data; E checks it)."""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

import torch

from kegen.profiling.schema import KernelStat

MAX_KERNELS = 256


def triton_kernel_names(model: Any) -> set[str]:
    """Names of the @triton.jit functions defined in the candidate's module."""
    module = sys.modules.get(type(model).__module__)
    names: set[str] = set()
    for value in vars(module).values() if module else ():
        fn = value
        while hasattr(fn, "fn") and not callable(getattr(fn, "__code__", None)):
            fn = fn.fn
        if type(value).__name__ in ("JITFunction", "Autotuner", "Heuristics", "InterpretedFunction"):
            names.add(getattr(fn, "__name__", ""))
    names.discard("")
    return names


def kernel_table(model: Any, inputs: list[Any]) -> tuple[list[KernelStat], float]:
    """Kernels launched by one forward (after warm-up), from torch.profiler."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), torch.device("cuda"):
        for _ in range(2):
            model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
    groups: dict[str, list[float]] = defaultdict(list)
    for evt in prof.events():
        if getattr(evt, "device_type", None) == DeviceType.CUDA:
            groups[evt.name].append(evt.time_range.elapsed_us() * 1e-6)
    if not groups:  # older/newer layouts: kernels are the entries with their own device time
        for avg in prof.key_averages():
            own = float(getattr(avg, "self_device_time_total", 0.0) or 0.0)
            if own > 0:
                groups[avg.key] = [own * 1e-6 / max(1, avg.count)] * max(1, avg.count)
    total = sum(sum(v) for v in groups.values()) or 1.0
    stats = [KernelStat(name, len(v), sum(v), sum(v) / total) for name, v in groups.items()]
    return sorted(stats, key=lambda k: -k.total_s), total


def worker_kernel_table(model: Any, inputs: list[Any]) -> dict[str, Any]:
    """In the worker: the kernel table of one forward and the candidate's Triton kernel names (the
    reply to the evaluator's "gpu_profile" request)."""
    from kegen.eval.sandboxed.guards import OpGuard

    kernels, _ = kernel_table(model, inputs)
    return {
        "op": "gpu_kernels",
        "kernels": [[k.name, k.calls, k.total_s] for k in kernels[:MAX_KERNELS]],
        "jit_names": sorted(triton_kernel_names(model) | OpGuard.launched_kernels)[:MAX_KERNELS],
    }
