"""mtia rewrite of a conv1d / conv2d seed: output rows as the GEMM's N axis, weights pre-packed per tap.

The seeds' implicit GEMM tiles output pixels flattened over the image (`pix // W`, `pix % W`), so
every tap gathers its input tile through a 2-D pointer tile and recomputes a 2-D boundary mask on
the SIMD (docs/results/gemm_class_moves.md: conv2d_fp16 at 35% of its roofline, DMA idle on
dependencies). Here one program computes `BLOCK_CO` output channels of `BLOCK_W` pixels of one
output row: each tap's input tile is `x[n, ci, oh + kh - PAD_H, ow + kw - PAD_W]`, affine in
(ci, ow), so it moves as one block DMA with a 1-D column mask hoisted per tap (the row test is a
scalar); the weights are packed once into (KH, KW, C_out, C_in), each tap's tile contiguous in
C_in. The seed is recognised as `templates.gpu_conv` does (one Conv1d/Conv2d module, stride,
dilation and groups 1, a bias-only epilogue). Block sizes are module constants (`CONVR_*`) and the
launch options literals, so the block and option moves tune them afterwards.

`conv_mutations` offers the rewrite as moves, two variants: two programs per PE (`dual_core`, each
in half the local store) and one program per PE with three operand stages; a variant whose tiles do
not fit is rejected by screening's compile at no simulation cost. Measured at full size
(docs/results/gemm_peak_mtia.md): conv2d_fp16 134.9 us (the production record) -> 75.6 us (dual) /
80.0 us; conv1d_fp16 87.8 -> 69.6 us (dual).
"""

from __future__ import annotations

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.templates.gpu_conv import _MODEL_TAIL as GPU_MODEL_TAIL
from kegen.search.operators.templates.gpu_conv import EPILOGUE_MARK, bn_act_apply, bn_prologue, conv_module
from kegen.search.operators.templates.gpu_conv import MARKER as GPU_MARKER
from kegen.search.operators.templates.gpu_launch import module_imports, module_support, rewritten_module

REWRITTEN = "# kegen-mtia: conv"  # the marker prefix of every mtia convolution rewrite
MARKER = f"{REWRITTEN} rows"

_RESIDUAL = (  # the output tile in the residual tensor: pointers, mask
    "r_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + oh * OW + ow[None, :]",
    "co_ok[:, None] & (ow < OW)[None, :]",
)
KERNEL = """
@triton.jit
def conv_rows_kernel(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, C_IN, C_OUT, H, W,
                     OH, OW, EPS,
                     KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                     STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, DIL_H: tl.constexpr, DIL_W: tl.constexpr,
                     HAS_BIAS: tl.constexpr, HAS_BN: tl.constexpr, BN_AFFINE: tl.constexpr,
                     HAS_RES: tl.constexpr, ACT: tl.constexpr,
                     BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_W: tl.constexpr):
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
            ih = oh * STRIDE_H + kh * DIL_H - PAD_H
            row_ok = (ih >= 0) & (ih < H)
            for kw in range(KW):
                iw = ow * STRIDE_W + (kw * DIL_W - PAD_W)
                cols_ok = (iw >= 0) & (iw < W) & row_ok
                w = tl.load(w_ptr + (kh * KW + kw) * C_OUT * C_IN + co[:, None] * C_IN + ci[None, :],
                            mask=co_ok[:, None] & ci_ok[None, :], other=0.0)
                x = tl.load(x_img + ci[:, None] * (H * W) + ih * W + iw[None, :],
                            mask=ci_ok[:, None] & cols_ok[None, :], other=0.0)
                acc += tl.dot(w, x)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    # BATCHNORM_ACTIVATION
    tl.store(y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW) + oh * OW + ow[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=co_ok[:, None] & (ow < OW)[None, :])
""".replace(EPILOGUE_MARK, bn_prologue("    ", "co", "co_ok") + bn_act_apply("    ", "[:, None]", _RESIDUAL))

