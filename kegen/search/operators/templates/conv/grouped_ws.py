"""The grouped convolution's weight-stationary kernel (mtia): each program loads its pack's weight tile
of every tap once, then walks a run of output-row tiles.

`conv/grouped.py`'s row kernel reads the pack's nine (3 x 3) [BLOCK_CO, BLOCK_CI] weight tiles again for
every output row it computes: on ResNeXt's grouped 3x3 that is 72 KiB of weights per 4-8 KiB of output.
Here a program is one (image, pack of GPP groups, output-channel block) and a run of `PER` row tiles
(BLOCK_P columns of one output row), sized so about one program per PE covers the output, as
`conv/stationary.py` does for dense convolutions; the taps are unrolled at trace time under constexpr
guards (up to `KH_MAX` x `KW_MAX`). The pack's input channels are one block (BLOCK_CI >= GPP * CI_G):
the launch uses this kernel only where that and the footprint fit, else the row kernel.
"""

from __future__ import annotations

from kegen.search.operators.templates.conv.stationary import KH_MAX, KW_MAX, guarded, row_tap_dots
from kegen.search.operators.templates.gpu_conv import bn_act_apply, bn_prologue

_HEAD = [
    "@triton.jit",
    "def kegen_conv_grouped_ws_kernel(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, C_IN,",
    "                                 C_OUT, H, W, OH, OW, EPS, GROUPS, CI_G, CO_G, CO_BLOCKS, OW_BLOCKS,",
    "                                 TILES, PER,",
    "                                 KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr,",
    "                                 PAD_W: tl.constexpr, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr,",
    "                                 DIL_H: tl.constexpr, DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr,",
    "                                 HAS_BN: tl.constexpr, BN_AFFINE: tl.constexpr, HAS_RES: tl.constexpr,",
    "                                 ACT: tl.constexpr, GPP: tl.constexpr, BLOCK_CO: tl.constexpr,",
    "                                 BLOCK_CI: tl.constexpr, BLOCK_P: tl.constexpr):",
    "    n = tl.program_id(0)",
    "    pack = tl.program_id(1) // CO_BLOCKS  # its GPP groups: one block of the packed weight",
    "    g0 = pack * GPP",
    "    co_l = (tl.program_id(1) % CO_BLOCKS) * BLOCK_CO + tl.arange(0, BLOCK_CO)",
    "    co = g0 * CO_G + co_l",
    "    valid_co = (co_l < GPP * CO_G) & (g0 + co_l // CO_G < GROUPS)",
    "    ci_l = tl.arange(0, BLOCK_CI)",
    "    valid_ci = (ci_l < GPP * CI_G) & (g0 + ci_l // CI_G < GROUPS)",
    "    t0 = tl.program_id(2) * PER",
    "    t1 = tl.minimum(t0 + PER, TILES)",
    "    w_tile = w_ptr + (pack * (KH * KW) * (GPP * CO_G) + co_l[:, None]) * (GPP * CI_G) + ci_l[None, :]",
    "    w_mask = valid_co[:, None] & valid_ci[None, :]",
]


def grouped_stationary_kernel(kh_max: int = KH_MAX, kw_max: int = KW_MAX) -> str:
    """The kernel's text, taps unrolled up to kh_max x kw_max."""
    lines = list(_HEAD)
    for kh in range(kh_max):
        for kw in range(kw_max):
            load = (
                f"w{kh}_{kw} = tl.load(w_tile + ({kh} * KW + {kw}) * (GPP * CO_G) * (GPP * CI_G), "
                "mask=w_mask, other=0.0)"
            )
            guarded(lines, "    ", kh, kw, [load])
    lines += [
        "    if HAS_BIAS:",
        "        bias = tl.load(b_ptr + co, mask=valid_co, other=0.0).to(tl.float32)",
        *bn_prologue("    ", "co", "valid_co").splitlines(),
        "    x_img = x_ptr + n * C_IN * H * W + (g0 * CI_G + ci_l)[:, None] * (H * W)",
        "    y_img = y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW)",
        "    r_img = r_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW)",
        "    for t in range(t0, t1):",
        "        oh = t // OW_BLOCKS",
        "        ow = (t % OW_BLOCKS) * BLOCK_P + tl.arange(0, BLOCK_P)",
        "        acc = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)",
    ]
    row_tap_dots(lines, kh_max, kw_max, "valid_ci")
    out_ok = "valid_co[:, None] & (ow < OW)[None, :]"
    lines += [
        "        if HAS_BIAS:",
        "            acc += bias[:, None]",
        *bn_act_apply("        ", "[:, None]", ("r_img + oh * OW + ow[None, :]", out_ok)).splitlines(),
        "        tl.store(y_img + oh * OW + ow[None, :], acc.to(y_ptr.dtype.element_ty),",
        f"                 mask={out_ok})",
    ]
    return "\n".join(lines) + "\n"
