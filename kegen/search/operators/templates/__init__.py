"""Triton source templates for the op classes the offline operator drafts and rewrites.

Every template yields a whole candidate module (kernel + `ModelNew`), general in the sizes
(masks on ragged edges), with its tunable sizes as module constants so mutations find them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"  # kegen/examples/<name>/seed.py
HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"

MODEL_TAIL = """

class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, {args}):
{body}
"""


def example_seed(name: str, **constants: int) -> str:
    """The seed candidate of kegen/examples/<name> without its docstring, with the given integer
    module constants (`BLOCK_SIZE=64`) set; a constant the seed does not define is an error."""
    source = (EXAMPLES / name / "seed.py").read_text()
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        source = "".join(source.splitlines(keepends=True)[body[0].end_lineno or 0 :]).lstrip("\n")
    for const, value in constants.items():
        source, n = re.subn(rf"^{const} = \d+$", f"{const} = {value}", source, count=1, flags=re.M)
        if n != 1:
            raise ValueError(f"kegen/examples/{name}/seed.py sets no integer {const}")
    return source


def elementwise(
    n_inputs: int, exprs: list[str], result: str, block: int = 256, dtype: str | None = None
) -> str:
    """One fused kernel over flattened, same-shape inputs: `exprs` are `tN = ...` lines over v0..vK;
    the output has x0's dtype, or `dtype` (a torch dtype's source) when given."""
    ptrs = ", ".join(f"in{i}_ptr" for i in range(n_inputs))
    loads = "\n".join(
        f"    v{i} = tl.load(in{i}_ptr + offs, mask=mask).to(tl.float32)" for i in range(n_inputs)
    )
    body = "\n".join(f"    {e}" for e in exprs)
    args = ", ".join(f"x{i}" for i in range(n_inputs))
    fwd = "\n".join(
        [f"        x{i} = x{i}.contiguous()" for i in range(n_inputs)]
        + [
            "        out = torch.empty_like(x0" + (f", dtype={dtype})" if dtype else ")"),
            "        n = out.numel()",
            "        grid = (triton.cdiv(n, BLOCK_SIZE),)",
            f"        fused_elementwise_kernel[grid]({args}, out, n, BLOCK=BLOCK_SIZE)",
            "        return out",
        ]
    )
    return (
        HEADER + f"\nBLOCK_SIZE = {block}\n\n\n@triton.jit\n"
        f"def fused_elementwise_kernel({ptrs}, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
        f"{loads}\n{body}\n    tl.store(out_ptr + offs, {result}.to(out_ptr.dtype.element_ty), mask=mask)\n"
        + MODEL_TAIL.format(args=args, body=fwd)
    )


_SOFTMAX_FWD = """        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty_like(x2)
        softmax_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK={block_arg})
        return y.view(x.shape)"""

_SOFTMAX_KERNELS = {
    "three_pass": """
@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    m = tl.full([BLOCK], float('-inf'), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float('-inf'))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float('-inf'))
        s += tl.exp(x - row_max)
    denom = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float('-inf'))
        tl.store(y_row + cols, tl.exp(x - row_max) / denom, mask=cols < n_cols)
""",
    "online": """
@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-1e30)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-1e30)
        tl.store(y_row + cols, tl.exp(x - row_max) / denom, mask=cols < n_cols)
""",
    "single_block": """
@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=float('-inf'))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * row_stride + cols, e / tl.sum(e, axis=0), mask=mask)
""",
}

SOFTMAX_VARIANTS = (*_SOFTMAX_KERNELS, "two_kernel")


def softmax(variant: str = "online", block: int = 64) -> str:
    """Row softmax over the last dimension; `single_block` sizes its block to the row at launch;
    `two_kernel` computes row statistics (max, sum of exponentials) then normalises in a 2-D grid."""
    if variant == "two_kernel":  # the softmax example's seed
        return example_seed("softmax", STATS_BLOCK_SIZE=block, NORM_BLOCK_SIZE=block)
    kernel = _SOFTMAX_KERNELS[variant]
    if variant == "single_block":
        return (
            HEADER
            + "\n"
            + kernel
            + MODEL_TAIL.format(
                args="x", body=_SOFTMAX_FWD.format(block_arg="triton.next_power_of_2(n_cols)")
            )
        )
    return (
        HEADER
        + f"\nBLOCK_SIZE = {block}\n\n"
        + kernel
        + MODEL_TAIL.format(args="x", body=_SOFTMAX_FWD.format(block_arg="BLOCK_SIZE"))
    )


def row_reduce(op: str, block: int = 64, scale_by_n: bool = False, keepdim: bool = False) -> str:
    """Reduce the last dimension with `op` in sum | max (mean = sum scaled by 1/n)."""
    init = "tl.zeros([BLOCK], tl.float32)" if op == "sum" else "tl.full([BLOCK], float('-inf'), tl.float32)"
    other = "0.0" if op == "sum" else "float('-inf')"
    acc = "acc += x" if op == "sum" else "acc = tl.maximum(acc, x)"
    fin = "tl.sum(acc, axis=0)" if op == "sum" else "tl.max(acc, axis=0)"
    if scale_by_n:
        fin = f"{fin} / n_cols"
    kernel = f"""
