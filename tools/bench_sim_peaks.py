#!/usr/bin/env python3
"""Peaks the simulated chip reaches, and the timing model's own speed; prints JSON.

    .venv/bin/python tools/bench_sim_peaks.py [--machine mtia-2i] [--real]

Synthetic mode builds program traces by hand (mtia_sim.timing.synthetic) and replays them on the
timing model: dot-product FLOP/s per operand width, DRAM/SRAM streaming with every PE, local-store
bandwidth, SIMD throughput, and events per host second of the model itself. `--real` also runs
RISC-V programs (LLVM IR compiled with llvmlite) through mtia_sim.Simulator: a DRAM stream and a
GEMM loop, functional model and timing model together.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

from mtia_sim.events import MemLevel
from mtia_sim.machine import DEFAULT_MACHINE, MachineDescription, load_machine
from mtia_sim.timing import TimingResult, simulate
from mtia_sim.timing.synthetic import dma, dram_stream, gemm_tiles, program, random_traces, simd

KB = 1024


def _frac(x: float, peak: float) -> float:
    return round(x / peak, 4)


def bench_dpe(m: MachineDescription) -> dict[str, Any]:
    out = {}
    for name, width in (("fp16", 2), ("int8", 1), ("fp32", 4)):
        r = simulate(m, gemm_tiles(m, tile=128, steps=32, dtype_bytes=width), launch_overhead=False)
        achieved = r.counters.roofline.achieved_flops
        out[name] = {"tflops": round(achieved / 1e12, 2), "peak_tflops": round(m.peak_flops(name) / 1e12, 2),
                     "fraction": _frac(achieved, m.peak_flops(name))}
    r = simulate(m, gemm_tiles(m, tile=32, steps=32), launch_overhead=False)
    small = r.counters.roofline.achieved_flops
    out["fp16_32x32x32_tiles"] = {"tflops": round(small / 1e12, 2),
                                  "fraction": _frac(small, m.peak_flops("fp16"))}
    return out


def _stream(m: MachineDescription, level: MemLevel, per_pe: int, chunk: int = 64 * KB) -> TimingResult:
    traces = [program(pe, [dma(chunk, src=level, local_addr=(i % 2) * chunk) for i in range(per_pe // chunk)])
              for pe in range(m.num_pes)]
    return simulate(m, traces, launch_overhead=False)


def bench_memory(m: MachineDescription) -> dict[str, Any]:
    dram = simulate(m, dram_stream(m, 1024 * KB), launch_overhead=False)
    dram_bw = dram.counters.bandwidth["dram"]["achieved_bw"] or 0.0
    sram = _stream(m, MemLevel.SRAM, 1024 * KB)
    sram_bw = sram.counters.bandwidth["sram"]["achieved_bw"] or 0.0
    n = 128 * KB  # local store -> local store copies on one PE: read + write traffic
    local = simulate(m, [program(0, [dma(n, src=MemLevel.LOCAL, dst=MemLevel.LOCAL, local_src_addr=0,
                                         local_addr=n) for _ in range(32)])], launch_overhead=False)
    local_bw = 2 * n * 32 / local.kernel_seconds
    return {
        "dram_stream_all_pes": {"gb_s": round(dram_bw / 1e9, 2), "peak_gb_s": m.dram_bw / 1e9,
                                "fraction": _frac(dram_bw, m.dram_bw), "pes": m.num_pes,
                                "bytes_per_pe": 1 << 20},
        "sram_stream_all_pes": {"gb_s": round(sram_bw / 1e9, 2), "peak_gb_s": m.sram_bw / 1e9,
                                "fraction": _frac(sram_bw, m.sram_bw)},
        "local_store_one_pe": {"gb_s": round(local_bw / 1e9, 2), "peak_gb_s": m.local_store_bw / 1e9,
                               "fraction": _frac(local_bw, m.local_store_bw)},
    }


def bench_simd(m: MachineDescription) -> dict[str, Any]:
    n = 64 * KB
    r = simulate(m, [program(pe, [simd(n, src=0, dst=n * 4, dtype_bytes=2) for _ in range(16)])
                     for pe in range(m.num_pes)], launch_overhead=False)
    per_cycle = 16 * n / r.kernel_cycles
    return {"elements_per_cycle_per_pe": round(per_cycle, 2), "peak": m.simd_elements_per_cycle(2),
            "fraction": _frac(per_cycle, m.simd_elements_per_cycle(2))}


def _speed(m: MachineDescription, traces: list) -> dict[str, Any]:
    """Host cost of one simulate() call: wall and CPU seconds (CPU time is robust to a busy host)."""
    w0, c0 = time.perf_counter(), time.process_time()
    r = simulate(m, traces)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"commands": len(r.commands), "events": r.events_processed, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "events_per_cpu_s": round(r.events_processed / cpu),
            "commands_per_cpu_s": round(len(r.commands) / cpu)}


def bench_model_speed(m: MachineDescription) -> dict[str, Any]:
    simulate(m, dram_stream(m, 64 * KB) + gemm_tiles(m, steps=2))  # warm up
    return {
        "random_mix_512_programs": _speed(m, random_traces(random.Random(0), m, programs=512, commands=100)),
        "dram_stream_all_pes": _speed(m, dram_stream(m, 2048 * KB, chunk=16 * KB)),
        "gemm_all_pes_no_shared_bw": _speed(m, gemm_tiles(m, tile=128, steps=200)),
    }


# ---- real RISC-V programs through the functional simulator ----------------------------------------
def _kernel_ir(commands: list[list[int | str]], prologue: list[str]) -> str:
    """A kernel that issues each descriptor (36 words; str words are SSA values) then fences all units."""
    from mtia_sim import isa

    body = ["%desc = alloca [36 x i64], align 8", *prologue]
    doorbell = f"inttoptr (i64 {isa.MMIO_BASE + isa.Reg.DOORBELL} to ptr)"
    for c, words in enumerate(commands):
        for i, w in enumerate(words):
            v = w if isinstance(w, str) else (w - (1 << 64) if w >> 63 else w)
            body += [f"%p{c}_{i} = getelementptr i64, ptr %desc, i64 {i}",
                     f"store volatile i64 {v}, ptr %p{c}_{i}"]
        body += [f"%d{c} = ptrtoint ptr %desc to i64", f"store volatile i64 %d{c}, ptr {doorbell}"]
    fence = f"inttoptr (i64 {isa.MMIO_BASE + isa.Reg.FENCE} to ptr)"
    body.append(f"store volatile i64 {int(isa.UnitMask.ALL)}, ptr {fence}")
    sig = "define void @kernel(ptr %args, i32 %pid_x, i32 %pid_y, i32 %pid_z, i32 %nx, i32 %ny, i32 %nz)"
    return "\n".join([sig + " {", "entry:", *("  " + b for b in body), "  ret void", "}", ""])


def _real_stream(sim: Any, m: MachineDescription, chunks: int = 8, chunk: int = 64 * KB) -> dict[str, Any]:
    from mtia_sim import isa
    from mtia_sim.isa import CommandDescriptor, DType, Op
    from mtia_sim.rvcompile import compile_ir

    n = chunk // 4
    prologue = ["%ap = getelementptr i64, ptr %args, i64 0", "%base = load i64, ptr %ap",
                "%pid = sext i32 %pid_x to i64", f"%off = mul i64 %pid, {chunks * chunk}",
                "%src = add i64 %base, %off"]
    cmds: list[list[int | str]] = []
    for i in range(chunks):
        prologue.append(f"%s{i} = add i64 %src, {i * chunk}")
        d = CommandDescriptor(op=Op.DMA_COPY, dtype_out=DType.F32, dtype_in0=DType.F32,
                              dst=isa.LOCAL_BASE + (i % 2) * chunk, shape=[1, 1, 1, n],
                              dst_stride=[0, 0, 0, 1], src0_stride=[0, 0, 0, 1], tag=1)
        words: list[int | str] = list(d.to_words())
        words[isa.Field.SRC0] = f"%s{i}"
        cmds.append(words)
    image = sim.load_image(compile_ir(_kernel_ir(cmds, prologue)), entry="kernel")
    src = sim.alloc(m.num_pes * chunks * chunk)
    t0 = time.perf_counter()
    res = sim.launch(image, (m.num_pes, 1, 1), [src])
    host = time.perf_counter() - t0
    sim.free(src)
    bw = res.timing.counters.bandwidth["dram"]["achieved_bw"] or 0.0
    return {"gb_s": round(bw / 1e9, 2), "fraction": _frac(bw, m.dram_bw), "programs": res.programs,
            "commands": res.commands, "instructions": res.instructions, "host_s": round(host, 3)}


def _real_gemm(sim: Any, m: MachineDescription, steps: int = 16, tile: int = 128) -> dict[str, Any]:
    from mtia_sim import isa
    from mtia_sim.isa import CommandDescriptor, DType, Flags, Op
    from mtia_sim.rvcompile import compile_ir

    a, b, c = isa.LOCAL_BASE, isa.LOCAL_BASE + tile * tile * 2, isa.LOCAL_BASE + 2 * tile * tile * 2
    d = CommandDescriptor(op=Op.DPE_MATMUL, flags=Flags.ACCUMULATE, dtype_out=DType.F32, dtype_in0=DType.F16,
                          dtype_in1=DType.F16, dst=c, src0=a, src1=b, shape=[tile, tile, tile, 1],
                          src0_stride=[tile, 0, 1, 0], src1_stride=[0, 1, tile, 0],
                          dst_stride=[tile, 1, 0, 0],
                          tag=2)
    cmds: list[list[int | str]] = [list(d.to_words()) for _ in range(steps)]
    image = sim.load_image(compile_ir(_kernel_ir(cmds, [])), entry="kernel")
    t0 = time.perf_counter()
    res = sim.launch(image, (m.num_pes, 1, 1), [])
    host = time.perf_counter() - t0
    achieved = res.timing.counters.roofline.achieved_flops
    return {"tflops": round(achieved / 1e12, 2), "fraction": _frac(achieved, m.peak_flops("fp16")),
            "fraction_with_launch": _frac(res.timing.counters.flops / res.seconds, m.peak_flops("fp16")),
            "programs": res.programs, "commands": res.commands, "host_s": round(host, 3)}


def bench_real(m: MachineDescription) -> dict[str, Any]:
    try:
        from mtia_sim import Simulator
    except ImportError as exc:
        return {"error": f"mtia_sim.Simulator unavailable: {exc}"}
    sim = Simulator(m, dram_arena_bytes=96 << 20)
    out: dict[str, Any] = {}
    for name, fn in (("dram_stream", _real_stream), ("gemm_128_fp16", _real_gemm)):
        try:
            out[name] = fn(sim, m)
        except Exception as exc:  # report, keep the synthetic figures
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", default=DEFAULT_MACHINE, help="machine description name or TOML path")
    ap.add_argument("--real", action="store_true", help="also run RISC-V programs through mtia_sim.Simulator")
    args = ap.parse_args(argv)
    m = load_machine(args.machine)
    report: dict[str, Any] = {"machine": m.name, "dpe": bench_dpe(m), "memory": bench_memory(m),
                              "simd_fp16": bench_simd(m), "timing_model_speed": bench_model_speed(m)}
    if args.real:
        report["real_programs"] = bench_real(m)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
