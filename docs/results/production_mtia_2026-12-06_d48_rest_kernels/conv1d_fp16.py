import torch
import torch.nn as nn
import triton
import triton.language as tl

# kegen-mtia: conv stationary weights
CONVS_BLOCK_CO = 128
CONVS_BLOCK_W = 64
CONVS_PROGRAMS = 64
CONVS_STAGES = 2
CONVS_DUAL_CORE = False  # the stationary launch's options, one place
CONVS_LOCAL_BYTES = 393216
CONVS_ALIGN_BYTES = 32
CONVR_BLOCK_CO = 128
CONVR_BLOCK_CI = 64
CONVR_BLOCK_W = 64

@triton.jit
def conv_ws_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW, TILES, PER, N_WB, ALIGN,
                   KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                   HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
                   BLOCK_W: tl.constexpr):
    n = tl.program_id(0)
    t0 = tl.program_id(1) * PER
    t1 = tl.minimum(t0 + PER, TILES)
    co = tl.program_id(2) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < C_OUT
    ci = tl.arange(0, BLOCK_CI)
    ci_ok = ci < C_IN
    w_tile = w_ptr + co[:, None] * C_IN + ci[None, :]
    w_mask = co_ok[:, None] & ci_ok[None, :]
    w0_0 = tl.load(w_tile + (0 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 1:
        w0_1 = tl.load(w_tile + (0 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 2:
        w0_2 = tl.load(w_tile + (0 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 3:
        w0_3 = tl.load(w_tile + (0 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 4:
        w0_4 = tl.load(w_tile + (0 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 5:
        w0_5 = tl.load(w_tile + (0 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 6:
        w0_6 = tl.load(w_tile + (0 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        w1_0 = tl.load(w_tile + (1 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 1:
            w1_1 = tl.load(w_tile + (1 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 2:
            w1_2 = tl.load(w_tile + (1 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 3:
            w1_3 = tl.load(w_tile + (1 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 4:
            w1_4 = tl.load(w_tile + (1 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 5:
            w1_5 = tl.load(w_tile + (1 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 6:
            w1_6 = tl.load(w_tile + (1 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        w2_0 = tl.load(w_tile + (2 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 1:
            w2_1 = tl.load(w_tile + (2 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 2:
            w2_2 = tl.load(w_tile + (2 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 3:
            w2_3 = tl.load(w_tile + (2 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 4:
            w2_4 = tl.load(w_tile + (2 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 5:
            w2_5 = tl.load(w_tile + (2 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 6:
            w2_6 = tl.load(w_tile + (2 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        w3_0 = tl.load(w_tile + (3 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 1:
            w3_1 = tl.load(w_tile + (3 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 2:
            w3_2 = tl.load(w_tile + (3 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 3:
            w3_3 = tl.load(w_tile + (3 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 4:
            w3_4 = tl.load(w_tile + (3 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 5:
            w3_5 = tl.load(w_tile + (3 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 6:
            w3_6 = tl.load(w_tile + (3 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        w4_0 = tl.load(w_tile + (4 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 1:
            w4_1 = tl.load(w_tile + (4 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 2:
            w4_2 = tl.load(w_tile + (4 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 3:
            w4_3 = tl.load(w_tile + (4 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 4:
            w4_4 = tl.load(w_tile + (4 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 5:
            w4_5 = tl.load(w_tile + (4 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 6:
            w4_6 = tl.load(w_tile + (4 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if HAS_BIAS:
        bias = tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)
    x_img = x_ptr + n * C_IN * H * W + ci[:, None] * (H * W)
    y_img = y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW)
    for t in range(t0, t1):
        oh = t // N_WB
        # a row narrower than the tile starts it up to ALIGN columns early (masked) where that puts
        # its output on a DMA-aligned address: a misaligned DMA moves a quarter more bytes
        sh = (((n * C_OUT + tl.program_id(2) * BLOCK_CO) * OH + oh) * OW) % ALIGN
        sh = sh * ((OW + sh) <= BLOCK_W).to(tl.int32)
        ow = (t % N_WB) * BLOCK_W + tl.arange(0, BLOCK_W) - sh
        acc = tl.zeros((BLOCK_CO, BLOCK_W), dtype=tl.float32)
        iw0 = ow + (0 - PAD_W)
        c0 = ci_ok[:, None] & ((iw0 >= 0) & (iw0 < W))[None, :]
        if KW > 1:
            iw1 = ow + (1 - PAD_W)
            c1 = ci_ok[:, None] & ((iw1 >= 0) & (iw1 < W))[None, :]
        if KW > 2:
            iw2 = ow + (2 - PAD_W)
            c2 = ci_ok[:, None] & ((iw2 >= 0) & (iw2 < W))[None, :]
        if KW > 3:
            iw3 = ow + (3 - PAD_W)
            c3 = ci_ok[:, None] & ((iw3 >= 0) & (iw3 < W))[None, :]
        if KW > 4:
            iw4 = ow + (4 - PAD_W)
            c4 = ci_ok[:, None] & ((iw4 >= 0) & (iw4 < W))[None, :]
        if KW > 5:
            iw5 = ow + (5 - PAD_W)
            c5 = ci_ok[:, None] & ((iw5 >= 0) & (iw5 < W))[None, :]
        if KW > 6:
            iw6 = ow + (6 - PAD_W)
            c6 = ci_ok[:, None] & ((iw6 >= 0) & (iw6 < W))[None, :]
        ih = oh + (0 - PAD_H)
        x = tl.load(x_img + ih * W + iw0[None, :], mask=c0 & ((ih >= 0) & (ih < H)),
                      other=0.0)
        acc += tl.dot(w0_0, x)
        if KW > 1:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw1[None, :], mask=c1 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_1, x)
        if KW > 2:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw2[None, :], mask=c2 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_2, x)
        if KW > 3:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw3[None, :], mask=c3 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_3, x)
        if KW > 4:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw4[None, :], mask=c4 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_4, x)
        if KW > 5:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw5[None, :], mask=c5 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_5, x)
        if KW > 6:
            ih = oh + (0 - PAD_H)
            x = tl.load(x_img + ih * W + iw6[None, :], mask=c6 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w0_6, x)
        if KH > 1:
            ih = oh + (1 - PAD_H)
            x = tl.load(x_img + ih * W + iw0[None, :], mask=c0 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w1_0, x)
        if KH > 1:
            if KW > 1:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw1[None, :], mask=c1 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_1, x)
        if KH > 1:
            if KW > 2:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw2[None, :], mask=c2 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_2, x)
        if KH > 1:
            if KW > 3:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw3[None, :], mask=c3 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_3, x)
        if KH > 1:
            if KW > 4:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw4[None, :], mask=c4 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_4, x)
        if KH > 1:
            if KW > 5:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw5[None, :], mask=c5 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_5, x)
        if KH > 1:
            if KW > 6:
                ih = oh + (1 - PAD_H)
                x = tl.load(x_img + ih * W + iw6[None, :], mask=c6 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w1_6, x)
        if KH > 2:
            ih = oh + (2 - PAD_H)
            x = tl.load(x_img + ih * W + iw0[None, :], mask=c0 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w2_0, x)
        if KH > 2:
            if KW > 1:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw1[None, :], mask=c1 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_1, x)
        if KH > 2:
            if KW > 2:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw2[None, :], mask=c2 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_2, x)
        if KH > 2:
            if KW > 3:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw3[None, :], mask=c3 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_3, x)
        if KH > 2:
            if KW > 4:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw4[None, :], mask=c4 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_4, x)
        if KH > 2:
            if KW > 5:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw5[None, :], mask=c5 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_5, x)
        if KH > 2:
            if KW > 6:
                ih = oh + (2 - PAD_H)
                x = tl.load(x_img + ih * W + iw6[None, :], mask=c6 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w2_6, x)
        if KH > 3:
            ih = oh + (3 - PAD_H)
            x = tl.load(x_img + ih * W + iw0[None, :], mask=c0 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w3_0, x)
        if KH > 3:
            if KW > 1:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw1[None, :], mask=c1 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_1, x)
        if KH > 3:
            if KW > 2:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw2[None, :], mask=c2 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_2, x)
        if KH > 3:
            if KW > 3:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw3[None, :], mask=c3 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_3, x)
        if KH > 3:
            if KW > 4:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw4[None, :], mask=c4 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_4, x)
        if KH > 3:
            if KW > 5:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw5[None, :], mask=c5 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_5, x)
        if KH > 3:
            if KW > 6:
                ih = oh + (3 - PAD_H)
                x = tl.load(x_img + ih * W + iw6[None, :], mask=c6 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w3_6, x)
        if KH > 4:
            ih = oh + (4 - PAD_H)
            x = tl.load(x_img + ih * W + iw0[None, :], mask=c0 & ((ih >= 0) & (ih < H)),
                          other=0.0)
            acc += tl.dot(w4_0, x)
        if KH > 4:
            if KW > 1:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw1[None, :], mask=c1 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_1, x)
        if KH > 4:
            if KW > 2:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw2[None, :], mask=c2 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_2, x)
        if KH > 4:
            if KW > 3:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw3[None, :], mask=c3 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_3, x)
        if KH > 4:
            if KW > 4:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw4[None, :], mask=c4 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_4, x)
        if KH > 4:
            if KW > 5:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw5[None, :], mask=c5 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_5, x)
        if KH > 4:
            if KW > 6:
                ih = oh + (4 - PAD_H)
                x = tl.load(x_img + ih * W + iw6[None, :], mask=c6 & ((ih >= 0) & (ih < H)),
                              other=0.0)
                acc += tl.dot(w4_6, x)
        if HAS_BIAS:
            acc += bias[:, None]
        tl.store(y_img + oh * OW + ow[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=co_ok[:, None] & ((ow >= 0) & (ow < OW))[None, :])


@triton.jit
def conv_px_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, TILES, PER,
                   KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                   HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
                   BLOCK_W: tl.constexpr):
    n = tl.program_id(0)
    t0 = tl.program_id(1) * PER
    t1 = tl.minimum(t0 + PER, TILES)
    co = tl.program_id(2) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < C_OUT
    ci = tl.arange(0, BLOCK_CI)
    ci_ok = ci < C_IN
    w_tile = w_ptr + co[:, None] * C_IN + ci[None, :]
    w_mask = co_ok[:, None] & ci_ok[None, :]
    w0_0 = tl.load(w_tile + (0 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 1:
        w0_1 = tl.load(w_tile + (0 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 2:
        w0_2 = tl.load(w_tile + (0 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 3:
        w0_3 = tl.load(w_tile + (0 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 4:
        w0_4 = tl.load(w_tile + (0 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 5:
        w0_5 = tl.load(w_tile + (0 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KW > 6:
        w0_6 = tl.load(w_tile + (0 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        w1_0 = tl.load(w_tile + (1 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 1:
            w1_1 = tl.load(w_tile + (1 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 2:
            w1_2 = tl.load(w_tile + (1 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 3:
            w1_3 = tl.load(w_tile + (1 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 4:
            w1_4 = tl.load(w_tile + (1 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 5:
            w1_5 = tl.load(w_tile + (1 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 1:
        if KW > 6:
            w1_6 = tl.load(w_tile + (1 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        w2_0 = tl.load(w_tile + (2 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 1:
            w2_1 = tl.load(w_tile + (2 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 2:
            w2_2 = tl.load(w_tile + (2 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 3:
            w2_3 = tl.load(w_tile + (2 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 4:
            w2_4 = tl.load(w_tile + (2 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 5:
            w2_5 = tl.load(w_tile + (2 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 2:
        if KW > 6:
            w2_6 = tl.load(w_tile + (2 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        w3_0 = tl.load(w_tile + (3 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 1:
            w3_1 = tl.load(w_tile + (3 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 2:
            w3_2 = tl.load(w_tile + (3 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 3:
            w3_3 = tl.load(w_tile + (3 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 4:
            w3_4 = tl.load(w_tile + (3 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 5:
            w3_5 = tl.load(w_tile + (3 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 3:
        if KW > 6:
            w3_6 = tl.load(w_tile + (3 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        w4_0 = tl.load(w_tile + (4 * KW + 0) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 1:
            w4_1 = tl.load(w_tile + (4 * KW + 1) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 2:
            w4_2 = tl.load(w_tile + (4 * KW + 2) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 3:
            w4_3 = tl.load(w_tile + (4 * KW + 3) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 4:
            w4_4 = tl.load(w_tile + (4 * KW + 4) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 5:
            w4_5 = tl.load(w_tile + (4 * KW + 5) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if KH > 4:
        if KW > 6:
            w4_6 = tl.load(w_tile + (4 * KW + 6) * C_OUT * C_IN, mask=w_mask, other=0.0)
    if HAS_BIAS:
        bias = tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)
    x_img = x_ptr + n * C_IN * H * W + ci[:, None] * (H * W)
    y_img = y_ptr + n * C_OUT * H * W + co[:, None] * (H * W)
    for t in range(t0, t1):
        p = t * BLOCK_W + tl.arange(0, BLOCK_W)
        oh = p // W
        ow = p % W
        p_ok = p < H * W
        acc = tl.zeros((BLOCK_CO, BLOCK_W), dtype=tl.float32)
        c0 = p_ok & (ow + (0 - PAD_W) >= 0) & (ow + (0 - PAD_W) < W)
        if KW > 1:
            c1 = p_ok & (ow + (1 - PAD_W) >= 0) & (ow + (1 - PAD_W) < W)
        if KW > 2:
            c2 = p_ok & (ow + (2 - PAD_W) >= 0) & (ow + (2 - PAD_W) < W)
        if KW > 3:
            c3 = p_ok & (ow + (3 - PAD_W) >= 0) & (ow + (3 - PAD_W) < W)
        if KW > 4:
            c4 = p_ok & (ow + (4 - PAD_W) >= 0) & (ow + (4 - PAD_W) < W)
        if KW > 5:
            c5 = p_ok & (ow + (5 - PAD_W) >= 0) & (ow + (5 - PAD_W) < W)
        if KW > 6:
            c6 = p_ok & (ow + (6 - PAD_W) >= 0) & (ow + (6 - PAD_W) < W)
        r0 = (oh + (0 - PAD_H) >= 0) & (oh + (0 - PAD_H) < H)
        if KH > 1:
            r1 = (oh + (1 - PAD_H) >= 0) & (oh + (1 - PAD_H) < H)
        if KH > 2:
            r2 = (oh + (2 - PAD_H) >= 0) & (oh + (2 - PAD_H) < H)
        if KH > 3:
            r3 = (oh + (3 - PAD_H) >= 0) & (oh + (3 - PAD_H) < H)
        if KH > 4:
            r4 = (oh + (4 - PAD_H) >= 0) & (oh + (4 - PAD_H) < H)
        x = tl.load(x_img + (p + ((0 - PAD_H) * W + (0 - PAD_W)))[None, :],
                      mask=ci_ok[:, None] & (r0 & c0)[None, :], other=0.0)
        acc += tl.dot(w0_0, x)
        if KW > 1:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (1 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c1)[None, :], other=0.0)
            acc += tl.dot(w0_1, x)
        if KW > 2:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (2 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c2)[None, :], other=0.0)
            acc += tl.dot(w0_2, x)
        if KW > 3:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (3 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c3)[None, :], other=0.0)
            acc += tl.dot(w0_3, x)
        if KW > 4:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (4 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c4)[None, :], other=0.0)
            acc += tl.dot(w0_4, x)
        if KW > 5:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (5 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c5)[None, :], other=0.0)
            acc += tl.dot(w0_5, x)
        if KW > 6:
            x = tl.load(x_img + (p + ((0 - PAD_H) * W + (6 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r0 & c6)[None, :], other=0.0)
            acc += tl.dot(w0_6, x)
        if KH > 1:
            x = tl.load(x_img + (p + ((1 - PAD_H) * W + (0 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r1 & c0)[None, :], other=0.0)
            acc += tl.dot(w1_0, x)
        if KH > 1:
            if KW > 1:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (1 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c1)[None, :], other=0.0)
                acc += tl.dot(w1_1, x)
        if KH > 1:
            if KW > 2:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (2 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c2)[None, :], other=0.0)
                acc += tl.dot(w1_2, x)
        if KH > 1:
            if KW > 3:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (3 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c3)[None, :], other=0.0)
                acc += tl.dot(w1_3, x)
        if KH > 1:
            if KW > 4:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (4 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c4)[None, :], other=0.0)
                acc += tl.dot(w1_4, x)
        if KH > 1:
            if KW > 5:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (5 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c5)[None, :], other=0.0)
                acc += tl.dot(w1_5, x)
        if KH > 1:
            if KW > 6:
                x = tl.load(x_img + (p + ((1 - PAD_H) * W + (6 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r1 & c6)[None, :], other=0.0)
                acc += tl.dot(w1_6, x)
        if KH > 2:
            x = tl.load(x_img + (p + ((2 - PAD_H) * W + (0 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r2 & c0)[None, :], other=0.0)
            acc += tl.dot(w2_0, x)
        if KH > 2:
            if KW > 1:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (1 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c1)[None, :], other=0.0)
                acc += tl.dot(w2_1, x)
        if KH > 2:
            if KW > 2:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (2 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c2)[None, :], other=0.0)
                acc += tl.dot(w2_2, x)
        if KH > 2:
            if KW > 3:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (3 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c3)[None, :], other=0.0)
                acc += tl.dot(w2_3, x)
        if KH > 2:
            if KW > 4:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (4 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c4)[None, :], other=0.0)
                acc += tl.dot(w2_4, x)
        if KH > 2:
            if KW > 5:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (5 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c5)[None, :], other=0.0)
                acc += tl.dot(w2_5, x)
        if KH > 2:
            if KW > 6:
                x = tl.load(x_img + (p + ((2 - PAD_H) * W + (6 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r2 & c6)[None, :], other=0.0)
                acc += tl.dot(w2_6, x)
        if KH > 3:
            x = tl.load(x_img + (p + ((3 - PAD_H) * W + (0 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r3 & c0)[None, :], other=0.0)
            acc += tl.dot(w3_0, x)
        if KH > 3:
            if KW > 1:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (1 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c1)[None, :], other=0.0)
                acc += tl.dot(w3_1, x)
        if KH > 3:
            if KW > 2:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (2 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c2)[None, :], other=0.0)
                acc += tl.dot(w3_2, x)
        if KH > 3:
            if KW > 3:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (3 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c3)[None, :], other=0.0)
                acc += tl.dot(w3_3, x)
        if KH > 3:
            if KW > 4:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (4 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c4)[None, :], other=0.0)
                acc += tl.dot(w3_4, x)
        if KH > 3:
            if KW > 5:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (5 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c5)[None, :], other=0.0)
                acc += tl.dot(w3_5, x)
        if KH > 3:
            if KW > 6:
                x = tl.load(x_img + (p + ((3 - PAD_H) * W + (6 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r3 & c6)[None, :], other=0.0)
                acc += tl.dot(w3_6, x)
        if KH > 4:
            x = tl.load(x_img + (p + ((4 - PAD_H) * W + (0 - PAD_W)))[None, :],
                          mask=ci_ok[:, None] & (r4 & c0)[None, :], other=0.0)
            acc += tl.dot(w4_0, x)
        if KH > 4:
            if KW > 1:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (1 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c1)[None, :], other=0.0)
                acc += tl.dot(w4_1, x)
        if KH > 4:
            if KW > 2:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (2 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c2)[None, :], other=0.0)
                acc += tl.dot(w4_2, x)
        if KH > 4:
            if KW > 3:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (3 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c3)[None, :], other=0.0)
                acc += tl.dot(w4_3, x)
        if KH > 4:
            if KW > 4:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (4 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c4)[None, :], other=0.0)
                acc += tl.dot(w4_4, x)
        if KH > 4:
            if KW > 5:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (5 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c5)[None, :], other=0.0)
                acc += tl.dot(w4_5, x)
        if KH > 4:
            if KW > 6:
                x = tl.load(x_img + (p + ((4 - PAD_H) * W + (6 - PAD_W)))[None, :],
                              mask=ci_ok[:, None] & (r4 & c6)[None, :], other=0.0)
                acc += tl.dot(w4_6, x)
        if HAS_BIAS:
            acc += bias[:, None]
        tl.store(y_img + p[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=co_ok[:, None] & p_ok[None, :])



@triton.jit
def conv_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, OH, OW,
                     KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                     HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
                     BLOCK_W: tl.constexpr):
    n = tl.program_id(0)
    n_wb = tl.cdiv(OW, BLOCK_W)
    oh = tl.program_id(1) // n_wb
    ow = (tl.program_id(1) % n_wb) * BLOCK_W + tl.arange(0, BLOCK_W)
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
                w = tl.load(w_ptr + (kh * KW + kw) * C_OUT * C_IN + co[:, None] * C_IN + ci[None, :],
                            mask=co_ok[:, None] & ci_ok[None, :], other=0.0)
                x = tl.load(x_img + ci[:, None] * (H * W) + ih * W + iw[None, :],
                            mask=ci_ok[:, None] & cols_ok[None, :], other=0.0)
                acc += tl.dot(w, x)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + oh * OW + ow[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=co_ok[:, None] & (ow < OW)[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.conv = conv.to(torch.float16)

    def _packed_weight(self, w):
        """(C_out, C_in, *taps) -> (*taps, C_out, C_in), packed once per weight storage and version."""
        key = (w.data_ptr(), w._version, tuple(w.shape), w.device)
        if getattr(self, "_kegen_pack_key", None) != key:
            self._kegen_pack = w.detach().permute(*range(2, w.dim()), 0, 1).contiguous()
            self._kegen_pack_key = key
        return self._kegen_pack

    def forward(self, x):
        conv = self.conv
        nd = x.dim() - 2
        if tuple(conv.stride) != (1,) * nd or tuple(conv.dilation) != (1,) * nd or conv.groups != 1 \
                or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("the implicit-GEMM kernel covers stride 1, dilation 1, groups 1, zero padding")
        x = x.contiguous()
        w = self._packed_weight(conv.weight)
        b = conv.bias.detach() if conv.bias is not None else None
        batch, c_in = x.shape[0], x.shape[1]
        c_out = conv.out_channels
        if nd == 1:
            h, w_ = 1, x.shape[2]
            kh, kw = 1, conv.kernel_size[0]
            ph, pw = 0, conv.padding[0]
        else:
            h, w_ = x.shape[2], x.shape[3]
            kh, kw = conv.kernel_size
            ph, pw = conv.padding
        oh, ow = h + 2 * ph - kh + 1, w_ + 2 * pw - kw + 1
        y = torch.empty((batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow), dtype=x.dtype,
                        device=x.device)
        bci = triton.next_power_of_2(c_in)
        taps, es = kh * kw, x.element_size()
        row_bw = min(CONVS_BLOCK_W, triton.next_power_of_2(ow))
        local = CONVS_LOCAL_BYTES // (2 if CONVS_DUAL_CORE else 1)  # a dual-core PE's half
        # flattened pixel tiles for a 2-D "same" convolution whose rows leave their tiles a quarter
        # masked or more, or are narrower than 32 pixels; else (or where those tiles do not fit) rows
        same = nd == 2 and (oh, ow) == (h, w_) and ow % row_bw != 0
        for pixels in ((True, False) if same and (4 * ow <= 3 * row_bw or row_bw < 32) else (False,)):
            bw = CONVS_BLOCK_W if pixels else row_bw
            bco = CONVS_BLOCK_CO
            while True:  # output channels halved until the weights, acc, output and input tiles fit
                need = (taps * bco * bci * es + bco * bw * (4 + es)  # weights, acc, output
                        + CONVS_STAGES * taps * bci * bw * es)  # the taps' input tiles per stage
                if need <= local or bco <= 16:
                    break
                bco //= 2
            if kh > 5 or kw > 7 or need > local:
                continue
            n_wb = triton.cdiv(ow, bw)
            tiles = triton.cdiv(oh * ow, bw) if pixels else oh * n_wb
            co_blocks = triton.cdiv(c_out, bco)
            per = triton.cdiv(tiles, max(1, CONVS_PROGRAMS // (batch * co_blocks)))
            grid = (batch, triton.cdiv(tiles, per), co_blocks)
            if pixels:
                conv_px_kernel[grid](x, w, w if b is None else b, y, c_in, c_out, h, w_, tiles, per,
                                     KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, HAS_BIAS=b is not None,
                                     BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                                     num_stages=CONVS_STAGES, dual_core=CONVS_DUAL_CORE)
            else:
                conv_ws_kernel[grid](x, w, w if b is None else b, y, c_in, c_out, h, w_, oh, ow, tiles, per,
                                     n_wb, max(1, CONVS_ALIGN_BYTES // es), KH=kh, KW=kw, PAD_H=ph, PAD_W=pw,
                                     HAS_BIAS=b is not None,
                                     BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                                     num_stages=CONVS_STAGES, dual_core=CONVS_DUAL_CORE)
            return y
        bw = min(CONVR_BLOCK_W, triton.next_power_of_2(ow))
        # blocks no wider than the channels (few input or output channels leave less of a tile masked)
        bci = min(CONVR_BLOCK_CI, max(16, triton.next_power_of_2(c_in)))
        bco = min(CONVR_BLOCK_CO, max(16, triton.next_power_of_2(c_out)))
        grid = (batch, oh * triton.cdiv(ow, bw), triton.cdiv(c_out, bco))
        conv_rows_kernel[grid](x, w, w if b is None else b, y, c_in, c_out, h, w_, oh, ow,
                               KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, HAS_BIAS=b is not None,
                               BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                               num_stages=2, dual_core=True)
        return y
