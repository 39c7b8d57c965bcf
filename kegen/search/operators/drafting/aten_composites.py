"""Lifting composite ops Inductor's post-grad graph spells in pieces (steps of `drafting.aten.lift`):
the eval-mode BatchNorm formula, and pooling (`lift_pooling`).

A `kegen tune` group of a convolution followed by an eval-mode BatchNorm reads the statistics and
affine weights as inputs of shape [C] and computes, with the per-channel vectors viewed as
[C, 1(, 1)]:

    (x - mean) * reciprocal(sqrt(var + eps)) [* 1] * weight + bias    (or rsqrt(var + eps))

`lift_batch_norm` rewrites that to `F.batch_norm(x, mean, var, weight, bias, False, 0.0, eps)`, the
form the convolution pattern takes as its epilogue. Exact up to rounding: the kernels fold the same
numbers into one scale and shift per channel.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node


def _shape(n: Any) -> tuple[int, ...] | None:
    meta = getattr(n, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _is_view(n: Any) -> bool:
    if not isinstance(n, Node):
        return False
    return n.target is torch.unsqueeze or (n.op, n.target) == ("call_method", "reshape")


def _channel_input(n: Any, channels: int) -> Node | None:
    """The [C] input a channel vector ([C, 1, ...] by reshapes and unsqueezes) views, else None."""
    while isinstance(n, Node) and n.op != "placeholder":
        if not _is_view(n):
            return None
        n = n.args[0]
    return n if isinstance(n, Node) and _shape(n) == (channels,) else None


def _inverse_std(n: Any, channels: int) -> tuple[Node, float] | None:
    """(var input, eps) where `n` is 1/sqrt(var + eps) viewed as a channel vector."""
    while _is_view(n):
        n = n.args[0]
    if isinstance(n, Node) and n.target is operator.mul and 1 in n.args[1:]:  # `* 1` (momentum-free)
        n = n.args[0]
    if not isinstance(n, Node):
        return None
    if n.target is torch.reciprocal and isinstance(n.args[0], Node) and n.args[0].target is torch.sqrt:
        added = n.args[0].args[0]
    elif n.target is torch.rsqrt:
        added = n.args[0]
    else:
        return None
    if not (isinstance(added, Node) and added.target is operator.add and isinstance(added.args[1], float)):
        return None
    var = _channel_input(added.args[0], channels)
    return (var, float(added.args[1])) if var is not None else None


def _other_arg(n: Node, value: Node) -> Any:
    a, b = n.args[:2]
    return b if a is value else a if b is value else None


def lift_batch_norm(gm: GraphModule) -> None:
    """Rewrite every eval-mode BatchNorm formula of the graph (module docstring) in place."""
    g = gm.graph
    for sub in list(g.nodes):
        if sub.target is not operator.sub or len(sub.users) != 1 or not isinstance(sub.args[0], Node):
            continue
        x = sub.args[0]
        shape = _shape(x)
        if shape is None or len(shape) not in (3, 4):
            continue
        channels = shape[1]
        mean = _channel_input(sub.args[1], channels)
        scaled = next(iter(sub.users))
        if mean is None or scaled.target is not operator.mul:
            continue
        found = _inverse_std(_other_arg(scaled, sub), channels)
        if found is None:
            continue
        var, eps = found
        out, weight, bias = scaled, None, None
        user = next(iter(out.users)) if len(out.users) == 1 else None
        if user is not None and user.target is operator.mul:
            weight = _channel_input(_other_arg(user, out), channels)
            out = user if weight is not None else out
        user = next(iter(out.users)) if len(out.users) == 1 else None
        if weight is not None and user is not None and user.target is operator.add:
            bias = _channel_input(_other_arg(user, out), channels)
            out = user if bias is not None else out
        if (weight is None) != (bias is None):  # the kernels' epilogue is affine or not, as a whole
            continue
        with g.inserting_before(out):
            bn = g.call_function(F.batch_norm, (x, mean, var, weight, bias, False, 0.0, eps))
        out.replace_all_uses_with(bn)
        g.eliminate_dead_code()


def lift_pooling(gm: GraphModule) -> None:
    """`aten.max_pool2d_with_indices` whose indices are not read (its values by `getitem` 0; `kegen
    tune` writes Inductor's low-memory max pool so) -> `F.max_pool2d` with the same window arguments;
    `aten.avg_pool2d` -> `F.avg_pool2d` (the same positional arguments)."""
    aten = torch.ops.aten
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.kwargs:
            continue
        if n.target is aten.avg_pool2d.default:
            n.target = F.avg_pool2d
        elif n.target is aten.max_pool2d_with_indices.default:
            users = list(n.users)
            if not users or any(u.target is not operator.getitem or u.args[1] != 0 for u in users):
                continue
            for u in users:
                u.replace_all_uses_with(n)
                gm.graph.erase_node(u)
            n.target = F.max_pool2d
