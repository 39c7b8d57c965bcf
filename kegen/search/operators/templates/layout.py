"""Triton templates over 2-D tiles of (rows, cols): broadcasting elementwise and transpose.

Leading dimensions are flattened into rows. In the broadcasting template each input has a kind:
`full` (the output's shape), `row` (a vector along the last dim, e.g. a bias), `col` (one value per
row, shape (..., 1)) or `scalar` (one element); the kernel loads each kind once per tile.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER

BROADCAST_KINDS = ("full", "row", "col", "scalar")

_LOADS = {
    "full": "tl.load(in{i}_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)",
    "row": "tl.load(in{i}_ptr + cols, mask=cols < n_cols, other=0.0)[None, :]",
    "col": "tl.load(in{i}_ptr + rows, mask=rows < n_rows, other=0.0)[:, None]",
    "scalar": "tl.load(in{i}_ptr)",
}


MODEL_HEAD = (
    "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n        super().__init__()\n\n"
)


def model_class(args: Sequence[str], body: str, init: Sequence[str] = ()) -> str:
    """ModelNew's source: `init` lines after super().__init__(), then forward(args) with `body`."""
    head = MODEL_HEAD.rstrip("\n") + "".join(f"\n        {line}" for line in init) + "\n\n"
    return head + f"    def forward(self, {', '.join(args)}):\n{body}\n"


def broadcast_elementwise(
    kinds: Sequence[str],
    exprs: Sequence[str],
    result: str,
    dtype: str,
    block_r: int = 16,
    block_c: int = 64,
    inputs: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    init: Sequence[str] = (),
) -> str:
    """One fused kernel over inputs that broadcast against a (rows, cols) output; `exprs` are
    `tN = ...` lines over v0..vK (the inputs in fp32), `dtype` the output's torch dtype.

    By default the inputs are forward's parameters x0..xK; else `inputs` are their forward-time
    expressions (e.g. `self.scale.detach()`) over parameters `args`, and `init` builds the modules."""
    for k in kinds:
        if k not in BROADCAST_KINDS:
            raise ValueError(f"unknown broadcast kind {k!r}: one of {', '.join(BROADCAST_KINDS)}")
    ptrs = ", ".join(f"in{i}_ptr" for i in range(len(kinds)))
    loads = "\n".join(f"    v{i} = " + _LOADS[k].format(i=i) + ".to(tl.float32)" for i, k in enumerate(kinds))
    body = "\n".join(f"    {e}" for e in exprs)
    kernel = f"""
@triton.jit
def broadcast_elementwise_kernel({ptrs}, out_ptr, n_rows, n_cols,
                                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
{loads}
{body}
    out = tl.zeros([BLOCK_R, BLOCK_C], tl.float32) + {result}
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)
"""
    names = [f"x{i}" for i in range(len(kinds))]
    fwd = "\n".join(
        ([f"        {', '.join(names)}, = ({', '.join(inputs)},)"] if inputs is not None else [])
        + [
            f"        shape = torch.broadcast_shapes({', '.join(a + '.shape' for a in names)})",
            f"        out = torch.empty(shape, dtype={dtype}, device=x0.device)",
            "        n_cols = shape[-1]",
            "        n_rows = out.numel() // max(n_cols, 1)",
            "        grid = (triton.cdiv(n_rows, BLOCK_SIZE_R), triton.cdiv(n_cols, BLOCK_SIZE_C))",
            "        broadcast_elementwise_kernel[grid]("
            + ", ".join(a + ".contiguous()" for a in names)
            + ", out, n_rows, n_cols,",
            "                                           BLOCK_R=BLOCK_SIZE_R, BLOCK_C=BLOCK_SIZE_C)",
            "        return out",
        ]
    )
    consts = f"\nBLOCK_SIZE_R = {block_r}\nBLOCK_SIZE_C = {block_c}\n\n"
    return HEADER + consts + kernel + model_class(names if args is None else args, fwd, init)


_TRANSPOSE_KERNEL = """
@triton.jit
def transpose_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    base = tl.program_id(2) * n_rows * n_cols
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tile = tl.load(x_ptr + base + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + base + cols[None, :] * n_rows + rows[:, None], tile, mask=mask)
"""

_TRANSPOSE_FWD = """        x = {arg}
        x3 = x.contiguous().view(-1, x.shape[-2], x.shape[-1])
        n_batch, n_rows, n_cols = x3.shape
        y = torch.empty((n_batch, n_cols, n_rows), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(n_rows, BLOCK_SIZE_R), triton.cdiv(n_cols, BLOCK_SIZE_C), n_batch)
        transpose_kernel[grid](x3, y, n_rows, n_cols, BLOCK_R=BLOCK_SIZE_R, BLOCK_C=BLOCK_SIZE_C)
        return y.view(*x.shape[:-2], n_cols, n_rows)"""


