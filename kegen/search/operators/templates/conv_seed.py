"""Triton template for a plain convolution (one nn.Conv1d / nn.Conv2d: stride 1, dilation 1, groups
1, zero padding, bias or not) in the seed form the convolution moves rewrite: an implicit GEMM over
(batch, BLOCK_CO output channels, BLOCK_P flattened output pixels), one dot per tap and C_in block,
the bias the only epilogue, the module's own kernel size and padding read at forward time. Drafted
for references no hand-written seed comes with; `conv_rows`, `conv_stationary` (mtia) and
`gpu_conv` (GPUs) take it from there.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER

KERNEL = """
@triton.jit
def kegen_conv_seed_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW,
                           KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                           HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
                           BLOCK_P: tl.constexpr):
    n = tl.program_id(0)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    pix = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
    oh = pix // OW
    ow = pix % OW
    ci_offs = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)
    for ci0 in range(0, C_IN, BLOCK_CI):
        ci = ci0 + ci_offs
        for kh in range(KH):
            for kw in range(KW):
                w = tl.load(w_ptr + co[:, None] * (C_IN * KH * KW) + ci[None, :] * (KH * KW) + kh * KW + kw,
                            mask=(co[:, None] < C_OUT) & (ci[None, :] < C_IN), other=0.0)
                ih = oh + (kh - PAD_H)
                iw = ow + (kw - PAD_W)
                inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (pix < OH * OW)
                x = tl.load(x_ptr + n * C_IN * H * W + ci[:, None] * (H * W) + (ih * W + iw)[None, :],
                            mask=(ci[:, None] < C_IN) & inside[None, :], other=0.0)
                acc += tl.dot(w, x, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + pix[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=(co[:, None] < C_OUT) & (pix[None, :] < OH * OW))
"""

_FORWARD = """
        conv = self.{attr}
        x = {x}.contiguous()
        nd = x.dim() - 2
        w = conv.weight.detach().contiguous()
        b = conv.bias.detach() if conv.bias is not None else None
        batch, c_in, c_out = x.shape[0], x.shape[1], conv.out_channels
        if nd == 1:
            h, w_, kh, kw, ph, pw = 1, x.shape[2], 1, conv.kernel_size[0], 0, conv.padding[0]
        else:
            h, w_ = x.shape[2], x.shape[3]
            (kh, kw), (ph, pw) = conv.kernel_size, conv.padding
        oh, ow = h + 2 * ph - kh + 1, w_ + 2 * pw - kw + 1
        shape = (batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow)
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        grid = (batch, triton.cdiv(c_out, 32), triton.cdiv(oh * ow, 64))
        kegen_conv_seed_kernel[grid](x, w, w if b is None else b, y, c_in, c_out, h, w_, oh, ow,
                                     KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, HAS_BIAS=b is not None,
                                     BLOCK_CO=32, BLOCK_CI=32, BLOCK_P=64)
        return y"""


def conv_seed(args: Sequence[str], x: str, attr: str, init: Sequence[str]) -> str:
    """A whole candidate: the convolution module `self.<attr>` (rebuilt by `init`) applied to `x`."""
    init_src = "".join(f"        {line}\n" for line in init)
    return (
        HEADER
        + KERNEL
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n"
        + init_src
        + f"\n    def forward(self, {', '.join(args)}):"
        + _FORWARD.replace("{attr}", attr).replace("{x}", x)
        + "\n"
    )
