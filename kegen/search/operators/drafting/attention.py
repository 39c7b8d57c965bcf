"""Attention drafted as kegen's flash-attention template, recognised by what the reference computes.

References write attention many ways: `F.scaled_dot_product_attention`, or its math spelled out (two
matmuls around a softmax, a scale, a causal mask built with `torch.ones(n, n).triu(1)` that torch.fx
cannot trace, fp16 operands upcast to float32). Rather than match each spelling, `draft_attention`
runs the reference once at its own inputs and compares its output with
`F.scaled_dot_product_attention` over the ways the inputs could play query, key, value and an
additive mask, causal or not, at the default scale or 1, with grouped-query heads (K and V with fewer
heads than Q, each shared by a group of query heads, however the reference repeats or expands them;
decoding's few queries are then packed with their group into one tile): the first that agrees (at the output
dtype's tolerance) is drafted with `templates.attention` (online softmax in fp32, exp2 with the
scale folded into Q, the causal mask as a constexpr branch), which the attention moves then tune.
The evaluator checks the draft again at fresh inputs, as every candidate.

Only a parameter-free forward of three or four 4-D float tensors [batch, heads, seq, head_dim]
that mentions a softmax (or attention) in its source is tried, and one whose score matrix is at
most `MAX_SCORES` elements, so the check costs one reference run of a modest size.
"""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kegen.search.operators.drafting.graph import load_problem_module
from kegen.search.operators.templates import attention

MAX_SCORES = 1 << 26  # batch x heads x seq_q x seq_k of the reference run that confirms the match
SUMMARY = "scaled_dot_product_attention (confirmed numerically)"


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (2e-2, 2e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-4, 1e-3)


def _forward_source(model_cls: Any) -> str:
    try:
        return inspect.getsource(model_cls.forward)
    except (OSError, TypeError):
        return ""


def draft_attention(problem_path: Path) -> str | None:
    """The attention template's candidate for the problem, or None where the reference is not
    attention over its inputs (module doc)."""
    mod = load_problem_module(Path(problem_path))
    source = _forward_source(mod.Model)  # before building the model: most problems stop here
    if not any(word in source for word in ("softmax", "attention")):
        return None
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    if any(True for _ in model.parameters()) or any(True for _ in model.buffers()):
        return None  # projections or learned masks: not the template's computation
    torch.manual_seed(0)
    with torch.device("meta"):
        shapes = mod.get_inputs()
    if not isinstance(shapes, list | tuple) or not 3 <= len(shapes) <= 4:
        return None
    if not all(isinstance(x, torch.Tensor) and x.is_floating_point() for x in shapes):
        return None
    four = [i for i, x in enumerate(shapes) if x.dim() == 4]
    if len(four) < 3:
        return None
    b, h, s, _ = shapes[four[0]].shape
    if b * h * s * max(shapes[i].shape[2] for i in four) > MAX_SCORES:
        return None
    torch.manual_seed(0)
    inputs = mod.get_inputs()
    with torch.no_grad():
        ref = model(*inputs)
    if not isinstance(ref, torch.Tensor) or ref.dim() != 4:
        return None
    return _match(model, list(inputs), ref)


def _match(model: torch.nn.Module, inputs: list[torch.Tensor], ref: torch.Tensor) -> str | None:
    """The template candidate for the first (q, k, v, mask, causal, scale) that reproduces `ref`."""
    names = [p for p in inspect.signature(model.forward).parameters]
    if len(names) != len(inputs):
        return None
    four = [i for i, x in enumerate(inputs) if x.dim() == 4]
    atol, rtol = _tolerance(ref.dtype)
    roles = itertools.product(itertools.permutations(four, 3), (False, True), (None, 1.0))
    for (q, k, v), causal, scale in roles:
        rest = [i for i in range(len(inputs)) if i not in (q, k, v)]
        if causal and rest:
            continue  # torch takes a mask or is_causal, not both
        m = rest[0] if rest else None
        if inputs[q].dtype != ref.dtype or tuple(ref.shape) != (*inputs[q].shape[:3], inputs[v].shape[3]):
            continue
        try:
            with torch.no_grad():
                mine = F.scaled_dot_product_attention(
                    inputs[q].float(), inputs[k].float(), inputs[v].float(),
                    attn_mask=None if m is None else inputs[m].float(), is_causal=causal, scale=scale,
                    enable_gqa=True,
                ).to(ref.dtype)  # fmt: skip
        except (RuntimeError, ValueError):
            continue
        if not torch.allclose(mine.float(), ref.float(), atol=atol, rtol=rtol):
            continue
        out = torch.empty(ref.shape)
        return attention.attention(
            names, names[q], names[k], names[v], list(ref.shape), list(out.stride()),
            inputs[q].shape[2], inputs[k].shape[2], causal, scale=scale,
            mask=None if m is None else names[m], kv_heads=inputs[k].shape[1],
        )  # fmt: skip
    return None

