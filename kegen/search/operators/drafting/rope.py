"""Rotary position embeddings drafted as kegen's one-pass template, recognised by what the reference
computes.

RoPE is written many ways (`torch.cat([-x2, x1])`, `rotate_half`, `torch.stack(...).flatten`, tables
as buffers or inputs, sliced to the sequence, unsqueezed for the heads, fp16 upcast), and Inductor
turns the `cat` into copies through DRAM. `draft_rope` runs the reference once at its own inputs and
compares its output with `x * cos + rotate(x) * sin` over the reference's inputs and tensors as x,
cos and sin, both pairings (halves, interleaved) and full- or half-width tables: the first that agrees
at the output dtype's tolerance is drafted (`templates.rope`). The evaluator checks the draft again
at fresh inputs, as every candidate.

Only a forward whose source mentions cos, sin, rot or rope is tried, with at most `MAX_ELEMENTS`
elements in x, so the check costs one modest reference run.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import torch

from kegen.search.operators.drafting.graph import ReferenceRun, run_reference
from kegen.search.operators.drafting.weights import reference_init, reference_tensor
from kegen.search.operators.templates import pow2_block
from kegen.search.operators.templates import rope as templates_rope

MAX_ELEMENTS = 1 << 25
SUMMARY = "rotary position embedding (confirmed numerically)"
_WORDS = ("cos", "sin", "rot", "rope")


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (1e-2, 1e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-5, 1e-4)


def _rotate(x: torch.Tensor, interleaved: bool) -> torch.Tensor:
    if interleaved:
        pairs = x.unflatten(-1, (-1, 2))
        return torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _widen(t: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """A half-width table as the full-width one its columns stand for."""
    return t.repeat_interleave(2, dim=-1) if interleaved else torch.cat([t, t], dim=-1)


def _views(name: str, t: torch.Tensor, x: torch.Tensor) -> list[tuple[str, torch.Tensor, bool]]:
    """(expression suffix, view, half width) of table `t` that broadcast against x: as it is, sliced
    to x's sequence (dim -2), unsqueezed for the heads (a (batch, seq, D) table of a 4-D x)."""
    out = []
    seq = x.shape[-2] if x.dim() >= 2 else 1
    cands = [("", t)]
    if t.dim() == 2 and t.shape[0] > seq:
        cands.append((f"[:{seq}]", t[:seq]))
    if t.dim() == 3 and x.dim() == 4:
        cands.append((".unsqueeze(1)", t.unsqueeze(1)))
    for suffix, v in cands:
        for half in (False, True):
            width = x.shape[-1] // 2 if half else x.shape[-1]
            if v.shape[-1] != width:
                continue
            try:
                fits = torch.broadcast_shapes(v.shape, (*x.shape[:-1], width)) == (*x.shape[:-1], width)
            except RuntimeError:
                continue
            if fits:
                out.append((suffix, v, half))
    return out


def draft_rope(problem_path: Path) -> str | None:
    """The RoPE template's candidate for the problem, or None where the reference is not a rotary
    embedding of one of its inputs (module doc)."""
    run = run_reference(problem_path, _WORDS, 4, MAX_ELEMENTS)
    if run is None:
        return None
    ref = run.output
    if not isinstance(ref, torch.Tensor) or not ref.is_floating_point() or ref.dim() < 2 or ref.shape[-1] % 2:
        return None
    return _match(run, ref, problem_path)


def _match(run: ReferenceRun, ref: torch.Tensor, path: Path) -> str | None:
    model, names, inputs = run.model, run.names, run.inputs
    tensors: list[tuple[str, torch.Tensor, bool]] = [
        (n, v, True) for n, v in zip(names, inputs, strict=True) if isinstance(v, torch.Tensor)
    ]
    held = [*model.named_buffers(), *model.named_parameters()]
    tensors += [(reference_tensor(model, n), v.detach(), False) for n, v in held]
    floats = [(e, v, is_input) for e, v, is_input in tensors if v.is_floating_point()]
    xs = [(e, v) for e, v, is_input in floats if is_input and v.shape == ref.shape and v.dtype == ref.dtype]
    atol, rtol = _tolerance(ref.dtype)
    for (x_expr, x), interleaved in itertools.product(xs, (False, True)):
        tables = [
            (e + suf, v, half, e) for e, t, _ in floats if e != x_expr for suf, v, half in _views(e, t, x)
        ]
        for (c_expr, c, c_half, c_src), (s_expr, s, s_half, s_src) in itertools.permutations(tables, 2):
            if c_half != s_half or c_src == s_src:
                continue
            cf = _widen(c.float(), interleaved) if c_half else c.float()
            sf = _widen(s.float(), interleaved) if s_half else s.float()
            mine = (x.float() * cf + _rotate(x.float(), interleaved) * sf).to(ref.dtype)
            if not torch.allclose(mine.float(), ref.float(), atol=atol, rtol=rtol):
                continue
            init: list[str] = []
            prelude = ""
            if "self.reference" in c_expr + s_expr:
                init, prelude = reference_init(path, "the cos / sin tables")
            rows = pow2_block(x.numel() // x.shape[-1] // 128, 16, 128)  # ~128 programs
            return templates_rope.rope(
                names, x_expr, c_expr, s_expr, interleaved, c_half, x.shape[-1], init, prelude, rows
            )
    return None
