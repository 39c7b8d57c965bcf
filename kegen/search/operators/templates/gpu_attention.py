"""GPU rewrite of an attention seed: a FlashAttention-style forward.

The seed is recognised as one `@triton.jit` kernel with two dots and a row max/exp (an online or
plain softmax between them), launched once from `forward(q, k, v)` with the softmax scale as the
argument of the parameter the first dot is multiplied by. The rewrite: q, k, v of shape
(batch, heads, seq, head_dim) made contiguous; one program per (BLOCK_M queries, batch*head);
the scale times log2(e) folded into the Q tile once, so the loop's softmax is `exp2(s - m)`;
K and V tiles streamed through a pipelined loop (`num_stages`); masks only where the sequence
does not divide the blocks (EVEN) and the causal variant (queries past the diagonal skipped) when
the seed masks keys after queries. Sizes and launch options are module constants (ATTN_*).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kegen.search.operators.mutations.base import MutationError, jit_functions
from kegen.search.operators.templates.gpu_launch import (
    find_launch,
    module_imports,
    rewritten_module,
    set_constants,
)

MARKER = "# kegen-gpu: attention"
_SCALE_NAMES = {"math", "q", "k", "v", "batch", "heads", "seq", "head_dim", "float", "int"}


@dataclass(frozen=True)
class AttentionConfig:
    """Query block, key block, warps and pipeline stages."""

    block_m: int = 128
    block_n: int = 64
    warps: int = 4
    stages: int = 3
    tma: int = 0  # Q/K/V/O tiles through tensor descriptors (TMA) where the blocks divide the sequence
    fixed: int = 0  # softmax on a fixed per-row reference (the first key block's max), checked per tile

    @property
    def label(self) -> str:
        return (
            f"{self.block_m}x{self.block_n} w{self.warps} s{self.stages}"
            + (" tma" if self.tma else "")
            + (" fixed" if self.fixed else "")
        )

    def constants(self) -> str:
        return (
            f"ATTN_BLOCK_M = {self.block_m}\nATTN_BLOCK_N = {self.block_n}\n"
            f"ATTN_WARPS = {self.warps}\nATTN_STAGES = {self.stages}\nATTN_TMA = {self.tma}\n"
            f"ATTN_FIXED = {self.fixed}\n"
        )


_KERNEL = """
@triton.jit
def _attention_block(ptr, desc, base, row0, start, offs_n, offs_d, seq, HEAD_DIM: tl.constexpr,
                     EVEN: tl.constexpr, TMA: tl.constexpr):
    \"\"\"Keys (or values) [start, start + BLOCK_N) of this head as a [BLOCK_N, BLOCK_D] tile.\"\"\"
    if TMA:  # EVEN holds: (batch*heads*seq, HEAD_DIM) row tiles never cross a head
        return desc.load([row0 + start, 0])
    keys = start + offs_n
    off = base + keys[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN:
        return tl.load(ptr + off)
    return tl.load(ptr + off, mask=(keys[:, None] < seq) & (offs_d[None, :] < HEAD_DIM), other=0.0)


@triton.jit
def _attention_scores(q, k, offs_m, keys, seq, CAUSAL: tl.constexpr, EVEN: tl.constexpr):
    s = tl.dot(q, tl.trans(k))
    if not EVEN:
        s = tl.where(keys[None, :] < seq, s, float("-inf"))
    if CAUSAL:
        s = tl.where(offs_m[:, None] >= keys[None, :], s, float("-inf"))
    return s


@triton.jit
def _attention_online(q, k_ptr, v_ptr, k_desc, v_desc, base, row0, hi, offs_m, offs_n, offs_d, seq,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, EVEN: tl.constexpr, TMA: tl.constexpr):
    \"\"\"The online softmax over keys [0, hi): the running row max rescales the sums at every block.\"\"\"
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in range(0, hi, BLOCK_N):
        k = _attention_block(k_ptr, k_desc, base, row0, start, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
        s = _attention_scores(q, k, offs_m, start + offs_n, seq, CAUSAL, EVEN)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _attention_block(v_ptr, v_desc, base, row0, start, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, qk_scale, HEAD_DIM: tl.constexpr,
                         BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, EVEN: tl.constexpr, TMA: tl.constexpr = False,
                         FIXED: tl.constexpr = False):
    pid_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q_off = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q_ok = (offs_m[:, None] < seq) & (offs_d[None, :] < HEAD_DIM)
    row0 = tl.program_id(1) * seq
    k_desc = None
    v_desc = None
    if TMA:  # EVEN holds: (batch*heads*seq, HEAD_DIM) row tiles never cross a head
        rows = tl.num_programs(1) * seq
        q_desc = tl.make_tensor_descriptor(q_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, BLOCK_D])
        k_desc = tl.make_tensor_descriptor(k_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        v_desc = tl.make_tensor_descriptor(v_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        o_desc = tl.make_tensor_descriptor(o_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, BLOCK_D])
        q = q_desc.load([row0 + pid_m * BLOCK_M, 0])
    elif EVEN:
        q = tl.load(q_ptr + q_off)
    else:
        q = tl.load(q_ptr + q_off, mask=q_ok, other=0.0)
    q = (q * qk_scale).to(q_ptr.dtype.element_ty)  # softmax scale and log2(e) folded in once
    hi = seq
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, seq)
    if FIXED:
        # every block exponentiated against one per-row reference, the first block's row max (<= the
        # row's max, so every row keeps a term >= 1): no running max, rescale or alpha in the loop.
        # Each p <= l_i, so l_i <= 2^15 proves that no p overflowed the 16-bit cast; else the tile is
        # computed again with the online softmax.
        k = _attention_block(k_ptr, k_desc, base, row0, 0, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
        s = _attention_scores(q, k, offs_m, offs_n, seq, CAUSAL, EVEN)
        m_ref = tl.max(s, 1)
        p = tl.math.exp2(s - m_ref[:, None])
        l_i = tl.sum(p, 1)
        v = _attention_block(v_ptr, v_desc, base, row0, 0, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
        acc = tl.dot(p.to(v.dtype), v)
        for start in range(BLOCK_N, hi, BLOCK_N):
            k = _attention_block(k_ptr, k_desc, base, row0, start, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
            s = _attention_scores(q, k, offs_m, start + offs_n, seq, CAUSAL, EVEN)
            p = tl.math.exp2(s - m_ref[:, None])
            l_i += tl.sum(p, 1)
            v = _attention_block(v_ptr, v_desc, base, row0, start, offs_n, offs_d, seq, HEAD_DIM, EVEN, TMA)
            acc = tl.dot(p.to(v.dtype), v, acc)
        if tl.max(l_i, 0) > 32768.0:
            acc, l_i = _attention_online(q, k_ptr, v_ptr, k_desc, v_desc, base, row0, hi, offs_m, offs_n,
                                         offs_d, seq, HEAD_DIM, BLOCK_M, BLOCK_D, BLOCK_N, CAUSAL, EVEN, TMA)
    else:
        acc, l_i = _attention_online(q, k_ptr, v_ptr, k_desc, v_desc, base, row0, hi, offs_m, offs_n,
                                     offs_d, seq, HEAD_DIM, BLOCK_M, BLOCK_D, BLOCK_N, CAUSAL, EVEN, TMA)
    acc = acc / l_i[:, None]
    if TMA:
        o_desc.store([row0 + pid_m * BLOCK_M, 0], acc.to(o_ptr.dtype.element_ty))
    elif EVEN:
        tl.store(o_ptr + q_off, acc.to(o_ptr.dtype.element_ty))
    else:
        tl.store(o_ptr + q_off, acc.to(o_ptr.dtype.element_ty), mask=q_ok)
"""

_TMA_HELPER = '''
_HAS_TMA = hasattr(tl, "make_tensor_descriptor")


def _tma_scratch(size, alignment, stream):
    """Global scratch for device-side tensor descriptors."""
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


if _HAS_TMA:
    triton.set_allocator(_tma_scratch)
'''

_FORWARD = """
    def forward(self, {args}):
        q, k, v = {q}.contiguous(), {k}.contiguous(), {v}.contiguous()
        if k.shape != q.shape or v.shape != q.shape:
            raise ValueError("this kernel is self-attention over equal q, k, v shapes (not grouped "
                             f"or cross attention): q {{q.shape}}, k {{k.shape}}, v {{v.shape}}")
        batch, heads, seq, head_dim = q.shape
        o = torch.empty_like(q)
        block_d = triton.next_power_of_2(head_dim)
        even = seq % ATTN_BLOCK_M == 0 and seq % ATTN_BLOCK_N == 0 and block_d == head_dim
        qk_scale = float({scale}) * 1.4426950408889634
        grid = (triton.cdiv(seq, ATTN_BLOCK_M), batch * heads)
        attention_fwd_kernel[grid](q, k, v, o, seq, qk_scale, HEAD_DIM=head_dim, BLOCK_D=block_d,
                                   BLOCK_M=ATTN_BLOCK_M, BLOCK_N=ATTN_BLOCK_N, CAUSAL={causal}, EVEN=even,
                                   TMA=even and bool(ATTN_TMA) and _HAS_TMA, FIXED=bool(ATTN_FIXED),
                                   num_warps=ATTN_WARPS, num_stages=ATTN_STAGES)
        return o
"""


def _calls(fn: ast.AST, attr: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
    ]


def _scale_param(fn: ast.FunctionDef) -> str:
    """The parameter the first dot's result is multiplied by (the softmax scale)."""
    params = {a.arg for a in fn.args.args}
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            for dot, other in ((n.left, n.right), (n.right, n.left)):
                if _calls(dot, "dot") and isinstance(other, ast.Name) and other.id in params:
                    return other.id
    raise MutationError("no dot multiplied by a scale parameter")


def _is_causal(fn: ast.FunctionDef) -> bool:
    """Whether a `tl.where` compares a row index with a column index (`offs_m[:, None] >= keys[None, :]`)."""
    for call in _calls(fn, "where"):
        for n in ast.walk(call.args[0]) if call.args else ():
            if isinstance(n, ast.Compare) and isinstance(n.ops[0], (ast.GtE, ast.Gt, ast.LtE, ast.Lt)):
                sides = [ast.unparse(x) for x in (n.left, *n.comparators)]
                if any(s.endswith("[:, None]") for s in sides) and any(
                    s.endswith("[None, :]") for s in sides
                ):
                    return True
    return False


def _model_init(tree: ast.Module, source: str) -> str:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    init = (
        next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if cls
        else None
    )
    if init is None:
        raise MutationError("ModelNew has no __init__")
    seg = ast.get_source_segment(source, init, padded=True)
    assert seg is not None
    return seg


def rewrite(source: str, config: AttentionConfig) -> str:
    """The module rewritten as the FlashAttention-style forward; MutationError when the seed is not
    an attention kernel launched from forward(q, k, v)."""
    if MARKER in source:
        raise MutationError("already rewritten for the GPU (use a config move)")
    tree = ast.parse(source)
    kernels = [f for f in jit_functions(tree) if len(_calls(f, "dot")) == 2 and _calls(f, "max")]
    kernels = [f for f in kernels if _calls(f, "exp") or _calls(f, "exp2")]
    if len(jit_functions(tree)) != 1 or len(kernels) != 1:
        raise MutationError("not a single attention kernel (two dots around a row max / exp)")
    fn = kernels[0]
    launch = find_launch(source, fn.name)
    if len(launch.forward_args) != 3:
        raise MutationError("the kernel is not launched from forward(q, k, v)")
    scale = launch.args.get(_scale_param(fn))
    if scale is None:
        raise MutationError("the launch passes no softmax scale")
    q, k, v = launch.forward_args
    scale = re.sub(rf"\b{q}\.shape\b", "q.shape", scale)
    unknown = {n.id for n in ast.walk(ast.parse(scale)) if isinstance(n, ast.Name)} - _SCALE_NAMES
    if unknown:
        raise MutationError(f"the scale reads names of the seed's forward: {', '.join(sorted(unknown))}")
    init = _model_init(tree, source)
    forward = _FORWARD.format(
        args=", ".join(launch.forward_args), q=q, k=k, v=v, scale=scale, causal=_is_causal(fn)
    )
    return rewritten_module(
        module_imports(source), MARKER + "\n" + config.constants() + _TMA_HELPER, _KERNEL, init, forward
    )


def set_config(source: str, config: AttentionConfig) -> str:
    """A rewritten attention module with its sizes replaced."""
    return set_constants(source, MARKER, config.constants(), "attention")
