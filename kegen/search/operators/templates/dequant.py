"""Triton template for weight-only quantized linear layers: `y = epilogue((x @ Q.T) * scale)`.

Q is the integer weight (N, K) as the model holds it (int8/uint8, a buffer or an input); each tile
is read as integers and converted to the activations' dtype in the GEMM's loop (exact for 8-bit
values in fp16/bf16/fp32), and the per-output-channel (or scalar) scale multiplies the fp32
accumulator once, so the float weight the reference builds never exists. The kernel has the linear
template's shape (module tile constants, one K loop of loads and `tl.dot`), so the GEMM moves apply.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.gemm import (
    MATMUL_PROLOGUE,
    consts,
    epilogue_args,
    epilogue_loads,
    indent,
)
from kegen.search.operators.templates.layout import model_class

_KERNEL = """
@triton.jit
def dequant_linear_kernel(x_ptr, q_ptr, s_ptr, y_ptr,{extra_ptrs} M, N, K, stride_xm, stride_xk,
                          stride_qn, stride_qk, stride_ym,{group_params} BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
{prologue}{group_check}
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(q_ptr + rn[None, :] * stride_qn + ks[:, None] * stride_qk,
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0).to(a.dtype)
        acc += tl.dot(a, w{precision}){group_scale}
{scale}{extra_loads}{epilogue}
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], {result}.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""

SCALES = {
    "row": "    acc = acc {op} tl.load(s_ptr + rn, mask=rn < N, other=1.0).to(tl.float32)[None, :]\n",
    "scalar": "    acc = acc {op} tl.load(s_ptr).to(tl.float32)\n",
    "none": "",
    "group": "",  # applied in the K loop (GROUP_SCALE)
}
GROUP_SCALE = (
    " {op} tl.load(s_ptr + rn * stride_sn + k0 // GROUP, mask=rn < N, other=1.0).to(tl.float32)[None, :]"
)
_FORWARD = """        x = {x}
        q = {q}
        s = {s}
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = q.shape[0]
        y = torch.empty((M, N), dtype={dtype}, device=x2.device)
        grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N),)
        dequant_linear_kernel[grid](x2, q, s, y,{extra_args} M, N, K, x2.stride(0), x2.stride(1), q.stride(0),
                                    q.stride(1), y.stride(0),{group_args} BLOCK_M=BLOCK_SIZE_M,
                                    BLOCK_N=BLOCK_SIZE_N, BLOCK_K=BLOCK_SIZE_K)
        return y.view(*x.shape[:-1], N)"""


def dequant_linear(
    args: Sequence[str],
    x: str,
    q: str,
    scale: tuple[str, str, str] | None,
    dtype: str,
    epilogue: Sequence[str] = (),
    result: str = "acc",
    extras: Sequence[tuple[str, str]] = (),
    init: Sequence[str] = (),
    prelude: str = "",
    ieee: bool = False,
    blocks: tuple[int, int, int] = (16, 16, 16),
) -> str:
    """The candidate module. `x`, `q` are forward-time expressions of the activations (..., K) and the
    integer weight (N, K); `scale` is (expression, kind `row` | `scalar` | `group`, `*` | `/`) or None
    (`group`: one scale per output channel and G consecutive K, shaped (N, K / G), applied to each K
    block's dot in the loop; G is read from the shapes at launch, so no move takes it for a block); `extras`
    are more tensors the epilogue reads as e0, e1, ... ((expression, kind `row` | `full` | `scalar`));
    `init` are ModelNew.__init__ lines and `prelude` module-level code they use (the reference's class);
    `ieee`: fp32 dots in full precision (no tf32 on GPUs)."""
    kind, op = (scale[1], scale[2]) if scale else ("none", "*")
    grouped = kind == "group"
    loads = epilogue_loads(extras)
    kernel = _KERNEL.format(
        prologue=MATMUL_PROLOGUE,
        extra_ptrs="".join(f" e{i}_ptr," for i in range(len(extras))),
        precision=', input_precision="ieee"' if ieee else "",
        group_params=" stride_sn, GROUP: tl.constexpr," if grouped else "",
        group_check="\n    tl.static_assert(GROUP % BLOCK_K == 0)  # a scale per K block" if grouped else "",
        group_scale=GROUP_SCALE.format(op=op) if grouped else "",
        scale=SCALES[kind].format(op=op),
        extra_loads=loads,
        epilogue=indent(epilogue),
        result=result,
    )
    s_expr = "q"
    if scale:
        s_expr = f"{scale[0]}.reshape(q.shape[0], -1)" if grouped else f"{scale[0]}.reshape(-1)"
    fwd = _FORWARD.format(
        x=x,
        q=q,
        s=s_expr,
        dtype=dtype,
        extra_args=epilogue_args(extras),
        group_args=" s.stride(0), GROUP=q.shape[1] // s.shape[1]," if grouped else "",
    )
    model = model_class(args, fwd, init)
    return HEADER + (f"\n\n{prelude}" if prelude else "") + consts(*blocks) + kernel + model
