"""Drafting a first candidate from the PyTorch reference (no seed given).

The reference model is traced with torch.fx (shapes propagated) and matched against RULES, a table
of (name, op class, pattern): the first pattern that recognises the whole graph writes the
candidate from its Triton template. The op classes:

- elementwise chains over same-shape inputs, or broadcasting row/column vectors and scalars;
- last-dim softmax, log-softmax, reductions (sum, mean, max/amax, argmax) and cumsum; sum, mean
  and max over dim 0 of a 2-D tensor (column reductions);
- LayerNorm (nn.LayerNorm; F.layer_norm with input weight/bias, of an input or a residual sum) and
  RMSNorm (nn.RMSNorm, F.rms_norm, or written with torch ops and confirmed numerically);
- transposes of the last two dims;
- matmul / mm / bmm (operands may be transposed views or fp32 upcasts) with an elementwise epilogue
  that may read a bias row, a residual or a scalar input;
- stacks of nn.Linear / F.linear layers, each with its bias and activation fused;
- row gathers (index_select on dim 0, F.embedding, nn.Embedding), from an input or a parameter.

Modules and parameters of the model are rebuilt in ModelNew.__init__ only where seeded construction
provably gives equal values (checked at draft time).

Anything else is reported by name as not draftable.
"""

from __future__ import annotations

import importlib.util
import math
import operator
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from kegen.search.operators import templates, templates_layout, templates_matmul, templates_rows
from kegen.search.operators.templates_exprs import (
    ELEMENTWISE_FORMATS,
    GELU_ERF,
    GELU_TANH,
    MODULE_FORMATS,
    POW_FORMATS,
)


class DraftError(ValueError):
    """The reference uses ops the offline drafter has no template for."""


_POW = {operator.pow, torch.pow, "pow"}
_GELU = {F.gelu, torch._C._nn.gelu, "gelu"}
_CASTS = {"to", "type", "half", "bfloat16"}
_IGNORED_KWARGS = {"inplace": False, "approximate": "none"}
_SOFTMAX = {torch.softmax, F.softmax, "softmax"}
_LOG_SOFTMAX = {torch.log_softmax, F.log_softmax, "log_softmax"}
_REDUCE = {
    **dict.fromkeys((torch.sum, "sum"), "sum"),
    **dict.fromkeys((torch.mean, "mean"), "mean"),
    **dict.fromkeys((torch.amax, "amax"), "max"),
}
_ARGMAX = {torch.argmax, "argmax"}
_CUMSUM = {torch.cumsum, "cumsum"}
_MATMUL = {torch.matmul, torch.mm, operator.matmul, "matmul", "mm", torch.bmm, "bmm"}
_LINEAR = {F.linear, torch._C._nn.linear}
_GATHER = {torch.index_select, "index_select", F.embedding}
_RMS_NORM = {F.rms_norm, torch.rms_norm}
_TRANSPOSE = {"t", torch.t, "transpose", torch.transpose, "swapaxes", "swapdims", "permute", torch.permute}
_KNOWN_TARGETS = (
    set(ELEMENTWISE_FORMATS)
    | _POW
    | _GELU
    | _CASTS
    | _SOFTMAX
    | _LOG_SOFTMAX
    | set(_REDUCE)
    | _ARGMAX
    | _CUMSUM
) | (
    _MATMUL
    | _LINEAR
    | _GATHER
    | _RMS_NORM
    | _TRANSPOSE
    | {F.layer_norm, getattr, operator.getitem, "type_as"}
)
_KNOWN_MODULES = (*MODULE_FORMATS, nn.Linear, nn.LayerNorm, nn.RMSNorm, nn.Embedding)
# local names of the templates' forward bodies that an input must not shadow
_RESERVED = {"x", "x2", "x3", "w", "y", "h", "a", "b", "a3", "b3", "c", "out", "shape", "grid", "self"}
_RESERVED |= {
    "n_rows",
    "n_cols",
    "n_batch",
    "M",
    "N",
    "K",
    "torch",
    "triton",
    "tl",
    "nn",
    "table",
    "idx",
    "flat",
}


