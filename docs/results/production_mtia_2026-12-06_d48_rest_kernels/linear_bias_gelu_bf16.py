"""Seed: linear + bias + GELU (tanh) in one kernel; 64x64 tiles, K loop of 32, float32 accumulator."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

def _kegen_stationary_plan(k, block_m, block_n, item, capacity, shrink=True, counts=(1, 3, 5), floor=16, min_m=32, min_n=64):
    """(chunks, block_k, block_m, block_n) of a weight-stationary dot kernel (written by kegen's
    `linear_stationary` move): K cut into `chunks` blocks of `block_k` (a power of two), the count
    that pads K least, fewer on ties; the tile halved (its longer side first, not below
    min_m x min_n, where `shrink`) until its [K, block_n] weights, three [block_m, K] input tiles
    (prefetched, current, loop-carried), the accumulator and the epilogue's tiles fit `capacity`
    bytes; block_m 0 where none fits (smaller tiles lose to the tiled kernel)."""
    best = None
    for count in counts:
        block = max(floor, 1 << max(0, (-(-int(k) // count) - 1).bit_length()))
        if best is None or count * block < best[0] * best[1]:
            best = (count, block)
    chunks, block_k = best
    while True:
        need = chunks * block_k * (block_n + 3 * block_m) * item + block_m * block_n * (4 + 3 * item)
        if need <= capacity:
            return (chunks, block_k, block_m, block_n)
        if shrink and block_m >= block_n and (block_m > min_m):
            block_m //= 2
        elif shrink and block_n > min_n:
            block_n //= 2
        elif shrink and block_m > min_m:
            block_m //= 2
        else:
            return (chunks, block_k, 0, 0)

@triton.jit
def linear_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k = 0
    ks = k + offs_k
    wt = tl.load(w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    kegen_m_step = tl.num_programs(0)
    out_prev = tl.zeros((y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
    x_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks[None, :] < K) & (pid_m < M_TILES), other=0.0)
    for kegen_m_tile in range(pid_m, M_TILES, kegen_m_step):
        x_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        tl.store(y_ptr + ((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > pid_m))
        offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        x = x_cur
        acc += tl.dot(x, wt)
        acc = acc + bias[None, :]
        acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
        y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
        out_prev = acc.to(y_ptr.dtype.element_ty)
        x_cur = x_next
    tl.store(y_ptr + ((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (M_TILES > pid_m))

@triton.jit
def linear_gelu_kernel_k3(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_c0 = 0 * BLOCK_K
    ks_c0 = k_c0 + offs_k
    wt_c0 = tl.load(w_ptr + ks_c0[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c0[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c1 = 1 * BLOCK_K
    ks_c1 = k_c1 + offs_k
    wt_c1 = tl.load(w_ptr + ks_c1[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c1[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c2 = 2 * BLOCK_K
    ks_c2 = k_c2 + offs_k
    wt_c2 = tl.load(w_ptr + ks_c2[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c2[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    kegen_m_step = tl.num_programs(0)
    out_prev = tl.zeros((y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
    x_c0_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c1_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c2_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (pid_m < M_TILES), other=0.0)
    for kegen_m_tile in range(pid_m, M_TILES, kegen_m_step):
        x_c0_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c1_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c2_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        tl.store(y_ptr + ((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > pid_m))
        offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        x_c0 = x_c0_cur
        acc += tl.dot(x_c0, wt_c0)
        x_c1 = x_c1_cur
        acc += tl.dot(x_c1, wt_c1)
        x_c2 = x_c2_cur
        acc += tl.dot(x_c2, wt_c2)
        acc = acc + bias[None, :]
        acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
        y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
        out_prev = acc.to(y_ptr.dtype.element_ty)
        x_c0_cur = x_c0_next
        x_c1_cur = x_c1_next
        x_c2_cur = x_c2_next
    tl.store(y_ptr + ((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (M_TILES > pid_m))

@triton.jit
def linear_gelu_kernel_k5(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_c0 = 0 * BLOCK_K
    ks_c0 = k_c0 + offs_k
    wt_c0 = tl.load(w_ptr + ks_c0[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c0[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c1 = 1 * BLOCK_K
    ks_c1 = k_c1 + offs_k
    wt_c1 = tl.load(w_ptr + ks_c1[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c1[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c2 = 2 * BLOCK_K
    ks_c2 = k_c2 + offs_k
    wt_c2 = tl.load(w_ptr + ks_c2[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c2[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c3 = 3 * BLOCK_K
    ks_c3 = k_c3 + offs_k
    wt_c3 = tl.load(w_ptr + ks_c3[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c3[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    k_c4 = 4 * BLOCK_K
    ks_c4 = k_c4 + offs_k
    wt_c4 = tl.load(w_ptr + ks_c4[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c4[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    kegen_m_step = tl.num_programs(0)
    out_prev = tl.zeros((y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
    x_c0_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c1_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c2_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c3_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c3[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c3[None, :] < K) & (pid_m < M_TILES), other=0.0)
    x_c4_cur = tl.load(x_ptr + (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c4[None, :] * stride_xk, mask=((pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c4[None, :] < K) & (pid_m < M_TILES), other=0.0)
    for kegen_m_tile in range(pid_m, M_TILES, kegen_m_step):
        x_c0_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c1_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c2_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c3_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c3[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c3[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        x_c4_next = tl.load(x_ptr + ((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c4[None, :] * stride_xk, mask=(((kegen_m_tile + kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c4[None, :] < K) & (kegen_m_tile + kegen_m_step < M_TILES), other=0.0)
        tl.store(y_ptr + ((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > pid_m))
        offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        x_c0 = x_c0_cur
        acc += tl.dot(x_c0, wt_c0)
        x_c1 = x_c1_cur
        acc += tl.dot(x_c1, wt_c1)
        x_c2 = x_c2_cur
        acc += tl.dot(x_c2, wt_c2)
        x_c3 = x_c3_cur
        acc += tl.dot(x_c3, wt_c3)
        x_c4 = x_c4_cur
        acc += tl.dot(x_c4, wt_c4)
        acc = acc + bias[None, :]
        acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
        y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
        out_prev = acc.to(y_ptr.dtype.element_ty)
        x_c0_cur = x_c0_next
        x_c1_cur = x_c1_next
        x_c2_cur = x_c2_next
        x_c3_cur = x_c3_next
        x_c4_cur = x_c4_next
    tl.store(y_ptr + ((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((pid_m + (M_TILES - pid_m - 1) // kegen_m_step * kegen_m_step) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (M_TILES > pid_m))

@triton.jit
def linear_gelu_kernel_bal(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES, N_TILES, SEGMENTS):
    kegen_items = M_TILES * N_TILES
    kegen_item = tl.program_id(0) * kegen_items // tl.num_programs(0)
    kegen_end = (tl.program_id(0) + 1) * kegen_items // tl.num_programs(0)
    for kegen_segment in range(SEGMENTS):
        pid_n = kegen_item // M_TILES
        kegen_seg_end = tl.minimum(kegen_end, (pid_n + 1) * M_TILES)
        kegen_m_lo = kegen_item - pid_n * M_TILES
        kegen_m_hi = kegen_seg_end - pid_n * M_TILES
        if kegen_item < kegen_end:
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            k = 0
            ks = k + offs_k
            wt = tl.load(w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
            out_prev = tl.zeros((y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
            x_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            for kegen_m_tile in range(kegen_m_lo, kegen_m_hi):
                x_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                tl.store(y_ptr + ((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > kegen_m_lo))
                offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                x = x_cur
                acc += tl.dot(x, wt)
                acc = acc + bias[None, :]
                acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
                y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
                out_prev = acc.to(y_ptr.dtype.element_ty)
                x_cur = x_next
            tl.store(y_ptr + ((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_hi > kegen_m_lo))
        kegen_item = kegen_seg_end

@triton.jit
def linear_gelu_kernel_k3_bal(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES, N_TILES, SEGMENTS):
    kegen_items = M_TILES * N_TILES
    kegen_item = tl.program_id(0) * kegen_items // tl.num_programs(0)
    kegen_end = (tl.program_id(0) + 1) * kegen_items // tl.num_programs(0)
    for kegen_segment in range(SEGMENTS):
        pid_n = kegen_item // M_TILES
        kegen_seg_end = tl.minimum(kegen_end, (pid_n + 1) * M_TILES)
        kegen_m_lo = kegen_item - pid_n * M_TILES
        kegen_m_hi = kegen_seg_end - pid_n * M_TILES
        if kegen_item < kegen_end:
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            k_c0 = 0 * BLOCK_K
            ks_c0 = k_c0 + offs_k
            wt_c0 = tl.load(w_ptr + ks_c0[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c0[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c1 = 1 * BLOCK_K
            ks_c1 = k_c1 + offs_k
            wt_c1 = tl.load(w_ptr + ks_c1[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c1[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c2 = 2 * BLOCK_K
            ks_c2 = k_c2 + offs_k
            wt_c2 = tl.load(w_ptr + ks_c2[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c2[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
            out_prev = tl.zeros((y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
            x_c0_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c1_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c2_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            for kegen_m_tile in range(kegen_m_lo, kegen_m_hi):
                x_c0_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c1_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c2_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                tl.store(y_ptr + ((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > kegen_m_lo))
                offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                x_c0 = x_c0_cur
                acc += tl.dot(x_c0, wt_c0)
                x_c1 = x_c1_cur
                acc += tl.dot(x_c1, wt_c1)
                x_c2 = x_c2_cur
                acc += tl.dot(x_c2, wt_c2)
                acc = acc + bias[None, :]
                acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
                y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
                out_prev = acc.to(y_ptr.dtype.element_ty)
                x_c0_cur = x_c0_next
                x_c1_cur = x_c1_next
                x_c2_cur = x_c2_next
            tl.store(y_ptr + ((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_hi > kegen_m_lo))
        kegen_item = kegen_seg_end

@triton.jit
def linear_gelu_kernel_k5_bal(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, M_TILES, N_TILES, SEGMENTS):
    kegen_items = M_TILES * N_TILES
    kegen_item = tl.program_id(0) * kegen_items // tl.num_programs(0)
    kegen_end = (tl.program_id(0) + 1) * kegen_items // tl.num_programs(0)
    for kegen_segment in range(SEGMENTS):
        pid_n = kegen_item // M_TILES
        kegen_seg_end = tl.minimum(kegen_end, (pid_n + 1) * M_TILES)
        kegen_m_lo = kegen_item - pid_n * M_TILES
        kegen_m_hi = kegen_seg_end - pid_n * M_TILES
        if kegen_item < kegen_end:
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            k_c0 = 0 * BLOCK_K
            ks_c0 = k_c0 + offs_k
            wt_c0 = tl.load(w_ptr + ks_c0[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c0[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c1 = 1 * BLOCK_K
            ks_c1 = k_c1 + offs_k
            wt_c1 = tl.load(w_ptr + ks_c1[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c1[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c2 = 2 * BLOCK_K
            ks_c2 = k_c2 + offs_k
            wt_c2 = tl.load(w_ptr + ks_c2[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c2[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c3 = 3 * BLOCK_K
            ks_c3 = k_c3 + offs_k
            wt_c3 = tl.load(w_ptr + ks_c3[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c3[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            k_c4 = 4 * BLOCK_K
            ks_c4 = k_c4 + offs_k
            wt_c4 = tl.load(w_ptr + ks_c4[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks_c4[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
            out_prev = tl.zeros((y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).shape, dtype=(y_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn).dtype.element_ty)
            x_c0_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c1_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c2_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c3_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c3[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c3[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            x_c4_cur = tl.load(x_ptr + (kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c4[None, :] * stride_xk, mask=((kegen_m_lo * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c4[None, :] < K) & (kegen_m_lo < kegen_m_hi), other=0.0)
            for kegen_m_tile in range(kegen_m_lo, kegen_m_hi):
                x_c0_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c0[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c0[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c1_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c1[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c1[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c2_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c2[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c2[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c3_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c3[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c3[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                x_c4_next = tl.load(x_ptr + ((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_xm + ks_c4[None, :] * stride_xk, mask=(((kegen_m_tile + 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (ks_c4[None, :] < K) & (kegen_m_tile + 1 < kegen_m_hi), other=0.0)
                tl.store(y_ptr + ((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_tile - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_tile > kegen_m_lo))
                offs_m = kegen_m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                x_c0 = x_c0_cur
                acc += tl.dot(x_c0, wt_c0)
                x_c1 = x_c1_cur
                acc += tl.dot(x_c1, wt_c1)
                x_c2 = x_c2_cur
                acc += tl.dot(x_c2, wt_c2)
                x_c3 = x_c3_cur
                acc += tl.dot(x_c3, wt_c3)
                x_c4 = x_c4_cur
                acc += tl.dot(x_c4, wt_c4)
                acc = acc + bias[None, :]
                acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
                y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
                out_prev = acc.to(y_ptr.dtype.element_ty)
                x_c0_cur = x_c0_next
                x_c1_cur = x_c1_next
                x_c2_cur = x_c2_next
                x_c3_cur = x_c3_next
                x_c4_cur = x_c4_next
            tl.store(y_ptr + ((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * stride_ym + offs_n[None, :] * stride_yn, out_prev, mask=(((kegen_m_hi - 1) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < M) & (offs_n[None, :] < N) & (kegen_m_hi > kegen_m_lo))
        kegen_item = kegen_seg_end

@triton.jit
def linear_gelu_kernel_tiled(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk, mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(x, wt)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = acc + bias[None, :]
    acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

class ModelNew(nn.Module):

    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randn(out_features, in_features) * in_features ** (-0.5)
        self.weight = nn.Parameter(weight.to(torch.bfloat16))
        self.bias = nn.Parameter((torch.randn(out_features) * 0.1).to(torch.bfloat16))

    def forward(self, x):
        M, K = x.shape
        w = self.weight.detach()
        b = self.bias.detach()
        N = w.shape[0]
        y = torch.empty((M, N), dtype=x.dtype)
        BM, BN, BK = (32, 128, 64)
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        kegen_k_chunks, kegen_block_k, kegen_block_m, kegen_block_n = _kegen_stationary_plan(K, BM, BN, x.element_size(), 393216, shrink=True)
        if kegen_block_m > 0:
            kegen_balance = 8 * triton.cdiv(N, kegen_block_n) * (64 // triton.cdiv(N, kegen_block_n)) < 7 * 64
            if kegen_k_chunks == 1:
                if kegen_balance:
                    linear_gelu_kernel_bal[min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n)),](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m), N_TILES=triton.cdiv(N, kegen_block_n), SEGMENTS=triton.cdiv(triton.cdiv(triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n), min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n))), triton.cdiv(M, kegen_block_m)) + 1)
                else:
                    linear_gelu_kernel[min(triton.cdiv(M, kegen_block_m), max(1, 64 // triton.cdiv(N, kegen_block_n))), triton.cdiv(N, kegen_block_n)](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m))
            elif kegen_k_chunks == 3:
                if kegen_balance:
                    linear_gelu_kernel_k3_bal[min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n)),](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m), N_TILES=triton.cdiv(N, kegen_block_n), SEGMENTS=triton.cdiv(triton.cdiv(triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n), min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n))), triton.cdiv(M, kegen_block_m)) + 1)
                else:
                    linear_gelu_kernel_k3[min(triton.cdiv(M, kegen_block_m), max(1, 64 // triton.cdiv(N, kegen_block_n))), triton.cdiv(N, kegen_block_n)](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m))
            elif kegen_balance:
                linear_gelu_kernel_k5_bal[min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n)),](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m), N_TILES=triton.cdiv(N, kegen_block_n), SEGMENTS=triton.cdiv(triton.cdiv(triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n), min(64, triton.cdiv(M, kegen_block_m) * triton.cdiv(N, kegen_block_n))), triton.cdiv(M, kegen_block_m)) + 1)
            else:
                linear_gelu_kernel_k5[min(triton.cdiv(M, kegen_block_m), max(1, 64 // triton.cdiv(N, kegen_block_n))), triton.cdiv(N, kegen_block_n)](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=kegen_block_m, BLOCK_N=kegen_block_n, BLOCK_K=kegen_block_k, M_TILES=triton.cdiv(M, kegen_block_m))
        else:
            linear_gelu_kernel_tiled[grid](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_stages=2)
        return y
