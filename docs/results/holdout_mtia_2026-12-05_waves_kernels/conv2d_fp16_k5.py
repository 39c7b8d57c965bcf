import torch
import torch.nn as nn
import triton
import triton.language as tl
CONVR_BLOCK_CO = 128
CONVR_BLOCK_CI = 64
CONVR_BLOCK_W = 64

@triton.jit
def conv_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW, KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_W: tl.constexpr):
    n = tl.program_id(0)
    n_wb = tl.cdiv(OW, BLOCK_W)
    oh = tl.program_id(1) // n_wb
    ow = tl.program_id(1) % n_wb * BLOCK_W + tl.arange(0, BLOCK_W)
    co = tl.program_id(2) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < C_OUT
    ci_offs = tl.arange(0, BLOCK_CI)
    x_img = x_ptr + n * C_IN * H * W
    acc = tl.zeros((BLOCK_CO, BLOCK_W), dtype=tl.float32)
    for ci0 in range(0, C_IN, BLOCK_CI):
        ci = ci0 + ci_offs
        ci_ok = ci < C_IN
        for kh in range(KH):
            ih = oh + kh - PAD_H
            row_ok = (ih >= 0) & (ih < H)
            for kw in range(KW):
                iw = ow + (kw - PAD_W)
                cols_ok = (iw >= 0) & (iw < W) & row_ok
                w = tl.load(w_ptr + (kh * KW + kw) * C_OUT * C_IN + co[:, None] * C_IN + ci[None, :], mask=co_ok[:, None] & ci_ok[None, :], other=0.0)
                x = tl.load(x_img + ci[:, None] * (H * W) + ih * W + iw[None, :], mask=ci_ok[:, None] & cols_ok[None, :], other=0.0)
                acc += tl.dot(w, x)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + oh * OW + ow[None, :], acc.to(y_ptr.dtype.element_ty), mask=co_ok[:, None] & (ow < OW)[None, :])

class ModelNew(nn.Module):

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.conv = conv.to(torch.float16)

    def _packed_weight(self, w):
        """(C_out, C_in, *taps) -> (*taps, C_out, C_in), packed once per weight storage and version."""
        key = (w.data_ptr(), w._version, tuple(w.shape), w.device)
        if getattr(self, '_kegen_pack_key', None) != key:
            self._kegen_pack = w.detach().permute(*range(2, w.dim()), 0, 1).contiguous()
            self._kegen_pack_key = key
        return self._kegen_pack

    def forward(self, x):
        conv = self.conv
        nd = x.dim() - 2
        if tuple(conv.stride) != (1,) * nd or tuple(conv.dilation) != (1,) * nd or conv.groups != 1 or (conv.padding_mode != 'zeros') or isinstance(conv.padding, str):
            raise ValueError('the implicit-GEMM kernel covers stride 1, dilation 1, groups 1, zero padding')
        x = x.contiguous()
        w = self._packed_weight(conv.weight)
        b = conv.bias.detach() if conv.bias is not None else None
        batch, c_in = (x.shape[0], x.shape[1])
        c_out = conv.out_channels
        if nd == 1:
            h, w_ = (1, x.shape[2])
            kh, kw = (1, conv.kernel_size[0])
            ph, pw = (0, conv.padding[0])
        else:
            h, w_ = (x.shape[2], x.shape[3])
            kh, kw = conv.kernel_size
            ph, pw = conv.padding
        oh, ow = (h + 2 * ph - kh + 1, w_ + 2 * pw - kw + 1)
        y = torch.empty((batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow), dtype=x.dtype, device=x.device)
        bw = min(CONVR_BLOCK_W, triton.next_power_of_2(ow))
        bci = min(CONVR_BLOCK_CI, max(16, triton.next_power_of_2(c_in)))
        bco = min(CONVR_BLOCK_CO, max(16, triton.next_power_of_2(c_out)))
        grid = (batch, oh * triton.cdiv(ow, bw), triton.cdiv(c_out, bco))
        conv_rows_kernel[grid](x, w, w if b is None else b, y, c_in, c_out, h, w_, oh, ow, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, HAS_BIAS=b is not None, BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw, num_stages=3, dual_core=True)
        return y
