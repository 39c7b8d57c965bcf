"""Triton template for nearest-neighbour upsampling by power-of-two factors (U-Net decoders, FPNs).

x is viewed as rows of its last dim (all leading dims flattened). A program loads ROWS input rows once,
repeats each element SW times along the row and each row SH times in registers (a broadcast and a
reshape), and stores SH * ROWS contiguous output rows: one contiguous read of x and one contiguous
write of y, where Inductor's draft reads x through a division per output element.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.layout import model_class

_KERNEL = """

@triton.jit
def upsample_nearest_kernel(x_ptr, y_ptr, n_rows, W, SH: tl.constexpr, SW: tl.constexpr, ROWS: tl.constexpr,
                            BLOCK_W: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_W)
    ok = (rows < n_rows)[:, None] & (cols < W)[None, :]
    x = tl.load(x_ptr + rows[:, None] * W + cols[None, :], mask=ok, other=0.0)
    y = tl.reshape(tl.broadcast_to(x[:, None, :, None], [ROWS, SH, BLOCK_W, SW]), [ROWS * SH, BLOCK_W * SW])
    out_rows = tl.program_id(0) * (ROWS * SH) + tl.arange(0, ROWS * SH)
    out_cols = tl.arange(0, BLOCK_W * SW)
    tl.store(y_ptr + out_rows[:, None] * (W * SW) + out_cols[None, :], y,
             mask=(out_rows < n_rows * SH)[:, None] & (out_cols < W * SW)[None, :])
"""


def upsample_nearest(arg: str, sh: int, sw: int, out_shape: Sequence[int], rows: int, block_w: int) -> str:
    """The candidate module: input `arg` (..., H, W) -> (..., H * sh, W * sw), `out_shape` the
    reference's output shape (leading dims kept)."""
    body = (
        f"        x = {arg}.contiguous()\n"
        "        w = x.shape[-1]\n"
        "        n_rows = x.numel() // w\n"
        f"        y = torch.empty({tuple(out_shape)}, dtype=x.dtype, device=x.device)\n"
        "        upsample_nearest_kernel[(triton.cdiv(n_rows, ROWS),)](x, y, n_rows, w, "
        f"SH={sh}, SW={sw}, ROWS=ROWS,\n"
        "                                                            BLOCK_W=BLOCK_W)\n"
        "        return y"
    )
    return HEADER + f"\nROWS = {rows}\nBLOCK_W = {block_w}\n" + _KERNEL + model_class([arg], body)
