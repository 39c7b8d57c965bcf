"""Drafting row gathers: index_select(table, 0, idx), F.embedding and nn.Embedding; and embedding
bags with offsets (F.embedding_bag, nn.EmbeddingBag; sum or mean) as the segment-gather kernel of
`templates.embedding`. The table is an input or a parameter of the model."""

from __future__ import annotations

from typing import Any

import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node

from kegen.search.operators import templates
from kegen.search.operators.drafting.graph import (
    GATHER,
    Traced,
    dim_arg,
    dtype_src,
    rank_of,
    strip_casts,
)
from kegen.search.operators.drafting.weights import twins
from kegen.search.operators.templates import embedding

_EMBEDDING_DEFAULTS = {"padding_idx": None, "max_norm": None, "norm_type": 2.0, "scale_grad_by_freq": False}
_EMBEDDING_DEFAULTS |= {"sparse": False}
# F.embedding_bag's parameters after (input, weight, offsets) and the values the template covers
_BAG_PARAMS: tuple[str, ...] = ("max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse")
_BAG_PARAMS += ("per_sample_weights", "include_last_offset", "padding_idx")
_BAG_DEFAULTS: dict[str, Any] = {**_EMBEDDING_DEFAULTS, "per_sample_weights": None}
_BAG_DEFAULTS |= {"include_last_offset": False, "mode": "mean"}
_MODULE_CALL = ("input", "offsets", "per_sample_weights")  # nn.EmbeddingBag.forward's parameters


def draft_gather(t: Traced) -> str | None:
    """Row gathers: index_select(table, 0, idx) or F.embedding(idx, table); the table an input or
    a parameter of the model."""
    if len(t.ops) != 1 or t.out is not t.ops[0]:
        return None
    n, mod = t.ops[0], t.module(t.ops[0])
    if isinstance(mod, nn.Embedding):
        rebuilt = twins(t)
        if rebuilt is None or n.kwargs or len(n.args) != 1 or n.args[0] not in t.ph:
            return None
        attr = str(n.target).replace(".", "_")
        return templates.gather_rows(
            64, ", ".join(t.args), (f"self.{attr}.weight.detach()", t.arg(n.args[0])), rebuilt
        )
    if n.target is F.embedding:
        if any(_EMBEDDING_DEFAULTS.get(k, object()) != v for k, v in n.kwargs.items()) or len(n.args) != 2:
            return None
        idx, table = n.args
    elif n.target in GATHER:
        if dim_arg(n, 1) != 0 or len(n.args) != 3 or n.kwargs:
            return None
        table, _, idx = n.args
    else:
        return None
    if idx not in t.ph or rank_of(table) != 2:
        return None
    init: list[str] | None = []
    if isinstance(table, Node) and table.op == "get_attr":
        init, table_src = twins(t), f"self.{str(table.target).replace('.', '_')}.detach()"
    elif table in t.ph:
        table_src = t.arg(table)
    else:
        return None
    if init is None:
        return None
    return templates.gather_rows(64, ", ".join(t.args), (table_src, t.arg(idx)), init)


def draft_embedding_bag(t: Traced) -> str | None:
    """Embedding bags with sum or mean pooling: nn.EmbeddingBag(...)(idx, offsets) or
    F.embedding_bag(idx, table, offsets, mode=..., include_last_offset=...) over 1-D indices, and
    both over 2-D indices without offsets (each row one bag); with per-sample weights (an input
    shaped as the indices, mode 'sum') the membership mask carries them; a padding index leaves its
    entries out of the mask (and out of a mean's count)."""
    casts: set[Node] = set()
    n = strip_casts(t.out, casts)  # fp32 upcasts of the table and the cast back allowed
    if not isinstance(n, Node):
        return None
    mod = t.module(n)
    if isinstance(mod, nn.EmbeddingBag):
        call = dict(zip(_MODULE_CALL, n.args, strict=False)) | dict(n.kwargs)
        if mod.max_norm is not None or set(call) - set(_MODULE_CALL):
            return None
        pad = mod.padding_idx  # the module stores it non-negative
        idx, off, psw = call.get("input"), call.get("offsets"), call.get("per_sample_weights")
        opts: dict[str, Any] = {"mode": mod.mode, "include_last_offset": mod.include_last_offset}
        init = twins(t)
        table_src = f"self.{str(n.target).replace('.', '_')}.weight.detach()"
    elif n.target is F.embedding_bag:
        opts = _BAG_DEFAULTS | dict(zip(("input", "weight", "offsets", *_BAG_PARAMS), n.args, strict=False))
        opts |= dict(n.kwargs)
        idx, table, off = opts.get("input"), strip_casts(opts.get("weight"), casts), opts.get("offsets")
        psw, pad = opts.get("per_sample_weights"), opts.get("padding_idx")
        fixed = {k: v for k, v in _BAG_DEFAULTS.items() if k not in ("mode", "include_last_offset")}
        if any(opts.get(k) != v for k, v in fixed.items() if k not in ("per_sample_weights", "padding_idx")):
            t.notes.append("F.embedding_bag with max_norm, norm_type, scale_grad_by_freq or sparse")
            return None
        if pad is not None and not (isinstance(pad, int) and pad >= 0):
            t.notes.append("F.embedding_bag with a padding_idx that is not a non-negative int")
            return None
        if isinstance(table, Node) and table.op == "get_attr":
            init, table_src = twins(t), f"self.{str(table.target).replace('.', '_')}.detach()"
        elif table in t.ph and rank_of(table) == 2:
            init, table_src = [], t.arg(table)
        else:
            return None
    else:
        return None
    if init is None or idx not in t.ph or any(op is not n and op not in casts for op in t.ops):
        return None
    if opts["mode"] not in ("sum", "mean"):
        t.notes.append(f"embedding_bag mode={opts['mode']!r} (the template pools sum and mean)")
        return None
    if psw is not None and (psw not in t.ph or rank_of(psw) != rank_of(idx) or opts["mode"] != "sum"):
        t.notes.append("per_sample_weights other than an input shaped as the indices with mode='sum'")
        return None
    if off is None and rank_of(idx) == 2:  # fixed-length bags: row r is bag r
        if opts["include_last_offset"]:
            return None  # torch refuses 2-D input with include_last_offset
        i = t.arg(idx)
        off_src = f"torch.arange(0, {i}.numel(), {i}.shape[1], device={i}.device)"  # as torch builds them
        last = False
    elif off in t.ph and rank_of(idx) == 1 and rank_of(off) == 1:
        off_src, last = t.arg(off), bool(opts["include_last_offset"])
    else:
        return None
    mean, weights = opts["mode"] == "mean", (t.arg(psw) if psw is not None else None)
    out_dtype = dtype_src(t.out) if casts else None  # without casts the output is the bag's
    return embedding.embedding_bag(
        t.args,
        table_src,
        t.arg(idx),
        off_src,
        mean,
        last,
        dtype=out_dtype,
        init=init,
        weights=weights,
        padding_idx=pad,
    )
