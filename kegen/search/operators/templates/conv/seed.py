"""Triton template for a plain convolution (one nn.Conv1d / nn.Conv2d, or F.conv1d / F.conv2d on a
parameter: any stride and dilation, groups 1, zero padding, bias or not), optionally followed by an
eval-mode BatchNorm and an activation (`gpu_conv.ACTIVATIONS`), in the seed form the convolution moves
rewrite: an implicit GEMM over (batch, BLOCK_CO output channels, BLOCK_P flattened output pixels), one
dot per tap and C_in block, then the bias, the BatchNorm computed from its running statistics and the
activation. The geometry is read from the module at forward time; the BatchNorm and activation are
named by ModelNew's `kegen_conv_epilogue`, which the rewrites keep. Drafted for references no
hand-written seed comes with; `conv_rows`, `conv_stationary` (mtia) and `gpu_conv` (GPUs) take it
from there.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.gpu_conv import (
    EPILOGUE_MARK,
    EPILOGUE_METHOD,
    GEOMETRY,
    bn_act_apply,
    bn_prologue,
    with_epilogue,
)

_RESIDUAL = (  # the output tile in the residual tensor: pointers, mask
    "r_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + pix[None, :]",
    "(co[:, None] < C_OUT) & (pix[None, :] < OH * OW)",
)
KERNEL = """
@triton.jit
def kegen_conv_seed_kernel(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, C_IN, C_OUT, H, W,
                           OH, OW, EPS,
                           KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                           STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, DIL_H: tl.constexpr,
                           DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_BN: tl.constexpr,
                           BN_AFFINE: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr,
                           BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_P: tl.constexpr):
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
                ih = oh * STRIDE_H + (kh * DIL_H - PAD_H)
                iw = ow * STRIDE_W + (kw * DIL_W - PAD_W)
                inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (pix < OH * OW)
                x = tl.load(x_ptr + n * C_IN * H * W + ci[:, None] * (H * W) + (ih * W + iw)[None, :],
                            mask=(ci[:, None] < C_IN) & inside[None, :], other=0.0)
                acc += tl.dot(w, x)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)[:, None]
    # BATCHNORM_ACTIVATION
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + pix[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=(co[:, None] < C_OUT) & (pix[None, :] < OH * OW))
""".replace(
    EPILOGUE_MARK, bn_prologue("    ", "co", "co < C_OUT") + bn_act_apply("    ", "[:, None]", _RESIDUAL)
)

_FORWARD = """
    def forward(self, {args}):
        conv = self.{attr}
        x = {x}.contiguous()
        r = {res}
        nd = x.dim() - 2
        w = conv.weight.detach().contiguous()
""" + GEOMETRY + """        shape = (batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow)
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        grid = (batch, triton.cdiv(c_out, 32), triton.cdiv(oh * ow, 64))
        kegen_conv_seed_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b,
                                     w if r is None else r, y, c_in, c_out,
                                     h, w_, oh, ow, eps, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=sh,
                                     STRIDE_W=sw, DIL_H=dh, DIL_W=dw, HAS_BIAS=b is not None,
                                     HAS_BN=bn is not None, BN_AFFINE=affine, HAS_RES=r is not None,
                                     ACT=act, BLOCK_CO=32, BLOCK_CI=32, BLOCK_P=64)
        return y"""


def conv_seed(
    args: Sequence[str],
    x: str,
    attr: str,
    init: Sequence[str],
    bn: str = "",
    act: str = "none",
    prelude: str = "",
    residual: str | None = None,
    kernel: str = KERNEL,
    forward: str = _FORWARD,
) -> str:
    """A whole candidate: the convolution module `self.<attr>` (built by `init`) applied to `x`, then
    the eval-mode BatchNorm `self.<bn>` (a dotted path; none where empty) and activation `act`;
    `prelude` (module-level definitions `init` uses, such as the reference's class) goes before
    ModelNew. `kernel` / `forward`: a variant's texts (`conv/grouped.py`)."""
    init_src = "".join(f"        {line}\n" for line in with_epilogue(init, bn, act, residual))
    return (
        HEADER
        + kernel
        + (f"\n\n{prelude.strip()}\n" if prelude else "")
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n"
        + init_src
        + EPILOGUE_METHOD
        + forward.replace("{args}", ", ".join(args))
        .replace("{attr}", attr)
        .replace("{x}", x)
        .replace("{res}", f"{residual}.contiguous()" if residual else "None")
        + "\n"
    )
