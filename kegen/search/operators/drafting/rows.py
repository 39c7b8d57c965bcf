"""Drafting row-wise ops over the last dimension (softmax, log-softmax, sum/mean/max, argmax,
cumsum), softmax over another dimension, and column reductions over dim 0 of a 2-D input."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx import Node

from kegen.search.operators.drafting.graph import (
    ARGMAX,
    CUMSUM,
    LOG_SOFTMAX,
    REDUCE,
    SOFTMAX,
    Traced,
    dim_arg,
    dtype_of,
    dtype_src,
    is_last_dim,
    rank_of,
    shape_of,
)
from kegen.search.operators.templates import layout as templates_layout
from kegen.search.operators.templates import pow2_block, pow2_floor
from kegen.search.operators.templates import rows as templates_rows


def _row_op(t: Traced, targets: set[Any], extra_kwargs: tuple[str, ...] = ()) -> Node | None:
    """The single op of the graph, in `targets`, over the single input's last dimension."""
    if len(t.ops) != 1 or len(t.ph) != 1 or t.out is not t.ops[0] or t.ops[0].target not in targets:
        return None
    n = t.ops[0]
    kwargs = {k: v for k, v in n.kwargs.items() if k != "_stacklevel" and (k, v) != ("dtype", None)}
    if n.args[:1] != (t.ph[0],) or set(kwargs) - {"dim", *extra_kwargs}:
        return None
    return n if is_last_dim(dim_arg(n, 1, -1 if n.target in SOFTMAX else None), rank_of(t.ph[0])) else None


def _keepdim(n: Node) -> bool:
    """A reduction's `keepdim` (keyword, or positional after `dim`)."""
    return bool(n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False))


def draft_softmax(t: Traced) -> str | None:
    """softmax over the last dimension (the rows template: rows that fit a block in registers, longer
    ones online)."""
    n = _row_op(t, SOFTMAX)
    if n is None or dtype_of(t.out) != dtype_of(t.ph[0]):
        return None
    shape = shape_of(t.ph[0])
    block = pow2_block(int(shape[-1]) if shape else 4096, 64, 4096)
    return templates_rows.softmax_rows(t.args, t.args[0], block)


