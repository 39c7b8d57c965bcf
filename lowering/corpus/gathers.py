"""Index-driven kernels: embedding lookups and bags, jagged (offset-indexed) sums and softmax, bucketize,
tl.gather."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


VOCAB, DIM = 20, 24
BLOCK_D = 32


@triton.jit
def embedding(idx_ptr, table_ptr, out_ptr, dim, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < dim
    tl.store(out_ptr + i * dim + cols, tl.load(table_ptr + row * dim + cols, mask=mask), mask=mask)


N_IDX = 7


def _emb_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "idx_ptr": torch.randint(0, VOCAB, (N_IDX,), generator=g, dtype=torch.int32),
        "table_ptr": torch.randn(VOCAB, DIM, generator=g),
        "out_ptr": torch.zeros(N_IDX, DIM),
        "dim": DIM,
    }


EMBEDDING = CorpusEntry(
    "embedding_lookup",
    embedding,
    {"idx_ptr": "*i32", "table_ptr": "*fp32", "out_ptr": "*fp32", "dim": "i32"},
    {"BLOCK_D": BLOCK_D},
    _emb_args,
    (N_IDX,),
    lambda a: {"out_ptr": a["table_ptr"][a["idx_ptr"].long()]},
    ("out_ptr",),
    ("data-dependent address", "extsi to i64"),
)


@triton.jit
def embedding_bag_sum(idx_ptr, offsets_ptr, table_ptr, out_ptr, dim, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0)
    start = tl.load(offsets_ptr + bag)
    end = tl.load(offsets_ptr + bag + 1)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < dim
    acc = tl.zeros((BLOCK_D,), tl.float32)
    for j in range(start, end):
        row = tl.load(idx_ptr + j)
        acc += tl.load(table_ptr + row * dim + cols, mask=mask, other=0.0)
    tl.store(out_ptr + bag * dim + cols, acc, mask=mask)


OFFSETS = [0, 3, 3, 7, 12]


def _bag_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "idx_ptr": torch.randint(0, VOCAB, (OFFSETS[-1],), generator=g, dtype=torch.int32),
        "offsets_ptr": torch.tensor(OFFSETS, dtype=torch.int32),
        "table_ptr": torch.randn(VOCAB, DIM, generator=g),
        "out_ptr": torch.zeros(len(OFFSETS) - 1, DIM),
        "dim": DIM,
    }


def _bag_ref(a: Args) -> dict[str, torch.Tensor]:
    return {
        "out_ptr": torch.nn.functional.embedding_bag(
            a["idx_ptr"].long(), a["table_ptr"], a["offsets_ptr"][:-1].long(), mode="sum"
        )
    }


EMBEDDING_BAG = CorpusEntry(
    "embedding_bag_sum",
    embedding_bag_sum,
    {"idx_ptr": "*i32", "offsets_ptr": "*i32", "table_ptr": "*fp32", "out_ptr": "*fp32", "dim": "i32"},
    {"BLOCK_D": BLOCK_D},
    _bag_args,
    (len(OFFSETS) - 1,),
    _bag_ref,
    ("out_ptr",),
    ("loop bounds loaded from memory", "empty bag", "gather rows"),
    atol=1e-5,
)


@triton.jit
def jagged_sum(values_ptr, offsets_ptr, out_ptr, dim, MAX_LEN: tl.constexpr, BLOCK_D: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(offsets_ptr + seg)
    length = tl.load(offsets_ptr + seg + 1) - start
    rows = tl.arange(0, MAX_LEN)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < length) & (cols[None, :] < dim)
    x = tl.load(values_ptr + (start + rows)[:, None] * dim + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + seg * dim + cols, tl.sum(x, axis=0), mask=cols < dim)


def _jag_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "values_ptr": torch.randn(OFFSETS[-1], DIM, generator=g),
        "offsets_ptr": torch.tensor(OFFSETS, dtype=torch.int32),
        "out_ptr": torch.zeros(len(OFFSETS) - 1, DIM),
        "dim": DIM,
    }


def _jag_ref(a: Args) -> dict[str, torch.Tensor]:
    v = a["values_ptr"]
    return {"out_ptr": torch.stack([v[s:e].sum(0) for s, e in zip(OFFSETS[:-1], OFFSETS[1:], strict=True)])}


JAGGED_SUM = CorpusEntry(
    "jagged_sum",
    jagged_sum,
    {"values_ptr": "*fp32", "offsets_ptr": "*i32", "out_ptr": "*fp32", "dim": "i32"},
    {"MAX_LEN": 8, "BLOCK_D": BLOCK_D},
    _jag_args,
    (len(OFFSETS) - 1,),
    _jag_ref,
    ("out_ptr",),
    ("offset-indexed rows", "tt.reduce axis 0", "2-D mask from a loaded length"),
    atol=1e-5,
)


@triton.jit
def jagged_softmax(values_ptr, offsets_ptr, out_ptr, MAX_LEN: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)
    r = tl.arange(0, MAX_LEN)
    mask = r < end - start
    x = tl.load(values_ptr + start + r, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + start + r, e / tl.sum(e, axis=0), mask=mask)


def _jsm_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "values_ptr": torch.randn(OFFSETS[-1], generator=g),
        "offsets_ptr": torch.tensor(OFFSETS, dtype=torch.int32),
        "out_ptr": torch.zeros(OFFSETS[-1]),
    }


def _jsm_ref(a: Args) -> dict[str, torch.Tensor]:
    v = a["values_ptr"]
    parts = [torch.softmax(v[s:e], 0) for s, e in zip(OFFSETS[:-1], OFFSETS[1:], strict=True) if e > s]
    return {"out_ptr": torch.cat(parts)}


JAGGED_SOFTMAX = CorpusEntry(
    "jagged_softmax",
    jagged_softmax,
    {"values_ptr": "*fp32", "offsets_ptr": "*i32", "out_ptr": "*fp32"},
    {"MAX_LEN": 8},
    _jsm_args,
    (len(OFFSETS) - 1,),
    _jsm_ref,
    ("out_ptr",),
    ("jagged", "masked max/sum"),
    atol=1e-5,
)


@triton.jit
def bucketize(x_ptr, bounds_ptr, out_ptr, n, n_bounds, BLOCK: tl.constexpr, NB: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.arange(0, NB)
    bounds = tl.load(bounds_ptr + b, mask=b < n_bounds, other=float("inf"))
    below = (bounds[None, :] < x[:, None]).to(tl.int32)
    tl.store(out_ptr + offs, tl.sum(below, axis=1), mask=mask)


BOUNDS = [-1.0, -0.25, 0.0, 0.5, 1.5]


def _bk_args(seed: int) -> Args:
    return {
        "x_ptr": torch.randn(70, generator=gen(seed)),
        "bounds_ptr": torch.tensor(BOUNDS),
        "out_ptr": torch.zeros(70, dtype=torch.int32),
        "n": 70,
        "n_bounds": len(BOUNDS),
    }


BUCKETIZE = CorpusEntry(
    "bucketize",
    bucketize,
    {"x_ptr": "*fp32", "bounds_ptr": "*fp32", "out_ptr": "*i32", "n": "i32", "n_bounds": "i32"},
    {"BLOCK": 32, "NB": 8},
    _bk_args,
    (3,),
    lambda a: {"out_ptr": torch.bucketize(a["x_ptr"], a["bounds_ptr"]).to(torch.int32)},
    ("out_ptr",),
    ("broadcast compare", "i1 to i32", "integer tt.reduce"),
)


@triton.jit
def gather_rows(src_ptr, idx_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    src = tl.load(src_ptr + r[:, None] * C + c[None, :])
    idx = tl.load(idx_ptr + r[:, None] * C + c[None, :])
    tl.store(out_ptr + r[:, None] * C + c[None, :], tl.gather(src, idx, axis=1))


def _gather_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "src_ptr": torch.randn(8, 16, generator=g),
        "idx_ptr": torch.randint(0, 16, (8, 16), generator=g, dtype=torch.int32),
        "out_ptr": torch.zeros(8, 16),
    }


TL_GATHER = CorpusEntry(
    "tl_gather",
    gather_rows,
    {"src_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"},
    {"R": 8, "C": 16},
    _gather_args,
    (1,),
    lambda a: {"out_ptr": torch.gather(a["src_ptr"], 1, a["idx_ptr"].long())},
    ("out_ptr",),
    ("tt.gather",),
)

ENTRIES = [EMBEDDING, EMBEDDING_BAG, JAGGED_SUM, JAGGED_SOFTMAX, BUCKETIZE, TL_GATHER]
