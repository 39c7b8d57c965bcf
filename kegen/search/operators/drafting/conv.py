"""Drafting one convolution module applied to an input: a depthwise nn.Conv2d (groups equal to its
input and output channels, zero padding) as the stencil template (`templates/depthwise.py`: the dot
engine would waste itself on it), and a plain nn.Conv1d / nn.Conv2d (stride 1, dilation 1, groups 1)
as the implicit-GEMM seed the convolution moves rewrite (`templates/conv_seed.py`)."""

from __future__ import annotations

import torch.nn as nn
from torch.fx import Node

from kegen.search.operators.drafting.graph import Traced, dtype_of, rank_of
from kegen.search.operators.drafting.weights import twins
from kegen.search.operators.templates import conv_seed as templates_conv_seed
from kegen.search.operators.templates import depthwise as templates_depthwise

Conv = nn.Conv1d | nn.Conv2d


def _one_conv(t: Traced) -> tuple[Node, Conv, list[str]] | None:
    """(node, module, ModelNew.__init__ lines) where the whole reference is one Conv1d / Conv2d module
    (zero numeric padding) over an input, its output returned as is and in the input's dtype."""
    if len(t.ops) != 1 or t.out is not t.ops[0] or t.ops[0].op != "call_module":
        return None
    n = t.ops[0]
    conv = t.module(n)
    if not isinstance(conv, Conv) or not n.args or n.args[0] not in t.ph:
        return None
    if n.kwargs or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
        return None
    if rank_of(n.args[0]) != len(conv.kernel_size) + 2 or dtype_of(n) != dtype_of(n.args[0]):
        return None
    init = twins(t)
    return None if init is None else (n, conv, init)


def draft_depthwise(t: Traced) -> str | None:
    """One depthwise Conv2d module over an input, its output returned as is."""
    found = _one_conv(t)
    if found is None:
        return None
    n, conv, init = found
    if not isinstance(conv, nn.Conv2d) or not conv.groups == conv.in_channels == conv.out_channels:
        return None
    shape = n.meta["tensor_meta"].shape
    name = str(n.target).replace(".", "_")
    return templates_depthwise.depthwise(t.args, t.arg(n.args[0]), name, init, conv.out_channels, shape[-1])


def draft_conv(t: Traced) -> str | None:
    """One plain Conv1d / Conv2d module over an input (stride 1, dilation 1, groups 1, zero padding),
    its output returned as is."""
    found = _one_conv(t)
    if found is None:
        return None
    n, conv, init = found
    ones = (1,) * len(conv.kernel_size)
    if conv.groups != 1 or tuple(conv.stride) != ones or tuple(conv.dilation) != ones:
        return None
    return templates_conv_seed.conv_seed(t.args, t.arg(n.args[0]), str(n.target).replace(".", "_"), init)
