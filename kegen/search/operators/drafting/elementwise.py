"""Drafting elementwise chains: each node's Triton expression, fused chains over same-shape inputs
and chains whose inputs and parameters broadcast (row/column vectors, scalars) against the output."""

from __future__ import annotations

import math
import string
from typing import Any

import torch
from torch.fx import Node

from kegen.search.operators import templates
from kegen.search.operators.drafting.graph import (
    CASTS,
    GELU,
    IGNORED_KWARGS,
    POW,
    Traced,
    dtype_of,
    dtype_src,
    rank_of,
    shape_of,
)
from kegen.search.operators.drafting.weights import twins
from kegen.search.operators.templates import layout as templates_layout
from kegen.search.operators.templates import pow2_floor
from kegen.search.operators.templates.exprs import (
    CLAMPS,
    ELEMENTWISE_FORMATS,
    GELU_ERF,
    GELU_TANH,
    MODULE_FORMATS,
    POW_FORMATS,
    clamp_expr,
)


def _operand(arg: Any, env: dict[Node, str]) -> str | None:
    if isinstance(arg, Node):
        return env.get(arg)
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(float(arg))
    return None


def _clamp_format(n: Node) -> str | None:
    """The clamp of `n` (a CLAMPS target) with constant bounds, or None (tensor bounds, unknown keywords,
    in place on a value read elsewhere)."""
    names, defaults = CLAMPS[n.target]
    if isinstance(n.target, str) and n.target.endswith("_") and len(getattr(n.args[0], "users", ())) > 1:
        return None  # in place on a value read elsewhere: the other reads see the clamped values
    params = [k for k in names if k is not None]
    kwargs = {k: v for k, v in n.kwargs.items() if k != "inplace"}
    if len(n.args) - 1 > len(params) or set(kwargs) - set(params):
        return None
    given = dict(zip(params, n.args[1:], strict=False)) | kwargs
    bounds: list[float | None] = []
    for name, default in zip(names, defaults, strict=True):
        b = given.get(name, default) if name is not None else default
        if b is not None and (isinstance(b, bool) or not isinstance(b, int | float)):
            return None
        bounds.append(b)
    return clamp_expr(*bounds)


def _format(t: Traced, n: Node) -> str | None:
    """The Triton expression of one elementwise node, or None."""
    if n.op == "call_module":
        m = t.module(n)
        fmt = MODULE_FORMATS.get(type(m))
        return fmt(m) if fmt is not None and not n.kwargs else None
    if n.target in CLAMPS:
        return _clamp_format(n)
    if any(k not in IGNORED_KWARGS or v != IGNORED_KWARGS[k] for k, v in n.kwargs.items()):
        if n.target in GELU and set(n.kwargs) <= {"approximate"}:
            return GELU_TANH if n.kwargs["approximate"] == "tanh" else None
        return None
    if n.target in GELU:
        return GELU_ERF
    if n.target in POW:
        exponent = n.args[1] if len(n.args) > 1 else None
        return POW_FORMATS.get(exponent) if isinstance(exponent, int | float) else None
    if n.target in CASTS:  # computed in fp32 and stored in the output's dtype: only a final cast
        return "{0}" if n is t.out or n.args[1:] == (torch.float32,) else None
    return ELEMENTWISE_FORMATS.get(n.target)


def chain(t: Traced, nodes: list[Node], env: dict[Node, str]) -> tuple[list[str], str] | None:
    """`tN = expr` lines computing `nodes` in order from the values named in `env`."""
    lines: list[str] = []
    for i, n in enumerate(nodes):
        fmt = _format(t, n)
        if fmt is None:
            return None
        operands = [_operand(a, env) for a in n.args]
        used = {int(f) for _, f, _, _ in string.Formatter().parse(fmt) if f is not None and f.isdigit()}
        if any(i >= len(operands) or operands[i] is None for i in used):
            return None
        env[n] = f"t{i}"
        lines.append(f"t{i} = " + fmt.format(*operands))
    return lines, env[nodes[-1]] if nodes else ""


def draft_elementwise(t: Traced) -> str | None:
    """A fused chain over same-shape inputs (flattened, 1-D blocks)."""
    if not t.ops or t.out is not t.ops[-1] or any(rank_of(p) is None for p in t.ph):
        return None
    if len({shape_of(p) for p in t.ph} | {shape_of(t.out)}) != 1 or dtype_src(t.out) is None:
        return None
    got = chain(t, t.ops, {p: f"v{i}" for i, p in enumerate(t.ph)})
    if got is None:
        return None
    lines, result = got
    dtype = dtype_src(t.out) if dtype_of(t.out) != dtype_of(t.ph[0]) else None
    return templates.elementwise(len(t.ph), lines, result, _block(t.out), dtype=dtype)


def _block(out: Node) -> int:
    """A flat block that gives each of the 64 PEs about one (a power of two, 256 to 4096): smaller
    blocks pay a program's fixed cost many times over (gelu on 256 x 512: 11.3 us at 256, 7.3 at 2048)."""
    return pow2_floor(math.prod(shape_of(out) or (1,)) // 64, 256, 4096)


def broadcast_kind(shape: tuple[int, ...], out: tuple[int, ...]) -> str | None:
    """How an operand of `shape` broadcasts against `out`: full | scalar | row | col, else None."""
    shape = (1,) * (len(out) - len(shape)) + shape
    if len(shape) != len(out):
        return None
    if shape == out:
        return "full"
    if math.prod(shape) == 1:
        return "scalar"
    if shape[-1] == out[-1] and math.prod(shape[:-1]) == 1:
        return "row"
    if shape[-1] == 1 and shape[:-1] == out[:-1]:
        return "col"
    return None


def draft_broadcast(t: Traced) -> str | None:
    """A fused chain whose inputs (and the model's own parameters) broadcast against the output:
    same-shape tensors, row/column vectors, scalars."""
    out_shape, dtype = shape_of(t.out), dtype_src(t.out)
    if not t.ops or t.out is not t.ops[-1] or not out_shape or dtype is None:
        return None
    attrs = [n for n in t.gm.graph.nodes if n.op == "get_attr"]
    leaves = t.ph + attrs
    kinds = [broadcast_kind(s, out_shape) if (s := shape_of(p)) is not None else None for p in leaves]
    if any(k is None for k in kinds) or "full" not in kinds and not {"row", "col"} <= set(kinds):
        return None
    got = chain(t, t.ops, {p: f"v{i}" for i, p in enumerate(leaves)})
    init = twins(t) if attrs else []
    if got is None or init is None:
        return None
    inputs = [*t.args, *(f"self.{str(a.target).replace('.', '_')}.detach()" for a in attrs)]
    return templates_layout.broadcast_elementwise(
        [str(k) for k in kinds], got[0], got[1], dtype, inputs=inputs, args=t.args, init=init
    )