@dataclass
class Analysis:
    """What the drafter recognised in the reference."""

    op_class: str | None
    ops: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    source: str | None = None

    @property
    def summary(self) -> str:
        s = f"{self.op_class or 'unrecognised'}: {', '.join(self.ops) or '-'}"
        if self.unsupported:
            s += f" (cannot draft: {', '.join(self.unsupported)})"
        return s


@dataclass
class Traced:
    """The traced reference: its compute nodes, inputs (with the values traced on) and output."""

    problem: Any
    model: nn.Module
    gm: GraphModule
    ops: list[Node]
    ph: list[Node]
    out: Node | None
    inputs: list[Any]
    notes: list[str] = field(default_factory=list)  # why a pattern that nearly matched refused

    def module(self, n: Node) -> nn.Module | None:
        return self.gm.get_submodule(str(n.target)) if n.op == "call_module" else None

    @property
    def args(self) -> list[str]:
        """ModelNew.forward's parameters: the reference's, renamed where a template uses the name."""
        return [f"{p.name}_in" if p.name in _RESERVED else p.name for p in self.ph]

    def arg(self, n: Any) -> str:
        return self.args[self.ph.index(n)]


@dataclass(frozen=True)
class Rule:
    """A pattern over the traced graph and the op class of the candidate it drafts."""

    name: str
    op_class: str
    match: Callable[[Traced], str | None]