def draft_softmax_dim(t: Traced) -> str | None:
    """softmax / log_softmax over a dimension that is not the last (channels of NCHW logits, the
    sequence of [batch, seq, heads] scores): the columns template, no transposed copies."""
    if (
        len(t.ops) != 1
        or len(t.ph) != 1
        or t.out is not t.ops[0]
        or t.ops[0].target not in SOFTMAX | LOG_SOFTMAX
    ):
        return None
    n, shape, rank = t.ops[0], shape_of(t.ph[0]), rank_of(t.ph[0])
    kwargs = {k: v for k, v in n.kwargs.items() if k != "_stacklevel" and (k, v) != ("dtype", None)}
    dim = dim_arg(n, 1)
    if n.args[:1] != (t.ph[0],) or set(kwargs) - {"dim"} or not shape or not rank or not isinstance(dim, int):
        return None
    dim %= rank
    dtype = dtype_of(t.ph[0])
    if dim == rank - 1 or dtype is None or not dtype.is_floating_point or dtype_src(t.out) is None:
        return None
    n_red, inner = shape[dim], math.prod(shape[dim + 1 :])
    block_r = pow2_block(n_red, 16, 1024)
    block_i = pow2_block(min(inner, max(1, 16384 // block_r)), 1, 256)
    return templates_rows.softmax_columns(
        t.args, t.args[0], dim, n.target in LOG_SOFTMAX, str(dtype_src(t.out)), block_r, block_i
    )


def draft_log_softmax(t: Traced) -> str | None:
    """log_softmax over the last dimension."""
    if _row_op(t, LOG_SOFTMAX) is None or dtype_src(t.out) is None:
        return None
    return templates_rows.log_softmax(t.args, t.args[0], str(dtype_src(t.out)))


def draft_reduce(t: Traced) -> str | None:
    """sum / mean / max (amax) over the last dimension, keepdim or not: the fused reduction's row
    tiles with no chain before it."""
    n = _row_op(t, set(REDUCE), ("keepdim",))
    shape, dtype = shape_of(t.ph[0]), dtype_of(t.ph[0])
    if n is None or not shape or dtype is None or not dtype.is_floating_point or dtype_of(t.out) != dtype:
        return None
    keep = _keepdim(n)
    block = pow2_block(shape[-1], 16, 1024)
    return templates_rows.fused_reduce(
        t.args, t.args, [], "v0", REDUCE[n.target], 1, keep, str(dtype_src(t.out)), block
    )


def draft_col_reduce(t: Traced) -> str | None:
    """sum / mean / max (amax) over dim 0 of a 2-D input (a column reduction)."""
    n, rank = (t.ops[0], rank_of(t.ph[0])) if len(t.ops) == 1 and len(t.ph) == 1 else (None, None)
    if n is None or rank != 2 or t.out is not n or n.target not in REDUCE or n.args[:1] != (t.ph[0],):
        return None
    dim = dim_arg(n, 1)
    dim = dim[0] if isinstance(dim, list | tuple) and len(dim) == 1 else dim
    if dim not in (0, -2) or set(n.kwargs) - {"dim", "keepdim"} or dtype_src(t.out) is None:
        return None
    kind, keep = REDUCE[n.target], _keepdim(n)
    dtype = str(dtype_src(t.out))
    # column blocks narrow enough that the programs cover the PEs (8 to 64 columns), rows in 2K tiles
    n_cols = int((shape_of(t.ph[0]) or (1, 64))[1])
    block_c = pow2_floor(n_cols // 64, 8, 64)
    return templates_layout.col_reduce(
        "max" if kind == "max" else "sum", kind == "mean", keep, dtype, t.args[0], 2048 // block_c, block_c
    )


def draft_argmax(t: Traced) -> str | None:
    """argmax over the last dimension of a floating input."""
    n = _row_op(t, ARGMAX, ("keepdim",))
    if n is None or not t.ph[0].meta["tensor_meta"].dtype.is_floating_point:
        return None
    keep = _keepdim(n)
    shape = shape_of(t.ph[0])
    block = pow2_block(int(shape[-1]) if shape else 1024, 16, 1024)
    return templates_rows.argmax(t.args, t.args[0], keep, block)


def draft_cumsum(t: Traced) -> str | None:
    """Inclusive cumsum over the last dimension (same dtype in and out)."""
    if _row_op(t, CUMSUM) is None or dtype_src(t.out) is None or dtype_of(t.out) != dtype_of(t.ph[0]):
        return None
    shape = shape_of(t.ph[0])
    block = pow2_block(int(shape[-1]) if shape else 1024, 64, 1024)
    return templates_rows.cumsum(t.args, t.args[0], str(dtype_src(t.out)), block)


def draft_fused_reduce(t: Traced) -> str | None:
    """sum / mean / max (amax) over trailing dims (one or several: global average pooling) of an
    elementwise chain of same-shape inputs, fused: the chain is computed in registers, never stored."""
    from kegen.search.operators.drafting.elementwise import chain

    red = t.out
    if red is None or red.target not in REDUCE or not red.args or red.args[0] in t.ph:
        return None
    x = red.args[0]
    shape, rank = shape_of(x), rank_of(x)
    dims = dim_arg(red, 1)
    dims = [dims] if isinstance(dims, int) else dims
    if shape is None or not rank or not isinstance(dims, list | tuple) or not dims:
        return None
    if dtype_src(t.out) is None:
        return None
    if set(red.kwargs) - {"dim", "keepdim"} or not all(isinstance(d, int) for d in dims):
        return None
    reduced = sorted(d % rank for d in dims)
    if reduced != list(range(rank - len(reduced), rank)) or len(reduced) == rank:
        return None
    if any(shape_of(p) != shape or not (dtype_of(p) or torch.int64).is_floating_point for p in t.ph):
        return None
    got = chain(t, [n for n in t.ops if n is not red], {p: f"v{i}" for i, p in enumerate(t.ph)})
    if got is None or not got[0]:
        return None
    lines, result = got
    keep = _keepdim(red)
    block = pow2_block(math.prod(shape[d] for d in reduced), 16, 1024)
    kind = REDUCE[red.target]
    return templates_rows.fused_reduce(
        t.args, t.args, lines, result, kind, len(reduced), keep, str(dtype_src(t.out)), block
    )
