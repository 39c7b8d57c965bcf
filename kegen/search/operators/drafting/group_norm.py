"""Drafting GroupNorm (nn.GroupNorm or F.group_norm over a contiguous (N, C, *spatial) input) with an
elementwise epilogue on its output (an activation, the cast back from an fp32 upcast) as the one-pass
GroupNorm template (`templates.group_norm`). The weight and bias are read from the reference built
in ModelNew.__init__ (`Reference`), which holds them however the model set them."""

from __future__ import annotations

from typing import Any

import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node

from kegen.search.operators.drafting.elementwise import chain
from kegen.search.operators.drafting.graph import Traced, dtype_src, rank_of, shape_of, strip_casts
from kegen.search.operators.drafting.weights import reference_init, reference_tensor
from kegen.search.operators.templates import group_norm as templates_group_norm

GROUP_NORM = {F.group_norm, "group_norm"}


def _model_tensor(t: Traced, n: Any) -> str | None:
    """`self.reference...` of the model tensor a get_attr node reads, or None."""
    return reference_tensor(t.model, str(n.target)) if isinstance(n, Node) and n.op == "get_attr" else None


def _norm(t: Traced, n: Node) -> tuple[Any, int, float, str | None, str | None] | None:
    """(input, groups, eps, weight, bias) of a GroupNorm node; weight/bias forward-time expressions."""
    mod = t.module(n)
    if isinstance(mod, nn.GroupNorm):
        if not mod.affine:
            return n.args[0], mod.num_groups, mod.eps, None, None
        path = str(n.target)
        sub = f"self.reference.get_submodule({path!r})"
        return n.args[0], mod.num_groups, mod.eps, f"{sub}.weight", f"{sub}.bias"
    if mod is None and n.target in GROUP_NORM:
        p = dict(zip(("input", "num_groups", "weight", "bias", "eps"), n.args, strict=False)) | n.kwargs
        casts: set[Node] = set()
        w, b = p.get("weight"), p.get("bias")
        we = _model_tensor(t, strip_casts(w, casts)) if w is not None else None
        be = _model_tensor(t, strip_casts(b, casts)) if b is not None else None
        if (w is None) != (b is None) or (w is not None and (we is None or be is None)):
            return None
        groups, eps = p.get("num_groups"), p.get("eps", 1e-5)
        if not isinstance(groups, int) or not isinstance(eps, float | int):
            return None
        return p.get("input"), groups, float(eps), we, be
    return None


def draft_group_norm(t: Traced) -> str | None:
    """GroupNorm of an input (fp32 upcasts allowed) then elementwise ops on its output alone."""
    norms = [n for n in t.ops if n.op == "call_module" and isinstance(t.module(n), nn.GroupNorm)]
    norms += [n for n in t.ops if n.op != "call_module" and n.target in GROUP_NORM]
    if len(norms) != 1 or len(t.ph) != 1 or t.out is not t.ops[-1]:
        return None
    gn = norms[0]
    got = _norm(t, gn)
    if got is None:
        return None
    x, groups, eps, weight, bias = got
    casts: set[Node] = set()
    if strip_casts(x, casts) is not t.ph[0] or (rank_of(t.ph[0]) or 0) < 3:
        return None
    shape = shape_of(t.ph[0])
    if shape is None or shape[1] % groups:
        return None
    k = t.ops.index(gn)
    dtypes = {n for n in t.ops if n.target is getattr and n.args[1:] == ("dtype",)}  # read by casts only
    weights = {n for n in t.ops[:k] if n.op == "call_method" and n.target in ("float", "to")}
    if set(t.ops[:k]) - casts - weights - dtypes:
        return None
    lines: list[str] = []
    result = "{y}"
    after = [n for n in t.ops[k + 1 :] if n not in dtypes]
    if after:
        epi = chain(t, after, {gn: "{y}"})
        if epi is None:
            return None
        lines, result = epi
    dtype = dtype_src(t.out)
    if dtype is None:
        return None
    init, prelude = (
        reference_init(t.problem.__file__, "the GroupNorm's weight and bias") if weight else ([], "")
    )
    return templates_group_norm.group_norm(
        t.args, t.args[0], groups, eps, weight, bias, dtype, lines, result, init, prelude
    )
