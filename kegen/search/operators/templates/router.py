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
    top = tl.max(x, axis=1)
    denom = tl.zeros([ROWS], tl.float32)
    if SOFTMAX and not RENORM:  # the probabilities' denominator (the softmax is monotonic: rank the logits)
        denom = tl.sum(tl.exp(x - top[:, None]), axis=1)
    kcols = tl.arange(0, BLOCK_K)
    taken = kcols[None, :] < K
    vals = tl.zeros([ROWS, BLOCK_K], tl.float32)
    idxs = tl.zeros([ROWS, BLOCK_K], tl.int32)
    for j in tl.static_range(K):
        best, at = tl.max(x, axis=1, return_indices=True)  # among equal values the first column
        vals = tl.where(kcols[None, :] == j, best[:, None], vals)
        idxs = tl.where(kcols[None, :] == j, at[:, None], idxs)
        x = tl.where(cols[None, :] == at[:, None], float("-inf"), x)
    vals = _topk_finish(vals, taken, top, denom, SOFTMAX, RENORM)  # only the k values leave the logits
    out_ok = row_ok[:, None] & (kcols < K)[None, :]
    out_at = rows[:, None] * K + kcols[None, :]
    tl.store(v_ptr + out_at, vals.to(v_ptr.dtype.element_ty), mask=out_ok)
    tl.store(i_ptr + out_at, idxs.to(tl.int64), mask=out_ok)
"""


# the k values as the reference returns them (the one-pass, chunked and merge kernels end with it)
_FINISH = """

@triton.jit
def _topk_finish(vals, taken, m, s, SOFTMAX: tl.constexpr, RENORM: tl.constexpr):
    # the K values as the reference returns them: probabilities (over the row, or renormalised over
    # the K), raw values renormalised, or raw
    if SOFTMAX:
        if RENORM:
            vals = tl.where(taken, tl.exp(vals - tl.max(vals, axis=1)[:, None]), 0.0)
            vals = vals / tl.sum(vals, axis=1)[:, None]
        else:
            vals = tl.exp(vals - m[:, None]) / s[:, None]
    elif RENORM:
        vals = vals / tl.sum(tl.where(taken, vals, 0.0), axis=1)[:, None]
    return vals
