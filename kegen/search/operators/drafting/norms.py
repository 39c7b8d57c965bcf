"""Drafting normalisations over the last dimension: nn.LayerNorm, F.layer_norm (of an input or a
residual sum), nn.RMSNorm / F.rms_norm, and RMSNorm written with torch ops (confirmed numerically)."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node

from kegen.search.operators.drafting.graph import (
    POW,
    RMS_NORM,
    Traced,
    dtype_of,
    dtype_src,
    rank_of,
    shape_of,
    strip_casts,
)
from kegen.search.operators.drafting.weights import reference_init, reference_tensor, twins
from kegen.search.operators.templates import pow2_block
from kegen.search.operators.templates import rows as templates_rows


def draft_layer_norm(t: Traced) -> str | None:
    """nn.LayerNorm over the last dimension of the input, as the rows template (its parameters rebuilt
    by `twins`, else read from the reference ModelNew builds)."""
    if len(t.ops) != 1 or len(t.ph) != 1 or t.out is not t.ops[0]:
        return None
    n = t.ops[0]
    mod = t.module(n)
    if not isinstance(mod, nn.LayerNorm) or len(mod.normalized_shape) != 1 or n.args[:1] != (t.ph[0],):
        return None
    if n.kwargs or len(n.args) != 1 or dtype_src(t.out) is None:
        return None
    path = str(n.target)
    params = [f"{path}.{name}" if getattr(mod, name) is not None else None for name in ("weight", "bias")]
    exprs, init, prelude = _parameters(t, params, "the LayerNorm's weight and bias")
    source = templates_rows.layer_norm(
        t.args,
        t.args[0],
        None,
        exprs[0],
        exprs[1],
        float(mod.eps),
        str(dtype_src(t.out)),
        block=_row_block(tuple(mod.normalized_shape)),
        init=init,
    )
    return _with_prelude(source, prelude)


def _shape_reads(t: Traced) -> set[Node]:
    """`x.shape` and `x.shape[i]` nodes (arguments such as F.layer_norm's normalized_shape)."""
    reads = {n for n in t.ops if n.target is getattr and n.args[1] == "shape"}
    return reads | {n for n in t.ops if n.target is operator.getitem and n.args[0] in reads}


def _param_path(n: Any, casts: set[Node]) -> str | None:
    """The dotted path of the model parameter a get_attr node (below casts) reads, else None."""
    n = strip_casts(n, casts)
    return str(n.target) if isinstance(n, Node) and n.op == "get_attr" else None


def _parameters(t: Traced, paths: list[str | None], holds: str) -> tuple[list[str | None], list[str], str]:
    """(ModelNew's forward-time expressions of the model parameters at `paths`, None staying None;
    ModelNew.__init__'s lines; the module-level prelude): the parameters rebuilt by `twins` where
    seeded construction gives the reference's values (module a.b as self.a_b), else read from the
    reference ModelNew builds (`holds` names them)."""
    rebuilt = twins(t)
    if rebuilt is None:
        init, prelude = reference_init(t.problem.__file__, holds)
        return [reference_tensor(t.model, p) if p else None for p in paths], init, prelude
    return [_twin(p) if p else None for p in paths], rebuilt, ""


def _twin(path: str) -> str:
    """ModelNew's expression of the twin of the parameter at `path` (`twins` builds module a.b as
    self.a_b)."""
    owner, _, leaf = path.rpartition(".")
    return f"self.{owner.replace('.', '_')}.{leaf}.detach()" if owner else f"self.{leaf}.detach()"


def _row_block(shape: Any) -> int:
    """The template's block for rows of `shape[0]` elements: the whole row up to 4096 (loaded once)."""
    n = int(shape[0]) if isinstance(shape[0], int) else 4096
    return pow2_block(n, 64, 4096)


def draft_layer_norm_fn(t: Traced) -> str | None:
    """F.layer_norm over the last dimension, of an input or a residual sum (returned beside the norm
    or not), with weight and bias that are inputs or the model's parameters (rebuilt by `twins`),
    fp32 upcasts and the cast back allowed."""
    lns = [n for n in t.ops if n.target is F.layer_norm]
    casts: set[Node] = set()
    outs = [t.out] if t.out is not None else t.outs
    normed = [o for o in outs if len(lns) == 1 and strip_casts(o, casts) is lns[0]]
    if len(normed) != 1 or len(outs) > 2 or dtype_src(normed[0]) is None:
        return None
    ln, out = lns[0], normed[0]
    p = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), ln.args, strict=False)) | ln.kwargs
    x, shape = strip_casts(p.get("input"), casts), p.get("normalized_shape")
    eps = p.get("eps", 1e-5)
    if not isinstance(shape, list | tuple) or len(shape) != 1 or not isinstance(eps, float | int):
        return None
    exprs: list[str | None] = []  # weight and bias: inputs' names (a parameter's below)
    params: list[str | None] = []  # weight and bias: parameters' paths
    for v in (p.get("weight"), p.get("bias")):
        upcast: set[Node] = set()
        if v is not None and (below := strip_casts(v, upcast)) in t.ph:  # an input read through upcasts
            v = below
            casts |= upcast
        if v is None or (v in t.ph and rank_of(v) == 1):
            exprs.append(t.arg(v) if v is not None else None)
            params.append(None)
        elif (path := _param_path(v, casts)) is not None:
            exprs.append(None)
            params.append(path)
        else:
            return None
    dtype_reads = {n for n in t.ops if n.target is getattr and n.args[1] == "dtype"}
    is_sum = isinstance(x, Node) and x.target in (operator.add, torch.add) and not x.kwargs
    addends = [strip_casts(v, casts) for v in x.args] if is_sum else []  # the sum's upcasts are casts
    rest = [n for n in t.ops if n is not ln and n not in _shape_reads(t) | casts | dtype_reads]
    residual, summed = None, x
    if rest == [x] and len(addends) == 2:
        x, residual = addends
        if residual not in t.ph or shape_of(residual) != shape_of(x):
            return None
    elif rest:
        return None
    if x not in t.ph:
        return None
    sum_at = None
    if len(outs) == 2:  # the other output must be the residual sum (cast back or not), in the inputs' dtype
        sum_at = 1 - outs.index(out)
        if residual is None or strip_casts(outs[sum_at], set()) is not summed:
            return None
        if not dtype_of(x) == dtype_of(residual) == dtype_of(outs[sum_at]):
            return None
    init: list[str] = []
    prelude = ""
    if any(params):
        values, init, prelude = _parameters(t, params, "the LayerNorm's weight and bias")
        exprs = [e if e is not None else v for e, v in zip(exprs, values, strict=True)]
    source = templates_rows.layer_norm(
        t.args,
        t.arg(x),
        t.arg(residual) if residual is not None else None,
        exprs[0],
        exprs[1],
        float(eps),
        str(dtype_src(out)),
        block=_row_block(shape),
        init=init,
        sum_at=sum_at,
    )
    return _with_prelude(source, prelude)


