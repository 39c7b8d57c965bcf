"""Triton template for GroupNorm with its elementwise epilogue (SiLU in diffusion U-Nets, ReLU, GELU).

In a contiguous (N, C, *spatial) tensor a group's C/G channels are one contiguous span of
`(C / G) * spatial` elements, so x is viewed as (N * G, span) rows. A group that fits ONE_PASS_LIMIT
elements (padded to powers of two) is loaded once as a (channels, spatial) tile: mean and variance in
fp32, one weight and bias per tile row (a per-element channel index made the affine loads gathers:
32.0 -> 26.6 us on a 4 x 128 x 32 x 32 GroupNorm + SiLU), the epilogue, one store; a longer group
takes mean, variance and normalise passes over BLOCK-sized chunks of its span. Each program
normalises one group.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.layout import model_class

ONE_PASS_LIMIT = 16384  # elements of a span loaded at once (64 KiB of fp32)

_AFFINE = """            ch = (row % GROUPS) * ch_per_group + {cols} // spatial
            {y} = {y} * tl.load(w_ptr + ch, mask={mask}, other=0.0).to(tl.float32)
            {y} = {y} + tl.load(b_ptr + ch, mask={mask}, other=0.0).to(tl.float32)"""

_AFFINE_TILE = """            g_c = (row % GROUPS) * ch_per_group + g_ch
            g_cm = g_ch < ch_per_group
            g_y = g_y * tl.load(w_ptr + g_c, mask=g_cm, other=0.0).to(tl.float32)[:, None]
            g_y = g_y + tl.load(b_ptr + g_c, mask=g_cm, other=0.0).to(tl.float32)[:, None]"""

_KERNEL = """

@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, span, ch_per_group, spatial, eps, GROUPS: tl.constexpr,
                      AFFINE: tl.constexpr, ONE_PASS: tl.constexpr, BLOCK_C: tl.constexpr,
                      BLOCK_S: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * span
    if ONE_PASS:  # the group as a (channels, spatial) tile: one weight and bias per tile row
        g_ch = tl.arange(0, BLOCK_C)
        g_sp = tl.arange(0, BLOCK_S)
        g_ok = (g_ch < ch_per_group)[:, None] & (g_sp < spatial)[None, :]
        g_at = g_ch[:, None] * spatial + g_sp[None, :]
        g_x = tl.load(x_ptr + base + g_at, mask=g_ok, other=0.0).to(tl.float32)
        g_d = tl.where(g_ok, g_x - tl.sum(tl.sum(g_x, axis=1), axis=0) / span, 0.0)
        g_y = g_d * (1.0 / tl.sqrt(tl.sum(tl.sum(g_d * g_d, axis=1), axis=0) / span + eps))
        if AFFINE:
{affine_one}
{epilogue_one}
        tl.store(y_ptr + base + g_at, {result_one}.to(y_ptr.dtype.element_ty), mask=g_ok)
        return
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, span, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + cols, mask=cols < span, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / span
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, span, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < span
        d = tl.where(mask, tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / span + eps)
    for start in range(0, span, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < span
        y = (tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32) - mean) * rstd
        if AFFINE:
{affine_loop}
{epilogue_loop}
        tl.store(y_ptr + base + cols, {result_loop}.to(y_ptr.dtype.element_ty), mask=mask)
"""

_FORWARD = """        x = {x}.contiguous()
        n, c = x.shape[0], x.shape[1]
        spatial = x[0, 0].numel()
        span = c // GROUPS * spatial
        y = torch.empty(x.shape, dtype={dtype}, device=x.device)
        w = {weight}
        b = {bias}
        block_c, block_s = triton.next_power_of_2(c // GROUPS), triton.next_power_of_2(spatial)
        one_pass = block_c * block_s <= ONE_PASS_LIMIT
        group_norm_kernel[(n * GROUPS,)](x, w, b, y, span, c // GROUPS, spatial, {eps!r}, GROUPS=GROUPS,
                                         AFFINE={affine}, ONE_PASS=one_pass, BLOCK_C=block_c,
                                         BLOCK_S=block_s, BLOCK=BLOCK_SIZE)
        return y"""


def _lines(lines: Sequence[str], rename: str, depth: int) -> str:
    """The epilogue's `tN = ...` lines over `y`, renamed to the branch's value and indented."""
    pad = " " * depth
    return "\n".join(pad + line.replace("{y}", rename) for line in lines) if lines else ""


def group_norm(
    args: Sequence[str],
    x: str,
    groups: int,
    eps: float,
    weight: str | None,
    bias: str | None,
    dtype: str,
    epilogue: Sequence[str] = (),
    result: str = "{y}",
    init: Sequence[str] = (),
    prelude: str = "",
) -> str:
    """The candidate module. `epilogue` lines read `{y}` (the normalised value) and end in `result`;
    `weight` / `bias` are forward-time expressions (None: no affine)."""
    affine = weight is not None
    one = [re.sub(r"\bt(\d+)\b", r"g_t\1", line) for line in epilogue]  # the tile's own names
    kernel = _KERNEL.format(
        affine_one=_AFFINE_TILE if affine else "            pass",
        affine_loop=_AFFINE.format(cols="cols", y="y", mask="mask") if affine else "            pass",
        epilogue_one=_lines(one, "g_y", 8),
        epilogue_loop=_lines(epilogue, "y", 8),
        result_one=re.sub(r"\bt(\d+)\b", r"g_t\1", result).replace("{y}", "g_y"),
        result_loop=result.replace("{y}", "y"),
    )
    fwd = _FORWARD.format(
        x=x, dtype=dtype, weight=weight or "x", bias=bias or "x", eps=float(eps), affine=affine
    )
    model = model_class(args, fwd, init)
    pre = f"\n\n{prelude.strip()}\n" if prelude else ""
    consts = f"\nBLOCK_SIZE = 4096\nGROUPS = {groups}\nONE_PASS_LIMIT = {ONE_PASS_LIMIT}\n"
    return HEADER + pre + consts + kernel + model
