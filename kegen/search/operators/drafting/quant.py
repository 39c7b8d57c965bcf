"""Drafting weight-only quantized linear layers: `x @ (Q.float() * scale[:, None]).T`,
`F.linear(x, Q.to(x.dtype) * scale[:, None], bias)` and the like, where Q is an 8-bit integer weight
(a buffer, a parameter or an input) and the scale is one value per output channel, one scalar, or one
per output channel and group of G input channels (`(Q.float().view(N, K // G, G) * S[..., None]).view(N, K)`).

The template (`templates.dequant`) reads Q's integers in the GEMM's loop and scales the accumulator,
so the float weight the reference materialises (N x K floats, written and read back: most of the
layer's traffic) is never built. The model's buffers are read from the reference itself, built in
ModelNew.__init__ (`Reference`): quantized weights come from a checkpoint or a quantizer, which
seeded construction of standard modules cannot rebuild.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from kegen.search.operators.drafting.elementwise import chain
from kegen.search.operators.drafting.graph import (
    LINEAR,
    MATMUL,
    Traced,
    dtype_of,
    dtype_src,
    is_cast,
    shape_of,
)
from kegen.search.operators.drafting.layout import _swapped, operand_view
from kegen.search.operators.drafting.matmul import epilogue_tensors
from kegen.search.operators.drafting.weights import reference_init, tensor_expr
from kegen.search.operators.templates import dequant as templates_dequant
from kegen.search.operators.templates import gemm_first_tiles

INTEGER = (torch.int8, torch.uint8)
_MUL = {operator.mul, torch.mul, "mul"}
_DIV = {operator.truediv, torch.div, "div"}
_VIEWS = {"unsqueeze", torch.unsqueeze, "view", "reshape", torch.reshape, operator.getitem}


@dataclass
class _Weight:
    """The dequantized weight (N, K): the integer leaf, the scale leaf and how it applies."""

    q: Node
    scale: Node | None = None
    kind: str = "none"  # row (one value per output channel) | scalar | none
    op: str = "*"
    nodes: list[Node] = field(default_factory=list)
    group: int = 0  # input channels per scale (kind `group`)


def _leaf(t: Traced, n: Any, nodes: list[Node], views: bool) -> Node | None:
    """The input or model tensor below casts (and, with `views`, unsqueeze/view/[:, None] views),
    adding the nodes passed to `nodes`; None when anything else is in between."""
    while isinstance(n, Node) and n.op not in ("placeholder", "get_attr"):
        if not (is_cast(n) or views and n.target in _VIEWS) or len(n.users) != 1 or not n.args:
            return None
        nodes.append(n)
        n = n.args[0]
    return n if isinstance(n, Node) else None


def _dequant(t: Traced, n: Any, n_out: int) -> _Weight | None:
    """`n` (the weight as (N, K)) as cast(Q) [* or / scale], Q an 8-bit integer tensor."""
    nodes: list[Node] = []
    while is_cast(n) and len(n.users) == 1:
        nodes.append(n)  # a cast of the scaled weight (the product rounded to the activations' dtype)
        n = n.args[0]
    if not isinstance(n, Node):
        return None
    if n.op == "call_method" and n.target in ("view", "reshape") and len(n.users) == 1:
        return _grouped(t, n, nodes, n_out)
    pairs: list[tuple[Any, Any, str]] = []
    if n.op != "placeholder" and n.op != "get_attr" and len(n.args) == 2 and len(n.users) == 1:
        a, b = n.args
        if n.target in _MUL:
            pairs = [(a, b, "*"), (b, a, "*")]
        elif n.target in _DIV:
            pairs = [(a, b, "/")]
    for q_side, s_side, op in pairs:
        q_nodes = [n]
        q = _leaf(t, q_side, q_nodes, views=False)
        if q is None or dtype_of(q) not in INTEGER or len(shape_of(q) or ()) != 2:
            continue
        if isinstance(s_side, int | float) and not isinstance(s_side, bool):
            return None  # a Python scale: no tensor to read (rare; Inductor's draft covers it)
        s = _leaf(t, s_side, q_nodes, views=True)
        s_shape = shape_of(s_side)
        if s is None or s_shape is None or shape_of(s) is None or dtype_of(s) in INTEGER:
            continue
        kind = "scalar" if int(torch.Size(s_shape).numel()) == 1 else None
        if kind is None and tuple(s_shape)[-1:] == (1,) and int(torch.Size(s_shape).numel()) == n_out:
            kind = "row"
        if kind is not None:
            return _Weight(q, s, kind, op, nodes + q_nodes)
    q_nodes = []
    q = _leaf(t, n, q_nodes, views=False)
    if q is not None and dtype_of(q) in INTEGER:
        return _Weight(q, nodes=nodes + q_nodes)
    return None


def _grouped(t: Traced, n: Node, nodes: list[Node], n_out: int) -> _Weight | None:
    """`(cast(Q).view(N, K // G, G) * S[..., None]).view(N, K)`: one scale per output channel and G
    consecutive input channels (group-wise quantization), S shaped (N, K // G)."""
    inner = n.args[0]
    out_shape, in_shape = shape_of(n), shape_of(inner)
    if not (isinstance(inner, Node) and inner.target in _MUL | _DIV and len(inner.users) == 1):
        return None
    if out_shape is None or in_shape is None or len(out_shape) != 2 or len(in_shape) != 3:
        return None
    rows, groups, group = in_shape
    if rows != n_out or out_shape != (rows, groups * group) or group < 16 or group & (group - 1):
        return None
    a, b = inner.args
    pairs = [(a, b, "*"), (b, a, "*")] if inner.target in _MUL else [(a, b, "/")]
    for q_side, s_side, op in pairs:
        q_nodes = [n, inner]
        q = _leaf(t, q_side, q_nodes, views=True)
        s = _leaf(t, s_side, q_nodes, views=True)
        if q is None or s is None or dtype_of(q) not in INTEGER or dtype_of(s) in INTEGER:
            continue
        if shape_of(q) != out_shape or shape_of(s_side) != (rows, groups, 1):
            continue
        if int(torch.Size(shape_of(s) or ()).numel()) != rows * groups:
            continue
        return _Weight(q, s, "group", op, nodes + q_nodes, group)
    return None


@dataclass
class LinearParts:
    """What a quantized linear's template needs besides its weight: the activations' view and size,
    the elementwise epilogue over `acc` (with the tensors it reads) and the output dtype."""

    x: str
    epilogue: list[str]
    result: str
    extras: list[tuple[str, str]]
    dtype: str
    m: int
    k: int
    ieee: bool


def linear_parts(
    t: Traced, mm: Node, bias: Any, weight_nodes: list[Node], weight_leaves: set[Node]
) -> LinearParts | None:
    """The activations, bias and epilogue of a one-matmul graph whose weight operand is computed by
    `weight_nodes` from `weight_leaves` (the integer weight, its scales and zeros); None where anything
    else is computed before the matmul or the epilogue is not an elementwise chain."""
    x_view = operand_view(t, mm.args[0]) if mm.args else None
    out_shape = shape_of(t.out) if t.out is not None else None
    if x_view is None or x_view[0].endswith(".transpose(-1, -2)") or not out_shape:
        return None
    n_out = out_shape[-1]
    extras: list[tuple[str, str]] = []
    b_nodes: list[Node] = []
    epilogue: list[str] = []
    if bias is not None:  # F.linear's bias: added to the scaled accumulator, read through its casts
        b = _leaf(t, bias, b_nodes, views=False)
        if b is None or shape_of(b) != (n_out,):
            return None
        extras.append((tensor_expr(t, b), "row"))
        epilogue.append("acc = acc + e0")
    k = t.ops.index(mm)
    # dtypes read by casts, sizes read by views: values, not tensors
    dtypes = {n for n in t.ops if shape_of(n) is None and dtype_of(n) is None and n is not mm}
    if not set(t.ops[:k]) - dtypes <= set(x_view[1] + weight_nodes + b_nodes):
        return None
    after = [n for n in t.ops[k + 1 :] if n not in dtypes]
    env: dict[Node, str] = {mm: "acc"}
    if not epilogue_tensors(t, after, tuple(out_shape), env, extras, skip=weight_leaves):
        return None
    got = chain(t, after, env) if after else ([], "acc")
    dtype = dtype_src(t.out) if t.out is not None else None
    if got is None or dtype is None:
        return None
    x_node = x_view[1][-1].args[0] if x_view[1] else mm.args[0]
    x_shape = shape_of(x_node) or (1, 1)
    m = int(torch.Size(x_shape[:-1]).numel())
    return LinearParts(
        x_view[0],
        [*epilogue, *got[0]],
        got[1] or "acc",
        extras,
        dtype,
        m,
        x_shape[-1],
        ieee=dtype_of(x_node) == torch.float32,
    )


def reference_reads(t: Traced, exprs: list[str], what: str) -> tuple[list[str], str]:
    """ModelNew.__init__ lines and module prelude that build the reference, where `exprs` read it."""
    if any("self.reference" in e for e in exprs):
        return reference_init(t.problem.__file__, what)
    return [], ""


def draft_dequant_linear(t: Traced) -> str | None:
    """A linear layer whose weight is an 8-bit integer tensor dequantized in the forward (see the module
    docstring), with an elementwise epilogue that may read a bias, a residual or a scalar."""
    mms = [n for n in t.ops if n.target in MATMUL | LINEAR]
    if len(mms) != 1 or t.out is None or t.out is not t.ops[-1]:
        return None
    mm = mms[0]
    out_shape = shape_of(t.out)
    if not out_shape:
        return None
    n_out = out_shape[-1]
    w_node: Any = mm.args[1] if len(mm.args) > 1 else None
    bias: Any = None
    swap: list[Node] = []
    if mm.target in LINEAR:
        bias = mm.kwargs.get("bias", mm.args[2] if len(mm.args) > 2 else None)
    else:  # matmul: the weight's transpose, below or above its casts
        while is_cast(w_node) and len(w_node.users) == 1:
            swap.append(w_node)
            w_node = w_node.args[0]
        if not (isinstance(w_node, Node) and _swapped(w_node, 2) and len(w_node.users) == 1):
            return None
        swap, w_node = [*swap, w_node], w_node.args[0]
    weight = _dequant(t, w_node, n_out)
    if weight is None or tuple(shape_of(weight.q) or ()) != (n_out, (shape_of(mm.args[0]) or (0,))[-1]):
        return None
    leaves = {weight.q} | ({weight.scale} if weight.scale is not None else set())
    parts = linear_parts(t, mm, bias, weight.nodes + swap, leaves)
    if parts is None:
        return None
    q_expr = tensor_expr(t, weight.q)
    scale = (tensor_expr(t, weight.scale), weight.kind, weight.op) if weight.scale is not None else None
    init, prelude = reference_reads(
        t,
        [q_expr, scale[0] if scale else "", *(e for e, _ in parts.extras)],
        "the quantized weights and scales",
    )
    return templates_dequant.dequant_linear(
        t.args,
        parts.x,
        q_expr,
        scale,
        parts.dtype,
        parts.epilogue,
        parts.result,
        parts.extras,
        init,
        prelude,
        ieee=parts.ieee,
        blocks=gemm_first_tiles(parts.m, n_out, parts.k, group=weight.group),
    )
