"""Triton template for top-k routing (mixture-of-experts routers, beam scoring): per row of the last
dim, an optional softmax, the k largest values and their positions, an optional renormalisation of
the k values to sum to one.

A program loads ROWS rows once and does everything in registers: k rounds of a max and the first
position holding it (positions taken are set to -inf) over the logits, which the softmax does not
reorder; the softmax is applied to the k values only (its denominator, the row's sum of exponentials,
computed once where the values are not renormalised). Values are
computed in fp32 and stored in the input's dtype, positions as int64; the k values come out in
descending order, ties to the first position, as `torch.topk` on distinct values.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER, pow2_block
from kegen.search.operators.templates.layout import model_class

_KERNEL = """

@triton.jit
def topk_router_kernel(x_ptr, v_ptr, i_ptr, n_rows, E, K: tl.constexpr, SOFTMAX: tl.constexpr,
                       RENORM: tl.constexpr, ROWS: tl.constexpr, BLOCK_E: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < n_rows
    ok = row_ok[:, None] & (cols < E)[None, :]
    x = tl.load(x_ptr + rows[:, None] * E + cols[None, :], mask=ok, other=float("-inf")).to(tl.float32)
    if SOFTMAX and not RENORM:  # the probabilities' denominator (the softmax is monotonic: rank the logits)
        denom = tl.sum(tl.exp(x - tl.max(x, axis=1)[:, None]), axis=1)
    kcols = tl.arange(0, BLOCK_K)
    taken = kcols[None, :] < K
    vals = tl.zeros([ROWS, BLOCK_K], tl.float32)
    idxs = tl.zeros([ROWS, BLOCK_K], tl.int32)
    top = tl.max(x, axis=1)
    for j in tl.static_range(K):
        best = tl.max(x, axis=1)
        at = tl.min(tl.where(x == best[:, None], cols[None, :], BLOCK_E), axis=1)
        vals = tl.where(kcols[None, :] == j, best[:, None], vals)
        idxs = tl.where(kcols[None, :] == j, at[:, None], idxs)
        x = tl.where(cols[None, :] == at[:, None], float("-inf"), x)
    if SOFTMAX:  # only the k values leave the logits: exp(v - max) over the row's or the k values' sum
        vals = tl.where(taken, tl.exp(vals - top[:, None]), 0.0)
        if RENORM:
            vals = vals / tl.sum(vals, axis=1)[:, None]
        else:
            vals = vals / denom[:, None]
    elif RENORM:
        vals = vals / tl.sum(tl.where(taken, vals, 0.0), axis=1)[:, None]
    out_ok = row_ok[:, None] & (kcols < K)[None, :]
    out_at = rows[:, None] * K + kcols[None, :]
    tl.store(v_ptr + out_at, vals.to(v_ptr.dtype.element_ty), mask=out_ok)
    tl.store(i_ptr + out_at, idxs.to(tl.int64), mask=out_ok)
"""


def topk_router(arg: str, k: int, softmax: bool, renorm: bool, outputs: Sequence[str], rows: int) -> str:
    """The candidate module for input `arg` (..., E): `outputs` names what forward returns, in order
    ("values", "indices"; one name: that tensor alone)."""
    result = ", ".join(f"{o}.view(*x.shape[:-1], {k})" for o in outputs)
    body = (
        f"        x = {arg}.contiguous()\n"
        "        e = x.shape[-1]\n"
        "        x2 = x.view(-1, e)\n"
        "        n_rows = x2.shape[0]\n"
        f"        values = torch.empty((n_rows, {k}), dtype=x.dtype, device=x.device)\n"
        f"        indices = torch.empty((n_rows, {k}), dtype=torch.int64, device=x.device)\n"
        "        topk_router_kernel[(triton.cdiv(n_rows, ROWS),)](\n"
        f"            x2, values, indices, n_rows, e, K={k}, SOFTMAX={softmax}, RENORM={renorm}, ROWS=ROWS,\n"
        f"            BLOCK_E=triton.next_power_of_2(e), BLOCK_K={pow2_block(k, 2)})\n"
        f"        return {result}"
    )
    return HEADER + f"\nROWS = {rows}\n" + _KERNEL + model_class([arg], body)
