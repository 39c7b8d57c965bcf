"""Benchmark the simulator's host speed; prints one JSON object (medians over repeats).

    .venv/bin/python tools/bench_sim_speed.py [--quick] [--repeats N] [--out docs/results/sim_speed.json]
    .venv/bin/python tools/bench_sim_speed.py --functional-only   # skip the timing model (faster)

- alu_mips: simulated RISC-V instructions per host second (an integer ALU loop, one program)
- program_us: host microseconds per (empty) program: the fixed cost of a grid point
- commands: unit commands per host second for a loop ringing the doorbell with a small (256-element)
  SIMD command: `commands_per_s` end to end (functional + timing model), and each part alone
- stream_b<BLOCK>: a DMA-in / SIMD add / DMA-out streaming kernel (DRAM-bound) over many programs:
  host seconds per simulated millisecond, end to end and for each part. `warm`: the same launch
  again (its commands were seen twice before, so they replay: the steady state of repeated launches);
  `cold`: a launch after the replay plans were dropped (every command decoded and executed in full,
  as in a first launch)
- native_fraction: the share of the figure's commands the native doorbell fast path ran

Host time is process CPU time (the simulator is single-threaded), so a busy shared machine inflates
the figures less. The functional part and the timing model (`Simulator._time`) are timed apart in the
same launch, so the bottleneck is visible.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mtia_sim import Simulator, isa  # noqa: E402
from mtia_sim.isa import CommandDescriptor as D  # noqa: E402
from mtia_sim.isa import DType, Op, SimdOp  # noqa: E402
from tests.sim.rv import KernelIR  # noqa: E402


def alu_kernel() -> bytes:
    k = KernelIR()
    n = k.arg(0)
    k.emit("br label %l", "l:", "%i = phi i64 [0, %entry], [%i1, %l]", "%x = phi i64 [1, %entry], [%x2, %l]",
           "%x1 = mul i64 %x, 6364136223846793005", "%x2 = xor i64 %x1, %i", "%i1 = add i64 %i, 1",
           f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    k.reg_write(isa.Reg.PRINT, "%x2")
    return k.compile()


def empty_kernel() -> bytes:
    k = KernelIR()
    k.arg(0)
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
    from tests.sim.test_programs import vector_add_kernel  # the end-to-end test's kernel

    return vector_add_kernel(block)


class TimedLaunch:
    """Launches on `sim`, splitting host CPU time into the functional part and the timing model."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.timing_s = 0.0
        inner = sim._time

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.timing_s += time.process_time() - t

        sim._time = timed  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
        """(LaunchResult, functional CPU seconds, timing-model CPU seconds)."""
        self.timing_s = 0.0
        fast = getattr(self.sim.core, "fast", None)  # None on trees before the fast path
        before = fast.handled if fast is not None else 0
        t = time.process_time()
        res = self.sim.launch(*args, **kwargs)
        total = time.process_time() - t
        self.native_fraction = ((fast.handled - before) / max(res.commands, 1)) if fast is not None else 0.0
        return res, total - self.timing_s, self.timing_s


def _simulated_ms(block: int, grid: tuple[int, int, int], n: int) -> float:
    """Simulated milliseconds of the stream launch (a separate simulator with the timing model)."""
    ref = Simulator("mtia-2i", dram_arena_bytes=256 << 20, max_instructions=10**10)
    img = ref.load_image(stream_kernel(block), entry="kernel")
    x, y, z = (ref.to_device(np.ones(n, np.float32)) for _ in range(3))
    return float(ref.launch(img, grid, [x, y, z, n]).seconds) * 1e3


def median_of(repeats: int, fn: Callable[[], dict[str, float]]) -> dict[str, float]:
    runs = [fn() for _ in range(repeats)]
    return {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller problem sizes")
    ap.add_argument("--repeats", type=int, default=5, help="runs per figure (the median is reported)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument("--functional-only", action="store_true", help="replace the timing model by a no-op")
    args = ap.parse_args()
    scale = 1 if args.quick else 4
    sim = Simulator("mtia-2i", dram_arena_bytes=256 << 20, max_instructions=10**10)
    if args.functional_only:
        sim._time = lambda *a, **k: None  # type: ignore[method-assign]
    launch = TimedLaunch(sim)
    out: dict[str, Any] = {"machine": sim.machine.name, "repeats": args.repeats, "scale": scale,
                           "load_average_1min_start": round(os.getloadavg()[0], 2),
                           "fast_path": getattr(sim.core, "fast", None) is not None,
                           "functional_only": args.functional_only}

    img = sim.load_image(alu_kernel(), entry="kernel")
    sim.launch(img, (1,), [1000])  # warm up (translation)

    def alu() -> dict[str, float]:
        res, func, _ = launch(img, (1,), [4_000_000 * scale])
        return {"alu_mips": res.instructions / func / 1e6}

    out.update(median_of(args.repeats, alu))

    img = sim.load_image(empty_kernel(), entry="kernel")
    sim.launch(img, (64,), [0])

    def programs() -> dict[str, float]:
        n = 2000 * scale
        _, func, timing = launch(img, (n,), [0])
        return {"program_us_functional": func / n * 1e6, "program_us_timing": timing / n * 1e6}

    out.update(median_of(args.repeats, programs))

    img = sim.load_image(command_kernel(), entry="kernel")
    sim.launch(img, (1,), [10])

    def commands() -> dict[str, float]:
        res, func, timing = launch(img, (1,), [5000 * scale])
        fig = {"commands_per_s_functional": res.commands / func, "native_fraction": launch.native_fraction}
        if not args.functional_only:
            fig.update(commands_per_s=res.commands / (func + timing),
                       commands_per_s_timing=res.commands / timing)
        return fig

    out["commands"] = 5000 * scale
    figs = median_of(args.repeats, commands)
    out.update({k: (v if k == "native_fraction" else round(v)) for k, v in figs.items()})

    for block in (2048, 8192):
        n = block * 64 * 5 * scale
        img = sim.load_image(stream_kernel(block), entry="kernel")
        sim.reset_memory()
        x, y, z = (sim.to_device(np.ones(n, np.float32)) for _ in range(3))
        grid = (n // block, 1, 1)
        sim_ms = _simulated_ms(block, grid, n)

        def stream(cold: bool, sim_ms: float = sim_ms) -> dict[str, float]:
            if cold:
                sim.memory.invalidate_views()  # drop every replay plan: a first launch
            res, func, timing = launch(img, grid, [x, y, z, n])  # noqa: B023 - run right away
            fig = {"functional_host_s_per_sim_ms": func / sim_ms, "native_fraction": launch.native_fraction}
            if not args.functional_only:
                fig.update(host_s_per_sim_ms=(func + timing) / sim_ms,
                           timing_host_s_per_sim_ms=timing / sim_ms)
            return fig

        for _ in range(2):  # every command seen twice: plans built
            launch(img, grid, [x, y, z, n])
        warm = median_of(args.repeats, lambda: stream(False))
        cold = median_of(args.repeats, lambda: stream(True))
        out[f"stream_b{block}"] = {"programs": grid[0], "bytes": 3 * 4 * n, "simulated_ms": round(sim_ms, 5),
                                   "warm": warm, "cold": cold}
    out["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
