"""Triton template for a transposed convolution (nn.ConvTranspose1d / nn.ConvTranspose2d: any stride,
padding, output padding and dilation, groups 1, bias or not) computed by output phase.

An output pixel (oh, ow) receives tap (kh, kw) of input pixel ((oh + pad - kh * dil) / stride, ...)
only where that division is exact, so with stride s most taps miss most outputs: an implicit GEMM over
all taps would spend (s_h * s_w - 1) / (s_h * s_w) of its dot-product work on masked zeros. The
outputs with one residue (oh % s_h, ow % s_w) = (RH, RW), a phase, all take the same taps, so each phase
is one launch whose taps are chosen at compile time (`tl.static_range` and constexpr conditions): a 2x2
stride-2 upsampling is four plain GEMMs (one tap each), a 4x4 stride-2 one four GEMMs of four taps. A
program computes BLOCK_CO output channels x BLOCK_P columns of one output row of one phase of one
image, one dot per tap and C_in block (each tap's input tile is one input row's contiguous run); the
weights are packed once per weight version to (taps, C_out, C_in), so a weight tile is contiguous along
C_in. Each phase re-reads the input (from the SRAM cache after the first). Where every output pixel takes
one tap (kernel == stride, no padding or dilation: the 2x2 stride-2 upsampling) one launch computes all
phases of an input tile with one stacked dot (TILES_KERNEL), reading the input once: 8 x 128 x 32 x 32
fp16 -> 64 channels runs 48.4 us on mtia-2i (64% of its roofline; 93.9 us per phase; Inductor's draft
did not finish one evaluation in 300 s).
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.gpu_conv import PACKED_WEIGHT_METHOD

BLOCK_CO, BLOCK_CI, BLOCK_P = 64, 32, 64

KERNEL = """
@triton.jit
def kegen_conv_transpose_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW, PHASE_H, PHASE_W,
                                KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                                PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                                RH: tl.constexpr, RW: tl.constexpr, HAS_BIAS: tl.constexpr,
                                BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_P: tl.constexpr):
    n = tl.program_id(0)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    col_blocks = tl.cdiv(PHASE_W, BLOCK_P)
    i = tl.program_id(2) // col_blocks  # this phase's output row RH + SH * i
    j = (tl.program_id(2) % col_blocks) * BLOCK_P + tl.arange(0, BLOCK_P)  # its columns RW + SW * j
    pmask = j < PHASE_W
    ci_offs = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)
    for kh in tl.static_range(KH):
        if (RH + PH - kh * DH) % SH == 0:  # the taps that reach this phase's rows (compile time)
            ih = i + (RH + PH - kh * DH) // SH
            for kw in tl.static_range(KW):
                if (RW + PW - kw * DW) % SW == 0:
                    iw = j + (RW + PW - kw * DW) // SW
                    inside = (iw >= 0) & (iw < W) & pmask & (ih >= 0) & (ih < H)
                    at = ih * W + iw  # one input row: a contiguous run
                    w_tap = w_ptr + (kh * KW + kw) * C_OUT * C_IN
                    for ci0 in range(0, C_IN, BLOCK_CI):
                        ci = ci0 + ci_offs
                        wt = tl.load(w_tap + co[:, None] * C_IN + ci[None, :],
                                     mask=(co[:, None] < C_OUT) & (ci[None, :] < C_IN), other=0.0)
                        xt = tl.load(x_ptr + n * C_IN * H * W + ci[:, None] * (H * W) + at[None, :],
                                     mask=(ci[:, None] < C_IN) & inside[None, :], other=0.0)
                        acc += tl.dot(wt, xt)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)[:, None]
    out = (RH + SH * i) * OW + RW + SW * j
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + out[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=(co[:, None] < C_OUT) & pmask[None, :])
"""

# kernel == stride, no padding or dilation (the 2x2 stride-2 upsampling): every output pixel takes
# exactly one tap of one input pixel, the same input pixel for all phases, so one program computes every
# phase of its input tile with one dot: its weight tile stacks the taps' [BLOCK_CO, BLOCK_CI] tiles
# (rows tap-major), and the input is read once instead of once per phase
TILES_KERNEL = """
@triton.jit
def kegen_conv_transpose_tiles_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW,
                                      SH: tl.constexpr, SW: tl.constexpr, HAS_BIAS: tl.constexpr,
                                      BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_P: tl.constexpr):
    n = tl.program_id(0)
    r = tl.arange(0, SH * SW * BLOCK_CO)  # the stacked rows: tap (r // BLOCK_CO), channel in block
    tap = r // BLOCK_CO
    co = tl.program_id(1) * BLOCK_CO + r % BLOCK_CO
    col_blocks = tl.cdiv(W, BLOCK_P)
    i = tl.program_id(2) // col_blocks  # the input row; its outputs are rows SH * i + tap // SW
    j = (tl.program_id(2) % col_blocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    jmask = j < W
    ci_offs = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((SH * SW * BLOCK_CO, BLOCK_P), dtype=tl.float32)
    for ci0 in range(0, C_IN, BLOCK_CI):
        ci = ci0 + ci_offs
        wt = tl.load(w_ptr + (tap * C_OUT + co)[:, None] * C_IN + ci[None, :],
                     mask=(co[:, None] < C_OUT) & (ci[None, :] < C_IN), other=0.0)
        xt = tl.load(x_ptr + n * C_IN * H * W + ci[:, None] * (H * W) + i * W + j[None, :],
                     mask=(ci[:, None] < C_IN) & jmask[None, :], other=0.0)
        acc += tl.dot(wt, xt)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)[:, None]
    row = n * C_OUT * OH * OW + co * (OH * OW) + (SH * i + tap // SW) * OW + tap % SW
    tl.store(y_ptr + row[:, None] + SW * j[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(co[:, None] < C_OUT) & jmask[None, :])
"""

# a transposed convolution's weight is (C_in, C_out, *taps): the same permutation gives (taps, C_out, C_in)
_PACK = PACKED_WEIGHT_METHOD.replace(
    "(C_out, C_in, *taps) -> (taps, C_in, C_out)", "(C_in, C_out, *taps) -> (taps, C_out, C_in)"
)

_FORWARD = """
    def forward(self, {args}):
        conv = self.{attr}
        if conv.groups != 1 or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("the phase kernel covers groups 1 and numeric zero padding")
        x = {x}.contiguous()
        nd = x.dim() - 2
        x4 = x if nd == 2 else x.unsqueeze(2)
        batch, c_in, h, w_ = x4.shape
        w = self._packed_weight(conv.weight)
        b = conv.bias
        c_out = conv.out_channels
        one = (1,) if nd == 1 else ()
        (kh, kw), (sh, sw) = one + tuple(conv.kernel_size), one + tuple(conv.stride)
        (ph, pw), (dh, dw) = (0,) * (2 - nd) + tuple(conv.padding), one + tuple(conv.dilation)
        (oph, opw) = (0,) * (2 - nd) + tuple(conv.output_padding)
        oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
        ow = (w_ - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
        y = torch.empty((batch, c_out, oh, ow), dtype=x.dtype, device=x.device)
        taps = sh * sw
        one_tap = (kh, kw) == (sh, sw) and (ph, pw, oph, opw, dh, dw) == (0, 0, 0, 0, 1, 1)
        if one_tap and taps & (taps - 1) == 0:  # each output pixel one tap (a power-of-two count)
            block_p = min(CT_BLOCK_P, triton.next_power_of_2(w_))
            # the stacked tile (taps x BLOCK_CO rows, at most 256): every output channel where they fit
            block_co = max(16, min(triton.next_power_of_2(c_out), 256 // taps))
            grid = (batch, triton.cdiv(c_out, block_co), h * triton.cdiv(w_, block_p))
            kegen_conv_transpose_tiles_kernel[grid](x4, w, w if b is None else b, y, c_in, c_out, h, w_,
                                                    oh, ow, SH=sh, SW=sw, HAS_BIAS=b is not None,
                                                    BLOCK_CO=block_co, BLOCK_CI=CT_BLOCK_CI, BLOCK_P=block_p)
            return y if nd == 2 else y.squeeze(2)
        for rh in range(sh):
            for rw in range(sw):
                phase_h, phase_w = max(0, -(-(oh - rh) // sh)), max(0, -(-(ow - rw) // sw))
                if phase_h * phase_w == 0:
                    continue
                block_p = min(CT_BLOCK_P, triton.next_power_of_2(phase_w))
                grid = (batch, triton.cdiv(c_out, CT_BLOCK_CO), phase_h * triton.cdiv(phase_w, block_p))
                kegen_conv_transpose_kernel[grid](x4, w, w if b is None else b, y, c_in, c_out, h, w_, oh, ow,
                                                  phase_h, phase_w, KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw,
                                                  DH=dh, DW=dw, RH=rh, RW=rw, HAS_BIAS=b is not None,
                                                  BLOCK_CO=CT_BLOCK_CO, BLOCK_CI=CT_BLOCK_CI,
                                                  BLOCK_P=block_p)
        return y if nd == 2 else y.squeeze(2)"""


def conv_transpose(args: Sequence[str], x: str, attr: str, init: Sequence[str], prelude: str = "") -> str:
    """A whole candidate: the transposed convolution module `self.<attr>` (built by `init`, which
    `prelude`'s module-level definitions may serve) applied to `x`."""
    init_src = "".join(f"        {line}\n" for line in init)
    return (
        HEADER
        + f"\nCT_BLOCK_CO, CT_BLOCK_CI, CT_BLOCK_P = {BLOCK_CO}, {BLOCK_CI}, {BLOCK_P}\n"
        + KERNEL
        + TILES_KERNEL
        + (f"\n\n{prelude.strip()}\n" if prelude else "")
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + "        super().__init__()\n"
        + init_src
        + _PACK
        + _FORWARD.replace("{args}", ", ".join(args)).replace("{attr}", attr).replace("{x}", x)
        + "\n"
    )
