"""Row-wise kernels: fused softmax, layer norm and RMS norm (forward and backward)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry

M, N = 6, 50  # rows, columns (not a power of two: masked)
BLOCK_N = 64
EPS = 1e-5


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@triton.jit
def softmax_fwd(x_ptr, y_ptr, stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride + cols, num / den, mask=mask)


def _rows(seed: int) -> Args:
    g = gen(seed)
    return {"x_ptr": torch.randn(M, N, generator=g), "y_ptr": torch.zeros(M, N), "stride": N, "n_cols": N}


SOFTMAX = CorpusEntry(
    "fused_softmax",
    softmax_fwd,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "stride": "i32", "n_cols": "i32"},
    {"BLOCK_N": BLOCK_N},
    _rows,
    (M,),
    lambda a: {"y_ptr": torch.softmax(a["x_ptr"], dim=1)},
    ("y_ptr",),
    ("tt.reduce", "max", "sum", "-inf other"),
    atol=1e-5,
)


@triton.jit
def layernorm_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, xc * rstd * w + b, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def _ln_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(M, N, generator=g),
        "w_ptr": torch.randn(N, generator=g),
        "b_ptr": torch.randn(N, generator=g),
        "y_ptr": torch.zeros(M, N),
        "mean_ptr": torch.zeros(M),
        "rstd_ptr": torch.zeros(M),
        "stride": N,
        "n_cols": N,
        "eps": EPS,
    }


def _ln_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"]
    mean = x.mean(1)
    var = x.var(1, unbiased=False)
    rstd = 1 / torch.sqrt(var + EPS)
    y = torch.nn.functional.layer_norm(x, (N,), a["w_ptr"], a["b_ptr"], EPS)
    return {"y_ptr": y, "mean_ptr": mean, "rstd_ptr": rstd}


LAYERNORM_FWD = CorpusEntry(
    "layernorm_fwd",
    layernorm_fwd,
    {
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "b_ptr": "*fp32",
        "y_ptr": "*fp32",
        "mean_ptr": "*fp32",
        "rstd_ptr": "*fp32",
        "stride": "i32",
        "n_cols": "i32",
        "eps": "fp32",
    },
    {"BLOCK_N": BLOCK_N},
    _ln_args,
    (M,),
    _ln_ref,
    ("y_ptr", "mean_ptr", "rstd_ptr"),
    ("tt.reduce", "scalar-store", "sqrt"),
    atol=1e-4,
)


@triton.jit
def layernorm_bwd(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride, n_cols, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = w * dy
    c1 = tl.sum(xhat * wdy, axis=0) / n_cols
    c2 = tl.sum(wdy, axis=0) / n_cols
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(dx_ptr + row * stride + cols, dx, mask=mask)
    tl.atomic_add(dw_ptr + cols, dy * xhat, mask=mask)
    tl.atomic_add(db_ptr + cols, dy, mask=mask)


def _lnb_args(seed: int) -> Args:
    g = gen(seed)
    x = torch.randn(M, N, generator=g)
    mean = x.mean(1)
    rstd = 1 / torch.sqrt(x.var(1, unbiased=False) + EPS)
    return {
        "dy_ptr": torch.randn(M, N, generator=g),
        "x_ptr": x,
        "w_ptr": torch.randn(N, generator=g),
        "mean_ptr": mean,
        "rstd_ptr": rstd,
        "dx_ptr": torch.zeros(M, N),
        "dw_ptr": torch.zeros(N),
        "db_ptr": torch.zeros(N),
        "stride": N,
        "n_cols": N,
    }


def _lnb_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"].clone().requires_grad_(True)
    w = a["w_ptr"].clone().requires_grad_(True)
    b = torch.zeros(N, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (N,), w, b, EPS)
    y.backward(a["dy_ptr"])
    assert x.grad is not None and w.grad is not None and b.grad is not None
    return {"dx_ptr": x.grad, "dw_ptr": w.grad, "db_ptr": b.grad}


LAYERNORM_BWD = CorpusEntry(
    "layernorm_bwd",
    layernorm_bwd,
    {
        "dy_ptr": "*fp32",
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "mean_ptr": "*fp32",
        "rstd_ptr": "*fp32",
        "dx_ptr": "*fp32",
        "dw_ptr": "*fp32",
        "db_ptr": "*fp32",
        "stride": "i32",
        "n_cols": "i32",
    },
    {"BLOCK_N": BLOCK_N},
    _lnb_args,
    (M,),
    _lnb_ref,
    ("dx_ptr", "dw_ptr", "db_ptr"),
    ("tt.reduce", "tt.atomic_rmw fadd", "scalar-load"),
    atol=1e-4,
)


@triton.jit
def rmsnorm_fwd(x_ptr, w_ptr, y_ptr, rstd_ptr, stride, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / n_cols
    rstd = tl.rsqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


def _rms_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(M, N, generator=g),
        "w_ptr": torch.randn(N, generator=g),
        "y_ptr": torch.zeros(M, N),
        "rstd_ptr": torch.zeros(M),
        "stride": N,
        "n_cols": N,
        "eps": EPS,
    }


def _rms_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"]
    rstd = torch.rsqrt((x * x).mean(1) + EPS)
    return {"y_ptr": x * rstd[:, None] * a["w_ptr"], "rstd_ptr": rstd}


RMSNORM_FWD = CorpusEntry(
    "rmsnorm_fwd",
    rmsnorm_fwd,
    {
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "y_ptr": "*fp32",
        "rstd_ptr": "*fp32",
        "stride": "i32",
        "n_cols": "i32",
        "eps": "fp32",
    },
    {"BLOCK_N": BLOCK_N},
    _rms_args,
    (M,),
    _rms_ref,
    ("y_ptr", "rstd_ptr"),
    ("tt.reduce", "math.rsqrt"),
    atol=1e-4,
)


@triton.jit
def rmsnorm_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, stride, n_cols, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    rstd = tl.load(rstd_ptr + row)
    xhat = x * rstd
    wdy = w * dy
    c = tl.sum(xhat * wdy, axis=0) / n_cols
    dx = (wdy - xhat * c) * rstd
    tl.store(dx_ptr + row * stride + cols, dx, mask=mask)
    tl.store(dw_partial_ptr + row * stride + cols, dy * xhat, mask=mask)


def _rmsb_args(seed: int) -> Args:
    g = gen(seed)
    x = torch.randn(M, N, generator=g)
    return {
        "dy_ptr": torch.randn(M, N, generator=g),
        "x_ptr": x,
        "w_ptr": torch.randn(N, generator=g),
        "rstd_ptr": torch.rsqrt((x * x).mean(1) + EPS),
        "dx_ptr": torch.zeros(M, N),
        "dw_partial_ptr": torch.zeros(M, N),
        "stride": N,
        "n_cols": N,
    }


def _rmsb_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"].clone().requires_grad_(True)
    w = a["w_ptr"].clone().requires_grad_(True)
    y = x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * w
    y.backward(a["dy_ptr"])
    assert x.grad is not None
    xhat = a["x_ptr"] * a["rstd_ptr"][:, None]
    return {"dx_ptr": x.grad, "dw_partial_ptr": a["dy_ptr"] * xhat}


RMSNORM_BWD = CorpusEntry(
    "rmsnorm_bwd",
    rmsnorm_bwd,
    {
        "dy_ptr": "*fp32",
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "rstd_ptr": "*fp32",
        "dx_ptr": "*fp32",
        "dw_partial_ptr": "*fp32",
        "stride": "i32",
        "n_cols": "i32",
    },
    {"BLOCK_N": BLOCK_N},
    _rmsb_args,
    (M,),
    _rmsb_ref,
    ("dx_ptr", "dw_partial_ptr"),
    ("tt.reduce",),
    atol=1e-4,
)

ENTRIES = [SOFTMAX, LAYERNORM_FWD, LAYERNORM_BWD, RMSNORM_FWD, RMSNORM_BWD]
