"""GPU profile: the torch profiler's kernel table, plus ncu's key metrics where ncu works.

ncu runs the worker again under `ncu --csv --page raw` in mode "ncu" (one forward of the candidate),
restricted to the candidate's own Triton kernels, and its per-kernel metrics become the profile's
metrics, units and stalls.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from kegen.eval.config import EvalConfig
from kegen.profiling.bottleneck import profile_bottleneck
from kegen.profiling.schema import KernelStat, MemoryLevelStat, Profile, UnitStat

NCU_TIMEOUT_S = 180
STALLS = (
    "long_scoreboard",
    "short_scoreboard",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "wait",
    "barrier",
    "not_selected",
    "no_instruction",
    "drain",
    "membar",
    "dispatch_stall",
    "branch_resolving",
    "imc_miss",
    "tex_throttle",
    "sleeping",
    "selected",
)
NCU_METRICS = {
    "gpu__time_duration.sum": "time_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_bw_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "dram__bytes.sum": "dram_bytes",
    **{f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio": f"stall:{s}" for s in STALLS},
}
# Kernels of compute libraries: a candidate that launches these computes with library ops.
LIBRARY_KERNEL = re.compile(
    r"gemm|cublas|cutlass|cudnn|nvjet|xmma|softmax|layer_norm|conv|reduce_kernel|"
    r"sgemm|hgemm|flash",
    re.IGNORECASE,
)


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

    with torch.no_grad():
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


def collect(
    model: Any,
    inputs: list[Any],
    time_s: float,
    roofline: dict[str, Any],
    config: EvalConfig,
    job: Any,
    *,
    full: bool,
) -> Profile:
    """The unified profile on a GPU."""
    prof = Profile(
        target=config.target, device=torch.cuda.get_device_name(), time_s=time_s, roofline=roofline
    )
    from kegen.eval.cheats import OpGuard

    jit_names = triton_kernel_names(model) | OpGuard.launched_kernels
    try:
        prof.kernels, total = kernel_table(model, inputs)
        prof.sources.append("torch.profiler")
        prof.metrics["kernel_time_s"] = total
        prof.metrics["launches"] = float(sum(k.calls for k in prof.kernels))
        library = [k.name for k in prof.kernels if k.name not in jit_names and LIBRARY_KERNEL.search(k.name)]
        if library:
            prof.notes.append("library kernels in the candidate's forward: " + ", ".join(library[:4]))
            prof.raw["library_kernels"] = library
    except Exception as exc:
        prof.notes.append(f"torch profiler failed: {type(exc).__name__}: {exc}")
    prof.metrics["time_s"] = time_s
    if roofline.get("bytes") and time_s:
        prof.metrics["achieved_dram_bw"] = roofline["bytes"] / time_s
        if roofline.get("flops"):
            prof.metrics["achieved_flops"] = roofline["flops"] / time_s
    if roofline.get("fraction") is not None:
        prof.metrics["roofline_fraction"] = float(roofline["fraction"])
    want_ncu = full or bool(config.extra.get("ncu"))
    if want_ncu and config.target == "nvidia":
        _add_ncu(prof, job, jit_names)
    prof.bottleneck = profile_bottleneck(prof)
    return prof


def _add_ncu(prof: Profile, job: Any, jit_names: set[str]) -> None:
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)
    if ncu is None:
        prof.notes.append("ncu not found: no hardware metrics (install Nsight Compute for them)")
        return
    rows, err = run_ncu(ncu, job, jit_names)
    if err:
        prof.notes.append(f"ncu did not work here: {err}")
        return
    prof.sources.append("ncu")
    prof.raw["ncu"] = rows
    merge_ncu(prof, rows)


def run_ncu(ncu: str, job: Any, jit_names: set[str]) -> tuple[list[dict[str, Any]], str | None]:
    with tempfile.TemporaryDirectory(prefix="kegen-ncu-") as tmp:
        req = {
            "mode": "ncu",
            "problem": str(job.problem),
            "candidate": str(job.candidate),
            "baseline": None,
            "config": {**job.config.to_dict(), "profile": False},
        }
        req_path, res_path = Path(tmp, "req.json"), Path(tmp, "res.json")
        req_path.write_text(json.dumps(req))
        cmd = [ncu, "--csv", "--page", "raw", "--target-processes", "all", "--metrics", ",".join(NCU_METRICS)]
        if jit_names:
            cmd += ["--kernel-name", "regex:" + "|".join(sorted(jit_names))]
        cmd += [sys.executable, "-m", "kegen.eval.worker", str(req_path), str(res_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [], f"timed out after {NCU_TIMEOUT_S} s"
        rows = parse_ncu_csv(proc.stdout)
        if not rows:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return [], " | ".join(tail) or f"exit code {proc.returncode}"
        return rows, None


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of `ncu --csv --page raw` (header, units, then one row per kernel launch)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return []
    reader = list(csv.reader(lines))
    header, rows = reader[0], reader[2:]
    out = []
    for row in rows:
        rec: dict[str, Any] = {"kernel": row[header.index("Kernel Name")] if "Kernel Name" in header else "?"}
        for metric, key in NCU_METRICS.items():
            if metric in header:
                rec[key] = _number(row[header.index(metric)])
        out.append(rec)
    return out


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def merge_ncu(prof: Profile, rows: list[dict[str, Any]]) -> None:
    """Time-weighted averages of ncu's per-launch metrics into the profile."""
    weights = [r.get("time_ns") or 1.0 for r in rows]
    total = sum(weights)

    def avg(key: str) -> float | None:
        vals = [(float(r[key]), w) for r, w in zip(rows, weights, strict=True) if r.get(key) is not None]
        return sum(v * w for v, w in vals) / sum(w for _, w in vals) if vals else None

    for key in ("dram_bw_pct", "sm_throughput_pct", "occupancy_pct", "l2_hit_rate_pct"):
        v = avg(key)
        if v is not None:
            prof.metrics[key] = v
    prof.metrics["ncu_kernel_time_s"] = total * 1e-9
    dram = sum(r.get("dram_bytes") or 0.0 for r in rows)
    if dram:
        prof.metrics["dram_bytes"] = dram
    sm_util = (prof.metrics.get("sm_throughput_pct") or 0) / 100
    dram_util = (prof.metrics.get("dram_bw_pct") or 0) / 100
    prof.units = [  # a GPU's units are all active: chip-wide and active-PE utilisation coincide
        UnitStat("SM", utilization=sm_util, utilization_active=sm_util),
        UnitStat("DRAM", utilization=dram_util, utilization_active=dram_util),
    ]
    kernel_s = total * 1e-9
    prof.memory = [
        MemoryLevelStat(
            "dram",
            bytes_read=dram,  # ncu's dram__bytes.sum counts reads and writes together
            achieved_bw=dram / kernel_s if dram and kernel_s else None,
            compulsory_bytes=float(prof.roofline["bytes"]) if prof.roofline.get("bytes") else None,
        )
    ]
    hit = prof.metrics.get("l2_hit_rate_pct")
    if hit is not None:
        prof.memory.append(MemoryLevelStat("l2", hit_rate=hit / 100))
    if dram and prof.roofline.get("bytes"):
        prof.metrics["compulsory_dram_bytes"] = float(prof.roofline["bytes"])
        prof.metrics["dram_excess"] = dram / float(prof.roofline["bytes"])
    stalls = {k.removeprefix("stall:"): avg(k) for k in NCU_METRICS.values() if k.startswith("stall:")}
    stalls.pop("selected", None)  # issuing, not stalled
    total_stall = sum(v for v in stalls.values() if v)
    if total_stall:
        prof.stalls = {
            k: v / total_stall for k, v in sorted(stalls.items(), key=lambda kv: -(kv[1] or 0)) if v
        }
        prof.stall_shares = dict(prof.stalls)  # share of all warp-stall cycles
