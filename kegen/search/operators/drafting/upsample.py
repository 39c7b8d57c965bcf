"""Nearest-neighbour upsampling drafted as kegen's one-pass template, recognised by what the reference
computes: `F.interpolate(mode="nearest")`, `nn.Upsample`, `repeat_interleave` along the last two dims,
any spelling whose output equals x repeated by power-of-two factors along its last one or two dims.
The reference runs once at its own inputs (a forward whose source names interpolate, upsample or
repeat_interleave, one input of at most `MAX_ELEMENTS`), and the match must be exact (a copy)."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from kegen.search.operators.drafting.graph import load_problem_module
from kegen.search.operators.templates import upsample as templates_upsample

MAX_ELEMENTS = 1 << 24
SUMMARY = "nearest-neighbour upsampling (confirmed numerically)"
_WORDS = ("interpolate", "upsample", "repeat_interleave")
_FACTORS = (1, 2, 4, 8)


def draft_upsample(problem_path: Path) -> str | None:
    """The template's candidate for the problem, or None (module doc)."""
    mod = load_problem_module(Path(problem_path))
    try:
        source = inspect.getsource(mod.Model)
    except (OSError, TypeError):
        return None
    if not any(word in source.lower() for word in _WORDS):
        return None
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(0)
    with torch.device("meta"):
        shapes = mod.get_inputs()
    if not isinstance(shapes, list | tuple) or len(shapes) != 1 or not isinstance(shapes[0], torch.Tensor):
        return None
    if shapes[0].dim() < 2 or shapes[0].numel() > MAX_ELEMENTS:
        return None
    torch.manual_seed(0)
    (x,) = mod.get_inputs()
    with torch.no_grad():
        ref = model(x)
    if not isinstance(ref, torch.Tensor) or ref.dim() != x.dim() or ref.shape[:-2] != x.shape[:-2]:
        return None
    sh, rh = divmod(ref.shape[-2], x.shape[-2])
    sw, rw = divmod(ref.shape[-1], x.shape[-1])
    if rh or rw or sh not in _FACTORS or sw not in _FACTORS or sh * sw == 1 or ref.dtype != x.dtype:
        return None
    if x.dim() < 3 and sh != 1:
        return None
    if not torch.equal(x.repeat_interleave(sh, -2).repeat_interleave(sw, -1), ref):
        return None
    names = list(inspect.signature(model.forward).parameters)
    w = x.shape[-1]
    block_w = 1 << max(0, w - 1).bit_length()
    n_rows = x.numel() // w
    rows = max(1, min(128, 16384 // (block_w * sh * sw), 1 << max(0, n_rows // 128 - 1).bit_length()))
    return templates_upsample.upsample_nearest(names[0], sh, sw, tuple(ref.shape), rows, block_w)