def load_problem_module(path: Path) -> Any:
    """Import a problem file as a fresh module."""
    name = f"_kegen_problem_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DraftError(f"cannot import problem {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", repr(target))


def _dim(node: Node, pos: int, default: Any = None) -> Any:
    if "dim" in node.kwargs:
        return node.kwargs["dim"]
    return node.args[pos] if len(node.args) > pos else default


def _shape(node: Any) -> tuple[int, ...] | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _rank(node: Any) -> int | None:
    shape = _shape(node)
    return None if shape is None else len(shape)


def _dtype(node: Any) -> torch.dtype | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return getattr(meta, "dtype", None)


def _is_last_dim(dim: Any, rank: int | None) -> bool:
    if isinstance(dim, list | tuple) and len(dim) == 1:
        dim = dim[0]
    return isinstance(dim, int) and rank is not None and rank > 0 and dim in (-1, rank - 1)


def _trace(problem_path: Path) -> Traced:
    mod = load_problem_module(Path(problem_path))
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    inputs = mod.get_inputs()
    gm = torch.fx.symbolic_trace(model)
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(gm).propagate(*inputs)
    nodes = list(gm.graph.nodes)
    ops = [n for n in nodes if n.op in ("call_function", "call_method", "call_module")]
    out_args = [n for n in nodes if n.op == "output"][0].args[0]
    out = out_args if isinstance(out_args, Node) else None
    return Traced(mod, model, gm, ops, [n for n in nodes if n.op == "placeholder"], out, inputs)


def analyze(problem_path: Path) -> Analysis:
    """Trace the reference and produce a candidate from templates where the graph is recognised."""
    try:
        t = _trace(problem_path)
    except Exception as exc:
        return Analysis(
            None, unsupported=[f"reference cannot be traced with torch.fx ({type(exc).__name__}: {exc})"]
        )
    names = [_name(n.target) if n.op != "call_module" else type(t.module(n)).__name__ for n in t.ops]
    for rule in RULES:
        try:
            source = rule.match(t)
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            t.notes.append(f"pattern {rule.name} failed on this graph ({type(exc).__name__}: {exc})")
            continue
        if source is not None:
            return Analysis(rule.op_class, names, [], source)
    bad = [nm for n, nm in zip(t.ops, names, strict=True) if not _known(t, n)]
    return Analysis(None, names, sorted(set(bad)) or t.notes or ["this combination of ops"])


def _known(t: Traced, n: Node) -> bool:
    if n.op == "call_module":
        return isinstance(t.module(n), _KNOWN_MODULES)
    try:
        return n.target in _KNOWN_TARGETS
    except TypeError:  # an unhashable target
        return False


def draft_candidate(problem_path: Path) -> tuple[str, Analysis]:
    """A first candidate for the problem, or DraftError naming the ops that have no template."""
    a = analyze(problem_path)
    if a.source is None:
        graph = f" (the reference computes: {', '.join(a.ops)})" if a.ops else ""
        raise DraftError(
            f"the offline operator cannot draft {problem_path}: no Triton template for "
            f"{', '.join(a.unsupported)}{graph}. Pass a hand-written --seed candidate, or use --operator llm."
        )
    return a.source, a


# ---- elementwise expressions --------------------------------------------------------------------


def _operand(arg: Any, env: dict[Node, str]) -> str | None:
    if isinstance(arg, Node):
        return env.get(arg)
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(float(arg))
    return None


def _format(t: Traced, n: Node) -> str | None:
    """The Triton expression of one elementwise node, or None."""
    if n.op == "call_module":
        m = t.module(n)
        fmt = MODULE_FORMATS.get(type(m))
        return fmt(m) if fmt is not None and not n.kwargs else None
    if any(k not in _IGNORED_KWARGS or v != _IGNORED_KWARGS[k] for k, v in n.kwargs.items()):
        if n.target in _GELU and set(n.kwargs) <= {"approximate"}:
            return GELU_TANH if n.kwargs["approximate"] == "tanh" else None
        return None
    if n.target in _GELU:
        return GELU_ERF
    if n.target in _POW:
        exponent = n.args[1] if len(n.args) > 1 else None
        return POW_FORMATS.get(exponent) if isinstance(exponent, int | float) else None
    if n.target in _CASTS:  # computed in fp32 and stored in the output's dtype: only a final cast
        return "{0}" if n is t.out or n.args[1:] == (torch.float32,) else None
    return ELEMENTWISE_FORMATS.get(n.target)


def _chain(t: Traced, nodes: list[Node], env: dict[Node, str]) -> tuple[list[str], str] | None:
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


def _dtype_src(n: Node | None) -> str | None:
    dtype = _dtype(n)
    return str(dtype) if dtype is not None and dtype.is_floating_point else None


def _draft_elementwise(t: Traced) -> str | None:
    """A fused chain over same-shape inputs (flattened, 1-D blocks)."""
    if not t.ops or t.out is not t.ops[-1] or any(_rank(p) is None for p in t.ph):
        return None
    if len({_shape(p) for p in t.ph} | {_shape(t.out)}) != 1 or _dtype_src(t.out) is None:
        return None
    got = _chain(t, t.ops, {p: f"v{i}" for i, p in enumerate(t.ph)})
    if got is None:
        return None
    lines, result = got
    dtype = _dtype_src(t.out) if _dtype(t.out) != _dtype(t.ph[0]) else None
    return templates.elementwise(len(t.ph), lines, result, 256, dtype=dtype)


def _broadcast_kind(shape: tuple[int, ...], out: tuple[int, ...]) -> str | None:
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


def _draft_broadcast(t: Traced) -> str | None:
    """A fused chain whose inputs (and the model's own parameters) broadcast against the output:
    same-shape tensors, row/column vectors, scalars."""
    out_shape, dtype = _shape(t.out), _dtype_src(t.out)
    if not t.ops or t.out is not t.ops[-1] or not out_shape or dtype is None:
        return None
    attrs = [n for n in t.gm.graph.nodes if n.op == "get_attr"]
    leaves = t.ph + attrs
    kinds = [_broadcast_kind(s, out_shape) if (s := _shape(p)) is not None else None for p in leaves]
    if any(k is None for k in kinds) or "full" not in kinds and not {"row", "col"} <= set(kinds):
        return None
    got = _chain(t, t.ops, {p: f"v{i}" for i, p in enumerate(leaves)})
    init = _twins(t) if attrs else []
    if got is None or init is None:
        return None
    inputs = [*t.args, *(f"self.{str(a.target).replace('.', '_')}.detach()" for a in attrs)]
    return templates_layout.broadcast_elementwise(
        [str(k) for k in kinds], got[0], got[1], dtype, inputs=inputs, args=t.args, init=init
    )


# ---- row-wise ops over the last dimension -------------------------------------------------------


def _row_op(t: Traced, targets: set[Any], extra_kwargs: tuple[str, ...] = ()) -> Node | None:
    """The single op of the graph, in `targets`, over the single input's last dimension."""
    if len(t.ops) != 1 or len(t.ph) != 1 or t.out is not t.ops[0] or t.ops[0].target not in targets:
        return None
    n = t.ops[0]
    kwargs = {k: v for k, v in n.kwargs.items() if k != "_stacklevel" and (k, v) != ("dtype", None)}
    if n.args[:1] != (t.ph[0],) or set(kwargs) - {"dim", *extra_kwargs}:
        return None
    return n if _is_last_dim(_dim(n, 1, -1 if n.target in _SOFTMAX else None), _rank(t.ph[0])) else None


def _draft_softmax(t: Traced) -> str | None:
    return templates.softmax("two_kernel", 64) if _row_op(t, _SOFTMAX) is not None else None


def _draft_log_softmax(t: Traced) -> str | None:
    if _row_op(t, _LOG_SOFTMAX) is None or _dtype_src(t.out) is None:
        return None
    return templates_rows.log_softmax(t.args, t.args[0], str(_dtype_src(t.out)))


def _draft_reduce(t: Traced) -> str | None:
    n = _row_op(t, set(_REDUCE), ("keepdim",))
    if n is None:
        return None
    kind = _REDUCE[n.target]
    keep = bool(n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False))
    return templates.row_reduce("max" if kind == "max" else "sum", 64, kind == "mean", keep)