LAUNCH = """
        y = torch.empty((batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow), dtype=x.dtype,
                        device=x.device)
        bw = min(CONVR_BLOCK_W, triton.next_power_of_2(ow))
        # blocks no wider than the channels (few input or output channels leave less of a tile masked)
        bci = min(CONVR_BLOCK_CI, max(16, triton.next_power_of_2(c_in)))
        bco = min(CONVR_BLOCK_CO, max(16, triton.next_power_of_2(c_out)))
        grid = (batch, oh * triton.cdiv(ow, bw), triton.cdiv(c_out, bco))
        conv_rows_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b, w if r is None else r,
                               y, c_in, c_out, h, w_,
                               oh, ow, eps, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=sh, STRIDE_W=sw,
                               DIL_H=dh, DIL_W=dw, HAS_BIAS=b is not None, HAS_BN=bn is not None,
                               BN_AFFINE=affine, HAS_RES=r is not None, ACT=act,
                               BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                               num_stages={stages}, dual_core={dual})
        return y
"""


def model_tail() -> str:
    """`templates.gpu_conv`'s model tail (the weights packed once per storage and version, the
    convolution's checks and geometry) with the weights packed (*taps, C_out, C_in), then this
    kernel's launch."""
    head, sep, _ = GPU_MODEL_TAIL.partition("        shape = ")
    ours = head.replace("permute(*range(2, w.dim()), 1, 0)", "permute(*range(2, w.dim()), 0, 1)")
    if not sep or ours == head:
        raise MutationError("templates.gpu_conv's model tail changed: the row rewrite cannot reuse it")
    return ours.replace("-> (taps, C_in, C_out)", "-> (*taps, C_out, C_in)").rstrip("\n") + LAUNCH


def constants(block_co: int, block_ci: int, block_w: int) -> str:
    """The module constants the row kernel's launch reads (tuned by the block moves)."""
    return f"CONVR_BLOCK_CO = {block_co}\nCONVR_BLOCK_CI = {block_ci}\nCONVR_BLOCK_W = {block_w}\n"


def rewrite(
    source: str,
    block_co: int = 128,
    block_ci: int = 64,
    block_w: int = 128,
    stages: int = 2,
    dual: bool = True,
) -> str:
    """The module rewritten as the row-tiled convolution; MutationError when it is not a
    one-convolution model with a bias-only epilogue, or already rewritten (for either target)."""
    if REWRITTEN in source or GPU_MARKER in source:
        raise MutationError("already a convolution rewrite")
    model = conv_module(source)
    imports = module_imports(source) + module_support(source)
    consts = constants(block_co, block_ci, block_w)
    tail = model.fill(model_tail()).replace("{stages}", str(stages)).replace("{dual}", str(dual))
    return rewritten_module(imports, f"{MARKER}\n{consts}", KERNEL, model.init_src, tail)


# (BLOCK_CO, BLOCK_CI, BLOCK_W, num_stages, dual_core)
VARIANTS: tuple[tuple[int, int, int, int, bool], ...] = (
    (128, 64, 64, 2, True),
    (128, 64, 64, 3, False),
)


def _apply(variant: tuple[int, int, int, int, bool]):  # type: ignore[no-untyped-def]
    co, ci, w, stages, dual = variant
    return lambda src: rewrite(src, block_co=co, block_ci=ci, block_w=w, stages=stages, dual=dual)


def conv_mutations(source: str) -> list[Mutation]:
    """The row-tiled rewrite of a convolution module, one move per variant ([] when it does not apply)."""
    try:
        rewrite(source)
    except (MutationError, SyntaxError):
        return []
    muts = []
    for v in VARIANTS:
        co, ci, w, stages, dual = v
        muts.append(
            Mutation(
                name=f"conv_rows={co}x{w}x{ci}{'+dual' if dual else ''}",
                family="conv_rows",
                description=f"rewrite the convolution as row tiles ({co} channels x {w} pixels of one "
                f"output row, C_in block {ci}): one block DMA per tap with a hoisted column mask, weights "
                f"packed per tap once; num_stages={stages}, dual_core={dual}",
                apply=_apply(v),
                helps=("memory", "latency"),
                prior=2.0 if dual else 1.8,
                remedies=("bigger_commands", "fewer_bytes", "overlap"),
                kernel="",
            )
        )
    return muts
