"""Elementwise kernels: masks, tl.where, dtype casts, math functions, dropout with tl.rand, early exits."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from lowering.corpus.entry import Args, CorpusEntry


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


N = 100  # not a multiple of the block: the masks matter
BLOCK = 32


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def _xy_out(seed: int, dtype: torch.dtype = torch.float32) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(N, generator=g).to(dtype),
        "y_ptr": torch.randn(N, generator=g).to(dtype),
        "out_ptr": torch.zeros(N, dtype=dtype),
        "n": N,
    }


VECTOR_ADD = CorpusEntry(
    "vector_add",
    vector_add,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    _xy_out,
    (triton.cdiv(N, BLOCK),),
    lambda a: {"out_ptr": a["x_ptr"] + a["y_ptr"]},
    ("out_ptr",),
    ("mask", "addptr", "program_id"),
    divisible_by_16=("x_ptr", "y_ptr", "out_ptr"),
)


@triton.jit
def axpby_relu_where(x_ptr, y_ptr, out_ptr, alpha, beta, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    z = alpha * x + beta * y
    z = tl.where(z > 0, z, 0.01 * z)
    tl.store(out_ptr + offs, z, mask=mask)


def _axpby_ref(a: Args) -> dict[str, torch.Tensor]:
    z = a["alpha"] * a["x_ptr"] + a["beta"] * a["y_ptr"]
    return {"out_ptr": torch.where(z > 0, z, 0.01 * z)}


AXPBY_RELU_WHERE = CorpusEntry(
    "axpby_leaky_relu_where",
    axpby_relu_where,
    {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "alpha": "fp32", "beta": "fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {**_xy_out(s), "alpha": 1.5, "beta": -0.5},
    (triton.cdiv(N, BLOCK),),
    _axpby_ref,
    ("out_ptr",),
    ("where", "scalar-args", "other"),
)


@triton.jit
def dtype_casts(x_ptr, h_ptr, b_ptr, i_ptr, u_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(h_ptr + offs, x.to(tl.float16), mask=mask)
    tl.store(b_ptr + offs, x.to(tl.bfloat16), mask=mask)
    xi = (x * 10.0).to(tl.int32)
    tl.store(i_ptr + offs, xi, mask=mask)
    u = (xi & 0xFF).to(tl.uint8)
    tl.store(u_ptr + offs, u, mask=mask)
    tl.store(d_ptr + offs, x.to(tl.float64) * 2.0 + xi.to(tl.float64), mask=mask)


def _casts_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randn(N, generator=g),
        "h_ptr": torch.zeros(N, dtype=torch.float16),
        "b_ptr": torch.zeros(N, dtype=torch.bfloat16),
        "i_ptr": torch.zeros(N, dtype=torch.int32),
        "u_ptr": torch.zeros(N, dtype=torch.uint8),
        "d_ptr": torch.zeros(N, dtype=torch.float64),
        "n": N,
    }


def _casts_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"]
    xi = (x * 10.0).to(torch.int32)
    return {
        "h_ptr": x.half(),
        "b_ptr": x.bfloat16(),
        "i_ptr": xi,
        "u_ptr": (xi & 0xFF).to(torch.uint8),
        "d_ptr": x.double() * 2.0 + xi.double(),
    }


DTYPE_CASTS = CorpusEntry(
    "dtype_casts",
    dtype_casts,
    {
        "x_ptr": "*fp32",
        "h_ptr": "*fp16",
        "b_ptr": "*bf16",
        "i_ptr": "*i32",
        "u_ptr": "*u8",
        "d_ptr": "*fp64",
        "n": "i32",
    },
    {"BLOCK": BLOCK},
    _casts_args,
    (triton.cdiv(N, BLOCK),),
    _casts_ref,
    ("h_ptr", "b_ptr", "i_ptr", "u_ptr", "d_ptr"),
    ("truncf", "extf", "fptosi", "sitofp", "trunci", "andi"),
    atol=8e-3,
    notes="atol covers one bf16 ulp (Triton's interpreter rounds fp32->bf16 differently from torch)",
)


@triton.jit
def math_functions(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    a = tl.abs(x) + 0.5
    y = tl.exp(x * 0.1) + tl.log(a) + tl.sqrt(a) + tl.sin(x) * tl.cos(x)
    y += tl.sigmoid(x) + tl.erf(x * 0.5) + tl.floor(x) - tl.ceil(x) + tl.rsqrt(a)
    y += tl.sqrt_rn(a) + tl.div_rn(x, a) + tl.fma(x, x, a) + tl.exp2(x * 0.25) + tl.log2(a)
    y += tl.clamp(x, -0.5, 0.5) + tl.maximum(x, a * 0.1) + tl.minimum(x, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def _math_ref(a: Args) -> dict[str, torch.Tensor]:
    x = a["x_ptr"]
    b = x.abs() + 0.5
    y = torch.exp(x * 0.1) + torch.log(b) + torch.sqrt(b) + torch.sin(x) * torch.cos(x)
    y = y + torch.sigmoid(x) + torch.erf(x * 0.5) + torch.floor(x) - torch.ceil(x) + torch.rsqrt(b)
    y = y + torch.sqrt(b) + x / b + (x * x + b) + torch.exp2(x * 0.25) + torch.log2(b)
    y = y + torch.clamp(x, -0.5, 0.5) + torch.maximum(x, b * 0.1) + torch.minimum(x, torch.zeros(()))
    return {"out_ptr": y}


MATH_FUNCTIONS = CorpusEntry(
    "math_functions",
    math_functions,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {"x_ptr": torch.randn(N, generator=gen(s)), "out_ptr": torch.zeros(N), "n": N},
    (triton.cdiv(N, BLOCK),),
    _math_ref,
    ("out_ptr",),
    ("math.exp", "math.log", "tt.precise_sqrt", "tt.precise_divf", "tt.clampf", "math.fma"),
    atol=1e-4,
)


@triton.jit
def int_bit_ops(x_ptr, y_ptr, out_ptr, hi_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1)
    y = tl.load(y_ptr + offs, mask=mask, other=1)
    r = (x << 3) ^ (y >> 1) | (x % 7) + (x // 3) - tl.maximum(x, y) + tl.minimum(x, y)
    tl.store(out_ptr + offs, r, mask=mask)
    tl.store(hi_ptr + offs, tl.umulhi(x.to(tl.uint32), y.to(tl.uint32)).to(tl.int32), mask=mask)


def _int_args(seed: int) -> Args:
    g = gen(seed)
    return {
        "x_ptr": torch.randint(1, 1000, (N,), generator=g, dtype=torch.int32),
        "y_ptr": torch.randint(1, 1000, (N,), generator=g, dtype=torch.int32),
        "out_ptr": torch.zeros(N, dtype=torch.int32),
        "hi_ptr": torch.zeros(N, dtype=torch.int32),
        "n": N,
    }


def _int_ref(a: Args) -> dict[str, torch.Tensor]:
    x, y = a["x_ptr"], a["y_ptr"]
    r = (x << 3) ^ (y >> 1) | (x % 7) + torch.div(x, 3, rounding_mode="trunc") - torch.maximum(
        x, y
    ) + torch.minimum(x, y)
    hi = ((x.long() * y.long()) >> 32).to(torch.int32)
    return {"out_ptr": r.to(torch.int32), "hi_ptr": hi}


INT_BIT_OPS = CorpusEntry(
    "int_bit_ops",
    int_bit_ops,
    {"x_ptr": "*i32", "y_ptr": "*i32", "out_ptr": "*i32", "hi_ptr": "*i32", "n": "i32"},
    {"BLOCK": BLOCK},
    _int_args,
    (triton.cdiv(N, BLOCK),),
    _int_ref,
    ("out_ptr", "hi_ptr"),
    ("shli", "shrsi", "xori", "remsi", "divsi", "maxsi", "tt.mulhiui"),
)


@triton.jit
def dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.rand(seed, offs)
    keep = r > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def _dropout_ref(a: Args) -> dict[str, torch.Tensor]:
    from lowering.corpus.philox import philox_rand

    x = a["x_ptr"]
    r = torch.from_numpy(philox_rand(a["seed"], np.arange(x.numel(), dtype=np.int32)))
    p = torch.tensor(a["p"], dtype=torch.float32)
    return {"out_ptr": torch.where(r > p, x / (1 - p), torch.zeros(()))}


DROPOUT = CorpusEntry(
    "dropout_rand",
    dropout,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "p": "fp32", "seed": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {
        "x_ptr": torch.randn(N, generator=gen(s)),
        "out_ptr": torch.zeros(N),
        "n": N,
        "p": 0.25,
        "seed": 1234,
    },
    (triton.cdiv(N, BLOCK),),
    _dropout_ref,
    ("out_ptr",),
    ("tl.rand", "philox", "umulhi", "uitofp"),
    atol=1e-6,
    notes="the reference reproduces Triton's Philox stream bit-exactly (lowering/corpus/philox.py)",
)


@triton.jit
def early_exit_copy(x_ptr, out_ptr, n, active_programs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= active_programs:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def _early_ref(a: Args) -> dict[str, torch.Tensor]:
    out = a["out_ptr"].clone()
    k = a["active_programs"] * BLOCK
    out[:k] = a["x_ptr"][:k] * 2.0
    return {"out_ptr": out}


EARLY_EXIT = CorpusEntry(
    "early_exit_copy",
    early_exit_copy,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "active_programs": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {
        "x_ptr": torch.randn(N, generator=gen(s)),
        "out_ptr": torch.full((N,), -1.0),
        "n": N,
        "active_programs": 2,
    },
    (triton.cdiv(N, BLOCK),),
    _early_ref,
    ("out_ptr",),
    ("early-return", "scf.if"),
)


@triton.jit
def collatz_while(x_ptr, steps_ptr, n, BLOCK: tl.constexpr):
    for i in range(BLOCK):
        idx = tl.program_id(0) * BLOCK + i
        if idx < n:
            v = tl.load(x_ptr + idx)
            steps = 0
            while v != 1:
                v = tl.where(v % 2 == 0, v // 2, 3 * v + 1)
                steps += 1
            tl.store(steps_ptr + idx, steps)


def _collatz_ref(a: Args) -> dict[str, torch.Tensor]:
    out = []
    for v in a["x_ptr"].tolist():
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        out.append(s)
    return {"steps_ptr": torch.tensor(out, dtype=torch.int32)}


COLLATZ_WHILE = CorpusEntry(
    "collatz_while_loop",
    collatz_while,
    {"x_ptr": "*i32", "steps_ptr": "*i32", "n": "i32"},
    {"BLOCK": 16},
    lambda s: {
        "x_ptr": torch.randint(1, 60, (40,), generator=gen(s), dtype=torch.int32),
        "steps_ptr": torch.zeros(40, dtype=torch.int32),
        "n": 40,
    },
    (triton.cdiv(40, 16),),
    _collatz_ref,
    ("steps_ptr",),
    ("scf.while", "scf.for", "scf.if", "scalar-load"),
)


@triton.jit
def fp8_roundtrip(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    q = x.to(tl.float8e5)
    tl.store(out_ptr + offs, q.to(tl.float32), mask=mask)


FP8_ROUNDTRIP = CorpusEntry(
    "fp8_roundtrip",
    fp8_roundtrip,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {"x_ptr": torch.randn(N, generator=gen(s)), "out_ptr": torch.zeros(N), "n": N},
    (triton.cdiv(N, BLOCK),),
    lambda a: {"out_ptr": a["x_ptr"].to(torch.float8_e5m2).float()},
    ("out_ptr",),
    ("tt.fp_to_fp", "f8E5M2"),
    atol=1e-4,
    rtol=0.26,
    notes="rtol allows one e5m2 ulp (rounding of ties differs between Triton's interpreter and torch)",
)


@triton.jit
def pointer_int_roundtrip(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    addr = x_ptr.to(tl.int64, bitcast=True)
    p = addr.to(tl.pointer_type(tl.float32), bitcast=True)
    bits = tl.load(p + offs, mask=mask, other=0.0).to(tl.int32, bitcast=True)
    tl.store(out_ptr + offs, (bits ^ (-2147483648)).to(tl.float32, bitcast=True), mask=mask)


POINTER_INT = CorpusEntry(
    "pointer_int_bitcast",
    pointer_int_roundtrip,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {"x_ptr": torch.randn(N, generator=gen(s)), "out_ptr": torch.zeros(N), "n": N},
    (triton.cdiv(N, BLOCK),),
    lambda a: {"out_ptr": -a["x_ptr"]},
    ("out_ptr",),
    ("tt.ptr_to_int", "tt.int_to_ptr", "tt.bitcast"),
    atol=0.0,
)


@triton.jit
def debug_print(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.device_print("x: ", x)
    tl.device_assert(offs >= 0, "negative offset")
    tl.store(out_ptr + offs, x, mask=mask)


DEBUG_PRINT = CorpusEntry(
    "debug_print_assert",
    debug_print,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {"x_ptr": torch.randn(N, generator=gen(s)), "out_ptr": torch.zeros(N), "n": N},
    (triton.cdiv(N, BLOCK),),
    lambda a: {"out_ptr": a["x_ptr"]},
    ("out_ptr",),
    ("tt.print", "tt.assert"),
    debug=True,
    numeric=False,
    notes="prints every element; numeric check skipped to keep test output quiet",
)


@triton.jit
def _helper_scale(x, s):
    return x * s + 1.0


@triton.jit(noinline=True)
def _helper_noinline(x, s):
    return x * s - 1.0


@triton.jit
def call_helpers(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    s = _helper_noinline(tl.load(x_ptr), 3.0)  # noinline functions take scalars
    y = _helper_scale(x, 2.0) + s
    tl.store(out_ptr + offs, y, mask=mask)


CALL_HELPERS = CorpusEntry(
    "call_noinline_helper",
    call_helpers,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
    {"BLOCK": BLOCK},
    lambda s: {"x_ptr": torch.randn(N, generator=gen(s)), "out_ptr": torch.zeros(N), "n": N},
    (triton.cdiv(N, BLOCK),),
    lambda a: {"out_ptr": a["x_ptr"] * 2.0 + 1.0 + (a["x_ptr"][0] * 3.0 - 1.0)},
    ("out_ptr",),
    ("tt.call", "private-func"),
)

ENTRIES = [
    VECTOR_ADD,
    AXPBY_RELU_WHERE,
    DTYPE_CASTS,
    MATH_FUNCTIONS,
    INT_BIT_OPS,
    DROPOUT,
    EARLY_EXIT,
    COLLATZ_WHILE,
    FP8_ROUNDTRIP,
    POINTER_INT,
    DEBUG_PRINT,
    CALL_HELPERS,
]


@triton.jit
def loop_hints_barrier(x_ptr, out_ptr, n, K, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for k in tl.range(0, K, 1, num_stages=3):
        acc += tl.load(x_ptr + k * n + offs, mask=mask, other=0.0)
    for j in tl.range(0, 4, loop_unroll_factor=2):
        acc += j
    for _ in tl.static_range(2):
        acc = acc * 2.0
    tl.debug_barrier()
    acc = tl.where(K > 2, acc, -acc)
    tl.store(out_ptr + offs, acc + tl.flip(acc, 0) * 0.0, mask=mask)


LOOP_HINTS = CorpusEntry(
    "loop_hints_barrier",
    loop_hints_barrier,
    {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "K": "i32"},
    {"BLOCK": 32},
    lambda s: {"x_ptr": torch.randn(3, 50, generator=gen(s)), "out_ptr": torch.zeros(50), "n": 50, "K": 3},
    (2,),
    lambda a: {"out_ptr": (a["x_ptr"].sum(0) + 6.0) * 4.0},
    ("out_ptr",),
    ("tt.num_stages loop attribute", "loop unrolled by factor 2", "tt.divisibility/contiguity op attributes",
     "gpu.barrier", "tl.flip"),
    atol=1e-5,
)

ENTRIES.append(LOOP_HINTS)