def _draft_col_reduce(t: Traced) -> str | None:
    """sum / mean / max (amax) over dim 0 of a 2-D input (a column reduction)."""
    n, rank = (t.ops[0], _rank(t.ph[0])) if len(t.ops) == 1 and len(t.ph) == 1 else (None, None)
    if n is None or rank != 2 or t.out is not n or n.target not in _REDUCE or n.args[:1] != (t.ph[0],):
        return None
    dim = _dim(n, 1)
    dim = dim[0] if isinstance(dim, list | tuple) and len(dim) == 1 else dim
    if dim not in (0, -2) or set(n.kwargs) - {"dim", "keepdim"} or _dtype_src(t.out) is None:
        return None
    kind, keep = _REDUCE[n.target], bool(n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False))
    dtype = str(_dtype_src(t.out))
    return templates_layout.col_reduce(
        "max" if kind == "max" else "sum", kind == "mean", keep, dtype, t.args[0]
    )


def _draft_argmax(t: Traced) -> str | None:
    n = _row_op(t, _ARGMAX, ("keepdim",))
    if n is None or not t.ph[0].meta["tensor_meta"].dtype.is_floating_point:
        return None
    keep = bool(n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False))
    return templates_rows.argmax(t.args, t.args[0], keep)


def _draft_cumsum(t: Traced) -> str | None:
    if _row_op(t, _CUMSUM) is None or _dtype_src(t.out) is None or _dtype(t.out) != _dtype(t.ph[0]):
        return None
    return templates_rows.cumsum(t.args, t.args[0], str(_dtype_src(t.out)))


def _draft_layer_norm(t: Traced) -> str | None:
    """nn.LayerNorm (a direct attribute of the model) over the last dimension."""
    if len(t.ops) != 1 or len(t.ph) != 1:
        return None
    n = t.ops[0]
    mod = t.module(n)
    if mod is not None:
        if not isinstance(mod, nn.LayerNorm) or "." in str(n.target) or len(mod.normalized_shape) != 1:
            return None
        has_w, has_b = mod.weight is not None, mod.bias is not None
        return templates.layer_norm(
            64, module=(str(n.target), int(mod.normalized_shape[0]), float(mod.eps), has_w, has_b)
        )
    return None


def _shape_reads(t: Traced) -> set[Node]:
    """`x.shape` and `x.shape[i]` nodes (arguments such as F.layer_norm's normalized_shape)."""
    reads = {n for n in t.ops if n.target is getattr and n.args[1] == "shape"}
    return reads | {n for n in t.ops if n.target is operator.getitem and n.args[0] in reads}


