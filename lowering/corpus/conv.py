"""Direct convolutions (no im2col library): conv1d and conv2d with loops over the filter taps."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


C_IN, C_OUT, L, KW = 3, 4, 30, 5
L_OUT = L - KW + 1
BLOCK_L = 32


@triton.jit
def conv1d(x_ptr, w_ptr, b_ptr, y_ptr, c_in, length, l_out, KW: tl.constexpr, BLOCK_L: tl.constexpr):
    co = tl.program_id(0)
    n = tl.program_id(1)
    pos = tl.arange(0, BLOCK_L)
    mask = pos < l_out
    acc = tl.zeros((BLOCK_L,), tl.float32)
    for ci in range(0, c_in):
        for k in tl.static_range(KW):
            x = tl.load(x_ptr + (n * c_in + ci) * length + pos + k, mask=mask, other=0.0)
            w = tl.load(w_ptr + (co * c_in + ci) * KW + k)
            acc += x * w
    acc += tl.load(b_ptr + co)
    tl.store(y_ptr + (n * tl.num_programs(0) + co) * l_out + pos, acc, mask=mask)


BATCH = 2


def _c1_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(BATCH, C_IN, L, generator=g),
        "w_ptr": torch.randn(C_OUT, C_IN, KW, generator=g),
        "b_ptr": torch.randn(C_OUT, generator=g),
        "y_ptr": torch.zeros(BATCH, C_OUT, L_OUT),
        "c_in": C_IN,
        "length": L,
        "l_out": L_OUT,
    }


CONV1D = CorpusEntry(
    "conv1d_direct",
    conv1d,
    {
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "b_ptr": "*fp32",
        "y_ptr": "*fp32",
        "c_in": "i32",
        "length": "i32",
        "l_out": "i32",
    },
    {"KW": KW, "BLOCK_L": BLOCK_L},
    _c1_args,
    (C_OUT, BATCH),
    lambda a: {"y_ptr": torch.nn.functional.conv1d(a["x_ptr"], a["w_ptr"], a["b_ptr"])},
    ("y_ptr",),
    ("nested loops", "static_range unrolled", "get_num_programs", "scalar loads"),
    atol=1e-4,
)

H, W, KH, KW2 = 10, 12, 3, 3
H_OUT, W_OUT = H - KH + 1, W - KW2 + 1
BLOCK_H, BLOCK_W = 8, 16


@triton.jit
def conv2d(
    x_ptr,
    w_ptr,
    y_ptr,
    c_in,
    h,
    w,
    h_out,
    w_out,
    KH: tl.constexpr,
    KW: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    co = tl.program_id(0)
    tile_h = tl.program_id(1)
    oh = tile_h * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = tl.arange(0, BLOCK_W)
    mask = (oh[:, None] < h_out) & (ow[None, :] < w_out)
    acc = tl.zeros((BLOCK_H, BLOCK_W), tl.float32)
    for ci in range(0, c_in):
        for kh in range(KH):
            for kw in range(KW):
                x = tl.load(
                    x_ptr + ci * h * w + (oh[:, None] + kh) * w + ow[None, :] + kw, mask=mask, other=0.0
                )
                wt = tl.load(w_ptr + ((co * c_in + ci) * KH + kh) * KW + kw)
                acc += x * wt
    tl.store(y_ptr + co * h_out * w_out + oh[:, None] * w_out + ow[None, :], acc, mask=mask)


def _c2_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(C_IN, H, W, generator=g),
        "w_ptr": torch.randn(C_OUT, C_IN, KH, KW2, generator=g),
        "y_ptr": torch.zeros(C_OUT, H_OUT, W_OUT),
        "c_in": C_IN,
        "h": H,
        "w": W,
        "h_out": H_OUT,
        "w_out": W_OUT,
    }


CONV2D = CorpusEntry(
    "conv2d_direct",
    conv2d,
    {
        "x_ptr": "*fp32",
        "w_ptr": "*fp32",
        "y_ptr": "*fp32",
        "c_in": "i32",
        "h": "i32",
        "w": "i32",
        "h_out": "i32",
        "w_out": "i32",
    },
    {"KH": KH, "KW": KW2, "BLOCK_H": BLOCK_H, "BLOCK_W": BLOCK_W},
    _c2_args,
    (C_OUT, triton.cdiv(H_OUT, BLOCK_H)),
    lambda a: {"y_ptr": torch.nn.functional.conv2d(a["x_ptr"][None], a["w_ptr"])[0]},
    ("y_ptr",),
    ("triple-nested scf.for", "2-D masks"),
    atol=1e-4,
)

ENTRIES = [CONV1D, CONV2D]
