"""Drafting matmul / mm / bmm with an elementwise epilogue, and stacks of linear layers
(nn.Linear / F.linear) with their biases and activations fused."""

from __future__ import annotations

import math
from collections.abc import Collection
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
    strip_casts,
)
from kegen.search.operators.drafting.layout import operand_view
from kegen.search.operators.drafting.weights import reference_init, reference_tensor, tensor_expr, twins
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


def _linear_layer(t: Traced, n: Node, x: Any, casts: set[Node], twin: bool) -> tuple[str, str | None] | None:
    """(weight, bias) expressions when `n` is a linear layer applied to `x` (through fp32 upcasts,
    added to `casts`): an nn.Linear (its twin in ModelNew where `twin`, else the reference's), or
    F.linear on inputs or the model's parameters (`self.reference`'s, through upcasts as well:
    `F.linear(x.float(), self.weight.float(), self.bias.float())`)."""
    mod = t.module(n)
    if isinstance(mod, nn.Linear) and n.args == (x,) and not n.kwargs:
        if not twin:
            bias = reference_tensor(t.model, f"{n.target}.bias") if mod.bias is not None else None
            return reference_tensor(t.model, f"{n.target}.weight"), bias
        attr = "self." + str(n.target).replace(".", "_")
        return f"{attr}.weight.detach()", f"{attr}.bias.detach()" if mod.bias is not None else None
    if mod is not None or n.target not in LINEAR or not n.args:
        return None
    used: set[Node] = set()
    if strip_casts(n.args[0], used) is not x:
        return None
    w, b = (*n.args[1:], None, None)[:2]
    b = n.kwargs.get("bias", b)
    exprs: list[str | None] = []
    for v, rank in ((w, 2), (b, 1)):
        v = strip_casts(v, used) if v is not None else None
        if v is None:
            exprs.append(None)
        elif v in t.ph and rank_of(v) == rank:
            exprs.append(t.arg(v))
        elif isinstance(v, Node) and v.op == "get_attr" and rank_of(v) == rank:
            exprs.append(reference_tensor(t.model, str(v.target)))
        else:
            return None
    if exprs[0] is None:
        return None
    casts |= used
    return exprs[0], exprs[1]


def epilogue_tensors(
    t: Traced,
    epilogue: list[Node],
    out: tuple[int, ...] | None,
    env: dict[Node, str],
    extras: list[tuple[str, str]],
    skip: Collection[Node] = (),
) -> bool:
    """Name the inputs and model tensors (but `skip`) a GEMM's `epilogue` reads (a residual, a per-row
    or per-column scale, a scalar) e<i> in `env`, appending (expression, kind) to `extras`; False where
    one does not broadcast against the GEMM's output `out` as the templates read it."""
    leaves = t.ph + [n for n in t.gm.graph.nodes if n.op == "get_attr"]
    for p in leaves:
        if p in skip or not any(u in epilogue for u in p.users):
            continue
        shape = shape_of(p)
        kind = broadcast_kind(shape, tuple(out)) if shape is not None and out else None
        if kind not in templates_gemm.EPILOGUE_KINDS:
            return False
        env[p] = f"e{len(extras)}"
        extras.append((tensor_expr(t, p), str(kind)))
    return True


def _stages(
    t: Traced, x: Node, linears: list[Node], casts: set[Node], twin: bool
) -> list[templates_gemm.LinearStage] | None:
    """The layers from input `x` to the output, each with its epilogue (module doc of draft_linear)."""
    stages, cur = [], x
    for i, lin in enumerate(linears):
        layer = _linear_layer(t, lin, cur, casts, twin)
        if layer is None:
            return None
        last = i + 1 == len(linears)
        # the next layer's input: this stage's last value, below upcasts (which join `casts`)
        nxt = None if last or not linears[i + 1].args else strip_casts(linears[i + 1].args[0], casts)
        end = len(t.ops) if last else t.ops.index(linears[i + 1])
        epilogue = [n for n in t.ops[t.ops.index(lin) + 1 : end] if n not in casts or n is t.out]
        if not last and nxt is not (epilogue[-1] if epilogue else lin):
            return None
        env: dict[Node, str] = {lin: "acc"}
        extras: list[tuple[str, str]] = []
        got = chain(t, epilogue, env) if epilogue_tensors(t, epilogue, shape_of(lin), env, extras) else None
        if got is None:
            return None
        stages.append(
            templates_gemm.LinearStage(layer[0], layer[1], tuple(got[0]), got[1] or "acc", tuple(extras))
        )
        cur = epilogue[-1] if epilogue else lin
    if cur is not t.out or any(n not in casts for n in t.ops[: t.ops.index(linears[0])]):
        return None
    return stages


def draft_linear(t: Traced) -> str | None:
    """A stack of linear layers (nn.Linear / F.linear), each with an elementwise epilogue that may read
    other inputs or model tensors (a residual, scales); fp32 upcasts of the input, weights and biases
    and the final cast back allowed."""
    if t.out is None or not t.ops:
        return None
    casts: set[Node] = set()
    linears = [n for n in t.ops if isinstance(t.module(n), nn.Linear) or n.target in LINEAR]
    if not linears or not linears[0].args:
        return None
    x = strip_casts(linears[0].args[0], casts)
    if x not in t.ph or dtype_of(t.out) != dtype_of(x):
        return None
    stages = _stages(t, x, linears, set(casts), twin=True)
    if stages is None:
        return None
    exprs = [e for s in stages for e in (s.weight, s.bias or "", *(e for e, _ in s.extras))]
    init: list[str] | None = None
    if not any("self.reference." in e for e in exprs):
        init, prelude = twins(t), ""
    if init is None:  # weights ModelNew cannot rebuild (e.g. made in bf16): the reference's, as built
        stages = _stages(t, x, linears, set(casts), twin=False)
        if stages is None:
            return None
        init, prelude = reference_init(t.problem.__file__, "the linear layers' parameters")
    x_shape, out_shape = shape_of(x) or (1,), shape_of(linears[0]) or (1,)
    bm, bn, bk = gemm_first_tiles(math.prod(x_shape[:-1]), out_shape[-1], x_shape[-1])
    return templates_gemm.linear_chain(stages, t.args, t.arg(x), init, bm, bn, bk, prelude=prelude)
