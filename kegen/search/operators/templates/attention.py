"""Triton template for scaled dot-product attention on strided [batch, heads, seq, head_dim] views: one
program per BLOCK_M queries of one head, keys and values in blocks of BLOCK_N, online softmax in fp32.

The moves that paid off on the production attention problem are built in (docs/results/
memory_moves_mtia.md): the softmax scale and log2(e) are folded into Q once, the loop's exponentials
are `tl.exp2`, and the key mask runs only when the key length does not divide BLOCK_N (EVEN_N).
Q, K, V and the output are read and written through their own four strides, so the heads of a fused
QKV projection (views of one buffer) need no copies. `is_causal` follows torch: query i sees keys
j <= i (the top-left aligned mask); a causal tile's loop ends at its last query's key block.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER, pow2_block

LOG2E = 1.4426950408889634

KERNEL = """
@triton.jit
def kegen_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, m_ptr, H, SQ, SK, D, qk_scale,
                           sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod,
                           smb, smh, sms, smk, CAUSAL: tl.constexpr, MASK: tl.constexpr, EVEN_N: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    qmask = (offs_m[:, None] < SQ) & dmask[None, :]
    q_base = q_ptr + b * sqb + h * sqh
    q = tl.load(q_base + offs_m[:, None] * sqs + offs_d[None, :] * sqd, mask=qmask, other=0.0)
    q = (q.to(tl.float32) * qk_scale).to(q.dtype)  # scale and log2(e) folded into Q
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi = SK
    if CAUSAL:  # key blocks past the tile's last query are all masked: not visited
        hi = tl.minimum(SK, (pid_m + 1) * BLOCK_M)
    for start in range(0, hi, BLOCK_N):
        keys = start + offs_n
        kt = tl.load(k_base + keys[None, :] * sks + offs_d[:, None] * skd,
                     mask=(keys[None, :] < SK) & dmask[:, None], other=0.0)
        s = tl.dot(q, kt)
        if not EVEN_N:
            s = tl.where(keys[None, :] < SK, s, float("-inf"))
        if CAUSAL:
            s = tl.where(keys[None, :] <= offs_m[:, None], s, float("-inf"))
        if MASK:  # an additive float mask, in the log2 domain of the scores
            add = tl.load(m_ptr + b * smb + h * smh + offs_m[:, None] * sms + keys[None, :] * smk,
                          mask=(offs_m[:, None] < SQ) & (keys[None, :] < SK), other=0.0)
            s = s + add.to(tl.float32) * 1.4426950408889634
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * svs + offs_d[None, :] * svd,
                    mask=(keys[:, None] < SK) & dmask[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :] * sod,
             acc.to(o_ptr.dtype.element_ty), mask=qmask)
"""


def _block_m(seq_q: int, out_shape: Sequence[int]) -> int:
    """The first query tile: up to 64 queries, halved (down to 16) while the programs (query tiles x
    batch x heads, `out_shape` [batch, heads, seq, head_dim]) leave some of mtia's 64 PEs idle (a
    causal 1 x 4 x 512 problem: 32 programs of 64 queries, 15.8 us; 64 of 32, 10.1 us)."""
    bm = pow2_block(seq_q, 16, 64)
    heads = out_shape[0] * out_shape[1] if len(out_shape) == 4 else 0
    while heads and -(-seq_q // bm) * heads < 64 and bm > 16:
        bm //= 2
    return bm


def attention(
    args: Sequence[str],
    q: str,
    k: str,
    v: str,
    out_shape: Sequence[int],
    out_stride: Sequence[int],
    seq_q: int,
    seq_k: int,
    causal: bool,
    scale: float | None = None,
    returns: Sequence[tuple[Sequence[int], Sequence[int], int]] = (),
    mask: str | None = None,
) -> str:
    """A whole candidate: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale) with
    `q`, `k`, `v` forward-time expressions over `args` ([batch, heads, seq, head_dim], any strides); the
    output is allocated with `out_shape` / `out_stride`, and the candidate returns the views `returns`
    ((size, stride, offset) each) of it, or the output itself. `mask` is an additive float `attn_mask`
    (an expression broadcastable to [batch, heads, seq_q, seq_k])."""
    views = [f"torch.as_strided(o, {tuple(sz)}, {tuple(st)}, {off})" for sz, st, off in returns]
    ret = "o" if not views else views[0] if len(views) == 1 else f"({', '.join(views)})"
    scale_src = f"{scale!r}" if scale is not None else "q.shape[-1] ** -0.5"
    body = (
        f"        q = {q}\n"
        f"        k = {k}\n"
        f"        v = {v}\n"
        f"        o = torch.empty_strided({tuple(out_shape)}, {tuple(out_stride)},\n"
        "                                dtype=q.dtype, device=q.device)\n"
        "        batch, heads, seq_q, head_dim = q.shape\n"
        "        seq_k = k.shape[2]\n"
        + (
            f"        m = {mask}.expand(batch, heads, seq_q, seq_k)\n"
            if mask
            else "        m = q  # no mask: any pointer, never read\n"
        )
        + "        grid = (triton.cdiv(seq_q, ATTN_BLOCK_M), batch * heads)\n"
        "        kegen_attention_kernel[grid](q, k, v, o, m, heads, seq_q, seq_k, head_dim,\n"
        f"            ({scale_src}) * {LOG2E},\n"
        "            *q.stride(), *k.stride(), *v.stride(), *o.stride(), *m.stride(),\n"
        f"            CAUSAL={bool(causal)}, MASK={bool(mask)}, EVEN_N=seq_k % ATTN_BLOCK_N == 0,\n"
        "            BLOCK_M=ATTN_BLOCK_M, BLOCK_N=ATTN_BLOCK_N, BLOCK_D=triton.next_power_of_2(head_dim))\n"
        + f"        return {ret}"
    )
    return (
        HEADER
        + f"\nATTN_BLOCK_M = {_block_m(seq_q, out_shape)}\nATTN_BLOCK_N = {pow2_block(seq_k, 16, 64)}\n"
        + KERNEL
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n\n"
        + f"    def forward(self, {', '.join(args)}):\n{body}\n"
    )