def _with_prelude(source: str, prelude: str) -> str:
    """`source` with module-level definitions (the reference's class, which ModelNew builds) before
    ModelNew."""
    if not prelude:
        return source
    return source.replace("\n\nclass ModelNew(", f"\n\n{prelude.strip()}\n\n\nclass ModelNew(", 1)


def draft_rms_norm_op(t: Traced) -> str | None:
    """nn.RMSNorm (rebuilt in ModelNew) or F.rms_norm over the last dimension."""
    if len(t.ops) != 1 or t.out is not t.ops[0] or dtype_src(t.out) is None or t.ops[0].args[0] not in t.ph:
        return None
    n, x = t.ops[0], t.ops[0].args[0]
    mod, init = t.module(n), twins(t) if t.module(n) is not None else []
    weight: str | None
    if isinstance(mod, nn.RMSNorm) and len(mod.normalized_shape) == 1 and init is not None:
        attr = str(n.target).replace(".", "_")
        eps: Any = mod.eps
        weight = f"self.{attr}.weight.detach()" if mod.weight is not None else None
    elif n.target in RMS_NORM:
        params = dict(zip(("input", "normalized_shape", "weight", "eps"), n.args, strict=False)) | n.kwargs
        shape, w, eps = params.get("normalized_shape"), params.get("weight"), params.get("eps")
        if not isinstance(shape, list | tuple) or len(shape) != 1 or (w is not None and w not in t.ph):
            return None
        weight = t.arg(w) if w is not None else None
    else:
        return None
    eps_src = "torch.finfo(x.dtype).eps" if eps is None else repr(float(eps))
    block = _row_block(shape_of(x)[-1:]) if shape_of(x) else 64  # type: ignore[index]
    return templates_rows.rms_norm(
        t.args, t.arg(x), weight, eps_src, str(dtype_src(t.out)), block=block, init=init or ()
    )


_RMS_FORMULA_OPS = {"mean", torch.mean, "float", "to", "type_as"} | POW | {torch.square, "square"}
_RMS_FORMULA_OPS |= {operator.mul, torch.mul, "mul", operator.add, torch.add, "add", torch.rsqrt, "rsqrt"}
_RMS_FORMULA_OPS |= {torch.sqrt, "sqrt", operator.truediv, torch.div, "div", torch.reciprocal, "reciprocal"}


