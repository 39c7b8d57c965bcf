"""Triton template for GroupNorm with its elementwise epilogue (SiLU in diffusion U-Nets, ReLU, GELU).

In a contiguous (N, C, *spatial) tensor a group's C/G channels are one contiguous span of
`(C / G) * spatial` elements, so x is viewed as (N * G, span) rows. A span that fits BLOCK is loaded
once: mean and variance in fp32, the per-channel weight and bias (channel = group's first + column //
spatial), the epilogue, one store; a longer span takes mean, variance and normalise passes over
BLOCK-sized chunks. Each program normalises one group.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.layout import MODEL_HEAD

ONE_PASS_LIMIT = 16384  # elements of a span loaded at once (64 KiB of fp32)

_AFFINE = """            ch = (row % GROUPS) * ch_per_group + {cols} // spatial
            {y} = {y} * tl.load(w_ptr + ch, mask={mask}, other=0.0).to(tl.float32)
            {y} = {y} + tl.load(b_ptr + ch, mask={mask}, other=0.0).to(tl.float32)"""

_KERNEL = """

@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, span, ch_per_group, spatial, eps, GROUPS: tl.constexpr,
                      AFFINE: tl.constexpr, ONE_PASS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * span
    if ONE_PASS:
        tile = tl.arange(0, BLOCK)
        ok = tile < span
        xt = tl.load(x_ptr + base + tile, mask=ok, other=0.0).to(tl.float32)
        dt = tl.where(ok, xt - tl.sum(xt, axis=0) / span, 0.0)
        yt = dt * (1.0 / tl.sqrt(tl.sum(dt * dt, axis=0) / span + eps))
        if AFFINE:
{affine_one}
{epilogue_one}
        tl.store(y_ptr + base + tile, {result_one}.to(y_ptr.dtype.element_ty), mask=ok)
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
        one_pass = span <= BLOCK_SIZE
        group_norm_kernel[(n * GROUPS,)](x, w, b, y, span, c // GROUPS, spatial, {eps!r}, GROUPS=GROUPS,
                                         AFFINE={affine}, ONE_PASS=one_pass, BLOCK=BLOCK_SIZE)
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
    span: int,
    epilogue: Sequence[str] = (),
    result: str = "{y}",
    init: Sequence[str] = (),
    prelude: str = "",
) -> str:
    """The candidate module. `epilogue` lines read `{y}` (the normalised value) and end in `result`;
    `weight` / `bias` are forward-time expressions (None: no affine); `span` sizes the first BLOCK."""
    block = max(64, min(ONE_PASS_LIMIT, 1 << max(0, span - 1).bit_length()))
    if span > ONE_PASS_LIMIT:
        block = 4096
    affine = weight is not None
    kernel = _KERNEL.format(
        affine_one=_AFFINE.format(cols="tile", y="yt", mask="ok") if affine else "            pass",
        affine_loop=_AFFINE.format(cols="cols", y="y", mask="mask") if affine else "            pass",
        epilogue_one=_lines(epilogue, "yt", 8),
        epilogue_loop=_lines(epilogue, "y", 8),
        result_one=result.replace("{y}", "yt"),
        result_loop=result.replace("{y}", "y"),
    )
    fwd = _FORWARD.format(
        x=x, dtype=dtype, weight=weight or "x", bias=bias or "x", eps=float(eps), affine=affine
    )
    head = MODEL_HEAD.rstrip("\n") + "".join(f"\n        {line}" for line in init) + "\n\n"
    model = head + f"    def forward(self, {', '.join(args)}):\n{fwd}\n"
    pre = f"\n\n{prelude.strip()}\n" if prelude else ""
    return HEADER + pre + f"\nBLOCK_SIZE = {block}\nGROUPS = {groups}\n" + kernel + model
