"""Triton kernels for the ops Inductor leaves to aten on the host (GEMMs and convolutions).

Inductor's CPU path calls `extern_kernels.mm / addmm / bmm / baddbmm / convolution` (library code
on the host). Drafted candidates call these launchers instead, so every FLOP runs on the device:
one batched, strided matmul kernel with an optional `beta * bias` epilogue, and one implicit-GEMM
convolution kernel for 1-D/2-D/3-D, strided, padded, dilated, grouped and transposed convolutions
(depthwise ones, one input channel a group, as multiply-adds over every channel at once). Their
source is copied into candidates (`EXTERN_SOURCES`), where the search tunes the module-level block
sizes.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

MM_BLOCK_M = 32
MM_BLOCK_N = 32
MM_BLOCK_K = 32
CONV_BLOCK_M = 32
CONV_BLOCK_N = 16
CONV_BLOCK_K = 16


@triton.jit
def kegen_matmul_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
    stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn,
    stride_biasb, stride_biasm, stride_biasn, alpha, beta,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    batch = tl.program_id(2)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(
            a_ptr + batch * stride_ab + rm[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rm[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + batch * stride_bb + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b)
    acc = acc * alpha
    if HAS_BIAS:
        bias = tl.load(
            bias_ptr + batch * stride_biasb + rm[:, None] * stride_biasm + rn[None, :] * stride_biasn,
            mask=(rm[:, None] < M) & (rn[None, :] < N),
            other=0.0,
        )
        acc += beta * bias.to(tl.float32)
    tl.store(c_ptr + batch * stride_cb + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


def kegen_matmul(a: Any, b: Any, out: Any, bias: Any = None, alpha: float = 1.0, beta: float = 1.0) -> Any:
    """out = alpha * (a @ b) + beta * bias for 2-D or batched 3-D operands (any strides); bias
    broadcasts to out's shape."""
    a3, b3, c3 = (t if t.dim() == 3 else t.unsqueeze(0) for t in (a, b, out))
    batches, m, k = a3.shape
    n = b3.shape[-1]
    bias3 = c3 if bias is None else bias.expand(out.shape)
    bias3 = bias3 if bias3.dim() == 3 else bias3.unsqueeze(0)
    grid = (triton.cdiv(m, MM_BLOCK_M), triton.cdiv(n, MM_BLOCK_N), batches)
    kegen_matmul_kernel[grid](
        a3, b3, c3, bias3, m, n, k, *a3.stride(), *b3.stride(), *c3.stride(), *bias3.stride(), alpha, beta,
        HAS_BIAS=bias is not None, BLOCK_M=MM_BLOCK_M, BLOCK_N=MM_BLOCK_N, BLOCK_K=MM_BLOCK_K,
    )  # fmt: skip
    return out


def kegen_mm(a: Any, b: Any, out: Any) -> Any:
    """aten.mm(a, b, out=out) as a Triton kernel."""
    return kegen_matmul(a, b, out)


def kegen_bmm(a: Any, b: Any, out: Any) -> Any:
    """aten.bmm(a, b, out=out) as a Triton kernel."""
    return kegen_matmul(a, b, out)


def kegen_addmm(bias: Any, a: Any, b: Any, alpha: float = 1.0, beta: float = 1.0, out: Any = None) -> Any:
    """aten.addmm(bias, a, b, alpha=, beta=, out=) as a Triton kernel."""
    return kegen_matmul(a, b, out, bias=bias, alpha=alpha, beta=beta)


def kegen_baddbmm(bias: Any, a: Any, b: Any, alpha: float = 1.0, beta: float = 1.0, out: Any = None) -> Any:
    """aten.baddbmm(bias, a, b, alpha=, beta=, out=) as a Triton kernel."""
    return kegen_matmul(a, b, out, bias=bias, alpha=alpha, beta=beta)


