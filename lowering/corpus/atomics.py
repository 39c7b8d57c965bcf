"""Atomics: scatter-add (atomic_rmw fadd), integer max/min, and a compare-and-swap claim."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


N, BINS, BLOCK = 90, 10, 32


@triton.jit
def scatter_add(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.atomic_add(out_ptr + idx, x, mask=mask, sem="relaxed")


def _sa_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(N, generator=g),
        "idx_ptr": torch.randint(0, BINS, (N,), generator=g, dtype=torch.int32),
        "out_ptr": torch.zeros(BINS),
        "n": N,
    }


def _sa_ref(a: Args) -> dict[str, torch.Tensor]:
    return {"out_ptr": torch.zeros(BINS).index_add_(0, a["idx_ptr"].long(), a["x_ptr"])}


SCATTER_ADD = CorpusEntry(
    "atomic_scatter_add",
    scatter_add,
    {"x_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    _sa_args,
    (triton.cdiv(N, BLOCK),),
    _sa_ref,
    ("out_ptr",),
    ("tt.atomic_rmw fadd relaxed", "masked atomics"),
    atol=1e-4,
)


@triton.jit
def atomic_minmax(x_ptr, max_ptr, min_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_max(max_ptr + offs % 4, x, mask=mask)
    tl.atomic_min(min_ptr + tl.zeros_like(offs), x, mask=mask, sem="acq_rel", scope="gpu")


def _mm_args(seed: int) -> Args:
    return {
        "x_ptr": torch.randint(-1000, 1000, (N,), generator=gen(seed), dtype=torch.int32),
        "max_ptr": torch.full((4,), -(2**31), dtype=torch.int32),
        "min_ptr": torch.full((1,), 2**31 - 1, dtype=torch.int32),
        "n": N,
    }


def _mm_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"]
    return {
        "max_ptr": torch.stack([x[k::4].max() for k in range(4)]).to(torch.int32),
        "min_ptr": x.min().reshape(1).to(torch.int32),
    }


ATOMIC_MINMAX = CorpusEntry(
    "atomic_max_min",
    atomic_minmax,
    {"x_ptr": "*i32", "max_ptr": "*i32", "min_ptr": "*i32", "n": "i32"},
    {"BLOCK": BLOCK},
    _mm_args,
    (triton.cdiv(N, BLOCK),),
    _mm_ref,
    ("max_ptr", "min_ptr"),
    ("tt.atomic_rmw max/min", "sem/scope"),
)


@triton.jit
def atomic_cas_claim(owner_ptr, claimed_ptr, n_slots):
    pid = tl.program_id(0)
    slot = pid % n_slots
    prev = tl.atomic_cas(owner_ptr + slot, -1, pid)
    tl.store(claimed_ptr + pid, (prev == -1).to(tl.int32))
    tl.atomic_xchg(owner_ptr + n_slots + slot, pid)


def _cas_ref(a: Args) -> dict[str, torch.Tensor]:
    # With programs run in order, the first program of each slot wins it.
    n_prog, slots = a["claimed_ptr"].numel(), a["n_slots"]
    claimed = torch.tensor([1 if p < slots else 0 for p in range(n_prog)], dtype=torch.int32)
    return {"claimed_ptr": claimed}


ATOMIC_CAS = CorpusEntry(
    "atomic_cas_claim",
    atomic_cas_claim,
    {"owner_ptr": "*i32", "claimed_ptr": "*i32", "n_slots": "i32"},
    {},
    lambda s: {
        "owner_ptr": torch.full((6,), -1, dtype=torch.int32),
        "claimed_ptr": torch.zeros(7, dtype=torch.int32),
        "n_slots": 3,
    },
    (7,),
    _cas_ref,
    ("claimed_ptr",),
    ("tt.atomic_cas", "atomic_rmw exch", "scalar atomics"),
    notes="the reference assumes programs run in order (true for sequential simulators and the interpreter)",
)

ENTRIES = [SCATTER_ADD, ATOMIC_MINMAX, ATOMIC_CAS]
