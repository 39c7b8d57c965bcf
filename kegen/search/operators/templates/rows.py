"""Triton templates for row-wise ops over the last dimension: RMSNorm, log-softmax, cumsum, argmax.

One program per row (leading dimensions flattened), the row walked in chunks of BLOCK_SIZE, so
any row length works; values are computed in fp32 and stored in the output's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER

# the candidate's rows per program: a power of two that leaves each of the 64 PEs (or SMs) some
_ROWS_AT_ONCE = """

def _rows_at_once(n_rows, most, elements):
    # n_rows / 64 or fewer (a power of two), at most `most` and `elements` // BLOCK_SIZE
    return max(1, min(most, elements // BLOCK_SIZE, 1 << max(0, (n_rows // 64).bit_length() - 1)))
"""


def _module(kernel: str, args: Sequence[str], body: str, block: int, init: Sequence[str] = ()) -> str:
    init_body = "\n".join(f"        {line}" for line in ("super().__init__()", *init))
    return (
        HEADER
        + f"\nBLOCK_SIZE = {block}\n"
        + (_ROWS_AT_ONCE if "_rows_at_once(" in body else "")
        + "\n"
        + kernel
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + f"{init_body}\n\n    def forward(self, {', '.join(args)}):\n{body}\n"
    )


_ROWS_FWD = """        x = {x}.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        n_rows = x2.shape[0]
"""

_RMS_NORM_KERNEL = """
@triton.jit
def rms_norm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, row_stride, n_rows, n_cols, eps,
                    HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, STORE_SUM: tl.constexpr,
                    ONE_PASS: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if ONE_PASS:  # rows that fit one block: ROWS of them loaded once
        tile_rows = row * ROWS + tl.arange(0, ROWS)
        tile_cols = tl.arange(0, BLOCK)
        col_ok = tile_cols < n_cols
        ok = (tile_rows < n_rows)[:, None] & col_ok[None, :]
        at = tile_rows[:, None] * row_stride + tile_cols[None, :]
        xt = tl.load(x_ptr + at, mask=ok, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:  # summed in fp32, as an upcast reference sums
            xt += tl.load(r_ptr + at, mask=ok, other=0.0).to(tl.float32)
        if STORE_SUM:  # the residual sum is an output too
            tl.store(s_ptr + tile_rows[:, None] * n_cols + tile_cols[None, :], xt.to(s_ptr.dtype.element_ty),
                     mask=ok)
        yt = xt * (1.0 / tl.sqrt(tl.sum(xt * xt, axis=1) / n_cols + eps))[:, None]
        if HAS_WEIGHT:
            yt = yt * tl.load(w_ptr + tile_cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(y_ptr + tile_rows[:, None] * n_cols + tile_cols[None, :], yt.to(y_ptr.dtype.element_ty),
                 mask=ok)
        return
    x_row = x_ptr + row * row_stride
    r_row = r_ptr + row * row_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            x += tl.load(r_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        if STORE_SUM:
            tl.store(s_ptr + row * n_cols + cols, x.to(s_ptr.dtype.element_ty), mask=cols < n_cols)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            x += tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
"""


def rms_norm(
    args: Sequence[str],
    x: str,
    weight: str | None,
    eps: str,
    dtype: str,
    block: int = 64,
    init: Sequence[str] = (),
    rows: int = 16,
    residual: str | None = None,
    sum_at: int | None = None,
) -> str:
    """y = x * rsqrt(mean(x^2, -1) + eps) [* weight]: rows that fit `block` loaded once, `rows` of them
    per program (capped at 16K elements), a longer row in a sum-of-squares pass and a scale pass.

    `x`, `weight`, `eps` and `dtype` (of y) are forward-time expressions; `init` rebuilds the
    reference's modules (an nn.RMSNorm). With `residual` the rows are `x + residual` (added in the
    kernel); `sum_at` (0 or 1): that sum is returned too, at that place of a pair with y."""
    body = _ROWS_FWD.format(x=x) + (
        (f"        r = {residual}.contiguous().view(-1, n_cols)\n" if residual else "        r = x2\n")
        + f"        w = {weight or 'x2'}\n"
        f"        y = torch.empty(x2.shape, dtype={dtype}, device=x.device)\n"
        + ("        s = torch.empty_like(x2)\n" if sum_at is not None else "        s = y\n")
        + "        one_pass = n_cols <= BLOCK_SIZE\n"
        "        rows = _rows_at_once(n_rows, RMS_ROWS, 16384) if one_pass else 1\n"
        "        rms_norm_kernel[(triton.cdiv(n_rows, rows),)](x2, r, w, y, s, x2.stride(0), n_rows, n_cols, "
        f"{eps},\n            HAS_RESIDUAL={residual is not None}, HAS_WEIGHT={weight is not None}, "
        f"STORE_SUM={sum_at is not None},\n            ONE_PASS=one_pass, ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        f"        return {_pair('y.view(x.shape)', 's.view(x.shape)', sum_at)}"
    )
    return _module(_RMS_NORM_KERNEL, args, body, block, init).replace(
        f"BLOCK_SIZE = {block}\n", f"BLOCK_SIZE = {block}\nRMS_ROWS = {rows}\n", 1
    )


_LOG_SOFTMAX_KERNEL = """
@triton.jit
def log_softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-1e30).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    lse = row_max + tl.log(tl.sum(s * tl.exp(m - row_max), axis=0))
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, (x - lse).to(y_ptr.dtype.element_ty), mask=mask)
"""


def log_softmax(args: Sequence[str], x: str, dtype: str, block: int = 64) -> str:
    """log_softmax over the last dimension: an online max/sum-of-exponentials pass, then x - lse."""
    body = _ROWS_FWD.format(x=x) + (
        f"        y = torch.empty(x2.shape, dtype={dtype}, device=x.device)\n"
        "        log_softmax_kernel[(n_rows,)](x2, y, x2.stride(0), n_cols, BLOCK=BLOCK_SIZE)\n"
        "        return y.view(x.shape)"
    )
    return _module(_LOG_SOFTMAX_KERNEL, args, body, block)


_CUMSUM_KERNEL = """
@triton.jit
def cumsum_kernel(x_ptr, y_ptr, row_stride, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = tl.arange(0, BLOCK)
    # each row's sum of the chunks before, kept [ROWS, 1]: a [ROWS] carry fed by `carry += tl.sum(x, axis=1)`
    # failed Triton's NVIDIA pipeline (TritonGPUOptimizeThreadLocality, Triton 3.6-3.7)
    carry = tl.zeros([ROWS, 1], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = (rows < n_rows)[:, None] & (start + offs < n_cols)[None, :]
        at = rows[:, None] * row_stride + (start + offs)[None, :]
        x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
        scan = tl.cumsum(x, axis=1) + carry
        out_at = rows[:, None] * n_cols + (start + offs)[None, :]
        tl.store(y_ptr + out_at, scan.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=1, keep_dims=True)
"""


def cumsum(args: Sequence[str], x: str, dtype: str, block: int = 64) -> str:
    """Inclusive prefix sum over the last dimension: ROWS rows a program (spread over the PEs, at
    most 8K elements a chunk), chunks of `block` columns scanned in order with a running carry."""
    body = _ROWS_FWD.format(x=x) + (
        f"        y = torch.empty(x2.shape, dtype={dtype}, device=x.device)\n"
        "        rows = _rows_at_once(n_rows, 16, 8192)\n"
        "        cumsum_kernel[(triton.cdiv(n_rows, rows),)](x2, y, x2.stride(0), n_rows, n_cols,\n"
        "            ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        "        return y.view(x.shape)"
    )
    return _module(_CUMSUM_KERNEL, args, body, block)


_ARGMAX_KERNEL = """
@triton.jit
def argmax_kernel(x_ptr, y_ptr, row_stride, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = tl.arange(0, BLOCK)
    best_val = tl.full([ROWS, BLOCK], float("-inf"), tl.float32)
    best_idx = tl.zeros([ROWS, BLOCK], tl.int32)
    for start in range(0, n_cols, BLOCK):
        ok = (rows < n_rows)[:, None] & (start + offs < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * row_stride + (start + offs)[None, :], mask=ok,
                    other=float("-inf")).to(tl.float32)
        better = x > best_val
        best_idx = tl.where(better, (start + offs)[None, :] + best_idx * 0, best_idx)
        best_val = tl.where(better, x, best_val)
    row_max = tl.max(best_val, axis=1)
    first = tl.where(best_val == row_max[:, None], best_idx, n_cols)
    tl.store(y_ptr + rows, tl.min(first, axis=1).to(tl.int64), mask=rows < n_rows)
"""


def argmax(args: Sequence[str], x: str, keepdim: bool, block: int = 64) -> str:
    """Index of the first maximum of each row (per-lane running best, then the smallest index
    among the lanes that hold the row maximum), as torch.argmax returns it; ROWS rows a program
    (spread over the PEs, at most 8K elements a chunk)."""
    shape = "x.shape[:-1] + (1,)" if keepdim else "x.shape[:-1]"
    body = _ROWS_FWD.format(x=x) + (
        "        y = torch.empty(n_rows, dtype=torch.int64, device=x.device)\n"
        "        rows = _rows_at_once(n_rows, 16, 8192)\n"
        "        argmax_kernel[(triton.cdiv(n_rows, rows),)](x2, y, x2.stride(0), n_rows, n_cols,\n"
        "            ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        f"        return y.view({shape})"
    )
    return _module(_ARGMAX_KERNEL, args, body, block)


_LAYER_NORM_LOAD = """        x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
        x = x.to(tl.float32)
        if HAS_RESIDUAL:  # summed in fp32, as an upcast reference sums
            x += tl.load(r_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)"""

_LAYER_NORM_KERNEL = f"""
@triton.jit
def layer_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, s_ptr, row_stride, n_rows, n_cols, eps,
                      HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                      STORE_SUM: tl.constexpr, ONE_PASS: tl.constexpr, ROWS: tl.constexpr,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if ONE_PASS:  # rows that fit one block: ROWS of them loaded at once (names apart from the loops')
        tile_rows = row * ROWS + tl.arange(0, ROWS)
        tile_cols = tl.arange(0, BLOCK)
        col_ok = tile_cols < n_cols
        ok = (tile_rows < n_rows)[:, None] & col_ok[None, :]
        at = tile_rows[:, None] * row_stride + tile_cols[None, :]
        xt = tl.load(x_ptr + at, mask=ok, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            xt += tl.load(r_ptr + at, mask=ok, other=0.0).to(tl.float32)
        if STORE_SUM:  # the residual sum is an output too
            tl.store(s_ptr + tile_rows[:, None] * n_cols + tile_cols[None, :], xt.to(s_ptr.dtype.element_ty),
                     mask=ok)
        dt = tl.where(ok, xt - (tl.sum(xt, axis=1) / n_cols)[:, None], 0.0)
        yt = dt * (1.0 / tl.sqrt(tl.sum(dt * dt, axis=1) / n_cols + eps))[:, None]
        if HAS_WEIGHT:
            yt = yt * tl.load(w_ptr + tile_cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        if HAS_BIAS:
            yt = yt + tl.load(b_ptr + tile_cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        out_at = tile_rows[:, None] * n_cols + tile_cols[None, :]
        tl.store(y_ptr + out_at, yt.to(y_ptr.dtype.element_ty), mask=ok)
        return
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
{_LAYER_NORM_LOAD}
        if STORE_SUM:
            tl.store(s_ptr + row * n_cols + cols, x.to(s_ptr.dtype.element_ty), mask=mask)
        acc += x
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
{_LAYER_NORM_LOAD}
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
{_LAYER_NORM_LOAD}
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
"""


def _pair(result: str, summed: str, sum_at: int | None) -> str:
    """The returned expression: the result alone, or with the residual sum at `sum_at` of a pair."""
    if sum_at is None:
        return result
    return f"({summed}, {result})" if sum_at == 0 else f"({result}, {summed})"


def layer_norm(
    args: Sequence[str],
    x: str,
    residual: str | None,
    weight: str | None,
    bias: str | None,
    eps: float,
    dtype: str,
    block: int = 64,
    init: Sequence[str] = (),
    rows: int = 16,
    sum_at: int | None = None,
) -> str:
    """F.layer_norm over the last dimension of `x` (+ `residual`, added in the kernel): rows that fit
    `block` are loaded once, `rows` of them per program (`LN_ROWS`, capped at 16K elements), a longer
    row in mean, variance and normalise passes; optional weight and bias (forward-time expressions,
    of parameters `init` builds). `sum_at` (0 or 1): the residual sum is returned too, at that place
    of a pair with the normalised rows (a transformer block's `h = x + r; return h, norm(h)`)."""
    body = _ROWS_FWD.format(x=x) + (
        (f"        r = {residual}.contiguous().view(-1, n_cols)\n" if residual else "        r = x2\n")
        + f"        w = {weight or 'x2'}\n"
        + f"        b = {bias or 'x2'}\n"
        + f"        y = torch.empty(x2.shape, dtype={dtype}, device=x.device)\n"
        + ("        s = torch.empty_like(x2)\n" if sum_at is not None else "        s = y\n")
        + "        one_pass = n_cols <= BLOCK_SIZE\n"
        + "        rows = _rows_at_once(n_rows, LN_ROWS, 16384) if one_pass else 1\n"
        + "        layer_norm_kernel[(triton.cdiv(n_rows, rows),)](x2, r, w, b, y, s, x2.stride(0), n_rows,\n"
        + f"            n_cols, {eps!r}, HAS_RESIDUAL={residual is not None},\n"
        + f"            HAS_WEIGHT={weight is not None}, HAS_BIAS={bias is not None},\n"
        + f"            STORE_SUM={sum_at is not None}, ONE_PASS=one_pass, ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        + f"        return {_pair('y.view(x.shape)', 's.view(x.shape)', sum_at)}"
    )
    return _module(_LAYER_NORM_KERNEL, args, body, block, init).replace(
        f"BLOCK_SIZE = {block}\n", f"BLOCK_SIZE = {block}\nLN_ROWS = {rows}\n", 1
    )


_FUSED_REDUCE_KERNEL = """
@triton.jit
def fused_reduce_kernel({ptrs}, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    acc = tl.full([ROWS, BLOCK], {init}, tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        ok = row_ok[:, None] & (cols < n_cols)[None, :]
        offs = rows[:, None] * n_cols + cols[None, :]
{loads}
{body}
        acc = tl.where(ok, {combine}, acc)
    total = {total}
    tl.store(y_ptr + rows, total.to(y_ptr.dtype.element_ty), mask=row_ok)
"""


_TOTALS = {"max": "tl.max(acc, axis=1)", "sum": "tl.sum(acc, axis=1)", "mean": "tl.sum(acc, axis=1) / n_cols"}


def fused_reduce(
    args: Sequence[str],
    inputs: Sequence[str],
    exprs: Sequence[str],
    result: str,
    op: str,
    reduced: int,
    keepdim: bool,
    dtype: str,
    block: int,
) -> str:
    """A whole candidate: sum | mean | max over the last `reduced` dims of an elementwise expression of
    same-shape inputs (`exprs`: `tN = ...` lines over v0..vK, computed in fp32 in registers, never
    stored), ROWS rows a program; the output in `dtype`, keepdim or not. Global average pooling after
    a residual ReLU is one (`relu(x + r).mean((2, 3))`)."""
    ptrs = ", ".join(f"in{i}_ptr" for i in range(len(inputs)))
    loads = "\n".join(
        f"        v{i} = tl.load(in{i}_ptr + offs, mask=ok, other=0.0).to(tl.float32)"
        for i in range(len(inputs))
    )
    kernel = _FUSED_REDUCE_KERNEL.format(
        ptrs=ptrs,
        init="float('-inf')" if op == "max" else "0.0",
        loads=loads,
        body="\n".join(f"        {e}" for e in exprs),
        combine=f"tl.maximum(acc, {result})" if op == "max" else f"acc + {result}",
        total=_TOTALS[op],
    )
    operands = ", ".join(f"x{i}" for i in range(len(inputs)))
    keep = f" + (1,) * {reduced}" if keepdim else ""
    body = (
        "".join(f"        x{i} = {x}.contiguous()\n" for i, x in enumerate(inputs))
        + f"        lead = x0.shape[:x0.dim() - {reduced}]\n"
        + f"        n_rows, n_cols = lead.numel(), x0.shape[x0.dim() - {reduced}:].numel()\n"
        + f"        y = torch.empty(n_rows, dtype={dtype}, device=x0.device)\n"
        + "        rows = _rows_at_once(n_rows, 16, 8192)\n"
        + f"        fused_reduce_kernel[(triton.cdiv(n_rows, rows),)]({operands}, y, n_rows, n_cols,\n"
        + "            ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        + f"        return y.view(tuple(lead){keep})"
    )
    return _module(kernel, args, body, block)


_SOFTMAX_ROWS_KERNEL = """
@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, row_stride, n_rows, n_cols, ONE_PASS: tl.constexpr, ROWS: tl.constexpr,
                        BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if ONE_PASS:  # rows that fit one block: ROWS of them loaded once, max, exp, sum and scale in registers
        tile_rows = pid * ROWS + tl.arange(0, ROWS)
        tile_cols = tl.arange(0, BLOCK)
        ok = (tile_rows < n_rows)[:, None] & (tile_cols < n_cols)[None, :]
        xt = tl.load(x_ptr + tile_rows[:, None] * row_stride + tile_cols[None, :], mask=ok, other=0.0)
        xt = tl.where(ok, xt.to(tl.float32), -1e30)
        e = tl.exp(xt - tl.max(xt, axis=1)[:, None])
        yt = e / tl.sum(e, axis=1)[:, None]
        out_at = tile_rows[:, None] * n_cols + tile_cols[None, :]
        tl.store(y_ptr + out_at, yt.to(y_ptr.dtype.element_ty), mask=ok)
        return
    x_row = x_ptr + pid * row_stride
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):  # online: the running max rescales the running sum
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        x = tl.where(cols < n_cols, x, -1e30)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / denom
        tl.store(y_ptr + pid * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)
"""


def softmax_rows(args: Sequence[str], x: str, block: int, rows: int = 16) -> str:
    """Softmax over the last dimension: rows that fit `block` loaded once, `rows` of them per program
    (`SM_ROWS`, capped at 16K elements, spread over the PEs), a longer row online (running max and
    sum) then scaled; computed in fp32, stored in the input's dtype."""
    body = _ROWS_FWD.format(x=x) + (
        "        y = torch.empty_like(x2)\n"
        "        one_pass = n_cols <= BLOCK_SIZE\n"
        "        rows = _rows_at_once(n_rows, SM_ROWS, 16384) if one_pass else 1\n"
        "        softmax_rows_kernel[(triton.cdiv(n_rows, rows),)](x2, y, x2.stride(0), n_rows, n_cols,\n"
        "            ONE_PASS=one_pass, ROWS=rows, BLOCK=BLOCK_SIZE)\n"
        "        return y.view(x.shape)"
    )
    return _module(_SOFTMAX_ROWS_KERNEL, args, body, block).replace(
        f"BLOCK_SIZE = {block}\n", f"BLOCK_SIZE = {block}\nSM_ROWS = {rows}\n", 1
    )


_SOFTMAX_COLS_KERNEL = """
@triton.jit
def softmax_cols_kernel(x_ptr, y_ptr, n_red, inner, LOG: tl.constexpr, BLOCK_R: tl.constexpr,
                        BLOCK_I: tl.constexpr):
    base = tl.program_id(0) * n_red * inner  # one outer index: an [n_red, inner] slab, reduced over rows
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < inner
    m = tl.full([BLOCK_I], -1e30, tl.float32)
    s = tl.zeros([BLOCK_I], tl.float32)
    for r0 in range(0, n_red, BLOCK_R):  # online over the reduced dim (one step where it fits BLOCK_R)
        r = r0 + tl.arange(0, BLOCK_R)
        ok = (r < n_red)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base + r[:, None] * inner + cols[None, :], mask=ok, other=-1e30).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[None, :]), axis=0)
        m = m_new
    for r0 in range(0, n_red, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        ok = (r < n_red)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base + r[:, None] * inner + cols[None, :], mask=ok, other=0.0).to(tl.float32)
        if LOG:
            y = x - m[None, :] - tl.log(s)[None, :]
        else:
            y = tl.exp(x - m[None, :]) / s[None, :]
        tl.store(y_ptr + base + r[:, None] * inner + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)
"""


def softmax_columns(
    args: Sequence[str], x: str, dim: int, log: bool, dtype: str, block_r: int, block_i: int
) -> str:
    """(log_)softmax over dim `dim` that is not the last: the input seen as [outer, n_red, inner] slabs,
    one program per outer index and BLOCK_I inner columns reducing over the rows (each row's columns
    contiguous: no transposed copy); an online max/sum pass over BLOCK_R rows at a time, then the
    output pass (the tile stays in the local store where the reduced dim fits one block)."""
    body = (
        f"        x = {x}.contiguous()\n"
        f"        n_red, inner = x.shape[{dim}], x[(0,) * {dim + 1}].numel()\n"
        "        y = torch.empty(x.shape, dtype=" + dtype + ", device=x.device)\n"
        "        grid = (x.numel() // (n_red * inner), triton.cdiv(inner, SMC_BLOCK_I))\n"
        f"        softmax_cols_kernel[grid](x, y, n_red, inner, LOG={log}, BLOCK_R=BLOCK_SIZE,\n"
        "            BLOCK_I=SMC_BLOCK_I)\n"
        "        return y"
    )
    return _module(_SOFTMAX_COLS_KERNEL, args, body, block_r).replace(
        f"BLOCK_SIZE = {block_r}\n", f"BLOCK_SIZE = {block_r}\nSMC_BLOCK_I = {block_i}\n", 1
    )
