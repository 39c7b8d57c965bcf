"""Convolution moves for mtia: the seed's implicit GEMM rewritten as the row-tiled kernel.

`templates.conv_rows` turns a one-convolution module (Conv1d / Conv2d, stride 1) into a kernel whose
per-tap input tile is one block DMA of an output row with a hoisted column mask and whose weights are
packed per tap once. Two variants: two programs per PE (`dual_core`, each in half the local store)
and one program per PE with three operand stages; a variant whose tiles do not fit is rejected by
screening's compile at no simulation cost. Measured at full size (docs/results/gemm_peak_mtia.md):
conv2d_fp16 134.9 us (the production record) -> 75.6 us (dual) / 80.0 us; conv1d_fp16 87.8 ->
69.6 us (dual).
"""

from __future__ import annotations

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.templates.conv_rows import rewrite

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
