"""Matrix kernels: matmul with a K loop, batched matmul, fp16 matmul with bias/activation, block pointers,
tensor descriptors, scaled dot, and flash-attention forward."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


MM_M, MM_N, MM_K = 40, 24, 56
BM, BN, BK = 32, 16, 16


@triton.jit
def matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(
        c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
        acc,
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


def _mm_args(seed: int) -> Args:
    g = gen(seed)
    a, b = torch.randn(MM_M, MM_K, generator=g), torch.randn(MM_K, MM_N, generator=g)
    c = torch.zeros(MM_M, MM_N)
    return {
        "a_ptr": a,
        "b_ptr": b,
        "c_ptr": c,
        "M": MM_M,
        "N": MM_N,
        "K": MM_K,
        "stride_am": MM_K,
        "stride_ak": 1,
        "stride_bk": MM_N,
        "stride_bn": 1,
        "stride_cm": MM_N,
        "stride_cn": 1,
    }


MATMUL = CorpusEntry(
    "matmul_k_loop",
    matmul,
    {
        "a_ptr": "*fp32",
        "b_ptr": "*fp32",
        "c_ptr": "*fp32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "stride_am": "i32",
        "stride_ak": "i32",
        "stride_bk": "i32",
        "stride_bn": "i32",
        "stride_cm": "i32",
        "stride_cn": "i32",
    },
    {"BM": BM, "BN": BN, "BK": BK},
    _mm_args,
    (triton.cdiv(MM_M, BM), triton.cdiv(MM_N, BN)),
    lambda a: {"c_ptr": a["a_ptr"] @ a["b_ptr"]},
    ("c_ptr",),
    ("tt.dot", "scf.for iter_args", "2-D masks"),
    atol=1e-3,
    rtol=1e-3,
)

BATCH = 3


@triton.jit
def batched_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    batch = tl.program_id(2)
    a_ptr += batch * M * K
    b_ptr += batch * K * N
    c_ptr += batch * M * N
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(
            a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _bmm_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "a_ptr": torch.randn(BATCH, MM_M, MM_K, generator=g),
        "b_ptr": torch.randn(BATCH, MM_K, MM_N, generator=g),
        "c_ptr": torch.zeros(BATCH, MM_M, MM_N),
        "M": MM_M,
        "N": MM_N,
        "K": MM_K,
    }


BATCHED_MATMUL = CorpusEntry(
    "batched_matmul",
    batched_matmul,
    {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"},
    {"BM": BM, "BN": BN, "BK": BK},
    _bmm_args,
    (triton.cdiv(MM_M, BM), triton.cdiv(MM_N, BN), BATCH),
    lambda a: {"c_ptr": torch.bmm(a["a_ptr"], a["b_ptr"])},
    ("c_ptr",),
    ("tt.dot", "program_id z", "pointer +="),
    atol=1e-3,
    rtol=1e-3,
)


@triton.jit
def matmul_fp16_bias_gelu(
    a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    out = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    tl.store(
        c_ptr + rm[:, None] * N + rn[None, :], out.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N)
    )


def _mmh_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "a_ptr": torch.randn(MM_M, 32, generator=g).half(),
        "b_ptr": torch.randn(32, MM_N, generator=g).half(),
        "bias_ptr": torch.randn(MM_N, generator=g).half(),
        "c_ptr": torch.zeros(MM_M, MM_N, dtype=torch.float16),
        "M": MM_M,
        "N": MM_N,
        "K": 32,
    }


def _mmh_ref(a: Args) -> dict[str, torch.Tensor]:
    acc = a["a_ptr"].float() @ a["b_ptr"].float() + a["bias_ptr"].float()
    return {"c_ptr": torch.nn.functional.gelu(acc).half()}


MATMUL_FP16_BIAS_GELU = CorpusEntry(
    "matmul_fp16_bias_gelu",
    matmul_fp16_bias_gelu,
    {
        "a_ptr": "*fp16",
        "b_ptr": "*fp16",
        "bias_ptr": "*fp16",
        "c_ptr": "*fp16",
        "M": "i32",
        "N": "i32",
        "K": "i32",
    },
    {"BM": BM, "BN": BN, "BK": BK},
    _mmh_args,
    (triton.cdiv(MM_M, BM), triton.cdiv(MM_N, BN)),
    _mmh_ref,
    ("c_ptr",),
    ("tt.dot fp16", "erf", "truncf"),
    atol=2e-2,
    rtol=2e-2,
)


@triton.jit
def block_ptr_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_bp = tl.make_block_ptr(
        a_ptr, shape=(M, K), strides=(K, 1), offsets=(pid_m * BM, 0), block_shape=(BM, BK), order=(1, 0)
    )
    b_bp = tl.make_block_ptr(
        b_ptr, shape=(K, N), strides=(N, 1), offsets=(0, pid_n * BN), block_shape=(BK, BN), order=(1, 0)
    )
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        a = tl.load(a_bp, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_bp, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_bp = tl.advance(a_bp, (0, BK))
        b_bp = tl.advance(b_bp, (BK, 0))
    c_bp = tl.make_block_ptr(
        c_ptr,
        shape=(M, N),
        strides=(N, 1),
        offsets=(pid_m * BM, pid_n * BN),
        block_shape=(BM, BN),
        order=(1, 0),
    )
    tl.store(c_bp, acc, boundary_check=(0, 1))


def _bp_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "a_ptr": torch.randn(MM_M, MM_K, generator=g),
        "b_ptr": torch.randn(MM_K, MM_N, generator=g),
        "c_ptr": torch.zeros(MM_M, MM_N),
        "M": MM_M,
        "N": MM_N,
        "K": MM_K,
    }


_BP_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}

BLOCK_PTR_MATMUL = CorpusEntry(
    "block_ptr_matmul",
    block_ptr_matmul,
    _BP_SIG,
    {"BM": BM, "BN": BN, "BK": BK},
    _bp_args,
    (triton.cdiv(MM_M, BM), triton.cdiv(MM_N, BN)),
    lambda a: {"c_ptr": a["a_ptr"] @ a["b_ptr"]},
    ("c_ptr",),
    ("tt.make_tensor_ptr", "tt.advance", "boundary_check", "padding"),
    keep_block_pointers=True,
    atol=1e-3,
    rtol=1e-3,
)

BLOCK_PTR_MATMUL_REWRITTEN = CorpusEntry(
    "block_ptr_matmul_rewritten",
    block_ptr_matmul,
    _BP_SIG,
    {"BM": BM, "BN": BN, "BK": BK},
    _bp_args,
    (triton.cdiv(MM_M, BM), triton.cdiv(MM_N, BN)),
    lambda a: {"c_ptr": a["a_ptr"] @ a["b_ptr"]},
    ("c_ptr",),
    ("block pointers rewritten to pointer tensors",),
    atol=1e-3,
    rtol=1e-3,
)


@triton.jit
def tensor_descriptor_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tile = x_desc.load([pid_m * BM, pid_n * BN])
    y_desc.store([pid_m * BM, pid_n * BN], tile * 2.0)


TENSOR_DESCRIPTOR = CorpusEntry(
    "tensor_descriptor_scale",
    tensor_descriptor_copy,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32"},
    {"BM": 16, "BN": 16},
    lambda s: {
        "x_ptr": torch.randn(32, 48, generator=gen(s)),
        "y_ptr": torch.zeros(32, 48),
        "M": 32,
        "N": 48,
    },
    (2, 3),
    lambda a: {"y_ptr": a["x_ptr"] * 2.0},
    ("y_ptr",),
    ("tt.make_tensor_descriptor", "tt.descriptor_load", "tt.descriptor_store"),
    keep_block_pointers=True,
    divisible_by_16=("x_ptr", "y_ptr", "N"),
    notes="on a GPU, Triton needs a host-side allocator (triton.set_allocator) to launch descriptor kernels",
)


@triton.jit
def dot_scaled_mxfp8(
    a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // 32)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    a_scale = tl.load(a_scale_ptr + rm[:, None] * (BK // 32) + rs[None, :])
    b_scale = tl.load(b_scale_ptr + rn[:, None] * (BK // 32) + rs[None, :])
    c = tl.dot_scaled(a, a_scale, "e4m3", b, b_scale, "e4m3")
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def _ds_args(seed: int) -> Args:
    g = gen(seed)
    a = (torch.randn(32, 64, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(64, 32, generator=g) * 2).to(torch.float8_e4m3fn)
    # e8m0 scales: 2 ** (s - 127), one per 32 elements along K
    a_scale = torch.randint(124, 130, (32, 2), generator=g, dtype=torch.uint8)
    b_scale = torch.randint(124, 130, (32, 2), generator=g, dtype=torch.uint8)
    return {
        "a_ptr": a,
        "a_scale_ptr": a_scale,
        "b_ptr": b,
        "b_scale_ptr": b_scale,
        "c_ptr": torch.zeros(32, 32),
    }


def _ds_ref(a: Args) -> dict[str, torch.Tensor]:
    sa = torch.exp2(a["a_scale_ptr"].float() - 127).repeat_interleave(32, dim=1)  # [M, K]
    sb = torch.exp2(a["b_scale_ptr"].float() - 127).repeat_interleave(32, dim=1)  # [N, K]
    return {"c_ptr": (a["a_ptr"].float() * sa) @ (a["b_ptr"].float() * sb.t())}


DOT_SCALED = CorpusEntry(
    "dot_scaled_mxfp8",
    dot_scaled_mxfp8,
    {"a_ptr": "*fp8e4nv", "a_scale_ptr": "*u8", "b_ptr": "*fp8e4nv", "b_scale_ptr": "*u8", "c_ptr": "*fp32"},
    {"BM": 32, "BN": 32, "BK": 64},
    _ds_args,
    (1,),
    _ds_ref,
    ("c_ptr",),
    ("tt.dot_scaled", "f8E4M3FN", "e8m0 scales"),
    atol=1e-2,
    rtol=1e-3,
    notes="microscaled fp8 (mxfp8) dot: C = (A * 2^(sa-127)) @ (B * 2^(sb-127))",
)

SEQ, HEAD_DIM = 40, 16
BLOCK_Q, BLOCK_KV = 16, 16


@triton.jit
def attention_fwd(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    seq_len,
    sm_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
):
    pid_q = tl.program_id(0)
    head = tl.program_id(1)
    base = head * seq_len * HEAD_DIM
    rq = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    rd = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rq[:, None] * HEAD_DIM + rd[None, :], mask=rq[:, None] < seq_len, other=0.0)
    m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    for start in range(0, seq_len, BLOCK_KV):
        rk = start + tl.arange(0, BLOCK_KV)
        kt = tl.load(
            k_ptr + base + rk[None, :] * HEAD_DIM + rd[:, None], mask=rk[None, :] < seq_len, other=0.0
        )
        s = tl.dot(q, kt, input_precision="ieee") * sm_scale
        s = tl.where(rk[None, :] < seq_len, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + base + rk[:, None] * HEAD_DIM + rd[None, :], mask=rk[:, None] < seq_len, other=0.0
        )
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rq[:, None] * HEAD_DIM + rd[None, :], out, mask=rq[:, None] < seq_len)


HEADS = 2


def _attn_args(seed: int) -> Args:
    g = gen(seed)
    shape = (HEADS, SEQ, HEAD_DIM)
    return {
        "q_ptr": torch.randn(*shape, generator=g),
        "k_ptr": torch.randn(*shape, generator=g),
        "v_ptr": torch.randn(*shape, generator=g),
        "o_ptr": torch.zeros(*shape),
        "seq_len": SEQ,
        "sm_scale": 1.0 / math.sqrt(HEAD_DIM),
    }


def _attn_ref(a: Args) -> dict[str, torch.Tensor]:
    s = a["q_ptr"] @ a["k_ptr"].transpose(1, 2) * a["sm_scale"]
    return {"o_ptr": torch.softmax(s, dim=-1) @ a["v_ptr"]}


ATTENTION_FWD = CorpusEntry(
    "attention_fwd",
    attention_fwd,
    {
        "q_ptr": "*fp32",
        "k_ptr": "*fp32",
        "v_ptr": "*fp32",
        "o_ptr": "*fp32",
        "seq_len": "i32",
        "sm_scale": "fp32",
    },
    {"HEAD_DIM": HEAD_DIM, "BLOCK_Q": BLOCK_Q, "BLOCK_KV": BLOCK_KV},
    _attn_args,
    (triton.cdiv(SEQ, BLOCK_Q), HEADS),
    _attn_ref,
    ("o_ptr",),
    ("online softmax", "two tt.dot", "scf.for with 3 iter_args", "tt.reduce axis 1"),
    atol=1e-3,
    rtol=1e-3,
)

ENTRIES = [
    MATMUL,
    BATCHED_MATMUL,
    MATMUL_FP16_BIAS_GELU,
    BLOCK_PTR_MATMUL,
    BLOCK_PTR_MATMUL_REWRITTEN,
    TENSOR_DESCRIPTOR,
    DOT_SCALED,
    ATTENTION_FWD,
]