def transpose(arg: str = "x", block_r: int = 32, block_c: int = 32) -> str:
    """Swap the last two dimensions into a new contiguous tensor: a tile is loaded row-major and
    stored with the strides swapped (one program per tile per batch entry)."""
    consts = f"\nBLOCK_SIZE_R = {block_r}\nBLOCK_SIZE_C = {block_c}\n\n"
    return HEADER + consts + _TRANSPOSE_KERNEL + model_class([arg], _TRANSPOSE_FWD.format(arg=arg))


def col_reduce(
    op: str, scale_by_n: bool, keepdim: bool, dtype: str, arg: str = "x", block_r: int = 16, block_c: int = 64
) -> str:
    """Reduce dim 0 of a 2-D tensor with `op` in sum | max (mean = sum scaled by 1/rows): each program
    owns BLOCK_C columns and walks the rows in (BLOCK_R, BLOCK_C) tiles."""
    init = "tl.zeros" if op == "sum" else "tl.full"
    init += (
        "([BLOCK_R, BLOCK_C], tl.float32)"
        if op == "sum"
        else "([BLOCK_R, BLOCK_C], float('-inf'), tl.float32)"
    )
    other = "0.0" if op == "sum" else "float('-inf')"
    step = "acc += x" if op == "sum" else "acc = tl.maximum(acc, x)"
    fin = ("tl.sum(acc, axis=0)" if op == "sum" else "tl.max(acc, axis=0)") + (
        " / n_rows" if scale_by_n else ""
    )
    kernel = f"""
@triton.jit
def col_reduce_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = {init}
    for start in range(0, n_rows, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other={other}).to(tl.float32)
        {step}
    tl.store(y_ptr + cols, ({fin}).to(y_ptr.dtype.element_ty), mask=cols < n_cols)
"""
    fwd = f"""        x = {arg}.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty(n_cols, dtype={dtype}, device=x.device)
        grid = (triton.cdiv(n_cols, BLOCK_SIZE_C),)
        col_reduce_kernel[grid](x, y, n_rows, n_cols, BLOCK_R=BLOCK_SIZE_R, BLOCK_C=BLOCK_SIZE_C)
        return y{".view(1, n_cols)" if keepdim else ""}"""
    consts = f"\nBLOCK_SIZE_R = {block_r}\nBLOCK_SIZE_C = {block_c}\n\n"
    return HEADER + consts + kernel + model_class([arg], fwd)


_STRIDED_COPY = """

@triton.jit
def strided_copy_kernel(x_ptr, y_ptr, D0, D1, D2, D3, s0, s1, s2, s3, n_rows, ROWS: tl.constexpr,
                        BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    i2 = rows % D2
    i1 = (rows // D2) % D1
    i0 = rows // (D2 * D1)
    src = (i0.to(tl.int64) * s0 + i1 * s1 + i2 * s2)[:, None] + cols[None, :] * s3
    mask = (rows < n_rows)[:, None] & (cols < D3)[None, :]
    v = tl.load(x_ptr + src, mask=mask, other=0)
    tl.store(y_ptr + rows.to(tl.int64)[:, None] * D3 + cols[None, :], v, mask=mask)
"""


def strided_copy(
    arg: str,
    size: Sequence[int],
    stride: Sequence[int],
    offset: int,
    out_shape: Sequence[int],
    rows: int = 16,
    block: int = 64,
) -> str:
    """A layout copy (a permute / transpose of leading dims made contiguous, a head split or merge):
    the input's strided view (`size`, `stride`, `offset` of its contiguous storage, at most 4 dims)
    copied row by row into a contiguous tensor of `out_shape`; the innermost dim is read in BLOCK
    columns, ROWS rows a program."""
    pad = 4 - len(size)
    dims, strides = (1,) * pad + tuple(size), (0,) * pad + tuple(stride)
    body = (
        f"        xv = torch.as_strided({arg}.contiguous(), {tuple(size)}, {tuple(stride)}, {offset})\n"
        "        y = torch.empty(xv.shape, dtype=xv.dtype, device=xv.device)\n"
        f"        n_rows = {dims[0] * dims[1] * dims[2]}\n"
        f"        grid = (triton.cdiv(n_rows, ROWS), triton.cdiv({dims[3]}, BLOCK_SIZE))\n"
        f"        strided_copy_kernel[grid](xv, y, {', '.join(map(str, dims))},\n"
        f"                                  {', '.join(map(str, strides))}, n_rows,\n"
        "                                  ROWS=ROWS, BLOCK=BLOCK_SIZE)\n"
        f"        return y.view({tuple(out_shape)})"
    )
    head = f"\nROWS = {rows}\nBLOCK_SIZE = {block}\n"
    return HEADER + head + _STRIDED_COPY + model_class([arg], body)
