"""Drafting layout ops: swaps of the last two dims (transpose, permute, .T, .mT), and operand views
(an input read through fp32 upcasts and at most one swap) for the matmul patterns."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx import Node

from kegen.search.operators.drafting.graph import Traced, dtype_of, rank_of, shape_of
from kegen.search.operators.templates import layout as templates_layout
from kegen.search.operators.templates import pow2_block


def _swapped(n: Node, rank: int) -> bool:
    """Whether `n` swaps the last two dims of its first argument (rank >= 2) and nothing else."""
    if n.target is getattr:
        return n.args[1] == "mT" or (n.args[1] == "T" and rank == 2)
    if n.target in ("t", torch.t):
        return rank == 2
    rest: list[Any] = [*n.args[1:], *n.kwargs.values()]
    if len(rest) == 1 and isinstance(rest[0], list | tuple):
        rest = list(rest[0])
    if not all(isinstance(d, int) for d in rest):
        return False
    if n.target in ("permute", torch.permute):
        return [d % rank for d in rest] == [*range(rank - 2), rank - 1, rank - 2]
    if n.target in ("transpose", torch.transpose, "swapaxes", "swapdims") and len(rest) == 2:
        return {d % rank for d in rest} == {rank - 2, rank - 1}
    return False


def _is_upcast(n: Node) -> bool:
    """x.float() / x.to(torch.float32) of a floating tensor (exact, so a kernel may read x as it is)."""
    src = n.args[0] if n.args else None
    if not isinstance(src, Node) or dtype_of(src) is None or not dtype_of(src).is_floating_point:  # type: ignore[union-attr]
        return False
    if n.target == "float":
        return len(n.args) == 1 and not n.kwargs
    return n.target == "to" and (n.args[1:] == (torch.float32,) or n.kwargs == {"dtype": torch.float32})


def operand_view(t: Traced, n: Any) -> tuple[str, list[Node]] | None:
    """An input read through fp32 upcasts and at most one swap of its last two dims: the forward-time
    expression of the view (strides do the swap; the kernel converts) and the nodes it covers."""
    nodes: list[Node] = []
    swapped = False
    while n not in t.ph:
        if not isinstance(n, Node) or n.op == "call_module" or not n.args or len(n.users) != 1:
            return None
        rank = rank_of(n.args[0])
        if not _is_upcast(n):
            if swapped or rank is None or rank < 2 or not _swapped(n, rank):
                return None
            swapped = True
        nodes.append(n)
        n = n.args[0]
    return t.arg(n) + (".transpose(-1, -2)" if swapped else ""), nodes


def draft_transpose(t: Traced) -> str | None:
    """x.t(), x.transpose(-1, -2), x.mT or x.permute(...) swapping the last two dims [.contiguous()]."""
    if len(t.ph) != 1 or not 1 <= len(t.ops) <= 2 or t.out is not t.ops[-1] or (rank_of(t.ph[0]) or 0) < 2:
        return None
    if not _swapped(t.ops[0], rank_of(t.ph[0]) or 0) or t.ops[0].args[:1] != (t.ph[0],):
        return None
    if len(t.ops) == 2 and (t.ops[1].target != "contiguous" or t.ops[1].args != (t.ops[0],)):
        return None
    return templates_layout.transpose(t.args[0])


_LAYOUT_METHODS = {"view", "reshape", "permute", "transpose", "contiguous", "flatten", "unflatten", "t"}
_LAYOUT_METHODS |= {"unsqueeze", "squeeze", "movedim", "swapaxes", "swapdims", "mT", "T"}
_LAYOUT_FUNCS = {torch.permute, torch.transpose, torch.reshape, torch.flatten, torch.movedim, torch.t}
_LAYOUT_FUNCS |= {torch.unsqueeze, torch.squeeze, torch.swapaxes}


def _layout_node(n: Node) -> bool:
    if n.target is getattr:
        return n.args[1] in ("shape", "mT", "T")
    if n.target is operator.getitem:  # of a shape (sizes for a view)
        return isinstance(n.args[0], Node) and n.args[0].target is getattr
    return n.target in _LAYOUT_METHODS if n.op == "call_method" else n.target in _LAYOUT_FUNCS


def draft_layout_copy(t: Traced) -> str | None:
    """Views and one copy of one input (`x.view(b, s, h, d).permute(0, 2, 1, 3).contiguous()`, a head
    merge `.transpose(1, 2).reshape(b, s, -1)`): the strided view before the copy found on a meta
    tensor, copied by `templates.layout.strided_copy`. Swaps of the last dim itself are the transpose
    template's."""
    if len(t.ph) != 1 or not t.ops or not all(_layout_node(n) for n in t.ops) or t.out is None:
        return None
    shape, dtype = shape_of(t.ph[0]), dtype_of(t.ph[0])
    if shape is None or dtype is None:
        return None
    copied: list[torch.Tensor] = []  # the non-contiguous views that an op materialised

    class _Watch(torch.fx.Interpreter):
        def run_node(self, n: Node) -> Any:
            out = super().run_node(n)
            if n.op != "placeholder" and isinstance(out, torch.Tensor) and not out._is_view():
                src = next(
                    (self.env[a] for a in n.all_input_nodes if isinstance(self.env[a], torch.Tensor)), None
                )
                if src is not None and src is not out and not src.is_contiguous():
                    copied.append(src)
            return out

    x = torch.empty(shape, dtype=dtype, device="meta")
    out = _Watch(t.gm).run(x)
    if not isinstance(out, torch.Tensor) or len(copied) != 1 or not out.is_contiguous():
        return None
    v = copied[0]
    if v.dim() > 4 or v.stride(-1) != 1 or out.numel() != v.numel():
        return None
    block = pow2_block(v.shape[-1], 16, 1024)
    rows = pow2_block(v.numel() // v.shape[-1] // 128, 16, min(256, 32768 // block))  # ~128 programs
    return templates_layout.strided_copy(
        t.args[0], tuple(v.shape), tuple(v.stride()), int(v.storage_offset()), tuple(out.shape), rows, block
    )