@triton.jit
def row_reduce_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = {init}
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other={other})
        {acc}
    tl.store(y_ptr + row, {fin})
"""
    fwd = """        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        row_reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=BLOCK_SIZE)
        return y.view(x.shape[:-1]){keep}"""
    fwd = fwd.replace("{keep}", ".unsqueeze(-1)" if keepdim else "")
    return HEADER + f"\nBLOCK_SIZE = {block}\n\n" + kernel + MODEL_TAIL.format(args="x", body=fwd)


def gather_rows(
    block: int = 64,
    arg_names: str = "table, idx",
    operands: tuple[str, str] | None = None,
    init: Sequence[str] = (),
) -> str:
    """out[i, :] = table[idx[i], :] (index_select on dim 0 / embedding lookup).

    forward's parameters are `arg_names`, by default the table and the indices themselves; else
    `operands` are the (table, idx) expressions over them (e.g. `self.table.detach()`), and `init`
    the lines of `__init__` that rebuild the model's parameters."""
    prelude = f"        table, idx = {operands[0]}, {operands[1]}\n" if operands else ""
    kernel = """
@triton.jit
def gather_rows_kernel(table_ptr, idx_ptr, out_ptr, n_cols, table_stride, out_stride, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    r = tl.load(idx_ptr + i)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(table_ptr + r * table_stride + cols, mask=cols < n_cols)
        tl.store(out_ptr + i * out_stride + cols, v, mask=cols < n_cols)
"""
    fwd = (
        prelude
        + """        table = table.contiguous()
        flat = idx.reshape(-1).contiguous()
        out = torch.empty((flat.numel(), table.shape[1]), dtype=table.dtype, device=table.device)
        gather_rows_kernel[(flat.numel(),)](table, flat, out, table.shape[1], table.stride(0), out.stride(0),
                                            BLOCK=BLOCK_SIZE)
        return out.view(*idx.shape, table.shape[1])"""
    )
    tail = MODEL_TAIL.format(args=arg_names, body=fwd)
    if init:
        tail = tail.replace(
            "super().__init__()\n", "super().__init__()\n" + "".join(f"        {x}\n" for x in init)
        )
    return HEADER + f"\nBLOCK_SIZE = {block}\n\n" + kernel + tail


_LAYER_NORM_KERNEL = """
@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
        d = tl.where(cols < n_cols, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=1.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * row_stride + cols, (x - mean) * rstd * w + b, mask=mask)
"""


def layer_norm(
    block: int = 64, eps: float = 1e-5, module: tuple[str, int, float, bool, bool] | None = None
) -> str:
    """Layer norm over the last dimension: three passes (mean, variance, normalise) per row.

    `module` = (attribute, size, eps, has_weight, has_bias) of the model's nn.LayerNorm: ModelNew
    builds the same module (equal weights under the evaluator's seeded construction)."""
    if module is not None:
        attr, size, eps, has_w, has_b = module
        init = (
            f"        self.{attr} = nn.LayerNorm({size}, eps={eps!r}, elementwise_affine={has_w or has_b})\n"
        )
        w = f"self.{attr}.weight" if has_w else "torch.ones(n_cols, device=x.device)"
        b = f"self.{attr}.bias" if has_b else "torch.zeros(n_cols, device=x.device)"
    else:
        init, w, b = "", "torch.ones(n_cols, device=x.device)", "torch.zeros(n_cols, device=x.device)"
    return (
        HEADER
        + f"\nBLOCK_SIZE = {block}\nEPS = {eps!r}\n\n"
        + _LAYER_NORM_KERNEL
        + f"""

class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
{init}
    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty_like(x2)
        layer_norm_kernel[(x2.shape[0],)](x2, {w}, {b}, y, x2.stride(0), n_cols, EPS, BLOCK=BLOCK_SIZE)
        return y.view(x.shape)
"""
    )


def pow2_block(n: int, least: int = 1, most: int = 1 << 30) -> int:
    """The smallest power of two >= n, clamped to [least, most]: a block or tile size sized to an
    extent (`tl.arange` takes powers of two)."""
    return max(least, min(most, 1 << max(0, int(n) - 1).bit_length()))


def pow2_floor(n: int, least: int = 1, most: int = 1 << 30) -> int:
    """The largest power of two <= n (1 for n < 1), clamped to [least, most]: a count that does not
    overshoot its extent (blocks that still give every PE one)."""
    return max(least, min(most, 1 << max(0, int(n).bit_length() - 1)))


def gemm_first_tiles(m: int, n: int, k: int, programs: int = 64, group: int = 0) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of a drafted GEMM: 128 x 128 x 64 tiles (powers of two, at least 16,
    no larger than the sizes need), the larger side halved down to 32 while fewer than `programs` tiles
    cover the output (mtia's 64 PEs; a GPU's SMs); `group`, where set, bounds BLOCK_K (a K block within
    one quantization group). A 16-wide draft is several times slower and the search, which expands its
    best nodes first, may never reach a good plan from there."""
    bm, bn = pow2_block(m, 16, 128), pow2_block(n, 16, 128)
    bk = min(pow2_block(k, 16, 64), group or 64)
    while -(-m // bm) * -(-n // bn) < programs and max(bm, bn) > 32:
        if bm >= bn:
            bm //= 2
        else:
            bn //= 2
    return bm, bn, bk