def _draft_layer_norm_fn(t: Traced) -> str | None:
    """F.layer_norm over the last dimension, with input weight/bias, of an input or a residual sum."""
    lns = [n for n in t.ops if n.target is F.layer_norm]
    if len(lns) != 1 or t.out is not lns[0] or _dtype_src(t.out) is None:
        return None
    ln = lns[0]
    p = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), ln.args, strict=False)) | ln.kwargs
    x, shape, w, b = p.get("input"), p.get("normalized_shape"), p.get("weight"), p.get("bias")
    eps = p.get("eps", 1e-5)
    if not isinstance(shape, list | tuple) or len(shape) != 1 or not isinstance(eps, float | int):
        return None
    if any(v is not None and (v not in t.ph or _rank(v) != 1) for v in (w, b)):
        return None
    rest = [n for n in t.ops if n is not ln and n not in _shape_reads(t)]
    residual = None
    if rest == [x] and isinstance(x, Node) and x.target in (operator.add, torch.add) and not x.kwargs:
        x, residual = x.args
        if residual not in t.ph or _shape(residual) != _shape(x):
            return None
    elif rest:
        return None
    if x not in t.ph:
        return None
    return templates_rows.layer_norm(
        t.args,
        t.arg(x),
        t.arg(residual) if residual is not None else None,
        t.arg(w) if w is not None else None,
        t.arg(b) if b is not None else None,
        float(eps),
        str(_dtype_src(t.out)),
    )


def _draft_rms_norm_op(t: Traced) -> str | None:
    """nn.RMSNorm (rebuilt in ModelNew) or F.rms_norm over the last dimension."""
    if len(t.ops) != 1 or t.out is not t.ops[0] or _dtype_src(t.out) is None or t.ops[0].args[0] not in t.ph:
        return None
    n, x = t.ops[0], t.ops[0].args[0]
    mod, init = t.module(n), _twins(t) if t.module(n) is not None else []
    weight: str | None
    if isinstance(mod, nn.RMSNorm) and len(mod.normalized_shape) == 1 and init is not None:
        attr = str(n.target).replace(".", "_")
        eps: Any = mod.eps
        weight = f"self.{attr}.weight.detach()" if mod.weight is not None else None
    elif n.target in _RMS_NORM:
        params = dict(zip(("input", "normalized_shape", "weight", "eps"), n.args, strict=False)) | n.kwargs
        shape, w, eps = params.get("normalized_shape"), params.get("weight"), params.get("eps")
        if not isinstance(shape, list | tuple) or len(shape) != 1 or (w is not None and w not in t.ph):
            return None
        weight = t.arg(w) if w is not None else None
    else:
        return None
    eps_src = "torch.finfo(x.dtype).eps" if eps is None else repr(float(eps))
    return templates_rows.rms_norm(t.args, t.arg(x), weight, eps_src, str(_dtype_src(t.out)), init=init or ())


_RMS_FORMULA_OPS = {"mean", torch.mean, "float", "to", "type_as"} | _POW | {torch.square, "square"}
_RMS_FORMULA_OPS |= {operator.mul, torch.mul, "mul", operator.add, torch.add, "add", torch.rsqrt, "rsqrt"}
_RMS_FORMULA_OPS |= {torch.sqrt, "sqrt", operator.truediv, torch.div, "div", torch.reciprocal, "reciprocal"}


def _draft_rms_norm_formula(t: Traced) -> str | None:
    """RMSNorm written with torch ops: recognised by its ops and eps, confirmed numerically."""
    if t.out is None or not 1 <= len(t.ph) <= 2 or any(n.op == "call_module" for n in t.ops):
        return None
    means = [n for n in t.ops if n.target in ("mean", torch.mean)]
    if any(n.target not in _RMS_FORMULA_OPS for n in t.ops) or len(means) != 1:
        return None
    out_shape = _shape(t.out)
    if not out_shape:
        return None
    xs = [p for p in t.ph if _shape(p) == out_shape]
    ws = [p for p in t.ph if p not in xs]
    if len(xs) != 1 or any(_shape(w) != out_shape[-1:] for w in ws) or _dtype_src(t.out) is None:
        return None
    adds = [n for n in t.ops if n.target in (operator.add, torch.add, "add")]
    eps = [a for n in adds for a in n.args if isinstance(a, float)]
    if len(eps) != 1:
        return None
    x, w = xs[0], ws[0] if ws else None
    for scale in (1.0, 3.0):
        values = [v * scale if p is x else v for p, v in zip(t.ph, t.inputs, strict=True)]
        xv, wv = values[t.ph.index(x)].float(), values[t.ph.index(w)].float() if w is not None else 1.0
        want = xv * torch.rsqrt(xv.pow(2).mean(-1, keepdim=True) + eps[0]) * wv
        got = t.gm(*values)
        if not isinstance(got, torch.Tensor) or not torch.allclose(got.float(), want, atol=1e-5, rtol=1e-4):
            return None
    wsrc = t.arg(w) if w is not None else None
    return templates_rows.rms_norm(t.args, t.arg(x), wsrc, repr(eps[0]), str(_dtype_src(t.out)))


