"""Triton template for a grouped convolution (nn.Conv1d / nn.Conv2d with 1 < groups < channels: ResNeXt,
RegNet and grouped-bottleneck blocks), with the seed template's BatchNorm, activation and residual.

The seed kernel (`conv/seed.py`) with each program inside GPP whole groups: its output channels are
those groups' (`CO_BLOCKS` blocks along grid axis 1 where one group is wider than a block), its input
channels run over the same groups' only, and the weight, (C_out, C_in / groups, taps), is read as a
block-diagonal tile (zero where a channel pair is in different groups), packed once per weight version
so each program's tile is one contiguous read. Groups narrower than the
dot's smallest side (16) are packed GPP to a program: ResNeXt's 8-channel groups make 64 x 64 dots,
one in eight of their products useful, instead of 16 x 16 dots three quarters masked. With unit stride
and rows of 16 columns or more a program takes one output row's columns (`ROW_TILES`), so each tap's
input tile is one block read instead of a gather (D81, later paragraph); where the pack's input channels
fit one block and every tap's weight tile fits the local store beside the row tiles, the weight-stationary
kernel of `conv/grouped_ws.py` walks runs of those rows instead (D89). Derived from
the seed kernel's text, so the two stay one algorithm; the seed's moves (conv_rows, conv_stationary,
gpu_conv) do not read this kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from kegen.search.operators.templates.conv import seed
from kegen.search.operators.templates.conv.grouped_ws import grouped_stationary_kernel
from kegen.search.operators.templates.conv.stationary import KH_MAX, KW_MAX, LOCAL_BYTES

WS_PROGRAMS = 64  # the stationary kernel's programs: about one a PE


def _derive(text: str, edits: Sequence[tuple[str, str]]) -> str:
    for old, new in edits:
        if text.count(old) != 1:
            raise AssertionError(f"the seed convolution template changed: {old!r} is not there once")
        text = text.replace(old, new)
    return text


KERNEL = _derive(
    seed.KERNEL,
    (
        ("def kegen_conv_seed_kernel(", "def kegen_conv_grouped_kernel("),
        ("OH, OW, EPS,\n", "OH, OW, EPS, GROUPS, CI_G, CO_G, CO_BLOCKS, OW_BLOCKS,\n"),
        (
            "    pix = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)\n"
            "    oh = pix // OW\n"
            "    ow = pix % OW\n",
            "    if ROW_TILES:  # one output row's columns: each tap's input tile is one block read\n"
            "        oh = tl.program_id(2) // OW_BLOCKS\n"
            "        ow = (tl.program_id(2) % OW_BLOCKS) * BLOCK_P + tl.arange(0, BLOCK_P)\n"
            "        pix = oh * OW + ow\n"
            "    else:  # flattened pixels (gathered where a tile spans rows)\n"
            "        pix = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)\n"
            "        oh = pix // OW\n"
            "        ow = pix % OW\n"
            "    pix_ok = (ow < OW) & (pix < OH * OW)\n",
        ),
        ("& (iw < W) & (pix < OH * OW)", "& (iw < W) & pix_ok"),
        ("BLOCK_CO: tl.constexpr,", "GPP: tl.constexpr, ROW_TILES: tl.constexpr, BLOCK_CO: tl.constexpr,"),
        (
            "    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)\n",
            "    pack = tl.program_id(1) // CO_BLOCKS  # its GPP groups: one block of the packed weight\n"
            "    g0 = pack * GPP\n"
            "    co_l = (tl.program_id(1) % CO_BLOCKS) * BLOCK_CO + tl.arange(0, BLOCK_CO)\n"
            "    co = g0 * CO_G + co_l\n"
            "    grp_co = g0 + co_l // CO_G\n"
            "    valid_co = (co_l < GPP * CO_G) & (grp_co < GROUPS)\n",
        ),
        (
            "    for ci0 in range(0, C_IN, BLOCK_CI):\n        ci = ci0 + ci_offs\n",
            "    for ci0 in range(0, GPP * CI_G, BLOCK_CI):\n"
            "        ci_l = ci0 + ci_offs\n"
            "        ci = g0 * CI_G + ci_l\n"
            "        grp_ci = g0 + ci_l // CI_G\n"
            "        valid_ci = (ci_l < GPP * CI_G) & (grp_ci < GROUPS)\n",
        ),
        (
            "w_ptr + co[:, None] * (C_IN * KH * KW) + ci[None, :] * (KH * KW) + kh * KW + kw,",
            "w_ptr + ((pack * (KH * KW) + kh * KW + kw) * (GPP * CO_G) + co_l[:, None]) * (GPP * CI_G)\n"
            "                            + ci_l[None, :],",
        ),
        (
            "mask=(co[:, None] < C_OUT) & (ci[None, :] < C_IN), other=0.0)",
            "mask=valid_co[:, None] & valid_ci[None, :], other=0.0)",
        ),
        (
            "mask=(ci[:, None] < C_IN) & inside[None, :], other=0.0)",
            "mask=valid_ci[:, None] & inside[None, :], other=0.0)",
        ),
    ),
)
KERNEL = (
    KERNEL.replace("mask=co < C_OUT,", "mask=valid_co,")
    .replace("(co[:, None] < C_OUT)", "valid_co[:, None]")
    .replace("(pix[None, :] < OH * OW)", "pix_ok[None, :]")
)

# ModelNew's method packing the weight for the kernel, once per weight storage and version
GROUPED_WEIGHT_METHOD = '''
    def _grouped_weight(self, w, groups, gpp):
        """(C_out, C_in / groups, *taps) -> (packs, taps, gpp * co_g, gpp * ci_g): each pack's gpp groups
        block-diagonal (zeros across groups), so a program's weight tile is one contiguous read."""
        key = (w.data_ptr(), w._version, tuple(w.shape), w.device, groups, gpp)
        if getattr(self, "_kegen_group_key", None) != key:
            co_g, ci_g, taps = w.shape[0] // groups, w.shape[1], w[0, 0].numel()
            packs = -(-groups // gpp)
            wg = w.detach().reshape(groups, co_g, ci_g, taps).permute(0, 3, 1, 2)
            wg = torch.cat([wg, wg.new_zeros(packs * gpp - groups, taps, co_g, ci_g)]).reshape(
                packs, gpp, taps, co_g, ci_g)
            out = wg.new_zeros(packs, taps, gpp * co_g, gpp * ci_g)
            for j in range(gpp):
                out[:, :, j * co_g:(j + 1) * co_g, j * ci_g:(j + 1) * ci_g] = wg[:, j]
            self._kegen_group_weight, self._kegen_group_key = out, key
        return self._kegen_group_weight
'''

# row tiles whose pack's input channels are one block and whose footprint fits (weights of every tap,
# accumulator and output tile, two stages of the taps' input tiles): the weight-stationary kernel on
# mtia (host-side tensors); a GPU keeps the row kernel (every tap's tile held would spill its registers)
_STATIONARY_LAUNCH = f"""        ws_ci = max(16, triton.next_power_of_2(gpp * ci_g))
        es = x.element_size()
        ws_bytes = (kh * kw * block_co * ws_ci * es + block_co * block_p * (4 + es)
                    + 2 * kh * kw * ws_ci * block_p * es)
        fits = kh <= {KH_MAX} and kw <= {KW_MAX} and ws_ci <= 128 and ws_bytes <= {LOCAL_BYTES}
        if not x.is_cuda and rows and fits:
            per = triton.cdiv(tiles, max(1, {WS_PROGRAMS} // (batch * grid[1])))  # grid[1]: packs x co blocks
            kegen_conv_grouped_ws_kernel[(batch, grid[1], triton.cdiv(tiles, per))](
                x, self._grouped_weight(w, groups, gpp), w if b is None else b, bn_m, bn_v, bn_g, bn_b,
                w if r is None else r, y, c_in, c_out, h, w_, oh, ow, eps, groups, ci_g, co_g, co_blocks,
                ow_blocks, tiles, per, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=sh, STRIDE_W=sw,
                DIL_H=dh, DIL_W=dw, HAS_BIAS=b is not None, HAS_BN=bn is not None, BN_AFFINE=affine,
                HAS_RES=r is not None, ACT=act, GPP=gpp, BLOCK_CO=block_co, BLOCK_CI=ws_ci,
                BLOCK_P=block_p, num_stages=2)
            return y
"""

_ROW_LAUNCH = "        kegen_conv_grouped_kernel[grid]("
_FORWARD = GROUPED_WEIGHT_METHOD + _derive(
    seed._FORWARD,
    (
        ("        w = conv.weight.detach().contiguous()\n", "        w = conv.weight.detach()\n"),
        (
            "        grid = (batch, triton.cdiv(c_out, 32), triton.cdiv(oh * ow, 64))\n",
            "        groups = conv.groups\n"
            "        ci_g, co_g = c_in // groups, c_out // groups\n"
            "        # narrow groups: GPP a program, the weight tile block-diagonal (zero across groups)\n"
            "        gpp = max(1, min(groups, 64 // co_g, 64 // ci_g)) if min(co_g, ci_g) < 16 else 1\n"
            "        block_co = max(16, min(64, triton.next_power_of_2(gpp * co_g)))\n"
            "        block_ci = max(16, min(64 if gpp > 1 else 32, triton.next_power_of_2(gpp * ci_g)))\n"
            "        co_blocks = triton.cdiv(gpp * co_g, block_co)\n"
            "        # unit-stride rows of 16 columns or more: a program takes one row's (block reads)\n"
            "        rows = sw == 1 and ow >= 16\n"
            "        block_p = min(64, triton.next_power_of_2(ow)) if rows else 64\n"
            "        ow_blocks = triton.cdiv(ow, block_p)\n"
            "        tiles = oh * ow_blocks if rows else triton.cdiv(oh * ow, 64)\n"
            "        grid = (batch, triton.cdiv(groups, gpp) * co_blocks, tiles)\n",
        ),
        (
            "kegen_conv_seed_kernel[grid](x, w,",
            "kegen_conv_grouped_kernel[grid](x, self._grouped_weight(w, groups, gpp),",
        ),
        (
            "h, w_, oh, ow, eps, KH=kh,",
            "h, w_, oh, ow, eps, groups, ci_g, co_g, co_blocks, ow_blocks, KH=kh,",
        ),
        (
            "BLOCK_CO=32, BLOCK_CI=32, BLOCK_P=64)",
            "GPP=gpp, ROW_TILES=rows, BLOCK_CO=block_co, BLOCK_CI=block_ci, BLOCK_P=block_p)",
        ),
        ("        kegen_conv_grouped_kernel[grid](", _STATIONARY_LAUNCH + _ROW_LAUNCH),
    ),
)


# the whole candidate: `seed.conv_seed`'s, with these kernels and forward
conv_grouped = partial(seed.conv_seed, kernel=KERNEL + "\n\n" + grouped_stationary_kernel(), forward=_FORWARD)
