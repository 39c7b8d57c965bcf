"""The views a lifted kernel group's outputs are read through, moved out of its graph.

A `kegen tune` group often returns views of what its kernel computed: the q/k/v split of a fused
projection (`reshape`, `permute`, `unbind` and three `getitem`s of one GEMM's result), the
reference's shape of a row-wise result, or the residual sum beside the LayerNorm of it. The
drafting patterns match one computed tensor (or, for the residual norm, the tensors computed), so
`strip` cuts every output's trailing views off the graph: the graph then returns the distinct
tensors the views start from, and the candidate's forward (`expression`, written by
`drafting.aten.wrap`) applies the views to what the drafted kernels return. Each view is exact
(a view of the same storage, no copy), so the candidate's outputs are the reference's values.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

# per output of the reference: (index of the graph's returned tensor it views, its views in order)
OutputViews = tuple[tuple[int, tuple["View", ...]], ...]


@dataclass(frozen=True)
class View:
    """One view method call (`method(*args)`) on a tensor."""

    method: str
    args: tuple[int, ...] = ()

    def source(self) -> str:
        """The call as Python source (`.permute(2, 0, 1)`)."""
        return f".{self.method}({', '.join(map(str, self.args))})"

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """The view of `x`."""
        return getattr(x, self.method)(*self.args)


def _shape(n: Any) -> tuple[int, ...] | None:
    meta = getattr(n, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _ints(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, list | tuple) and all(isinstance(x, int) for x in v):
        return tuple(v)
    return None


def _dim(v: Any, rank: int) -> int | None:
    return v % rank if isinstance(v, int) and rank and -rank <= v < rank else None


def _method_step(n: Node) -> tuple[View, Node] | None:
    """A view spelled as a tensor method of a module's forward (`x.view(b, t, h, d)`, `.transpose(1, 2)`,
    `.permute(0, 2, 1, 3)`, `.unsqueeze(1)`, `.t()`; sizes already folded to ints by `fold_metadata`)."""
    args: Any = n.args
    rest = args[1:]
    sizes = _ints(rest[0]) if len(rest) == 1 and isinstance(rest[0], list | tuple) else _ints(rest)
    if n.target in ("view", "reshape", "permute") and sizes:  # sizes or dims, as one tuple or spread
        return View("permute" if n.target == "permute" else "reshape", sizes), args[0]
    if n.target == "transpose" and len(rest) == 2 and all(isinstance(a, int) for a in rest):
        return View("transpose", (rest[0], rest[1])), args[0]
    if n.target == "t" and not rest:
        return View("t"), args[0]
    if n.target == "unsqueeze" and len(rest) == 1 and isinstance(rest[0], int):
        return View("unsqueeze", (rest[0],)), args[0]
    return None


def _step(n: Any, methods: bool = False) -> tuple[View, Node] | None:
    """The view node `n` applies and the node it views (None when `n` is not a view here); `methods`:
    also the tensor-method spellings of a module's forward."""
    if not isinstance(n, Node) or n.kwargs or not n.args or not isinstance(n.args[0], Node):
        return None
    args: Any = n.args
    if n.op == "call_method" and n.target == "reshape" and len(args) == 2 and (s := _ints(args[1])):
        return View("reshape", s), args[0]
    if n.op == "call_method" and methods:
        return _method_step(n)
    if n.op != "call_function":
        return None
    if n.target is torch.permute and len(args) == 2 and (dims := _ints(args[1])) is not None:
        return View("permute", dims), args[0]
    if n.target is torch.transpose and len(args) == 3 and all(isinstance(a, int) for a in args[1:]):
        return View("transpose", (args[1], args[2])), args[0]
    if n.target is torch.t and len(args) == 1:
        return View("t"), args[0]
    if n.target is torch.unsqueeze and len(args) == 2 and isinstance(args[1], int):
        return View("unsqueeze", (args[1],)), args[0]
    if n.target is torch.select and len(args) == 3 and all(isinstance(a, int) for a in args[1:]):
        return View("select", (args[1], args[2])), args[0]
    if n.target is operator.getitem and isinstance(args[1], int) and isinstance(args[0], Node):
        return _item(args[0], args[1], methods)
    return None


def _item(parts: Node, i: int, methods: bool = False) -> tuple[View, Node] | None:
    """Element `i` of an unbind (a select) or a split into equal sizes (a narrow)."""
    method = methods and parts.op == "call_method"
    if (parts.op != "call_function" and not method) or parts.kwargs or not isinstance(parts.args[0], Node):
        return None
    x, rest = parts.args[0], parts.args[1:]
    shape = _shape(x)
    if shape is None:
        return None
    if method and parts.target in ("unbind", "split"):  # the method forms, as the functions below read
        target: Any = {"unbind": torch.unbind, "split": torch.split}[str(parts.target)]
    else:
        target = parts.target
    if target is torch.unbind and len(rest) <= 1:
        dim = _dim(rest[0] if rest else 0, len(shape))
        return (View("select", (dim, i)), x) if dim is not None and 0 <= i < shape[dim] else None
    if target is torch.split and 1 <= len(rest) <= 2 and isinstance(rest[0], int) and rest[0] > 0:
        dim = _dim(rest[1] if len(rest) > 1 else 0, len(shape))
        if dim is None or not 0 <= i * rest[0] < shape[dim]:
            return None
        return View("narrow", (dim, i * rest[0], min(rest[0], shape[dim] - i * rest[0]))), x
    return None


def strip(gm: GraphModule, methods: bool = False) -> OutputViews | None:
    """Cut the trailing views off a tuple of outputs: the graph returns the distinct tensors they
    view (one tensor, or a tuple); None (the graph unchanged) when the output is not a tuple, nothing
    is a view, or an output views an input. `methods`: a module's forward as traced (the views'
    tensor-method spellings too, and one tensor returned: `expression` with `single`)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    res = out.args[0]
    if methods and isinstance(res, Node):
        res = (res,)
    if not isinstance(res, list | tuple) or not res or not all(isinstance(r, Node) for r in res):
        return None
    roots: list[Node] = []
    chains: list[tuple[View, ...]] = []
    for r in res:
        chain: list[View] = []
        while (step := _step(r, methods)) is not None:
            chain.append(step[0])
            r = step[1]
        if r.op == "placeholder":
            return None
        roots.append(r)
        chains.append(tuple(reversed(chain)))
    distinct = list(dict.fromkeys(roots))
    if not any(chains) and len(distinct) == len(res):
        return None
    out.args = (distinct[0] if len(distinct) == 1 else tuple(distinct),)
    gm.graph.eliminate_dead_code()
    return tuple((distinct.index(r), c) for r, c in zip(roots, chains, strict=True))


def apply(result: Any, views: OutputViews) -> tuple[Any, ...]:
    """The reference's outputs from what the stripped graph (or the candidate) returns."""
    parts = result if isinstance(result, tuple | list) else (result,)
    outs = []
    for index, chain in views:
        x = parts[index]
        for v in chain:
            x = v.apply(x)
        outs.append(x)
    return tuple(outs)


def expression(result: str, views: OutputViews, single: bool = False) -> str:
    """Python source of `apply` over the name `result` (one tensor returned, or a tuple)."""
    several = len({index for index, _ in views}) > 1
    parts = [
        (f"{result}[{index}]" if several else result) + "".join(v.source() for v in chain)
        for index, chain in views
    ]
    if single:
        return parts[0]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
