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
                           {group_param}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
{q_load}
    q = (q.to(tl.float32) * qk_scale).to(q.dtype)  # scale and log2(e) folded into Q
    k_base = k_ptr + b * skb + {kv_head} * skh
    v_base = v_ptr + b * svb + {kv_head} * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi = SK
    if CAUSAL:  # key blocks past the tile's last query are all masked: not visited
        hi = tl.minimum(SK, {last_query})
    for start in range(0, hi, BLOCK_N):
        keys = start + offs_n
        kt = tl.load(k_base + keys[None, :] * sks + offs_d[:, None] * skd,
                     mask=(keys[None, :] < SK) & dmask[:, None], other=0.0)
        s = tl.dot(q, kt)
        if not EVEN_N:
            s = tl.where(keys[None, :] < SK, s, float("-inf"))
        if CAUSAL:
            s = tl.where(keys[None, :] <= {query}[:, None], s, float("-inf"))
        if MASK:  # an additive float mask, in the log2 domain of the scores
            add = tl.load(m_ptr + b * smb + {mask_rows} + keys[None, :] * smk,
                          mask=(offs_m[:, None] < {rows}) & (keys[None, :] < SK), other=0.0)
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
{store}
"""


# the kernel's parts where a program's rows are its head's queries (MHA, or GQA's K/V head h // GROUP)
_HEAD_ROWS = {
    "group_param": "",
    "q_load": """    qmask = (offs_m[:, None] < SQ) & dmask[None, :]
    q_base = q_ptr + b * sqb + h * sqh
    q = tl.load(q_base + offs_m[:, None] * sqs + offs_d[None, :] * sqd, mask=qmask, other=0.0)""",
    "kv_head": "h",
    "last_query": "(pid_m + 1) * BLOCK_M",
    "query": "offs_m",
    "mask_rows": "h * smh + offs_m[:, None] * sms",
    "rows": "SQ",
    "store": """    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :] * sod,
             acc.to(o_ptr.dtype.element_ty), mask=qmask)""",
}
# ... where they are the GROUP query heads of K/V head h x their queries (head-major): decoding's few
# queries fill a tile, and the group's K/V blocks are read once for all its heads
_GROUP_ROWS = {
    "group_param": "GROUP: tl.constexpr, ",
    "q_load": """    head = h * GROUP + offs_m // SQ  # rows: the K/V head's GROUP query heads x SQ queries
    query = offs_m % SQ
    qmask = (offs_m[:, None] < GROUP * SQ) & dmask[None, :]
    q_base = q_ptr + b * sqb
    q = tl.load(q_base + head[:, None] * sqh + query[:, None] * sqs + offs_d[None, :] * sqd, mask=qmask,
                other=0.0)""",
    "kv_head": "h",
    "last_query": "SQ",
    "query": "query",
    "mask_rows": "head[:, None] * smh + query[:, None] * sms",
    "rows": "GROUP * SQ",
    "store": """    o_rows = head[:, None] * soh + query[:, None] * sos
    tl.store(o_ptr + b * sob + o_rows + offs_d[None, :] * sod, acc.to(o_ptr.dtype.element_ty), mask=qmask)""",
}
PACK_QUERIES = 16  # GQA with fewer queries than this per head (decoding): the group's heads share a tile


def kernel(group: int = 1, packed: bool = False) -> str:
    """The attention kernel's source: query heads sharing K/V head `h // GROUP` where `group` > 1, the
    group's heads packed into one tile's rows where `packed` (see _GROUP_ROWS)."""
    parts = dict(_GROUP_ROWS if packed else _HEAD_ROWS)
    if group > 1 and not packed:
        parts.update(group_param="GROUP: tl.constexpr, ", kv_head="(h // GROUP)")
    return KERNEL.format(**parts)


def _block_m(rows: int, heads: int) -> int:
    """The first query tile: up to 64 of a program's `rows`, halved (down to 16) while the programs
    (query tiles x `heads`, the batch's heads) leave some of mtia's 64 PEs idle (a causal 1 x 4 x 512
    problem: 32 programs of 64 queries, 15.8 us; 64 of 32, 10.1 us)."""
    bm = pow2_block(rows, 16, 64)
    while heads and -(-rows // bm) * heads < 64 and bm > 16:
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
    kv_heads: int | None = None,
) -> str:
    """A whole candidate: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale) with
    `q`, `k`, `v` forward-time expressions over `args` ([batch, heads, seq, head_dim], any strides); the
    output is allocated with `out_shape` / `out_stride`, and the candidate returns the views `returns`
    ((size, stride, offset) each) of it, or the output itself. `mask` is an additive float `attn_mask`
    (an expression broadcastable to [batch, heads, seq_q, seq_k]). `kv_heads` < the query heads: grouped-
    query attention (query head i reads K/V head i // (heads / kv_heads), as `enable_gqa=True`)."""
    views = [f"torch.as_strided(o, {tuple(sz)}, {tuple(st)}, {off})" for sz, st, off in returns]
    ret = "o" if not views else views[0] if len(views) == 1 else f"({', '.join(views)})"
    scale_src = f"{scale!r}" if scale is not None else "q.shape[-1] ** -0.5"
    heads = out_shape[1] if len(out_shape) == 4 else 1
    group = heads // kv_heads if kv_heads and heads % kv_heads == 0 else 1
    packed = group > 1 and seq_q < PACK_QUERIES
    if packed:  # programs over the K/V heads, each tile the group's heads x queries
        grid = "        grid = (triton.cdiv(group * seq_q, ATTN_BLOCK_M), batch * k.shape[1])\n"
        launch_heads = "k.shape[1]"
    else:
        grid = "        grid = (triton.cdiv(seq_q, ATTN_BLOCK_M), batch * heads)\n"
        launch_heads = "heads"
    body = (
        f"        q = {q}\n"
        f"        k = {k}\n"
        f"        v = {v}\n"
        f"        o = torch.empty_strided({tuple(out_shape)}, {tuple(out_stride)},\n"
        "                                dtype=q.dtype, device=q.device)\n"
        "        batch, heads, seq_q, head_dim = q.shape\n"
        "        seq_k = k.shape[2]\n"
        + ("        group = heads // k.shape[1]  # query heads per K/V head\n" if group > 1 else "")
        + (
            f"        m = {mask}.expand(batch, heads, seq_q, seq_k)\n"
            if mask
            else "        m = q  # no mask: any pointer, never read\n"
        )
        + grid
        + f"        kegen_attention_kernel[grid](q, k, v, o, m, {launch_heads}, seq_q, seq_k, head_dim,\n"
        f"            ({scale_src}) * {LOG2E},\n"
        "            *q.stride(), *k.stride(), *v.stride(), *o.stride(), *m.stride(),\n"
        f"            CAUSAL={bool(causal)}, MASK={bool(mask)}, EVEN_N=seq_k % ATTN_BLOCK_N == 0,\n"
        + ("            GROUP=group,\n" if group > 1 else "")
        + "            BLOCK_M=ATTN_BLOCK_M, BLOCK_N=ATTN_BLOCK_N,"
        + " BLOCK_D=triton.next_power_of_2(head_dim))\n"
        + f"        return {ret}"
    )
    batch_heads = out_shape[0] * heads if len(out_shape) == 4 else 0
    rows, tiles = (group * seq_q, batch_heads // group) if packed else (seq_q, batch_heads)
    return (
        HEADER
        + f"\nATTN_BLOCK_M = {_block_m(rows, tiles)}\nATTN_BLOCK_N = {pow2_block(seq_k, 16, 64)}\n"
        + kernel(group, packed)
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n\n"
        + f"    def forward(self, {', '.join(args)}):\n{body}\n"
    )