# ---- layout -------------------------------------------------------------------------------------


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
    if not isinstance(src, Node) or _dtype(src) is None or not _dtype(src).is_floating_point:  # type: ignore[union-attr]
        return False
    if n.target == "float":
        return len(n.args) == 1 and not n.kwargs
    return n.target == "to" and (n.args[1:] == (torch.float32,) or n.kwargs == {"dtype": torch.float32})


def _operand_view(t: Traced, n: Any) -> tuple[str, list[Node]] | None:
    """An input read through fp32 upcasts and at most one swap of its last two dims: the forward-time
    expression of the view (strides do the swap; the kernel converts) and the nodes it covers."""
    nodes: list[Node] = []
    swapped = False
    while n not in t.ph:
        if not isinstance(n, Node) or n.op == "call_module" or not n.args or len(n.users) != 1:
            return None
        rank = _rank(n.args[0])
        if not _is_upcast(n):
            if swapped or rank is None or rank < 2 or not _swapped(n, rank):
                return None
            swapped = True
        nodes.append(n)
        n = n.args[0]
    return t.arg(n) + (".transpose(-1, -2)" if swapped else ""), nodes


def _draft_transpose(t: Traced) -> str | None:
    """x.t(), x.transpose(-1, -2), x.mT or x.permute(...) swapping the last two dims [.contiguous()]."""
    if len(t.ph) != 1 or not 1 <= len(t.ops) <= 2 or t.out is not t.ops[-1] or (_rank(t.ph[0]) or 0) < 2:
        return None
    if not _swapped(t.ops[0], _rank(t.ph[0]) or 0) or t.ops[0].args[:1] != (t.ph[0],):
        return None
    if len(t.ops) == 2 and (t.ops[1].target != "contiguous" or t.ops[1].args != (t.ops[0],)):
        return None
    return templates_layout.transpose(t.args[0])


# ---- matmul and linear layers -------------------------------------------------------------------


def _draft_matmul(t: Traced) -> str | None:
    """matmul / mm / bmm of two inputs (or their last-two-dim transposes) with an elementwise epilogue."""
    mms = [n for n in t.ops if n.target in _MATMUL]
    if len(mms) != 1 or len(mms[0].args) != 2 or mms[0].kwargs:
        return None
    mm = mms[0]
    k = t.ops.index(mm)
    views = [_operand_view(t, x) for x in mm.args]
    if views[0] is None or views[1] is None or t.out is not t.ops[-1]:
        return None
    (a, a_nodes), (b, b_nodes) = views[0], views[1]
    if set(t.ops[:k]) != set(a_nodes + b_nodes):
        return None
    (sa, sb), dtype = (_shape(x) for x in mm.args), _dtype_src(t.out)
    if sa is None or sb is None or len(sa) < 2 or dtype is None:
        return None
    fold = len(sb) == 2 and len(sa) > 2
    if not fold and (len(sa) != len(sb) or sa[:-2] != sb[:-2]):  # no batch broadcasting
        return None
    env: dict[Node, str] = {mm: "acc"}
    extras: list[tuple[str, str]] = []
    for p in t.ph:  # inputs the epilogue reads: a bias row, a residual, a scalar
        kind = _broadcast_kind(_shape(p) or (), tuple(_shape(t.out) or ()))
        if kind in ("row", "full", "scalar") and any(u in t.ops[k + 1 :] for u in p.users):
            env[p] = f"e{len(extras)}"
            extras.append((t.arg(p), str(kind)))
    got = _chain(t, t.ops[k + 1 :], env)
    if got is None:
        return None
    return templates_matmul.bmm(t.args, a, b, got[0], got[1] or "acc", dtype, fold, extras)


