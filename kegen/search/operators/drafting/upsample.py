"""Nearest-neighbour upsampling drafted as kegen's one-pass template, recognised by what the reference
computes: `F.interpolate(mode="nearest")`, `nn.Upsample`, `repeat_interleave` along the last two dims,
any spelling whose output equals x repeated by power-of-two factors along its last one or two dims.
The reference runs once at its own inputs (a forward whose source names interpolate, upsample or
repeat_interleave, one input of at most `MAX_ELEMENTS`), and the match must be exact (a copy)."""

from __future__ import annotations

from pathlib import Path

import torch

from kegen.search.operators.drafting.graph import run_reference
from kegen.search.operators.templates import pow2_block
from kegen.search.operators.templates import upsample as templates_upsample

MAX_ELEMENTS = 1 << 24
SUMMARY = "nearest-neighbour upsampling (confirmed numerically)"
_WORDS = ("interpolate", "upsample", "repeat_interleave")
_FACTORS = (1, 2, 4, 8)


def draft_upsample(problem_path: Path) -> str | None:
    """The template's candidate for the problem, or None (module doc)."""
    run = run_reference(problem_path, _WORDS, 1, MAX_ELEMENTS)
    if run is None:
        return None
    (x,), ref = run.inputs, run.output
    if (
        x.dim() < 2
        or not isinstance(ref, torch.Tensor)
        or ref.dim() != x.dim()
        or ref.shape[:-2] != x.shape[:-2]
    ):
        return None
    sh, rh = divmod(ref.shape[-2], x.shape[-2])
    sw, rw = divmod(ref.shape[-1], x.shape[-1])
    if rh or rw or sh not in _FACTORS or sw not in _FACTORS or sh * sw == 1 or ref.dtype != x.dtype:
        return None
    if x.dim() < 3 and sh != 1:
        return None
    if not torch.equal(x.repeat_interleave(sh, -2).repeat_interleave(sw, -1), ref):
        return None
    w = x.shape[-1]
    block_w = pow2_block(w)
    rows = pow2_block(x.numel() // w // 128, 1, min(128, 16384 // (block_w * sh * sw)))  # ~128 programs
    return templates_upsample.upsample_nearest(run.names[0], sh, sw, tuple(ref.shape), rows, block_w)