@triton.jit
def kegen_conv_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr, BATCH, D, H, W, OD, OH, OW, KD, KH, KW, C_IN_G, C_OUT_G, MULT,
    sxn, sxc, sxd, sxh, sxw, sw0, sw1, swd, swh, sww, syn, syc, syd, syh, syw,
    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
    HAS_BIAS: tl.constexpr, TRANSPOSED: tl.constexpr, DEPTHWISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # implicit GEMM: rows = output positions (n, od, oh, ow), columns = output channels of group g,
    # reduction = (input channel of the group, kd, kh, kw). DEPTHWISE (one input channel a group, MULT
    # output channels each; launched as one group of all C_OUT_G output channels): no reduction over
    # channels to give a dot, so each tap is a multiply-add of the input tile and the taps' weights.
    g = tl.program_id(2)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    M = BATCH * OD * OH * OW
    KTOT = C_IN_G * KD * KH * KW
    ow = rm % OW
    t = rm // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    n = t // OD
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if DEPTHWISE:
        ic = rn // MULT
        c_ok = rn < C_OUT_G
        for tap in range(0, KD * KH * KW):
            kw = tap % KW
            kh = (tap // KW) % KH
            kd = tap // (KW * KH)
            i_d = od * stride_d - pad_d + kd * dil_d
            i_h = oh * stride_h - pad_h + kh * dil_h
            i_w = ow * stride_w - pad_w + kw * dil_w
            ok = (i_d >= 0) & (i_h >= 0) & (i_w >= 0) & (i_d < D) & (i_h < H) & (i_w < W) & (rm < M)
            x_pos = n * sxn + tl.where(ok, i_d * sxd + i_h * sxh + i_w * sxw, 0)
            x_off = x_pos[:, None] + ic[None, :] * sxc
            a = tl.load(x_ptr + x_off, mask=ok[:, None] & c_ok[None, :], other=0.0)
            b = tl.load(w_ptr + rn * sw0 + kd * swd + kh * swh + kw * sww, mask=c_ok, other=0.0)
            acc += a.to(tl.float32) * b.to(tl.float32)[None, :]
    else:
        for k0 in range(0, KTOT, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            kw = rk % KW
            t2 = rk // KW
            kh = t2 % KH
            t2 = t2 // KH
            kd = t2 % KD
            ic = t2 // KD
            if TRANSPOSED:
                nd = od[:, None] + pad_d - kd[None, :] * dil_d
                nh = oh[:, None] + pad_h - kh[None, :] * dil_h
                nw = ow[:, None] + pad_w - kw[None, :] * dil_w
                valid = (nd >= 0) & (nh >= 0) & (nw >= 0)
                valid = valid & (nd % stride_d == 0) & (nh % stride_h == 0) & (nw % stride_w == 0)
                i_d = tl.where(valid, nd, 0) // stride_d
                i_h = tl.where(valid, nh, 0) // stride_h
                i_w = tl.where(valid, nw, 0) // stride_w
                w_off = (g * C_IN_G + ic)[:, None] * sw0 + rn[None, :] * sw1
            else:
                i_d = od[:, None] * stride_d - pad_d + kd[None, :] * dil_d
                i_h = oh[:, None] * stride_h - pad_h + kh[None, :] * dil_h
                i_w = ow[:, None] * stride_w - pad_w + kw[None, :] * dil_w
                valid = (i_d >= 0) & (i_h >= 0) & (i_w >= 0)
                w_off = (g * C_OUT_G + rn)[None, :] * sw0 + ic[:, None] * sw1
            valid = valid & (i_d < D) & (i_h < H) & (i_w < W) & (rm[:, None] < M) & (rk[None, :] < KTOT)
            x_off = n[:, None] * sxn + (g * C_IN_G + ic)[None, :] * sxc
            x_off += tl.where(valid, i_d * sxd + i_h * sxh + i_w * sxw, 0)
            a = tl.load(x_ptr + x_off, mask=valid, other=0.0)
            w_off += kd[:, None] * swd + kh[:, None] * swh + kw[:, None] * sww
            b = tl.load(w_ptr + w_off, mask=(rk[:, None] < KTOT) & (rn[None, :] < C_OUT_G), other=0.0)
            acc += tl.dot(a, b)
    oc = g * C_OUT_G + rn
    if HAS_BIAS:
        acc += tl.load(bias_ptr + oc, mask=rn < C_OUT_G, other=0.0).to(tl.float32)[None, :]
    y_off = n[:, None] * syn + oc[None, :] * syc + (od * syd + oh * syh + ow * syw)[:, None]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < C_OUT_G))


def _as_3d(t: Any) -> Any:
    """A (N, C, *spatial) tensor as (N, C, D, H, W), size-1 dims in front of the spatial ones."""
    while t.dim() < 5:
        t = t.unsqueeze(2)
    return t


def _triple(v: Any, fill: int, spatial: int) -> list[int]:
    """A per-spatial-dim argument (an int applies to every dim) over 3 dims, `fill` in front."""
    v = [int(x) for x in (v if isinstance(v, list | tuple) else [v] * spatial)]
    return [fill] * (3 - len(v)) + v


