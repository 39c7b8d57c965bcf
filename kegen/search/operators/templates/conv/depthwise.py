"""Triton template for a depthwise 2-D convolution (nn.Conv2d with groups == in == out channels): one
program per BLOCK_C channels x BLOCK_W output pixels of one output row of one image, each tap one
strided block load of the input row (masked at the image's edges, a scalar row test) times the
channels' tap weights on the SIMD, accumulated in fp32. A depthwise convolution has no reduction over
channels, so the implicit-GEMM form Inductor drafts (a K of KH x KW per output channel) wastes the dot
engine; this is the stencil form. Stride, padding and dilation are runtime arguments; the tap loops
are unrolled (KH, KW constexpr). Block sizes are module constants (`DW_BLOCK_C`, `DW_BLOCK_W`) for the
block moves.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER, pow2_block
from kegen.search.operators.templates.gpu_conv import (
    EPILOGUE_MARK,
    EPILOGUE_METHOD,
    bn_act_apply,
    bn_prologue,
    with_epilogue,
)

_RESIDUAL = (  # the output tile in the residual tensor: pointers, mask
    "r_ptr + n * C * OH * OW + c[:, None] * (OH * OW) + oh * OW + ow[None, :]",
    "c_ok[:, None] & (ow < OW)[None, :]",
)
KERNEL = """
@triton.jit
def kegen_depthwise_kernel(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, C, H, W, OH, OW,
                           STRIDE_H, STRIDE_W, PAD_H, PAD_W, DIL_H, DIL_W, EPS, KH: tl.constexpr,
                           KW: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_BN: tl.constexpr,
                           BN_AFFINE: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr,
                           BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr):
    n_wb = tl.cdiv(OW, BLOCK_W)
    oh = tl.program_id(0) // n_wb
    ow = (tl.program_id(0) % n_wb) * BLOCK_W + tl.arange(0, BLOCK_W)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(2)
    c_ok = c < C
    x_img = x_ptr + n * C * H * W + c[:, None] * (H * W)
    acc = tl.zeros((BLOCK_C, BLOCK_W), dtype=tl.float32)
    for kh in tl.static_range(KH):
        ih = oh * STRIDE_H - PAD_H + kh * DIL_H
        row_ok = (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * STRIDE_W - PAD_W + kw * DIL_W
            ok = (iw >= 0) & (iw < W) & row_ok
            x = tl.load(x_img + ih * W + iw[None, :], mask=c_ok[:, None] & ok[None, :], other=0.0)
            w = tl.load(w_ptr + c * (KH * KW) + (kh * KW + kw), mask=c_ok, other=0.0)
            acc += x.to(tl.float32) * w.to(tl.float32)[:, None]
    if HAS_BIAS:
        acc += tl.load(b_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[:, None]
    # BATCHNORM_ACTIVATION
    tl.store(y_ptr + n * C * OH * OW + c[:, None] * (OH * OW) + oh * OW + ow[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=c_ok[:, None] & (ow < OW)[None, :])
""".replace(EPILOGUE_MARK, bn_prologue("    ", "c", "c_ok") + bn_act_apply("    ", "[:, None]", _RESIDUAL))


def depthwise(
    args: Sequence[str],
    x: str,
    conv: str,
    init: Sequence[str],
    channels: int,
    out_w: int,
    bn: str = "",
    act: str = "none",
    prelude: str = "",
    residual: str | None = None,
) -> str:
    """A whole candidate: the depthwise convolution module `self.<conv>` (built by `init`) applied to
    the forward-time expression `x` ([N, C, H, W]), then the eval-mode BatchNorm `self.<bn>` (none
    where empty), the forward argument `residual` (added before the activation) and activation `act` (as
    `templates.conv.seed`); `prelude` goes before ModelNew."""
    block_c = pow2_block(channels, 16, 64)
    block_w = pow2_block(out_w, 16, 64)
    residual_src = f"{residual}.contiguous()" if residual else "None"
    body = (
        f"        x = {x}.contiguous()\n"
        f"        r = {residual_src}\n"
        f"        conv = self.{conv}\n"
        "        w = conv.weight\n"
        "        b, bn, eps, affine, act = self._epilogue(conv)\n"
        "        bn_m, bn_v, bn_g, bn_b = bn or (w, w, w, w)\n"
        "        batch, c, h, w_ = x.shape\n"
        "        kh, kw = conv.kernel_size\n"
        "        (sh, sw), (ph, pw), (dh, dw) = conv.stride, conv.padding, conv.dilation\n"
        "        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1\n"
        "        ow = (w_ + 2 * pw - dw * (kw - 1) - 1) // sw + 1\n"
        "        y = torch.empty((batch, c, oh, ow), dtype=x.dtype, device=x.device)\n"
        "        grid = (oh * triton.cdiv(ow, DW_BLOCK_W), triton.cdiv(c, DW_BLOCK_C), batch)\n"
        "        kegen_depthwise_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b,\n"
        "                                     w if r is None else r, y, c,\n"
        "                                     h, w_, oh, ow, sh, sw, ph, pw, dh, dw, eps, KH=kh, KW=kw,\n"
        "                                     HAS_BIAS=b is not None, HAS_BN=bn is not None,\n"
        "                                     BN_AFFINE=affine, HAS_RES=r is not None, ACT=act,\n"
        "                                     BLOCK_C=DW_BLOCK_C, BLOCK_W=DW_BLOCK_W)\n"
        "        return y"
    )
    init_src = "".join(f"        {line}\n" for line in with_epilogue(init, bn, act, residual))
    return (
        HEADER
        + f"\nDW_BLOCK_C = {block_c}\nDW_BLOCK_W = {block_w}\n"
        + KERNEL
        + (f"\n\n{prelude.strip()}\n" if prelude else "")
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n"
        + init_src
        + EPILOGUE_METHOD
        + f"\n    def forward(self, {', '.join(args)}):\n{body}\n"
    )
