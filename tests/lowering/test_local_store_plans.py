"""The local-store plans and their fallback order (docs/DECISIONS.md D38, D87).

"spread" (next-fit placement, rotating slots for carried tiles computed ahead) is tried first; a
kernel whose spread placement does not fit -- often only because next-fit left the free space in
pieces -- is lowered "packed" (first-fit placement, rotating slots kept) before "compact" (first-fit,
one slot per carried tensor, a copy at each yield). Checked on an attention kernel whose key loop is
cut in two (work between the halves), numerically against PyTorch on the simulator.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from lowering.backend import driver
from lowering.codegen.local_alloc import LocalStoreAllocator
from lowering.errors import LocalStoreOverflowError
from lowering.options import LOCAL_STORE_PLANS
from lowering.pipeline import _lower_first_fitting


@triton.jit
def _key_blocks(
    q,
    k_ptr,
    v_ptr,
    base,
    seq,
    lo,
    hi,
    s_dot,
    m_fix,
    l_i,
    acc,
    offs_n,
    offs_d,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
):
    """Keys [lo, hi) in blocks; the next block's scores are computed before this block's are used."""
    last = (seq - 1) // BLOCK_N * BLOCK_N
    for start in range(lo, hi, BLOCK_N):
        nxt = tl.minimum(start + BLOCK_N, last) + offs_n
        kt = tl.load(k_ptr + base + nxt[None, :] * D + offs_d[:, None])
        s_next = tl.dot(q, kt, m_fix)
        keys = start + offs_n
        v = tl.load(v_ptr + base + keys[:, None] * D + offs_d[None, :])
        p = tl.exp2(s_dot).to(v.dtype)
        l_i = l_i + tl.sum(p.to(tl.float32), axis=1)
        acc = tl.dot(p, v, acc)
        s_dot = s_next
    return s_dot, l_i, acc


@triton.jit
def two_loop_attention(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    seq,
    split,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
):
    """Attention (softmax on the first key block's row max) whose key loop is cut at `split`."""
    pid_m = tl.program_id(0)
    base = tl.program_id(1) * seq * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :])
    q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)
    kt0 = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None])
    s0 = tl.dot(q, kt0)
    m_fix = tl.zeros_like(s0) - tl.max(s0, axis=1)[:, None]
    s_dot = s0 + m_fix
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    s_dot, l_i, acc = _key_blocks(
        q, k_ptr, v_ptr, base, seq, 0, split, s_dot, m_fix, l_i, acc, offs_n, offs_d, BLOCK_N, D
    )
    s_dot, l_i, acc = _key_blocks(
        q, k_ptr, v_ptr, base, seq, split, seq, s_dot, m_fix, l_i, acc, offs_n, offs_d, BLOCK_N, D
    )
    tl.store(
        o_ptr + base + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
    )


SIG = {
    "q_ptr": "*fp16",
    "k_ptr": "*fp16",
    "v_ptr": "*fp16",
    "o_ptr": "*fp16",
    "seq": "i32",
    "split": "i32",
    "scale": "fp32",
    "BLOCK_M": "constexpr",
    "BLOCK_N": "constexpr",
    "D": "constexpr",
}
BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "D": 64}  # one core: next-fit leaves no 64 KiB range free


def _header(**options: object) -> str:
    src = ASTSource(two_loop_attention, SIG, BLOCKS)
    k = triton.compile(src, target=GPUTarget("mtia", "2i", 1), options=options)
    return k.asm["llir"].split("; ModuleID", 1)[0]


def test_a_kernel_spread_does_not_fit_is_packed_with_its_rotating_slots() -> None:
    head = _header()
    assert "plan packed" in head
    assert "rotating %s_dot" in head  # the scores computed a block ahead still get two halves
    compact = _header(local_store_plan="compact")
    assert "plan compact" in compact and "rotating" not in compact


def _attention(plan: str, seq: int = 512, heads: int = 2) -> tuple[torch.Tensor, torch.Tensor, float]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(heads, seq, 64, dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    scale = 1.0 / math.sqrt(64)
    two_loop_attention[(seq // 128, heads)](q, k, v, o, seq, seq // 2, scale, local_store_plan=plan, **BLOCKS)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    return o, ref, driver.last_launch().cycles


def test_packed_and_compact_plans_compute_the_same_attention() -> None:
    o_packed, ref, packed = _attention("spread")  # falls back to packed
    o_compact, _, compact = _attention("compact")
    torch.testing.assert_close(o_packed.float(), ref, atol=2e-3, rtol=2e-3)
    assert torch.equal(o_packed, o_compact)
    assert packed < compact, (packed, compact)  # no copy of the score tile at each yield


def test_the_fallback_order_is_spread_packed_compact() -> None:
    tried: list[str] = []

    class Fake:
        def __init__(self, placement: str, fits: set[str]) -> None:
            self.placement, self.fits = placement, fits

        def lower(self) -> str:
            tried.append(self.placement)
            if self.placement not in self.fits:
                raise LocalStoreOverflowError(f"{self.placement} does not fit")
            return self.placement

    assert LOCAL_STORE_PLANS == ("spread", "packed", "compact")
    assert _lower_first_fitting(lambda p: Fake(p, {"packed", "compact"}), "spread") == "packed"
    assert tried == ["spread", "packed"]
    tried.clear()
    assert _lower_first_fitting(lambda p: Fake(p, {"compact"}), "packed") == "compact"
    assert tried == ["packed", "compact"]
    tried.clear()
    with pytest.raises(LocalStoreOverflowError, match="compact does not fit"):
        _lower_first_fitting(lambda p: Fake(p, set()), "spread")
    assert tried == ["spread", "packed", "compact"]


def test_an_overflow_from_fragmentation_says_so() -> None:
    a = LocalStoreAllocator(4096, next_fit=True)
    a.allocate(1024, "x")
    hole = a.allocate(1024, "hole")
    a.allocate(1024, "y")
    a.release(hole)
    with pytest.raises(LocalStoreOverflowError, match=r"fragmented: its largest range is 1024 B"):
        a.allocate(2048, "z")  # 2 KiB free in all, in two 1 KiB pieces
    with pytest.raises(LocalStoreOverflowError) as whole:
        a.allocate(4096, "w")
    assert "fragmented" not in str(whole.value)
