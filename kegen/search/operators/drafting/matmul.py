"""Drafting matmul / mm / bmm with an elementwise epilogue, and stacks of linear layers
(nn.Linear / F.linear) with their biases and activations fused."""

from __future__ import annotations

import math
import operator
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
from torch.fx import Node

from kegen.search.operators.drafting.elementwise import broadcast_kind, chain
from kegen.search.operators.drafting.graph import (
    LINEAR,
    MATMUL,
    Drafts,
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
    if mod is not None or not n.args:
        return None
    used: set[Node] = set()
    if strip_casts(n.args[0], used) is not x:
        return None
    if n.target in LINEAR:
        w, b = (*n.args[1:], None, None)[:2]
        b = n.kwargs.get("bias", b)
        weight, transposed = w, False
    elif _is_weight_matmul(n):  # x @ W.t() (a linear spelled as a product), or x @ W with W [K, N]
        weight, transposed = _matmul_weight(n.args[1], used)
        b = None
    else:
        return None
    exprs: list[str | None] = []
    for v, rank in ((weight, 2), (b, 1)):
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
    return (f"{exprs[0]}.t()" if transposed else exprs[0]), exprs[1]


def _is_transpose(n: Any) -> bool:
    """`W.t()`, `W.T`, `W.transpose(0, 1)` / `(-2, -1)` / ... of a 2-D `W`, `W.permute(1, 0)`."""
    if not isinstance(n, Node) or rank_of(n) != 2 or not n.args:
        return False
    if n.target in ("t", torch.t) or (n.target is getattr and n.args[1:] in (("T",), ("mT",))):
        return True
    if n.target in ("transpose", torch.transpose, "swapaxes", "swapdims"):
        dims: Any = n.args[1:]
    elif n.target in ("permute", torch.permute):
        dims = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], list | tuple) else n.args[1:]
    else:
        return False
    if len(dims) != 2 or not all(isinstance(d, int) for d in dims):
        return False
    first, second = dims[0] % 2, dims[1] % 2  # of a 2-D tensor: -2 is 0, -1 is 1
    if n.target in ("permute", torch.permute):
        return (first, second) == (1, 0)
    return {first, second} == {0, 1}


def _matmul_weight(w: Any, used: set[Node]) -> tuple[Node | None, bool]:
    """(the weight leaf of a product's second operand, below casts and one transpose, which join `used`,
    or None; whether the product reads it as stored, [K, N], so the layer's weight is its `.t()`)."""
    v = strip_casts(w, used)
    as_stored = not _is_transpose(v)
    if not as_stored:
        used.add(v)
        v = strip_casts(v.args[0], used)
    leaf = v if isinstance(v, Node) and v.op in ("get_attr", "placeholder") and rank_of(v) == 2 else None
    return leaf, as_stored


def _is_weight_matmul(n: Node) -> bool:
    """A matmul / mm / `@` whose second operand is a 2-D model tensor or input (through casts and one
    transpose): a linear layer in all but name."""
    if n.target not in MATMUL or len(n.args) != 2 or n.kwargs or n.target in (torch.bmm, "bmm"):
        return False
    return _matmul_weight(n.args[1], set())[0] is not None


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