def kegen_convolution(
    x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
    output_padding: Any, groups: int, out_size: Any = None, out_stride: Any = None,
) -> Any:  # fmt: skip
    """aten.convolution as a Triton kernel (1-3 spatial dims); `out_size`/`out_stride` give the
    output's layout (default: contiguous)."""
    spatial = x.dim() - 2
    k = list(weight.shape[2:])
    st, pad, dil = _triple(stride, 1, spatial), _triple(padding, 0, spatial), _triple(dilation, 1, spatial)
    opad = _triple(output_padding, 0, spatial)
    ins, ks = [1] * (3 - spatial) + list(x.shape[2:]), [1] * (3 - spatial) + k
    if transposed:
        c_out = weight.shape[1] * groups
        outs = [
            (i - 1) * s - 2 * p + d * (kk - 1) + op + 1
            for i, s, p, d, kk, op in zip(ins, st, pad, dil, ks, opad, strict=True)
        ]
    else:
        c_out = weight.shape[0]
        outs = [
            (i + 2 * p - d * (kk - 1) - 1) // s + 1
            for i, s, p, d, kk in zip(ins, st, pad, dil, ks, strict=True)
        ]
    size = out_size or (x.shape[0], c_out, *outs[3 - spatial :])
    y = (
        torch.empty_strided(size, out_stride, dtype=x.dtype, device=x.device)
        if out_stride
        else torch.empty(size, dtype=x.dtype, device=x.device)
    )
    x5, w5, y5 = _as_3d(x), _as_3d(weight), _as_3d(y)
    c_in_g = x.shape[1] // groups
    c_out_g = c_out // groups
    # depthwise (one input channel a group): all output channels as one group, MULT of them a channel
    depthwise = c_in_g == 1 and groups > 1 and not transposed
    c_out_g, mult, launch_groups = (c_out, c_out_g, 1) if depthwise else (c_out_g, 1, groups)
    m = x.shape[0] * outs[0] * outs[1] * outs[2]
    grid = (triton.cdiv(m, CONV_BLOCK_M), triton.cdiv(c_out_g, CONV_BLOCK_N), launch_groups)
    kegen_conv_kernel[grid](
        x5, w5, w5 if bias is None else bias, y5, x.shape[0], *ins, *outs, *ks, c_in_g, c_out_g, mult,
        *x5.stride(), *w5.stride(), *y5.stride(), *st, *pad, *dil,
        HAS_BIAS=bias is not None, TRANSPOSED=bool(transposed), DEPTHWISE=depthwise,
        BLOCK_M=CONV_BLOCK_M, BLOCK_N=CONV_BLOCK_N, BLOCK_K=CONV_BLOCK_K,
    )  # fmt: skip
    return y


# what a candidate calls instead of each extern kernel, and the sources each needs
REPLACEMENTS: dict[str, str] = {
    "extern_kernels.mm": "kegen_mm",
    "extern_kernels.bmm": "kegen_bmm",
    "extern_kernels.addmm": "kegen_addmm",
    "extern_kernels.baddbmm": "kegen_baddbmm",
    "extern_kernels.convolution": "kegen_convolution",
}
_MATMUL = ("MM_BLOCKS", "kegen_matmul_kernel", "kegen_matmul")
NEEDS: dict[str, tuple[str, ...]] = {
    "kegen_mm": (*_MATMUL, "kegen_mm"),
    "kegen_bmm": (*_MATMUL, "kegen_bmm"),
    "kegen_addmm": (*_MATMUL, "kegen_addmm"),
    "kegen_baddbmm": (*_MATMUL, "kegen_baddbmm"),
    "kegen_convolution": ("CONV_BLOCKS", "kegen_conv_kernel", "_as_3d", "_triple", "kegen_convolution"),
}


def extern_sources(names: list[str]) -> list[str]:
    """Source text of the launchers `names` (values of REPLACEMENTS) and everything they need."""
    import inspect
    import sys

    module = sys.modules[__name__]
    parts: list[str] = []
    for name in names:
        for piece in NEEDS[name]:
            if piece == "MM_BLOCKS":
                src = f"MM_BLOCK_M = {MM_BLOCK_M}\nMM_BLOCK_N = {MM_BLOCK_N}\nMM_BLOCK_K = {MM_BLOCK_K}\n"
            elif piece == "CONV_BLOCKS":
                src = (
                    f"CONV_BLOCK_M = {CONV_BLOCK_M}\nCONV_BLOCK_N = {CONV_BLOCK_N}\n"
                    f"CONV_BLOCK_K = {CONV_BLOCK_K}\n"
                )
            else:
                obj = getattr(module, piece)
                src = inspect.getsource(getattr(obj, "fn", obj))  # a jit function's has its decorator
            if src not in parts:
                parts.append(src)
    return parts