_PARAM_INITS = ("torch.randn", "torch.rand", "torch.ones", "torch.zeros")


def _module_ctor(m: nn.Module) -> str | None:
    """The constructor call that rebuilds module `m` (its weights equal under the same RNG state)."""
    if isinstance(m, nn.Linear):
        ctor = f"nn.Linear({m.in_features}, {m.out_features}, bias={m.bias is not None})"
    elif isinstance(m, nn.RMSNorm):
        ctor = f"nn.RMSNorm({tuple(m.normalized_shape)}, eps={m.eps!r}, elementwise_affine=True)"
    elif isinstance(m, nn.Embedding) and m.padding_idx is None and m.max_norm is None:
        ctor = f"nn.Embedding({m.num_embeddings}, {m.embedding_dim})"
    else:
        return None
    dtype = next(m.parameters()).dtype
    return ctor if dtype == torch.float32 else f"{ctor}.to({dtype})"


def _twins(t: Traced) -> list[str] | None:
    """`__init__` lines that rebuild the model's parameters (nn.Linear, nn.RMSNorm, nn.Embedding and
    the model's own nn.Parameter(torch.randn/rand/ones/zeros(shape))) so that the evaluator's seeded
    construction gives ModelNew equal values; None (and a note) when they would not be equal."""
    modules = [(path, m) for path, m in t.model.named_modules() if path and list(m.parameters(recurse=False))]
    for path, m in modules:
        if _module_ctor(m) is None:
            t.notes.append(f"the parameters of {path} ({type(m).__name__}), which ModelNew cannot rebuild")
            return None
    params = [(name, p) for name, p in t.model.named_parameters(recurse=False)]
    for params_first in (True, False):
        lines = _rebuild(t, params, modules, params_first)
        if lines is not None:
            return lines
    t.notes.append("the model's weights, which seeded construction in ModelNew does not reproduce")
    return None


def _rebuild(
    t: Traced, params: list[tuple[str, Any]], modules: list[tuple[str, nn.Module]], params_first: bool
) -> list[str] | None:
    torch.manual_seed(1234)
    ref = t.problem.Model(*t.problem.get_init_inputs())
    torch.manual_seed(1234)
    lines = []
    steps = [*((n, None) for n, _ in params), *((p, m) for p, m in modules)]
    if not params_first:
        steps = steps[len(params) :] + steps[: len(params)]
    for name, module in steps:
        theirs = (
            list(ref.get_submodule(name).parameters(recurse=False)) if module else [ref.get_parameter(name)]
        )
        candidates = (
            [str(_module_ctor(module))]
            if module
            else [f"nn.Parameter({f}({tuple(theirs[0].shape)}))" for f in _PARAM_INITS]
        )
        state = torch.get_rng_state()
        for ctor in candidates:
            torch.set_rng_state(state)
            twin = eval(ctor, {"nn": nn, "torch": torch})  # noqa: S307 - our own text
            mine = list(twin.parameters()) if module else [twin]
            if len(mine) == len(theirs) and all(torch.equal(p, q) for p, q in zip(theirs, mine, strict=True)):
                lines.append(f"self.{name.replace('.', '_')} = {ctor}")
                break
        else:
            return None
    return lines


def _linear_layer(t: Traced, n: Node, x: Any) -> tuple[str, str | None] | None:
    """(weight, bias) expressions when `n` is a linear layer applied to `x`."""
    mod = t.module(n)
    if isinstance(mod, nn.Linear) and n.args == (x,) and not n.kwargs:
        attr = "self." + str(n.target).replace(".", "_")
        return f"{attr}.weight.detach()", f"{attr}.bias.detach()" if mod.bias is not None else None
    if mod is None and n.target in _LINEAR and n.args[:1] == (x,):
        w, b = (*n.args[1:], None, None)[:2]
        b = n.kwargs.get("bias", b)
        if w in t.ph and _rank(w) == 2 and (b is None or b in t.ph and _rank(b) == 1):
            return t.arg(w), t.arg(b) if b is not None else None
    return None