def _graph_stages(
    t: Traced, x: Node, linears: list[Node], casts: set[Node], twin: bool
) -> list[templates_gemm.LinearStage] | None:
    """Linear layers that form a graph rather than a stack (a gated MLP: `silu(x @ W1.t()) * (x @ W3.t())`
    then `@ W2.t()`; two projections of one input summed): each elementwise op belongs to the latest
    layer it depends on and runs in that layer's epilogue, reading other layers' outputs as epilogue
    tensors; a layer's input is the block's input or an earlier layer's output."""
    layers = {}
    for lin in linears:
        if not lin.args:
            return None
        inp = strip_casts(lin.args[0], casts)
        layer = _linear_layer(t, lin, inp, casts, twin)
        if layer is None:
            return None
        parts = _column_parts(lin)
        if parts is None:
            layers[lin] = (inp, layer)
            continue
        weight, bias = layer  # each part a layer of its own: the weight's (and bias's) rows c0:c1
        for part, c0, c1 in parts:
            layers[part] = (inp, (f"{weight}[{c0}:{c1}]", f"{bias}[{c0}:{c1}]" if bias else None))
        casts |= {lin, *(u for u in lin.users if u not in layers)}  # the product and its chunk
    if any(inp in t.ph and dtype_of(inp) != dtype_of(x) for inp, _ in layers.values()):
        return None  # a layer's output is stored in its input's dtype: other inputs must share x's
    order = {n: i for i, n in enumerate(t.ops)}
    linears = sorted(layers, key=order.__getitem__)
    owner: dict[Node, Node] = {}
    for n in t.ops:
        if n in layers or (n in casts and n is not t.out):
            owner[n] = n if n in layers else owner.get(strip_casts(n, set()), n)
            continue
        deps = [owner[a] for a in n.all_input_nodes if a in owner and owner[a] in layers]
        if not deps:
            return None  # work before the first layer: not a linear graph
        owner[n] = max(deps, key=order.__getitem__)
    names: dict[Node, str] = {p: t.arg(p) for p in t.ph} | {x: "h"}  # a layer may read any input
    stages = []
    for i, lin in enumerate(linears):
        inp, (weight, bias) = layers[lin]
        epilogue = [
            n for n in t.ops if owner.get(n) is lin and n is not lin and (n not in casts or n is t.out)
        ]
        result = epilogue[-1] if epilogue else lin
        if inp not in names or any(
            owner.get(u) is not lin and u not in casts
            for n in (lin, *epilogue)
            if n is not result
            for u in n.users
        ):
            return None  # an input not computed yet, or a value other layers read besides the output
        env: dict[Node, str] = {lin: "acc"}
        extras: list[tuple[str, str]] = []
        if not epilogue_tensors(t, epilogue, shape_of(lin), env, extras):
            return None
        for n in epilogue:  # other layers' outputs the epilogue reads (through casts)
            for a in n.all_input_nodes:
                src = strip_casts(a, set())
                if src in names and owner.get(src) is not lin and a not in env:
                    if shape_of(src) != shape_of(lin):
                        return None
                    env[a] = env[src] = f"e{len(extras)}"
                    extras.append((names[src], "full"))
        got = chain(t, epilogue, env)
        if got is None:
            return None
        names[result] = f"y{i}"
        stages.append(
            templates_gemm.LinearStage(
                weight, bias, tuple(got[0]), got[1] or "acc", tuple(extras), names[inp], names[result]
            )
        )
    if result is not t.out or any(n not in owner for n in t.ops):
        return None
    return stages