"""


# rows wider than one pass holds (a vocabulary's logits): chunks of BLOCK_E columns; a chunk's values above
# the running K-th best replace the list's worst one at a time (the list unordered, as many rounds as the
# chunk has such values), the list sorted once at the end (ties by position, as torch.topk on distinct
# values); the softmax's denominator kept online over the chunks. With few rows a row's columns are
# split over programs (PARTIAL: each split's sorted K and softmax statistics) and topk_merge_kernel
# takes the K of their candidates. A split's first chunk needs no worst to replace: its best K enter in
# order, one argmax a round. 8 x 32000, k 50, fp32 on mtia-2i: 43.0 us (a split in one chunk of 4096
# with worst-replacing rounds: 75.4 us; chunks of 1024: 99.4 us; one program a row: 158.3 us)
CHUNK = 1024
CHUNK_ELEMENTS = 4096  # a split's columns in one chunk up to this many (x ROWS): fewer chunks, fewer rounds
_CHUNKED_KERNEL = """
@triton.jit
def topk_chunked_kernel(x_ptr, v_ptr, i_ptr, ms_ptr, n_rows, E, SPAN, OUT_STRIDE, K: tl.constexpr,
                        SOFTMAX: tl.constexpr, RENORM: tl.constexpr, PARTIAL: tl.constexpr,
                        ROWS: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    split = tl.program_id(1)  # columns [lo, hi) of the row: all of it, or one split's (PARTIAL)
    lo = split * SPAN
    hi = tl.minimum(E, lo + SPAN)
    cols = tl.arange(0, BLOCK_E)
    kcols = tl.arange(0, BLOCK_K)
    row_ok = rows < n_rows
    taken = kcols[None, :] < K
    # the best K so far, unordered (slots past K hold +inf: never the one replaced)
    best = tl.where(taken, float("-inf"), float("inf")) + tl.zeros([ROWS, BLOCK_K], tl.float32)
    pos = tl.zeros([ROWS, BLOCK_K], tl.int32)
    m = tl.full([ROWS], float("-inf"), tl.float32)  # the row's running max and sum of exponentials
    s = tl.zeros([ROWS], tl.float32)
    # the first chunk: the list is empty, so its best K enter in order (descending, ties by position):
    # no worst to find, and no sort at the end where the split is one chunk
    x, m, s = _topk_chunk(x_ptr, rows, lo, hi, E, cols, row_ok, m, s, SOFTMAX, RENORM)
    n_new = tl.max(tl.sum((x > float("-inf")).to(tl.int32), axis=1))
    for j in range(0, tl.minimum(n_new, K)):
        top, at = tl.max(x, axis=1, return_indices=True)  # among equal values the first column
        enter = (top > float("-inf"))[:, None] & (kcols[None, :] == j)
        best = tl.where(enter, top[:, None], best)
        pos = tl.where(enter, (lo + at)[:, None], pos)
        x = tl.where(cols[None, :] == at[:, None], float("-inf"), x)
    for start in range(lo + BLOCK_E, hi, BLOCK_E):
        x, m, s = _topk_chunk(x_ptr, rows, start, hi, E, cols, row_ok, m, s, SOFTMAX, RENORM)
        # only values above the K-th best can enter (an equal one ranks after it: earlier position)
        x = tl.where(x > tl.min(best, axis=1)[:, None], x, float("-inf"))
        n_new = tl.max(tl.sum((x > float("-inf")).to(tl.int32), axis=1))
        for _ in range(0, tl.minimum(n_new, K)):  # each round: the chunk's best replaces the list's worst
            top, at = tl.max(x, axis=1, return_indices=True)
            low = tl.min(best, axis=1)
            # among equal worst values the latest position ranks last: it goes
            key = tl.where(best == low[:, None], pos * BLOCK_K + kcols[None, :], -1)
            slot = tl.max(key, axis=1) % BLOCK_K
            enter = (top > low)[:, None] & (kcols[None, :] == slot[:, None])
            best = tl.where(enter, top[:, None], best)
            pos = tl.where(enter, (start + at)[:, None], pos)
            x = tl.where(cols[None, :] == at[:, None], float("-inf"), x)
    # the K in descending order, ties by position (so already where the split was one chunk)
    best = tl.where(taken, best, float("-inf"))
    vals = best
    idxs = pos
    for j in range(0, tl.where(hi - lo > BLOCK_E, K, 0)):
        top = tl.max(best, axis=1)
        first = tl.min(tl.where(best == top[:, None], pos, E), axis=1)
        vals = tl.where(kcols[None, :] == j, top[:, None], vals)
        idxs = tl.where(kcols[None, :] == j, first[:, None], idxs)
        best = tl.where((best == top[:, None]) & (pos == first[:, None]), float("-inf"), best)
    out_ok = row_ok[:, None] & (kcols < K)[None, :]
    out_at = rows[:, None] * OUT_STRIDE + split * K + kcols[None, :]
    if PARTIAL:  # one split's sorted K (raw values) and its softmax statistics, for topk_merge_kernel
        if SOFTMAX and not RENORM:
            tl.store(ms_ptr + rows * (2 * tl.num_programs(1)) + 2 * split, m, mask=row_ok)
            tl.store(ms_ptr + rows * (2 * tl.num_programs(1)) + 2 * split + 1, s, mask=row_ok)
    else:
        vals = _topk_finish(vals, taken, m, s, SOFTMAX, RENORM)
    tl.store(v_ptr + out_at, vals.to(v_ptr.dtype.element_ty), mask=out_ok)
    tl.store(i_ptr + out_at, idxs.to(i_ptr.dtype.element_ty), mask=out_ok)


@triton.jit
def _topk_chunk(x_ptr, rows, start, hi, E, cols, row_ok, m, s, SOFTMAX: tl.constexpr, RENORM: tl.constexpr):
    # the rows' columns [start, start + BLOCK_E) (-inf past hi), the softmax's running max and sum updated
    ok = row_ok[:, None] & (start + cols < hi)[None, :]
    x = tl.load(x_ptr + rows[:, None] * E + (start + cols)[None, :], mask=ok, other=float("-inf"))
    x = x.to(tl.float32)
    if SOFTMAX and not RENORM:
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    return x, m, s


@triton.jit
def topk_merge_kernel(cv_ptr, ci_ptr, ms_ptr, v_ptr, i_ptr, n_rows, C, SPLITS, K: tl.constexpr,
                      SOFTMAX: tl.constexpr, RENORM: tl.constexpr, ROWS: tl.constexpr, BLOCK_C: tl.constexpr,
                      BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr):
    # the row's top K among its splits' (C = SPLITS x K candidates, in column order: among equal values
    # the earlier candidate has the earlier position), the softmax's statistics combined
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ccols = tl.arange(0, BLOCK_C)
    kcols = tl.arange(0, BLOCK_K)
    row_ok = rows < n_rows
    taken = kcols[None, :] < K
    ok = row_ok[:, None] & (ccols < C)[None, :]
    cand = tl.load(cv_ptr + rows[:, None] * C + ccols[None, :], mask=ok, other=float("-inf")).to(tl.float32)
    cpos = tl.load(ci_ptr + rows[:, None] * C + ccols[None, :], mask=ok, other=0)
    vals = tl.zeros([ROWS, BLOCK_K], tl.float32)
    idxs = tl.zeros([ROWS, BLOCK_K], tl.int32)
    for j in range(K):
        top, at = tl.max(cand, axis=1, return_indices=True)
        vals = tl.where(kcols[None, :] == j, top[:, None], vals)
        first = tl.sum(tl.where(ccols[None, :] == at[:, None], cpos, 0), axis=1)
        idxs = tl.where(kcols[None, :] == j, first[:, None], idxs)
        cand = tl.where(ccols[None, :] == at[:, None], float("-inf"), cand)
    m = tl.zeros([ROWS], tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    if SOFTMAX and not RENORM:
        scols = tl.arange(0, BLOCK_S)
        s_ok = row_ok[:, None] & (scols < SPLITS)[None, :]
        at = rows[:, None] * (2 * SPLITS) + 2 * scols[None, :]
        ms = tl.load(ms_ptr + at, mask=s_ok, other=float("-inf"))
        ss = tl.load(ms_ptr + at + 1, mask=s_ok, other=0.0)
        m = tl.max(ms, axis=1)
        s = tl.sum(tl.where(s_ok, ss * tl.exp(ms - m[:, None]), 0.0), axis=1)
    vals = _topk_finish(vals, taken, m, s, SOFTMAX, RENORM)
    out_ok = row_ok[:, None] & taken
    out_at = rows[:, None] * K + kcols[None, :]
    tl.store(v_ptr + out_at, vals.to(v_ptr.dtype.element_ty), mask=out_ok)
    tl.store(i_ptr + out_at, idxs.to(tl.int64), mask=out_ok)
"""


def topk_router(
    arg: str, k: int, softmax: bool, renorm: bool, outputs: Sequence[str], rows: int, chunked: bool = False
) -> str:
    """The candidate module for input `arg` (..., E): `outputs` names what forward returns, in order
    ("values", "indices"; one name: that tensor alone); `chunked`: rows read in chunks of CHUNK columns or
    more (wider rows than one pass holds)."""
    result = ", ".join(f"{o}.view(*x.shape[:-1], {k})" for o in outputs)
    head = (
        f"        x = {arg}.contiguous()\n"
        "        e = x.shape[-1]\n"
        "        x2 = x.view(-1, e)\n"
        "        n_rows = x2.shape[0]\n"
        f"        values = torch.empty((n_rows, {k}), dtype=x.dtype, device=x.device)\n"
        f"        indices = torch.empty((n_rows, {k}), dtype=torch.int64, device=x.device)\n"
    )
    modes = f"K={k}, SOFTMAX={softmax}, RENORM={renorm}"
    if not chunked:
        body = head + (
            "        topk_router_kernel[(triton.cdiv(n_rows, ROWS),)](\n"
            f"            x2, values, indices, n_rows, e, {modes}, ROWS=ROWS,\n"
            f"            BLOCK_E=triton.next_power_of_2(e), BLOCK_K={pow2_block(k, 2)})\n"
            f"        return {result}"
        )
        return HEADER + f"\nROWS = {rows}\n" + _KERNEL + _FINISH + model_class([arg], body)
    body = head + _CHUNKED_FORWARD.format(modes=modes, k=k, block_k=pow2_block(k, 2))
    body += f"        return {result}"
    kernels = _CHUNKED_KERNEL + _FINISH
    constants = f"\nROWS = {rows}\nCHUNK = {CHUNK}\nCHUNK_ELEMENTS = {CHUNK_ELEMENTS}\n"
    return HEADER + constants + kernels + model_class([arg], body)


# few rows: each row's columns split over programs (about 64 in all), their top K merged by a second kernel
_CHUNKED_FORWARD = """\
        splits = max(1, min(triton.cdiv(e, CHUNK), 64 // triton.cdiv(n_rows, ROWS), 1024 // {k}))
        # a split read in one chunk where ROWS of it fit CHUNK_ELEMENTS: a chunk may cost K rounds
        chunk = max(CHUNK, min(CHUNK_ELEMENTS // ROWS, triton.next_power_of_2(triton.cdiv(e, splits))))
        span = triton.cdiv(triton.cdiv(e, splits), chunk) * chunk
        splits = triton.cdiv(e, span)
        grid = (triton.cdiv(n_rows, ROWS), splits)
        if splits == 1:
            topk_chunked_kernel[grid](x2, values, indices, values, n_rows, e, e, {k}, {modes},
                                      PARTIAL=False, ROWS=ROWS, BLOCK_E=chunk, BLOCK_K={block_k})
        else:
            cv = torch.empty((n_rows, splits * {k}), dtype=torch.float32, device=x.device)
            ci = torch.empty((n_rows, splits * {k}), dtype=torch.int32, device=x.device)
            ms = torch.empty((n_rows, splits, 2), dtype=torch.float32, device=x.device)
            topk_chunked_kernel[grid](x2, cv, ci, ms, n_rows, e, span, splits * {k}, {modes},
                                      PARTIAL=True, ROWS=ROWS, BLOCK_E=chunk, BLOCK_K={block_k})
            topk_merge_kernel[(triton.cdiv(n_rows, ROWS),)](
                cv, ci, ms, values, indices, n_rows, splits * {k}, splits, {modes}, ROWS=ROWS,
                BLOCK_C=triton.next_power_of_2(splits * {k}), BLOCK_S=triton.next_power_of_2(splits),
                BLOCK_K={block_k})
"""
