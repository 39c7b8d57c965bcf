"""Drafting row gathers: index_select(table, 0, idx), F.embedding and nn.Embedding, the table an
input or a parameter of the model."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node

from kegen.search.operators import templates
from kegen.search.operators.drafting.graph import GATHER, Traced, dim_arg, rank_of
from kegen.search.operators.drafting.weights import twins

_EMBEDDING_DEFAULTS = {"padding_idx": None, "max_norm": None, "norm_type": 2.0, "scale_grad_by_freq": False}
_EMBEDDING_DEFAULTS |= {"sparse": False}


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