def _column_parts(lin: Node) -> list[tuple[Node, int, int]] | None:
    """(node, first column, end column) of each part where a layer's output is only read split along
    its last dim (`chunk`, `split`, `h[..., a:b]`), covering each column once; None otherwise."""
    shape = shape_of(lin)
    users = list(lin.users)
    if shape is None or not users:
        return None
    n_cols, last = shape[-1], len(shape) - 1
    parts: list[tuple[Node, int, int]] = []
    if len(users) == 1 and users[0].target in ("chunk", torch.chunk, "split", torch.split):
        split = users[0]
        dim = split.kwargs.get("dim", split.args[2] if len(split.args) > 2 else 0)
        arg = split.args[1] if len(split.args) > 1 else None
        if (
            not isinstance(dim, int)
            or dim % len(shape) != last
            or any(u.target is not operator.getitem for u in split.users)
        ):
            return None
        if split.target in ("chunk", torch.chunk):
            sizes = [n_cols // arg] * arg if isinstance(arg, int) and arg > 0 and n_cols % arg == 0 else []
        else:
            if isinstance(arg, int):
                sizes = [arg] * (n_cols // arg) if arg > 0 and n_cols % arg == 0 else []
            elif isinstance(arg, list | tuple) and all(isinstance(a, int) for a in arg):
                sizes = [int(a) for a in arg]
            else:
                return None
        starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        if not sizes or starts[-1] != n_cols:
            return None
        for u in split.users:
            i = u.args[1]
            if not isinstance(i, int) or not -len(sizes) <= i < len(sizes):
                return None
            parts.append((u, starts[i % len(sizes)], starts[i % len(sizes) + 1]))
    else:
        for u in users:
            cols = _last_dim_slice(u, len(shape), n_cols) if u.target is operator.getitem else None
            if cols is None:
                return None
            parts.append((u, *cols))
    covered = sorted((c0, c1) for _, c0, c1 in parts)
    if any(b[0] < a[1] for a, b in zip(covered, covered[1:], strict=False)) or any(
        c0 >= c1 for c0, c1 in covered
    ):
        return None  # overlapping or empty parts (a column read twice would be computed twice)
    return parts


def _last_dim_slice(n: Node, rank: int, n_cols: int) -> tuple[int, int] | None:
    """The columns of `h[..., a:b]` (or `h[:, a:b]` on a matrix), step 1; None for any other index."""
    index = n.args[1]
    if isinstance(index, tuple) and len(index) == 2 and index[0] is Ellipsis:
        sl = index[1]
    elif isinstance(index, tuple) and len(index) == rank and all(i == slice(None) for i in index[:-1]):
        sl = index[-1]
    else:
        return None
    if not isinstance(sl, slice) or sl.step not in (None, 1):
        return None
    if not all(v is None or isinstance(v, int) for v in (sl.start, sl.stop)):
        return None
    c0, c1, _ = sl.indices(n_cols)
    return c0, c1


def draft_linear(t: Traced) -> Drafts | None:
    """A stack of linear layers (nn.Linear / F.linear), each with an elementwise epilogue that may read
    other inputs or model tensors (a residual, scales); fp32 upcasts of the input, weights and biases
    and the final cast back allowed. Its variant: gated layers (SwiGLU, GEGLU) with both products of one
    input in one kernel (`templates.gemm.fuse_gates`), where any pair fuses."""
    plan = _linear_plan(t)
    if plan is None:
        return None
    fused = templates_gemm.fuse_gates(plan.stages)
    variants = () if fused is None else ((GATED_VARIANT, plan.source(fused)),)
    return Drafts(plan.source(plan.stages), variants)


GATED_VARIANT = "gate and up layers of one input in one kernel"


@dataclass(frozen=True)
class _LinearPlan:
    """The layers of a linear stack or graph and what the candidate's module needs to run them."""

    t: Traced
    stages: list[templates_gemm.LinearStage]
    x: Node
    init: list[str]
    prelude: str
    tiles: tuple[int, int, int]

    def source(self, stages: list[templates_gemm.LinearStage]) -> str:
        """The candidate running `stages` (this plan's or a rewrite of them)."""
        bm, bn, bk = self.tiles
        return templates_gemm.linear_chain(
            stages, self.t.args, self.t.arg(self.x), self.init, bm, bn, bk, prelude=self.prelude
        )


def _linear_plan(t: Traced) -> _LinearPlan | None:
    """`draft_linear`'s layers of `t`, or None where the graph is not a stack or graph of them."""
    if t.out is None or not t.ops:
        return None
    casts: set[Node] = set()
    linears = [
        n for n in t.ops if isinstance(t.module(n), nn.Linear) or n.target in LINEAR or _is_weight_matmul(n)
    ]
    if not linears or not linears[0].args:
        return None
    x = strip_casts(linears[0].args[0], casts)
    if x not in t.ph or dtype_of(t.out) != dtype_of(x):
        return None
    for lin in linears:  # every layer's weight and bias preparation (upcasts, transposes) up front
        if _linear_layer(t, lin, strip_casts(lin.args[0], casts), casts, True) is None:
            return None
    build = _stages
    stages = _stages(t, x, linears, set(casts), twin=True)
    if stages is None:
        build, stages = _graph_stages, _graph_stages(t, x, linears, set(casts), twin=True)
    if stages is None:
        return None
    exprs = [e for s in stages for e in (s.weight, s.bias or "", *(e for e, _ in s.extras))]
    init: list[str] | None = None
    if not any("self.reference." in e for e in exprs):
        init, prelude = twins(t), ""
    if init is None:  # weights ModelNew cannot rebuild (e.g. made in bf16): the reference's, as built
        stages = build(t, x, linears, set(casts), twin=False)
        if stages is None:
            return None
        init, prelude = reference_init(t.problem.__file__, "the linear layers' parameters")
    x_shape, out_shape = shape_of(x) or (1,), shape_of(linears[0]) or (1,)
    tiles = gemm_first_tiles(math.prod(x_shape[:-1]), out_shape[-1], x_shape[-1])
    return _LinearPlan(t, stages, x, init, prelude, tiles)
