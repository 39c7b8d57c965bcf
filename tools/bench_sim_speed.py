"""Benchmark the simulator's host speed; prints one JSON object.

    .venv/bin/python tools/bench_sim_speed.py [--quick]

- alu_mips: simulated RISC-V instructions per host second (an integer ALU loop, one program)
- commands_per_s: unit commands per host second (a loop ringing the doorbell with a small SIMD command)
- stream_host_s_per_sim_ms: host seconds per simulated millisecond for a DMA-in / SIMD add / DMA-out
  streaming kernel over many programs (functional + timing model), and the two parts separately

Host time is process CPU time (the simulator is single-threaded), so a busy shared machine does
not inflate the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sim"))

from rv import KernelIR  # noqa: E402

from mtia_sim import Simulator, isa  # noqa: E402
from mtia_sim.isa import CommandDescriptor as D  # noqa: E402
from mtia_sim.isa import DType, Op, SimdOp  # noqa: E402


def alu_kernel() -> bytes:
    k = KernelIR()
    n = k.arg(0)
    k.emit("br label %l", "l:", "%i = phi i64 [0, %entry], [%i1, %l]", "%x = phi i64 [1, %entry], [%x2, %l]",
           "%x1 = mul i64 %x, 6364136223846793005", "%x2 = xor i64 %x1, %i", "%i1 = add i64 %i, 1",
           f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    k.reg_write(isa.Reg.PRINT, "%x2")
    return k.compile()


def command_kernel() -> bytes:
    k = KernelIR()
    n = k.arg(0)
    one = [0, 0, 0, 1]
    k.command(D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=DType.F32, dst=isa.LOCAL_BASE + 0x800,
                src0=isa.LOCAL_BASE, src1=isa.LOCAL_BASE + 0x400, shape=D.dims([256]), dst_stride=one,
                src0_stride=one, src1_stride=one))
    slot = k.allocas[-1].split(" = ")[0]
    k.emit(f"%dp = ptrtoint ptr {slot} to i64", "br label %l", "l:", "%i = phi i64 [1, %entry], [%i1, %l]")
    k.reg_write(isa.Reg.DOORBELL, "%dp")
    k.emit("%i1 = add i64 %i, 1", f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    return k.compile()


def stream_kernel(block: int) -> bytes:
    from test_programs import vector_add_kernel  # the end-to-end test's kernel

    return vector_add_kernel(block)


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller problem sizes")
    args = ap.parse_args()
    scale = 1 if args.quick else 5
    sim = Simulator("mtia-2i", dram_arena_bytes=256 << 20, max_instructions=10**10)
    out: dict[str, object] = {"machine": sim.machine.name}

    img = sim.load_image(alu_kernel(), entry="kernel")
    sim.launch(img, (1,), [1000])  # warm up (translation)
    res, dt = timed(lambda: sim.launch(img, (1,), [4_000_000 * scale]))
    out["alu_instructions"] = res.instructions
    out["alu_mips"] = round(res.instructions / dt / 1e6, 1)

    img = sim.load_image(command_kernel(), entry="kernel")
    sim.launch(img, (1,), [10])
    n_cmds = 4000 * scale
    t0 = time.process_time()
    res = sim.launch(img, (1,), [n_cmds])
    total = time.process_time() - t0
    from mtia_sim.timing import simulate

    _, timing_s = timed(lambda: simulate(sim.machine, res.traces))
    out["commands"] = res.commands
    out["commands_per_s"] = round(res.commands / total)  # functional + timing model
    out["commands_per_s_functional"] = round(res.commands / (total - timing_s))

    block = 2048
    n = block * 64 * 4 * scale
    img = sim.load_image(stream_kernel(block), entry="kernel")
    x, y, z = (sim.to_device(np.ones(n, np.float32)) for _ in range(3))
    grid = (n // block, 1, 1)
    t0 = time.process_time()
    traces = []
    res = sim.launch(img, grid, [x, y, z, n])
    total = time.process_time() - t0
    traces = res.traces
    _, timing_s = timed(lambda: simulate(sim.machine, traces))
    sim_ms = res.seconds * 1e3
    out["stream_programs"] = res.programs
    out["stream_bytes"] = 3 * 4 * n
    out["stream_simulated_ms"] = round(sim_ms, 4)
    out["stream_host_s"] = round(total, 3)
    out["stream_host_s_per_sim_ms"] = round(total / sim_ms, 2)
    out["stream_timing_model_host_s"] = round(timing_s, 3)
    out["stream_functional_host_s"] = round(total - timing_s, 3)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
