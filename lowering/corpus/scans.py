"""Reductions and scans: tl.cumsum, tl.associative_scan with a custom combiner, argmax, 2-D reductions,
a custom tl.reduce, tl.histogram, tl.sort; and shape ops (transpose, join/split, reshape, cat)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


ROWS, COLS = 5, 32


@triton.jit
def cumsum_rows(x_ptr, out_ptr, COLS: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * COLS + c)
    tl.store(out_ptr + row * COLS + c, tl.cumsum(x, axis=0))


def _rows_args(seed: int) -> Args:
    return {"x_ptr": torch.randn(ROWS, COLS, generator=gen(seed)), "out_ptr": torch.zeros(ROWS, COLS)}


CUMSUM = CorpusEntry(
    "cumsum",
    cumsum_rows,
    {"x_ptr": "*fp32", "out_ptr": "*fp32"},
    {"COLS": COLS},
    _rows_args,
    (ROWS,),
    lambda a: {"out_ptr": torch.cumsum(a["x_ptr"], 1)},
    ("out_ptr",),
    ("tt.scan",),
    atol=1e-5,
)


@triton.jit
def _linear_recurrence(a1, b1, a2, b2):
    # h = a * h_prev + b, composed: (a2 * a1, a2 * b1 + b2)
    return a1 * a2, b1 * a2 + b2


@triton.jit
def associative_scan_recurrence(a_ptr, b_ptr, h_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i)
    b = tl.load(b_ptr + i)
    _, h = tl.associative_scan((a, b), axis=0, combine_fn=_linear_recurrence)
    tl.store(h_ptr + i, h)


def _rec_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "a_ptr": torch.rand(32, generator=g) * 0.9,
        "b_ptr": torch.randn(32, generator=g),
        "h_ptr": torch.zeros(32),
    }


def _rec_ref(a: Args) -> dict[str, torch.Tensor]:
    h, out = 0.0, []
    for x, y in zip(a["a_ptr"].tolist(), a["b_ptr"].tolist(), strict=True):
        h = x * h + y
        out.append(h)
    return {"h_ptr": torch.tensor(out)}


ASSOCIATIVE_SCAN = CorpusEntry(
    "associative_scan_recurrence",
    associative_scan_recurrence,
    {"a_ptr": "*fp32", "b_ptr": "*fp32", "h_ptr": "*fp32"},
    {"N": 32},
    _rec_args,
    (1,),
    _rec_ref,
    ("h_ptr",),
    ("tt.scan with 2 operands", "custom combiner"),
    atol=1e-5,
)


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def cummax_reverse(x_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    tl.store(out_ptr + i, tl.associative_scan(x, 0, _max_combine, reverse=True))


CUMMAX_REVERSE = CorpusEntry(
    "cummax_reverse_scan",
    cummax_reverse,
    {"x_ptr": "*fp32", "out_ptr": "*fp32"},
    {"N": 32},
    lambda s: {"x_ptr": torch.randn(32, generator=gen(s)), "out_ptr": torch.zeros(32)},
    (1,),
    lambda a: {"out_ptr": torch.flip(torch.cummax(torch.flip(a["x_ptr"], [0]), 0).values, [0])},
    ("out_ptr",),
    ("tt.scan reverse", "maxnumf combiner"),
)


@triton.jit
def argmax_rows(x_ptr, idx_ptr, val_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=-float("inf"))
    v, i = tl.max(x, axis=0, return_indices=True)
    tl.store(idx_ptr + row, tl.argmax(x, axis=0))
    tl.store(val_ptr + row, v + 0 * i)


def _am_args(seed: int) -> Args:
    return {
        "x_ptr": torch.randn(ROWS, 27, generator=gen(seed)),
        "idx_ptr": torch.zeros(ROWS, dtype=torch.int32),
        "val_ptr": torch.zeros(ROWS),
        "n_cols": 27,
    }


ARGMAX = CorpusEntry(
    "argmax_rows",
    argmax_rows,
    {"x_ptr": "*fp32", "idx_ptr": "*i32", "val_ptr": "*fp32", "n_cols": "i32"},
    {"BLOCK": 32},
    _am_args,
    (ROWS,),
    lambda a: {"idx_ptr": a["x_ptr"].argmax(1).to(torch.int32), "val_ptr": a["x_ptr"].max(1).values},
    ("idx_ptr", "val_ptr"),
    ("tt.reduce with 2 operands", "argmax tie-break"),
)


@triton.jit
def _sum_of_squares_combine(a, b):
    return a + b


@triton.jit
def reductions_2d(x_ptr, colmax_ptr, rowmin_ptr, total_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(colmax_ptr + c, tl.max(x, axis=0))
    tl.store(rowmin_ptr + r, tl.min(x, axis=1))
    tl.store(total_ptr, tl.reduce(x * x, None, _sum_of_squares_combine))


def _red_args(seed: int) -> Args:
    return {
        "x_ptr": torch.randn(8, 16, generator=gen(seed)),
        "colmax_ptr": torch.zeros(16),
        "rowmin_ptr": torch.zeros(8),
        "total_ptr": torch.zeros(1),
    }


REDUCTIONS_2D = CorpusEntry(
    "reductions_2d",
    reductions_2d,
    {"x_ptr": "*fp32", "colmax_ptr": "*fp32", "rowmin_ptr": "*fp32", "total_ptr": "*fp32"},
    {"R": 8, "C": 16},
    _red_args,
    (1,),
    lambda a: {
        "colmax_ptr": a["x_ptr"].max(0).values,
        "rowmin_ptr": a["x_ptr"].min(1).values,
        "total_ptr": (a["x_ptr"] ** 2).sum().reshape(1),
    },
    ("colmax_ptr", "rowmin_ptr", "total_ptr"),
    ("tt.reduce axis 0/1", "full reduction (reshape)"),
    atol=1e-4,
)


@triton.jit
def histogram_kernel(x_ptr, hist_ptr, N: tl.constexpr, BINS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(hist_ptr + tl.arange(0, BINS), tl.histogram(x, BINS))


HISTOGRAM = CorpusEntry(
    "histogram",
    histogram_kernel,
    {"x_ptr": "*i32", "hist_ptr": "*i32"},
    {"N": 64, "BINS": 8},
    lambda s: {
        "x_ptr": torch.randint(0, 8, (64,), generator=gen(s), dtype=torch.int32),
        "hist_ptr": torch.zeros(8, dtype=torch.int32),
    },
    (1,),
    lambda a: {"hist_ptr": torch.bincount(a["x_ptr"].long(), minlength=8).to(torch.int32)},
    ("hist_ptr",),
    ("tt.histogram",),
)


@triton.jit
def sort_rows(x_ptr, out_ptr, C: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + row * C + c)
    tl.store(out_ptr + row * C + c, tl.sort(x, descending=True))


SORT = CorpusEntry(
    "sort_rows",
    sort_rows,
    {"x_ptr": "*fp32", "out_ptr": "*fp32"},
    {"C": 16},
    lambda s: {"x_ptr": torch.randn(3, 16, generator=gen(s)), "out_ptr": torch.zeros(3, 16)},
    (3,),
    lambda a: {"out_ptr": torch.sort(a["x_ptr"], 1, descending=True).values},
    ("out_ptr",),
    ("bitonic sort: reshape, tt.reduce, xor-swap", "many shape ops"),
)


@triton.jit
def transpose_tile(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(y_ptr + c[:, None] * R + r[None, :], tl.trans(x))


TRANSPOSE = CorpusEntry(
    "transpose_tile",
    transpose_tile,
    {"x_ptr": "*fp32", "y_ptr": "*fp32"},
    {"R": 8, "C": 16},
    lambda s: {"x_ptr": torch.randn(8, 16, generator=gen(s)), "y_ptr": torch.zeros(16, 8)},
    (1,),
    lambda a: {"y_ptr": a["x_ptr"].t().contiguous()},
    ("y_ptr",),
    ("tt.trans",),
)


@triton.jit
def join_split_reshape(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + i)
    xy = tl.join(x, y)  # [N, 2]
    flat = tl.reshape(xy, (2 * N,))  # interleaved x0 y0 x1 y1 ...
    pairs = tl.reshape(flat, (N, 2))
    a, b = tl.split(pairs)
    tl.store(out_ptr + i, a * 10.0 + b)
    tl.store(out_ptr + N + tl.arange(0, 2 * N), flat)


def _jsr_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(16, generator=g),
        "y_ptr": torch.randn(16, generator=g),
        "out_ptr": torch.zeros(48),
    }


def _jsr_ref(a: Args) -> dict[str, torch.Tensor]:
    x, y = a["x_ptr"], a["y_ptr"]
    return {"out_ptr": torch.cat([x * 10.0 + y, torch.stack([x, y], 1).reshape(-1)])}


JOIN_SPLIT = CorpusEntry(
    "join_split_reshape",
    join_split_reshape,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"},
    {"N": 16},
    _jsr_args,
    (1,),
    _jsr_ref,
    ("out_ptr",),
    ("tt.join", "tt.split", "tt.reshape"),
    atol=1e-5,
)


@triton.jit
def cat_halves(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    c = tl.cat(tl.load(x_ptr + i), tl.load(y_ptr + i), can_reorder=True)
    tl.store(out_ptr + tl.arange(0, 2 * N), tl.sum(c, axis=0) + tl.zeros((2 * N,), tl.float32))


def _cat_ref(a: Args) -> dict[str, torch.Tensor]:
    return {"out_ptr": torch.full((32,), float(a["x_ptr"].sum() + a["y_ptr"].sum()))}


CAT = CorpusEntry(
    "cat_reorder_sum",
    cat_halves,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"},
    {"N": 16},
    lambda s: {
        "x_ptr": torch.randn(16, generator=gen(s)),
        "y_ptr": torch.randn(16, generator=gen(s + 1)),
        "out_ptr": torch.zeros(32),
    },
    (1,),
    _cat_ref,
    ("out_ptr",),
    ("tt.cat",),
    atol=1e-4,
    notes="tl.cat(can_reorder=True) may order elements freely: only an order-independent result is stored",
)

ENTRIES = [
    CUMSUM,
    ASSOCIATIVE_SCAN,
    CUMMAX_REVERSE,
    ARGMAX,
    REDUCTIONS_2D,
    HISTOGRAM,
    SORT,
    TRANSPOSE,
    JOIN_SPLIT,
    CAT,
]
