"""End to end: ordinary Triton kernels launched with kernel[grid](...) on CPU tensors run on the
simulated MTIA chip through kegen's backend, and match PyTorch."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from lowering.backend import driver
from lowering.corpus.elementwise import vector_add as add_kernel
from lowering.corpus.matmul import dot_scaled_mxfp8 as dot_scaled_kernel
from lowering.corpus.matmul import matmul as matmul_kernel

TOL = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=1e-2, rtol=1e-2),
}


@pytest.mark.parametrize("n", [1, 100, 256, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_vector_add(n: int, dtype: torch.dtype) -> None:
    x, y = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
    z = torch.full((n,), 7.0).to(dtype)
    add_kernel[(triton.cdiv(n, 128),)](x, y, z, n, BLOCK=128)
    torch.testing.assert_close(z, x + y, **TOL[dtype])
    res = driver.last_launch()
    assert res.cycles > 0 and res.seconds > 0


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    out = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + offs, out.to(y_ptr.dtype.element_ty), mask=m)


@pytest.mark.parametrize("shape", [(3, 17), (4, 64), (2, 100)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_softmax(shape: tuple[int, int], dtype: torch.dtype) -> None:
    x = torch.randn(shape).to(dtype)
    y = torch.empty_like(x)
    softmax_kernel[(shape[0],)](x, y, shape[1], x.stride(0), BLOCK=triton.next_power_of_2(shape[1]))
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), **TOL[dtype])


def _launch_matmul(
    kernel: triton.JITFunction, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **meta: int
) -> None:
    """Launch a (a, b, c, M, N, K, six strides, BM, BN, BK) matmul kernel on a grid of BM x BN tiles."""
    (M, K), N = a.shape, b.shape[1]
    grid = (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
    kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), **meta)


@pytest.mark.parametrize("mnk", [(32, 32, 32), (40, 36, 70), (17, 50, 9)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matmul_k_loop(mnk: tuple[int, int, int], dtype: torch.dtype) -> None:
    M, N, K = mnk
    a, b = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype)
    c = torch.empty(M, N, dtype=dtype)
    _launch_matmul(matmul_kernel, a, b, c, BM=16, BN=32, BK=16)
    ref = (a.float() @ b.float()).to(dtype)
    tol = dict(atol=1e-3, rtol=1e-3) if dtype == torch.float32 else dict(atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(c, ref, **tol)


def test_matmul_transposed_operand() -> None:
    M, N, K = 24, 20, 33
    a = torch.randn(K, M).t()  # column-major view: strides (1, M)
    b = torch.randn(K, N)
    c = torch.empty(M, N)
    _launch_matmul(matmul_kernel, a, b, c, BM=16, BN=32, BK=16)
    torch.testing.assert_close(c, a @ b, atol=1e-3, rtol=1e-3)


@triton.jit
def reduce_rows_kernel(x_ptr, s_ptr, mx_ptr, mn_ptr, am_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BR + tl.arange(0, BR)
    cols = tl.arange(0, BC)
    m = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
    s = tl.sum(x, axis=1)
    xm = tl.where(m, x, -float("inf"))
    tl.store(s_ptr + rows, s, mask=rows < R)
    tl.store(mx_ptr + rows, tl.max(xm, axis=1), mask=rows < R)
    tl.store(mn_ptr + rows, tl.min(tl.where(m, x, float("inf")), axis=1), mask=rows < R)
    tl.store(am_ptr + rows, tl.argmax(xm, axis=1), mask=rows < R)


@pytest.mark.parametrize("shape", [(5, 7), (16, 32), (9, 33)])
def test_row_reductions(shape: tuple[int, int]) -> None:
    R, C = shape
    x = torch.randn(R, C)
    s, mx, mn = torch.empty(R), torch.empty(R), torch.empty(R)
    am = torch.empty(R, dtype=torch.int32)
    reduce_rows_kernel[(triton.cdiv(R, 4),)](x, s, mx, mn, am, R, C, BR=4, BC=triton.next_power_of_2(C))
    torch.testing.assert_close(s, x.sum(1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(mx, x.max(1).values)
    torch.testing.assert_close(mn, x.min(1).values)
    torch.testing.assert_close(am, x.argmax(1).to(torch.int32))


@triton.jit
def col_sum_cumsum_kernel(x_ptr, cs_ptr, cum_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.arange(0, BR)
    cols = tl.arange(0, BC)
    m = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
    tl.store(cs_ptr + cols, tl.sum(x, axis=0), mask=cols < C)
    tl.store(cum_ptr + rows[:, None] * C + cols[None, :], tl.cumsum(x, axis=1), mask=m)


def test_column_sum_and_cumsum() -> None:
    R, C = 6, 10
    x = torch.randn(R, C)
    cs, cum = torch.empty(C), torch.empty(R, C)
    col_sum_cumsum_kernel[(1,)](x, cs, cum, R, C, BR=8, BC=16)
    torch.testing.assert_close(cs, x.sum(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(cum, x.cumsum(1), atol=1e-4, rtol=1e-4)


@triton.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    v = tl.load(src_ptr + idx, mask=m, other=0.0)
    tl.store(out_ptr + idx, v * 2.0 + 1.0, mask=m)


def test_indirect_gather_scatter() -> None:
    n = 77
    src = torch.randn(200)
    idx = torch.randperm(200)[:n].to(torch.int32)
    out = torch.zeros(200)
    gather_kernel[(triton.cdiv(n, 32),)](src, idx, out, n, BLOCK=32)
    ref = torch.zeros(200)
    ref[idx.long()] = src[idx.long()] * 2 + 1
    torch.testing.assert_close(out, ref)


@triton.jit
def scalar_loop_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    first = tl.load(x_ptr)  # a scalar load on the core
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    total = tl.sum(acc, axis=0) * scale + first
    if total > 0:
        tl.store(out_ptr, total)
    else:
        tl.store(out_ptr, -total)


def test_scalar_control_flow() -> None:
    for sign in (1.0, -1.0):
        x = torch.randn(90) + sign
        out = torch.zeros(1)
        scalar_loop_kernel[(1,)](x, out, 90, 0.5, BLOCK=32)
        t = x.sum() * 0.5 + x[0]
        torch.testing.assert_close(out[0], t.abs(), atol=1e-4, rtol=1e-4)


@triton.jit
def while_kernel(out_ptr, n):
    i = 0
    acc = 0
    while i < n:
        acc += i * i
        i += 1
    tl.store(out_ptr, acc)


def test_while_loop() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    while_kernel[(1,)](out, 10)
    assert int(out[0]) == sum(i * i for i in range(10))


@triton.jit
def atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def test_atomic_add_across_programs() -> None:
    x = torch.randn(300)
    out = torch.zeros(1)
    atomic_kernel[(triton.cdiv(300, 64),)](x, out, 300, BLOCK=64)
    torch.testing.assert_close(out[0], x.sum(), atol=1e-4, rtol=1e-4)


@triton.jit
def transpose_kernel(x_ptr, y_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=m)
    xt = tl.trans(x)
    tl.store(y_ptr + cols[:, None] * R + rows[None, :], tl.sqrt(tl.abs(xt)) + 1.0, mask=tl.trans(m))


def test_transpose_and_math() -> None:
    R, C = 19, 23
    x = torch.randn(R, C)
    y = torch.empty(C, R)
    transpose_kernel[(triton.cdiv(R, 8), triton.cdiv(C, 16))](x, y, R, C, BR=8, BC=16)
    torch.testing.assert_close(y, x.abs().sqrt().t() + 1.0)


@triton.jit
def mixed_ops_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.load(y_ptr + offs, mask=m, other=1).to(tl.float32)
    z = tl.where(x > 0, x * y, tl.exp(x) - 1.0)
    z = tl.maximum(z, -0.5) + tl.sigmoid(x) + (offs % 3).to(tl.float32)
    tl.store(out_ptr + offs, z, mask=m)


def test_mixed_elementwise_int_float() -> None:
    n = 150
    x = torch.randn(n)
    y = torch.randint(-5, 5, (n,), dtype=torch.int32)
    out = torch.empty(n)
    mixed_ops_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    yf = y.float()
    ref = torch.where(x > 0, x * yf, torch.exp(x) - 1.0)
    ref = torch.maximum(ref, torch.tensor(-0.5)) + torch.sigmoid(x) + (torch.arange(n) % 3).float()
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


@triton.jit
def many_functions_kernel(x_ptr, i_ptr, o_ptr, oi_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.5)
    i = tl.load(i_ptr + offs, mask=m, other=1)
    a = tl.clamp(x, -0.5, 0.5) + tl.sigmoid(x) + tl.math.floor(x) + tl.math.ceil(x) + tl.math.fma(x, x, x)
    a += tl.math.erf(x) + tl.math.log2(tl.abs(x) + 1) + tl.math.exp2(x) + tl.math.cos(x) + tl.math.sin(x)
    a += (
        tl.math.rsqrt(tl.abs(x) + 1)
        + tl.math.div_rn(x, 3.0)
        + tl.softmax(x)
        + tl.full((BLOCK,), 2.0, tl.float32)
    )
    a += tl.sum(tl.zeros_like(x)) + tl.xor_sum(i, 0).to(tl.float32) + tl.min(i, 0).to(tl.float32)
    a = tl.where(m, a, 0.0)
    j = (
        (i // 3)
        + (i % 5)
        + (i << 2)
        + (i >> 1)
        + (~i)
        + (i ^ 7)
        + tl.umulhi(i.to(tl.uint32), 12345).to(tl.int32)
    )
    j += tl.maximum(i, 2) + tl.minimum(i, -2) + tl.cdiv(n, 7) + tl.flip(i, 0)
    s = tl.sort(x)
    tl.store(o_ptr + offs, a + s * 0.0, mask=m)
    tl.store(oi_ptr + offs, j, mask=m)


def test_many_tl_functions() -> None:
    import numpy as np

    n = 32
    x = torch.randn(n)
    i = torch.randint(-20, 20, (n,), dtype=torch.int32)
    o, oi = torch.empty(n), torch.empty(n, dtype=torch.int32)
    many_functions_kernel[(1,)](x, i, o, oi, n, BLOCK=32)
    a = x.clamp(-0.5, 0.5) + torch.sigmoid(x) + x.floor() + x.ceil() + x * x + x
    a += torch.erf(x) + torch.log2(x.abs() + 1) + torch.exp2(x) + torch.cos(x) + torch.sin(x)
    a += torch.rsqrt(x.abs() + 1) + x / 3.0 + torch.softmax(x, 0) + 2.0
    xs = 0
    for v in i.tolist():
        xs ^= v
    a += xs + i.min().float()
    torch.testing.assert_close(o, a, atol=1e-4, rtol=1e-4)
    ii = i.long()
    umul = torch.tensor((i.numpy().astype(np.uint32).astype(np.uint64) * 12345 >> 32).astype(np.int64))
    j = (
        torch.div(ii, 3, rounding_mode="trunc")
        + torch.fmod(ii, 5)
        + (ii << 2)
        + (ii >> 1)
        + (~ii)
        + (ii ^ 7)
        + umul
    )
    j += torch.clamp(ii, min=2) + torch.clamp(ii, max=-2) + (n + 6) // 7 + ii.flip(0)
    assert torch.equal(oi.long(), j)


@triton.jit
def matmul_tutorial_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    """The Triton tutorial's form: pointer tensors carried through the K loop (`ptrs += BK * s`)."""
    offs_am = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_bn = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_am[:, None] * sam + offs_k[None, :] * sak)
    b_ptrs = b_ptr + (offs_k[:, None] * sbk + offs_bn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_bn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + scm * offs_am[:, None] + scn * offs_bn[None, :]
    tl.store(c_ptrs, acc, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


@pytest.mark.parametrize("mnk", [(32, 32, 64), (50, 40, 70)])
def test_matmul_tutorial_carried_pointers(mnk: tuple[int, int, int]) -> None:
    M, N, K = mnk
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.empty(M, N)
    _launch_matmul(matmul_tutorial_kernel, a, b, c, BM=32, BN=32, BK=32, num_stages=2)
    torch.testing.assert_close(c, a @ b, atol=1e-3, rtol=1e-3)


@triton.jit
def layernorm_stats_kernel(x_ptr, y_ptr, mean_ptr, rstd_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / n  # scalar arithmetic on a reduction result stays on the units
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(y_ptr + row * n + offs, d * rstd, mask=m)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def test_deferred_scalars_layernorm_stats() -> None:
    R, C = 3, 37
    x = torch.randn(R, C)
    y, mean, rstd = torch.empty(R, C), torch.empty(R), torch.empty(R)
    layernorm_stats_kernel[(R,)](x, y, mean, rstd, C, 1e-5, BLOCK=64)
    mu = x.mean(1)
    var = x.var(1, unbiased=False)
    torch.testing.assert_close(mean, mu, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rstd, 1 / torch.sqrt(var + 1e-5), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(y, (x - mu[:, None]) / torch.sqrt(var[:, None] + 1e-5), atol=1e-4, rtol=1e-4)


def test_reduction_results_never_stall_the_core() -> None:
    """Scalars from reductions feed later commands in the local store: no fence in the code."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mtia_sim.isa import MMIO_BASE, Reg

    sig = {
        "x_ptr": "*fp32",
        "y_ptr": "*fp32",
        "mean_ptr": "*fp32",
        "rstd_ptr": "*fp32",
        "n": "i32",
        "eps": "fp32",
        "BLOCK": "constexpr",
    }
    k = triton.compile(
        ASTSource(layernorm_stats_kernel, sig, {"BLOCK": 64}), target=GPUTarget("mtia", "2i", 1)
    )
    assert f"inttoptr (i64 {MMIO_BASE + Reg.FENCE} to ptr)" not in k.asm["llir"]
    assert f"inttoptr (i64 {MMIO_BASE + Reg.DOORBELL} to ptr)" in k.asm["llir"]


def test_dot_scaled_mxfp8() -> None:
    M, N, K = 16, 16, 64
    a = (torch.randn(M, K) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(K, N) * 2).to(torch.float8_e4m3fn)
    sa = torch.randint(124, 130, (M, K // 32), dtype=torch.uint8)
    sb = torch.randint(124, 130, (N, K // 32), dtype=torch.uint8)
    c = torch.empty(M, N)
    dot_scaled_kernel[(1,)](a, sa, b, sb, c, BM=M, BN=N, BK=K)
    af = a.float() * torch.exp2(sa.float() - 127).repeat_interleave(32, dim=1)
    bf = b.float() * torch.exp2(sb.float() - 127).repeat_interleave(32, dim=1).t()
    torch.testing.assert_close(c, af @ bf, atol=1e-3, rtol=1e-3)


@triton.jit
def assert_kernel(x_ptr, R: tl.constexpr, C: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])
    tl.device_assert(x >= 0, "negative input")


def test_device_assert_checks_every_element() -> None:
    import triton.knobs as knobs

    from mtia_sim.errors import SimulationError

    old = knobs.runtime.debug
    knobs.runtime.debug = True
    try:
        x = torch.ones(4, 8)
        assert_kernel[(1,)](x, R=4, C=8)  # passes
        x[3, 5] = -1.0  # not in row 0 nor column 0
        with pytest.raises(SimulationError):
            assert_kernel[(1,)](x, R=4, C=8)
    finally:
        knobs.runtime.debug = old
