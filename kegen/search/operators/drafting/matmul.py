"""Drafting matmul / mm / bmm with an elementwise epilogue, and stacks of linear layers
(nn.Linear / F.linear) with their biases and activations fused."""

from __future__ import annotations

import math
from typing import Any

import torch.nn as nn
from torch.fx import Node

from kegen.search.operators.drafting.elementwise import broadcast_kind, chain
from kegen.search.operators.drafting.graph import (
    LINEAR,
    MATMUL,
    Traced,
    dtype_of,
    dtype_src,
    rank_of,
    shape_of,
)
from kegen.search.operators.drafting.layout import operand_view
from kegen.search.operators.drafting.weights import twins
from kegen.search.operators.templates import gemm as templates_gemm
from kegen.search.operators.templates import gemm_first_tiles


def draft_matmul(t: Traced) -> str | None:
    """matmul / mm / bmm of two inputs (or their last-two-dim transposes) with an elementwise epilogue."""
    mms = [n for n in t.ops if n.target in MATMUL]
    if len(mms) != 1 or len(mms[0].args) != 2 or mms[0].kwargs:
        return None
    mm = mms[0]
    k = t.ops.index(mm)
    views = [operand_view(t, x) for x in mm.args]
    if views[0] is None or views[1] is None or t.out is not t.ops[-1]:
        return None
    (a, a_nodes), (b, b_nodes) = views[0], views[1]
    if set(t.ops[:k]) != set(a_nodes + b_nodes):
        return None
    (sa, sb), dtype = (shape_of(x) for x in mm.args), dtype_src(t.out)
    if sa is None or sb is None or len(sa) < 2 or dtype is None:
        return None
    fold = len(sb) == 2 and len(sa) > 2
    if not fold and (len(sa) != len(sb) or sa[:-2] != sb[:-2]):  # no batch broadcasting
        return None
    env: dict[Node, str] = {mm: "acc"}
    extras: list[tuple[str, str]] = []
    for p in t.ph:  # inputs the epilogue reads: a bias row, a residual, a scalar
        kind = broadcast_kind(shape_of(p) or (), tuple(shape_of(t.out) or ()))
        if kind in ("row", "full", "scalar") and any(u in t.ops[k + 1 :] for u in p.users):
            env[p] = f"e{len(extras)}"
            extras.append((t.arg(p), str(kind)))
    got = chain(t, t.ops[k + 1 :], env)
    if got is None:
        return None
    batch = 1 if fold else math.prod(sa[:-2])
    m = math.prod(sa[:-1]) if fold else sa[-2]
    bm, bn, bk = gemm_first_tiles(m, sb[-1], sa[-1], programs=-(-64 // batch))
    return templates_gemm.bmm(t.args, a, b, got[0], got[1] or "acc", dtype, fold, extras, bm, bn, bk)


def _linear_layer(t: Traced, n: Node, x: Any) -> tuple[str, str | None] | None:
    """(weight, bias) expressions when `n` is a linear layer applied to `x`."""
    mod = t.module(n)
    if isinstance(mod, nn.Linear) and n.args == (x,) and not n.kwargs:
        attr = "self." + str(n.target).replace(".", "_")
        return f"{attr}.weight.detach()", f"{attr}.bias.detach()" if mod.bias is not None else None
    if mod is None and n.target in LINEAR and n.args[:1] == (x,):
        w, b = (*n.args[1:], None, None)[:2]
        b = n.kwargs.get("bias", b)
        if w in t.ph and rank_of(w) == 2 and (b is None or b in t.ph and rank_of(b) == 1):
            return t.arg(w), t.arg(b) if b is not None else None
    return None


def draft_linear(t: Traced) -> str | None:
    """A stack of linear layers (nn.Linear / F.linear), each with an elementwise epilogue."""
    if t.out is None or not t.ops or not t.ops[0].args or t.ops[0].args[0] not in t.ph:
        return None
    x = t.ops[0].args[0]
    stages, cur, i = [], x, 0
    while i < len(t.ops):
        layer = _linear_layer(t, t.ops[i], cur)
        if layer is None:
            return None
        j = i + 1
        while j < len(t.ops) and _linear_layer(t, t.ops[j], t.ops[j - 1]) is None:
            j += 1
        got = chain(t, t.ops[i + 1 : j], {t.ops[i]: "acc"})
        if got is None:
            return None
        stages.append(templates_gemm.LinearStage(layer[0], layer[1], tuple(got[0]), got[1] or "acc"))
        cur, i = t.ops[j - 1], j
    init = twins(t)
    if cur is not t.out or init is None or dtype_of(t.out) != dtype_of(x):
        return None
    return templates_gemm.linear_chain(stages, t.args, t.arg(x), init)