def _draft_linear(t: Traced) -> str | None:
    """A stack of linear layers (nn.Linear / F.linear), each with an elementwise epilogue."""
    if t.out is None or not t.ops or not t.ops[0].args or t.ops[0].args[0] not in t.ph:
        return None
    x = t.ops[0].args[0]
    stages, cur, i = [], x, 0
    while i < len(t.ops):
        layer = _linear_layer(t, t.ops[i], cur)
        if layer is None:
            return None
        j = i + 1
        while j < len(t.ops) and _linear_layer(t, t.ops[j], t.ops[j - 1]) is None:
            j += 1
        got = _chain(t, t.ops[i + 1 : j], {t.ops[i]: "acc"})
        if got is None:
            return None
        stages.append(templates_matmul.LinearStage(layer[0], layer[1], tuple(got[0]), got[1] or "acc"))
        cur, i = t.ops[j - 1], j
    init = _twins(t)
    if cur is not t.out or init is None or _dtype(t.out) != _dtype(x):
        return None
    return templates_matmul.linear_chain(stages, t.args, t.arg(x), init)


_EMBEDDING_DEFAULTS = {"padding_idx": None, "max_norm": None, "norm_type": 2.0, "scale_grad_by_freq": False}
_EMBEDDING_DEFAULTS |= {"sparse": False}


def _draft_gather(t: Traced) -> str | None:
    """Row gathers: index_select(table, 0, idx) or F.embedding(idx, table); the table an input or
    a parameter of the model."""
    if len(t.ops) != 1 or t.out is not t.ops[0]:
        return None
    n, mod = t.ops[0], t.module(t.ops[0])
    if isinstance(mod, nn.Embedding):
        twins = _twins(t)
        if twins is None or n.kwargs or len(n.args) != 1 or n.args[0] not in t.ph:
            return None
        attr = str(n.target).replace(".", "_")
        return templates.gather_rows(
            64, ", ".join(t.args), (f"self.{attr}.weight.detach()", t.arg(n.args[0])), twins
        )
    if n.target is F.embedding:
        if any(_EMBEDDING_DEFAULTS.get(k, object()) != v for k, v in n.kwargs.items()) or len(n.args) != 2:
            return None
        idx, table = n.args
    elif n.target in _GATHER:
        if _dim(n, 1) != 0 or len(n.args) != 3 or n.kwargs:
            return None
        table, _, idx = n.args
    else:
        return None
    if idx not in t.ph or _rank(table) != 2:
        return None
    init: list[str] | None = []
    if isinstance(table, Node) and table.op == "get_attr":
        init, table_src = _twins(t), f"self.{str(table.target).replace('.', '_')}.detach()"
    elif table in t.ph:
        table_src = t.arg(table)
    else:
        return None
    if init is None:
        return None
    return templates.gather_rows(64, ", ".join(t.args), (table_src, t.arg(idx)), init)


RULES: tuple[Rule, ...] = (
    Rule("layer_norm", "normalization", _draft_layer_norm),
    Rule("layer_norm_fn", "normalization", _draft_layer_norm_fn),
    Rule("rms_norm", "normalization", _draft_rms_norm_op),
    Rule("rms_norm_formula", "normalization", _draft_rms_norm_formula),
    Rule("softmax", "softmax", _draft_softmax),
    Rule("log_softmax", "softmax", _draft_log_softmax),
    Rule("reduction", "reduction", _draft_reduce),
    Rule("column_reduction", "reduction", _draft_col_reduce),
    Rule("argmax", "reduction", _draft_argmax),
    Rule("cumsum", "scan", _draft_cumsum),
    Rule("transpose", "elementwise", _draft_transpose),
    Rule("matmul", "matmul", _draft_matmul),
    Rule("linear", "matmul", _draft_linear),
    Rule("gather", "gather", _draft_gather),
    Rule("elementwise", "elementwise", _draft_elementwise),
    Rule("broadcast", "elementwise", _draft_broadcast),
)


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))