def draft_rms_norm_formula(t: Traced) -> str | None:
    """RMSNorm written with torch ops, of an input or a residual sum (returned beside the norm or
    not), fp32 upcasts and casts back allowed, the weight an input or a parameter: recognised by its
    ops and eps, confirmed numerically."""
    outs = [t.out] if t.out is not None else t.outs
    if not 1 <= len(outs) <= 2 or not 1 <= len(t.ph) <= 3 or any(n.op == "call_module" for n in t.ops):
        return None
    means = [n for n in t.ops if n.target in ("mean", torch.mean)]
    if any(n.target not in _RMS_FORMULA_OPS for n in t.ops) or len(means) != 1:
        return None
    out_shape = shape_of(outs[0])
    if not out_shape or any(shape_of(o) != out_shape for o in outs):
        return None
    xs = [p for p in t.ph if shape_of(p) == out_shape]
    params = [n for n in t.gm.graph.nodes if n.op == "get_attr"]
    ws = [p for p in t.ph if p not in xs] + params
    if not 1 <= len(xs) <= 2 or len(ws) > 1 or any(shape_of(w) != out_shape[-1:] for w in ws):
        return None
    adds = [n for n in t.ops if n.target in (operator.add, torch.add, "add")]
    eps = [a for n in adds for a in n.args if isinstance(a, float)]
    casts: set[Node] = set()
    pairs = [n for n in adds if len(xs) == 2 and not n.kwargs]
    sums = [n for n in pairs if {strip_casts(a, casts) for a in n.args} == set(xs)]
    if len(eps) != 1 or len(sums) != len(xs) - 1 or (len(xs) == 2 and dtype_of(xs[0]) != dtype_of(xs[1])):
        return None
    bases = [strip_casts(o, casts) for o in outs]
    sum_at = bases.index(sums[0]) if sums and sums[0] in bases else None
    normed = 1 - sum_at if sum_at is not None else 0
    if len(outs) != 1 + (sum_at is not None) or dtype_src(outs[normed]) is None:
        return None
    if sum_at is not None and dtype_of(outs[sum_at]) != dtype_of(xs[0]):  # stored in the inputs' dtype
        return None
    w = ws[0] if ws else None
    if not _rms_confirmed(t, xs, w, eps[0], normed, sum_at, out_shape):
        return None
    weight, init, prelude = _rms_weight(t, w)
    source = templates_rows.rms_norm(
        t.args,
        t.arg(xs[0]),
        weight,
        repr(eps[0]),
        str(dtype_src(outs[normed])),
        block=_row_block(out_shape[-1:]),
        init=init,
        residual=t.arg(xs[1]) if len(xs) == 2 else None,
        sum_at=sum_at,
    )
    return _with_prelude(source, prelude)


def _rms_weight(t: Traced, w: Node | None) -> tuple[str | None, list[str], str]:
    """(forward's expression of the weight, ModelNew.__init__ lines, module-level prelude): an input
    as it is; a parameter rebuilt by `twins`, else read from the reference built in ModelNew."""
    if w is None or w.op == "placeholder":
        return (t.arg(w) if w is not None else None), [], ""
    (expr,), init, prelude = _parameters(t, [str(w.target)], "the RMSNorm's weight")
    return expr, init, prelude


def _rms_confirmed(
    t: Traced, xs: list[Node], w: Node | None, eps: float, normed: int, sum_at: int | None, shape: tuple
) -> bool:
    """Whether the graph computes RMSNorm of the sum of `xs` (output `normed`; the sum itself at
    `sum_at`, to its dtype's rounding) on real inputs, their leading dims cut to 2 (the formula is
    row-wise); `w` an input or a parameter."""
    torch.manual_seed(0)
    real = [
        torch.randn(
            (2,) * (len(shape) - 1) + shape[-1:] if p in xs else (shape_of(p) or ()),
            dtype=dtype_of(p) or torch.float32,
        )
        for p in t.ph
    ]
    for scale in (1.0, 3.0):
        values = [v * scale if p in xs else v for p, v in zip(t.ph, real, strict=True)]
        src = values[t.ph.index(xs[0])].float()
        if len(xs) == 2:
            src = src + values[t.ph.index(xs[1])].float()
        if w is None:
            wv: Any = 1.0
        elif w.op == "placeholder":
            wv = values[t.ph.index(w)].float()
        else:
            wv = operator.attrgetter(str(w.target))(t.model).detach().float()
        want = src * torch.rsqrt(src.pow(2).mean(-1, keepdim=True) + eps) * wv
        result = t.gm(*values)
        got = result[normed] if isinstance(result, tuple | list) else result
        if not isinstance(got, torch.Tensor) or not got.is_floating_point():
            return False
        if sum_at is not None:
            summed = result[sum_at] if isinstance(result, tuple | list) else None
            if summed is None or not torch.equal(summed, src.to(summed.dtype)):
                return False
        # an output cast back to fp16/bf16 (`.to(x.dtype)`) rounds: one unit of its precision apart
        tol = 1e-4 if got.dtype == torch.float32 else 2 * torch.finfo(got.dtype).eps
        if not torch.allclose(got.float(), want, atol=1e-5, rtol=tol):
            return False
    return True
