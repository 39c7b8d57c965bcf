"""Real Triton kernels for the fidelity report (tools/fidelity_report.py), lowered by kegen's mtia backend
and run on the simulator through `kernel[grid](...)`: every figure comes from a launch's LaunchResult,
re-timed with `mtia_sim.timing.simulate` for the SRAM modes (placement never changes what ran).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from lowering.backend import driver
from lowering.corpus.elementwise import vector_add
from lowering.corpus.matmul import matmul
from mtia_sim.timing import TimingResult, simulate


@triton.jit
def dot_loop(a_ptr, b_ptr, c_ptr, ITERS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             ACC: tl.constexpr):
    """DPE peak: each program loads one A and one B tile, then accumulates ITERS dots of them."""
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.zeros((BM, BN), dtype=ACC)
    for _ in range(ITERS):
        acc += tl.dot(a, b)
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PER_PROGRAM: tl.constexpr):
    """Streaming copy: each program copies PER_PROGRAM blocks of BLOCK elements."""
    pid = tl.program_id(0)
    for i in range(PER_PROGRAM):
        offs = (pid * PER_PROGRAM + i) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


DTYPES: dict[str, tuple[torch.dtype, Any, torch.dtype]] = {
    # name: (input dtype, accumulator, output dtype)
    "fp16": (torch.float16, tl.float32, torch.float32),
    "bf16": (torch.bfloat16, tl.float32, torch.float32),
    "int8": (torch.int8, tl.int32, torch.int32),
    "fp8": (torch.float8_e4m3fn, tl.float32, torch.float32),
    "fp32": (torch.float32, tl.float32, torch.float32),
}


@dataclass
class Run:
    """One real launch and its timing under each SRAM mode."""

    kernel: str
    params: dict[str, Any]
    machine: str
    result: Any  # LaunchResult (traces kept)
    timings: dict[str, TimingResult]

    def timing(self, mode: str = "cache") -> TimingResult:
        return self.timings[mode]


def _launch(fn: Any, grid: tuple[int, ...], args: list[Any], kw: dict[str, Any], name: str, machine: str,
            modes: tuple[str, ...]) -> Run:
    fn[grid](*args, **kw, machine=machine)
    res = driver.last_launch()
    m = res.timing.machine
    timings = {mode: simulate(m, res.traces, sram_mode=mode) for mode in modes}
    params = {k: v for k, v in kw.items() if isinstance(v, int | str | float)}
    return Run(name, params, m.name, res, timings)


def _tensor(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype == torch.int8:
        return torch.randint(-3, 4, shape, dtype=torch.int8, generator=gen)
    return torch.randn(shape, generator=gen).to(dtype)


def run_dot_loop(machine: str, dtype: str, *, iters: int = 256, tile: int = 128, programs: int = 64,
                 modes: tuple[str, ...] = ("resident",)) -> Run:
    """Compute-bound DPE microbenchmark on `programs` PEs."""
    in_dt, acc, out_dt = DTYPES[dtype]
    g = torch.Generator().manual_seed(0)
    a, b = _tensor((tile, tile), in_dt, g), _tensor((tile, tile), in_dt, g)
    c = torch.empty(programs * tile, tile, dtype=out_dt)
    run = _launch(dot_loop, (programs,), [a, b, c], dict(ITERS=iters, BM=tile, BN=tile, BK=tile, ACC=acc),
                  f"dot_loop_{dtype}", machine, modes)
    run.params.update(dtype=dtype, programs=programs)
    return run


def run_copy(machine: str, nbytes: int, *, programs: int, block: int = 16384, stages: int = 1,
             modes: tuple[str, ...] = ("cache",)) -> Run:
    """Stream `nbytes` of fp32 from one tensor to another with `programs` programs."""
    n = nbytes // 4
    per = max(1, -(-n // (block * programs)))
    x = torch.randn(n)
    y = torch.empty(n)
    run = _launch(copy, (programs,), [x, y, n], dict(BLOCK=block, PER_PROGRAM=per, num_stages=stages), "copy",
                  machine, modes)
    if not torch.equal(x, y):
        raise RuntimeError("copy kernel produced wrong results on the simulator")
    run.params.update(nbytes=nbytes, programs=programs)
    return run


def run_vector_add(machine: str, nbytes: int, *, block: int = 4096,
                   modes: tuple[str, ...] = ("cache",)) -> Run:
    """z = x + y over fp32 vectors; `nbytes` counts all three."""
    n = max(block, nbytes // 12)
    x, y = torch.randn(n), torch.randn(n)
    z = torch.empty(n)
    run = _launch(vector_add, (triton.cdiv(n, block),), [x, y, z, n], dict(BLOCK=block), "vector_add",
                  machine, modes)
    if not torch.allclose(z, x + y):
        raise RuntimeError("vector_add produced wrong results on the simulator")
    run.params.update(nbytes=12 * n)
    return run


def run_gemm(machine: str, n: int, *, bm: int, bk: int, stages: int,
             modes: tuple[str, ...] = ("cache", "resident")) -> Run:
    """The corpus' plain Triton fp16 GEMM (fp32 out) with block sizes and stages a search moves."""
    g = torch.Generator().manual_seed(1)
    a, b = _tensor((n, n), torch.float16, g), _tensor((n, n), torch.float16, g)
    c = torch.empty(n, n)
    grid = (triton.cdiv(n, bm), triton.cdiv(n, bm))
    run = _launch(matmul, grid, [a, b, c, n, n, n, n, 1, n, 1, n, 1],
                  dict(BM=bm, BN=bm, BK=bk, num_stages=stages), "matmul", machine, modes)
    if n <= 1024:  # a spot check of the result (bigger sizes: too slow on the host to be worth it)
        torch.testing.assert_close(c[:64], a[:64].float() @ b.float(), atol=0.1, rtol=0.02)
    run.params.update(n=n)
    return run
