"""GPU profile: the torch profiler's kernel table, plus ncu's key metrics where the operator reads them.

Two pieces, both outside the verdict (a profile never changes a status or a time):

* the kernel table: the evaluator asks the candidate's worker for one extra forward under
  torch.profiler (`kernel_pass` in the evaluator, `worker_kernel_table` in the worker); the reply
  is plain data, checked and capped. Cheap (a few forwards), so every profile has it unless
  `gpu_profile="timing"`.
* ncu: a separate process runs the candidate's forward under `ncu --csv --page raw` (mode "ncu" of
  `python -m kegen.eval.sandboxed.worker`), restricted to the candidate's Triton kernels and to its second
  forward (cudaProfilerStart/Stop: the first one compiles and autotunes). Costs 10-30 s, so with
  `gpu_profile="auto"` (the search's default) it runs only for a candidate that improves: faster
  than `extra["ncu_if_faster_than"]` seconds when the caller says, else than every earlier
  candidate of the problem in this process (`kegen.eval.trusted.memo`). `kegen eval`/`kegen profile`
  ("full") always run it; `kegen profile` re-runs a stored candidate when its metrics are wanted.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kegen.eval.config import EvalConfig
from kegen.eval.sandboxed.gpu_kernels import MAX_KERNELS, kernel_table, triton_kernel_names  # noqa: F401
from kegen.eval.trusted import memo
from kegen.profiling.bottleneck import profile_bottleneck
from kegen.profiling.schema import KernelStat, MemoryLevelStat, Profile, UnitStat

if TYPE_CHECKING:
    from kegen.eval.inputs import InputFactory
    from kegen.eval.trusted.evaluator import Evaluator
    from kegen.eval.trusted.session import WorkerSession

NCU_TIMEOUT_S = 180.0
NCU_MIN_TIMEOUT_S = 60.0
NCU_PATHS = ("/usr/local/cuda/bin/ncu",)
NCU_MIN_GAIN = 0.02  # "auto": ncu for a candidate at least this much faster than the best so far
# The kernel table of an evaluation between its worker pass and its profile (or why there is none).
_tables: weakref.WeakKeyDictionary[Evaluator, tuple[list[KernelStat], set[str]] | str] = (
    weakref.WeakKeyDictionary()
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
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


def parse_kernel_reply(reply: dict[str, Any]) -> tuple[list[KernelStat], set[str]]:
    """The worker's kernel table as plain, bounded data (it is the candidate's process: never trusted
    beyond a profile)."""
    stats: list[KernelStat] = []
    for row in list(reply.get("kernels") or [])[:MAX_KERNELS]:
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
            continue
        try:
            calls, total = int(row[1]), float(row[2])
        except (TypeError, ValueError):
            continue
        if calls >= 0 and math.isfinite(total) and total >= 0:
            stats.append(KernelStat(row[0][:200], calls, total, 0.0))
    whole = sum(k.total_s for k in stats) or 1.0
    stats = [KernelStat(k.name, k.calls, k.total_s, k.total_s / whole) for k in stats]
    names = {
        n for n in list(reply.get("jit_names") or [])[:MAX_KERNELS] if isinstance(n, str) and _IDENT.match(n)
    }
    return sorted(stats, key=lambda k: -k.total_s), names


def kernel_pass(ev: Evaluator, factory: InputFactory, session: WorkerSession) -> None:
    """While the candidate's worker is open: its kernel table (kept for `build_profile`), unless the profile
    is off or `gpu_profile="timing"`. A failure here is a note in the profile, never a verdict."""
    _tables.pop(ev, None)
    if not ev.gpu or profile_level(ev) == "timing" or not (ev.cfg.profile or ev.mode == "profile"):
        return
    from kegen.eval.errors import CandidateError
    from kegen.eval.wire import encode_values

    try:
        metas, blobs = encode_values(factory.make(ev.seed()))
        reply, _ = session.request({"op": "gpu_profile", "inputs": metas}, blobs)
    except CandidateError as exc:
        _tables[ev] = f"kernel table not collected: {exc.status}: {exc.message[:300]}"
        return
    except Exception as exc:  # the profile is optional: never the verdict's business
        _tables[ev] = f"kernel table not collected: {type(exc).__name__}: {str(exc)[:300]}"
        return
    if reply.get("op") != "gpu_kernels":
        _tables[ev] = f"kernel table not collected: the worker replied {str(reply.get('op'))[:40]!r}"
        return
    _tables[ev] = parse_kernel_reply(reply)
    ev.mark("kernel_table")


def profile_level(ev: Evaluator) -> str:
    """ "full", "auto" or "timing": `kegen profile` and `extra["ncu"]` ask for everything."""
    if ev.mode == "profile" or ev.cfg.extra.get("ncu"):
        return "full"
    return ev.cfg.gpu_profile


def want_ncu(ev: Evaluator, time_s: float) -> tuple[bool, str]:
    """Whether this evaluation runs ncu, and why not. Records `time_s` as the problem's best so far."""
    level = profile_level(ev)
    key = memo.problem_key(ev, "best-candidate")
    best = memo.best_time(key)
    memo.record_time(key, time_s)
    if ev.cfg.target != "nvidia":
        return False, f"ncu is for NVIDIA GPUs (target {ev.cfg.target})"
    if level == "timing":
        return False, "no kernel-level profile (gpu_profile=timing)"
    if level == "full":
        return True, ""
    limit = ev.cfg.extra.get("ncu_if_faster_than")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit >= 0:  # 0: never
        if time_s < limit:
            return True, ""
        return False, (
            f"ncu skipped (gpu_profile=auto): {time_s * 1e6:.2f} us is not faster than "
            f"{limit * 1e6:.2f} us; `kegen profile --target nvidia` collects its hardware metrics"
        )
    if best is None or time_s < best * (1.0 - NCU_MIN_GAIN):
        return True, ""
    return False, (
        f"ncu skipped (gpu_profile=auto): {time_s * 1e6:.2f} us does not improve on the best "
        f"{best * 1e6:.2f} us of this problem; `kegen profile --target nvidia` collects its hardware metrics"
    )


