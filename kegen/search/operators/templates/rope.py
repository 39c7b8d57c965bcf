"""Triton template for rotary position embeddings: `y = x * cos + rotate(x) * sin` in one pass.

`rotate` pairs each column with its partner: the two halves of the last dim (LLaMA / Hugging Face's
`rotate_half`: partner of column i < D/2 is i + D/2, negated) or neighbouring columns (GPT-J's
interleaved form: 2i and 2i + 1). A program takes ROWS rows of x (all leading dims flattened) and
loads each row's two partner sets once, so x is read and y written exactly once; the cos / sin
tables are read through broadcast strides (stride 0 over the dims they do not vary in: batch,
heads), full width or half width (the halves' shared table of `cat([f, f])`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.layout import model_class

_KERNEL = """

@triton.jit
def rope_kernel(x_ptr, c_ptr, s_ptr, y_ptr, n_rows, D0, D1, D2, HALF, x_e1, x_e2, t_e1, t_e2,
                c0, c1, c2, c3, s0, s1, s2, s3, ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < HALF)
    i2 = rows % D2
    i1 = (rows // D2) % D1
    i0 = rows // (D2 * D1) % D0
    first = rows[:, None] * (2 * HALF) + cols[None, :] * x_e1
    x1 = tl.load(x_ptr + first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + first + x_e2, mask=mask, other=0.0).to(tl.float32)
    c_row = (i0 * c0 + i1 * c1 + i2 * c2)[:, None] + cols[None, :] * (t_e1 * c3)
    s_row = (i0 * s0 + i1 * s1 + i2 * s2)[:, None] + cols[None, :] * (t_e1 * s3)
    cos1 = tl.load(c_ptr + c_row, mask=mask, other=0.0).to(tl.float32)
    cos2 = tl.load(c_ptr + c_row + t_e2 * c3, mask=mask, other=0.0).to(tl.float32)
    sin1 = tl.load(s_ptr + s_row, mask=mask, other=0.0).to(tl.float32)
    sin2 = tl.load(s_ptr + s_row + t_e2 * s3, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + first, (x1 * cos1 - x2 * sin1).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + first + x_e2, (x2 * cos2 + x1 * sin2).to(y_ptr.dtype.element_ty), mask=mask)
"""

_FORWARD = """        x = {x}.contiguous()
        c = torch.broadcast_to({cos}, (*x.shape[:-1], {table_width}))
        s = torch.broadcast_to({sin}, (*x.shape[:-1], {table_width}))
        lead = (1,) * (4 - x.dim()) + tuple(x.shape[:-1])  # the leading dims as three
        c_strides = (0,) * (4 - c.dim()) + tuple(c.stride())
        s_strides = (0,) * (4 - s.dim()) + tuple(s.stride())
        y = torch.empty_like(x)
        half = x.shape[-1] // 2
        n_rows = x.numel() // x.shape[-1]
        grid = (triton.cdiv(n_rows, ROWS),)
        rope_kernel[grid](x, c, s, y, n_rows, lead[0], lead[1], lead[2], half, {x_e1}, {x_e2}, {t_e1}, {t_e2},
                          *c_strides, *s_strides, ROWS=ROWS, BLOCK_H=triton.next_power_of_2(half))
        return y"""


def rope(
    args: Sequence[str],
    x: str,
    cos: str,
    sin: str,
    interleaved: bool,
    half_tables: bool,
    width: int,
    init: Sequence[str] = (),
    prelude: str = "",
    rows: int = 16,
) -> str:
    """The candidate module: `x` (..., D), `cos` / `sin` forward-time expressions of tables that
    broadcast against x's leading dims with last dim D (or D / 2: `half_tables`); `width` is D."""
    if interleaved:
        x_e, t_e = ("2", "1"), ("1", "0") if half_tables else ("2", "1")
    else:
        x_e, t_e = ("1", "half"), ("1", "0") if half_tables else ("1", "half")
    fwd = _FORWARD.format(
        x=x,
        cos=cos,
        sin=sin,
        table_width=width // 2 if half_tables else width,
        x_e1=x_e[0],
        x_e2=x_e[1],
        t_e1=t_e[0],
        t_e2=t_e[1],
    )
    model = model_class(args, fwd, init)
    pre = f"\n\n{prelude.strip()}\n" if prelude else ""
    return HEADER + pre + f"\nROWS = {rows}\n" + _KERNEL + model