def build_profile(ev: Evaluator, time_s: float, roofline: dict[str, Any]) -> Profile:
    """The unified GPU profile of an evaluation: events' time, the roofline, the worker's kernel
    table and, where `want_ncu` says so, ncu's metrics."""
    prof = Profile(
        target=ev.cfg.target,
        device=str(ev.result.get("machine", "")),
        time_s=time_s,
        roofline=roofline,
        sources=["cuda events (worker)"],
    )
    table = _tables.pop(ev, None)
    jit_names: set[str] = set()
    if isinstance(table, tuple):
        prof.kernels, jit_names = table
        prof.sources.append("torch.profiler")
        prof.metrics["kernel_time_s"] = sum(k.total_s for k in prof.kernels)
        prof.metrics["launches"] = float(sum(k.calls for k in prof.kernels))
        library = [k.name for k in prof.kernels if k.name not in jit_names and LIBRARY_KERNEL.search(k.name)]
        if library:
            prof.notes.append("library kernels in the candidate's forward: " + ", ".join(library[:4]))
            prof.raw["library_kernels"] = library
    elif isinstance(table, str):
        prof.notes.append(table)
    prof.metrics["time_s"] = time_s
    if roofline.get("bytes") and time_s:
        prof.metrics["achieved_dram_bw"] = roofline["bytes"] / time_s
        if roofline.get("flops"):
            prof.metrics["achieved_flops"] = roofline["flops"] / time_s
    if roofline.get("fraction") is not None:
        prof.metrics["roofline_fraction"] = float(roofline["fraction"])
    run, why = want_ncu(ev, time_s)
    ev.result["details"]["ncu"] = "ran" if run else why
    if run:
        _add_ncu(prof, ev, jit_names)
    elif why:
        prof.notes.append(why)
    prof.bottleneck = profile_bottleneck(prof)
    return prof


def _add_ncu(prof: Profile, ev: Evaluator, jit_names: set[str]) -> None:
    ncu = shutil.which("ncu") or next((p for p in NCU_PATHS if os.path.exists(p)), None)
    if ncu is None:
        prof.notes.append("ncu not found: no hardware metrics (install Nsight Compute for them)")
        return
    t0 = time.monotonic()
    timeout = max(NCU_MIN_TIMEOUT_S, min(NCU_TIMEOUT_S, ev.deadline - t0))
    try:
        rows, err = run_ncu(ncu, ev.problem_path, ev.candidate, ev.cfg, jit_names, timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        rows, err = [], f"{type(exc).__name__}: {exc}"
    ev.result["details"]["ncu_wall_s"] = round(time.monotonic() - t0, 3)
    if err:
        prof.notes.append(f"ncu did not work here: {err}")
        return
    prof.sources.append("ncu")
    prof.raw["ncu"] = rows
    merge_ncu(prof, rows)


def ncu_command(ncu: str, jit_names: set[str], request: Path, result: Path) -> list[str]:
    """ncu over one plain forward of the candidate (`python -m kegen.eval.sandboxed.worker`): only the
    candidate's Triton kernels, only inside cudaProfilerStart/Stop (its second forward)."""
    cmd = [ncu, "--csv", "--page", "raw", "--target-processes", "all", "--profile-from-start", "off"]
    cmd += ["--clock-control", "none"]  # the clocks the timed runs had, not locked base clocks
    cmd += ["--metrics", ",".join(NCU_METRICS)]
    names = sorted(n for n in jit_names if _IDENT.match(n))
    if names:
        cmd += ["--kernel-name", "regex:" + "|".join(names)]
    return cmd + [sys.executable, "-m", "kegen.eval.sandboxed.worker", str(request), str(result)]


def run_ncu(
    ncu: str, problem: Path, candidate: Path, config: EvalConfig, jit_names: set[str], timeout_s: float
) -> tuple[list[dict[str, Any]], str | None]:
    """ncu's per-launch rows for the candidate's forward, or ([], why not)."""
    from kegen.eval.trusted import compile_cache

    with tempfile.TemporaryDirectory(prefix="kegen-ncu-") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # kegen as this process finds it
        key = compile_cache.cache_key(candidate, config.target, config.machine)
        if compile_cache.seed_job(key, Path(tmp)):  # the worker's kernels: no second compile
            env["TRITON_CACHE_DIR"] = str(Path(tmp, compile_cache.SEED_DIR))
        req = {
            "mode": "ncu",
            "problem": str(problem),
            "candidate": str(candidate),
            "baseline": None,
            "config": {**config.to_dict(), "profile": False},
        }
        req_path, res_path = Path(tmp, "req.json"), Path(tmp, "res.json")
        req_path.write_text(json.dumps(req))
        proc = subprocess.Popen(
            ncu_command(ncu, jit_names, req_path, res_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # ncu and the forward it runs are killed together
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return [], f"timed out after {timeout_s:.0f} s"
        rows = parse_ncu_csv(out)
        if not rows:
            tail = (out + err).strip().splitlines()[-3:]
            return [], " | ".join(tail) or f"exit code {proc.returncode}"
        return rows, None


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.communicate()


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
