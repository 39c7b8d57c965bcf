"""Drafting a first candidate from the PyTorch reference (no seed given).

The reference model is traced with torch.fx; the graph is matched against the op classes that
have a Triton template: elementwise chains, last-dimension softmax, row reductions (sum, mean,
max/amax), 2-D matmul with an elementwise epilogue, and row gathers (index_select on dim 0,
embedding). Anything else is reported by name as not draftable.
"""

from __future__ import annotations

import importlib.util
import math
import operator
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kegen.search.operators import templates


class DraftError(ValueError):
    """The reference uses ops the offline drafter has no template for."""


# fx target -> (arity, format) over operand strings; scalars are inlined.
_ELEMENTWISE: dict[Any, str] = {
    operator.add: "({0} + {1})",
    torch.add: "({0} + {1})",
    "add": "({0} + {1})",
    operator.sub: "({0} - {1})",
    torch.sub: "({0} - {1})",
    "sub": "({0} - {1})",
    operator.mul: "({0} * {1})",
    torch.mul: "({0} * {1})",
    "mul": "({0} * {1})",
    operator.truediv: "({0} / {1})",
    torch.div: "({0} / {1})",
    "div": "({0} / {1})",
    operator.neg: "(-{0})",
    torch.neg: "(-{0})",
    "neg": "(-{0})",
    torch.relu: "tl.maximum({0}, 0.0)",
    F.relu: "tl.maximum({0}, 0.0)",
    "relu": "tl.maximum({0}, 0.0)",
    torch.sigmoid: "(1.0 / (1.0 + tl.exp(-{0})))",
    F.sigmoid: "(1.0 / (1.0 + tl.exp(-{0})))",
    "sigmoid": "(1.0 / (1.0 + tl.exp(-{0})))",
    torch.tanh: "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)",
    F.tanh: "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)",
    "tanh": "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)",
    torch.exp: "tl.exp({0})",
    "exp": "tl.exp({0})",
    torch.abs: "tl.abs({0})",
    "abs": "tl.abs({0})",
    torch.sqrt: "tl.sqrt({0})",
    "sqrt": "tl.sqrt({0})",
    F.silu: "({0} / (1.0 + tl.exp(-{0})))",
    F.gelu: "(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))",
    torch.maximum: "tl.maximum({0}, {1})",
    torch.minimum: "tl.minimum({0}, {1})",
}
_SOFTMAX = {torch.softmax, F.softmax, "softmax"}
_REDUCE = {
    torch.sum: "sum",
    "sum": "sum",
    torch.mean: "mean",
    "mean": "mean",
    torch.amax: "max",
    "amax": "max",
}
_MATMUL = {torch.matmul, torch.mm, operator.matmul, "matmul", "mm"}
_GATHER = {torch.index_select, "index_select", F.embedding}


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


def _dim(node: torch.fx.Node, pos: int, default: Any = None) -> Any:
    if "dim" in node.kwargs:
        return node.kwargs["dim"]
    return node.args[pos] if len(node.args) > pos else default


def _rank(node: Any) -> int | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return len(meta.shape) if meta is not None else None


def analyze(problem_path: Path) -> Analysis:
    """Trace the reference and produce a candidate from templates where the graph is recognised."""
    mod = load_problem_module(Path(problem_path))
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    inputs = mod.get_inputs()
    try:
        gm = torch.fx.symbolic_trace(model)
        from torch.fx.passes.shape_prop import ShapeProp

        ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        return Analysis(
            None, unsupported=[f"reference cannot be traced with torch.fx ({type(exc).__name__}: {exc})"]
        )
    ops = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [
        _name(n.target) if n.op != "call_module" else type(gm.get_submodule(n.target)).__name__ for n in ops
    ]
    norm = _draft_layer_norm(gm, ops, placeholders)
    if norm is not None:
        return Analysis("normalization", names, [], norm)
    for draft in (_draft_softmax, _draft_reduce, _draft_matmul, _draft_gather, _draft_elementwise):
        got = draft(ops, placeholders)
        if got is not None:
            op_class, source = got
            return Analysis(op_class, names, [], source)
    bad = [
        nm
        for n, nm in zip(ops, names, strict=True)
        if n.op == "call_module"
        or (
            n.target not in _ELEMENTWISE
            and n.target not in _SOFTMAX
            and n.target not in _REDUCE
            and n.target not in _MATMUL
            and n.target not in _GATHER
        )
    ]
    return Analysis(None, names, sorted(set(bad)) or ["this combination of ops"])


def draft_candidate(problem_path: Path) -> tuple[str, Analysis]:
    """A first candidate for the problem, or DraftError naming the ops that have no template."""
    a = analyze(problem_path)
    if a.source is None:
        raise DraftError(
            f"the offline operator cannot draft {problem_path}: no Triton template for "
            f"{', '.join(a.unsupported)}. Pass a hand-written --seed candidate, or use --operator llm."
        )
    return a.source, a


def _single(ops: list[torch.fx.Node], targets: set[Any]) -> torch.fx.Node | None:
    return ops[0] if len(ops) == 1 and ops[0].target in targets else None


def _draft_layer_norm(
    gm: torch.fx.GraphModule, ops: list[torch.fx.Node], ph: list[torch.fx.Node]
) -> str | None:
    """nn.LayerNorm (a direct attribute of the model) or F.layer_norm over the last dimension."""
    if len(ops) != 1 or len(ph) != 1:
        return None
    n = ops[0]
    if n.op == "call_module":
        mod = gm.get_submodule(str(n.target))
        if not isinstance(mod, torch.nn.LayerNorm) or "." in str(n.target) or len(mod.normalized_shape) != 1:
            return None
        return templates.layer_norm(
            64,
            module=(
                str(n.target),
                int(mod.normalized_shape[0]),
                float(mod.eps),
                mod.weight is not None,
                mod.bias is not None,
            ),
        )
    if (
        n.target is F.layer_norm
        and len(n.args) == 2
        and not n.kwargs.get("weight")
        and not n.kwargs.get("bias")
    ):
        shape = n.args[1]
        if isinstance(shape, list | tuple) and len(shape) == 1:
            eps = n.kwargs.get("eps", 1e-5)
            return templates.layer_norm(64, eps=float(eps) if isinstance(eps, int | float) else 1e-5)
    return None


def _draft_softmax(ops: list[torch.fx.Node], ph: list[torch.fx.Node]) -> tuple[str, str] | None:
    n = _single(ops, _SOFTMAX)
    if n is None or len(ph) != 1:
        return None
    dim, rank = _dim(n, 1, -1), _rank(n)
    if dim not in (-1, (rank or 0) - 1):
        return None
    return "softmax", templates.softmax("two_kernel", 64)


def _draft_reduce(ops: list[torch.fx.Node], ph: list[torch.fx.Node]) -> tuple[str, str] | None:
    n = _single(ops, set(_REDUCE))
    if n is None or len(ph) != 1:
        return None
    dim, rank = _dim(n, 1), _rank(ph[0])
    if isinstance(dim, list | tuple) and len(dim) == 1:
        dim = dim[0]
    if dim not in (-1, (rank or 0) - 1):
        return None
    kind = _REDUCE[n.target]
    keep = bool(n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False))
    return "reduction", templates.row_reduce("max" if kind == "max" else "sum", 64, kind == "mean", keep)


def _operand(arg: Any, env: dict[torch.fx.Node, str]) -> str | None:
    if isinstance(arg, torch.fx.Node):
        return env.get(arg)
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(float(arg))
    return None


def _epilogue(chain: list[torch.fx.Node], env: dict[torch.fx.Node, str]) -> tuple[list[str], str] | None:
    lines: list[str] = []
    for i, n in enumerate(chain):
        fmt = _ELEMENTWISE.get(n.target)
        if (
            fmt is None
            or n.kwargs
            and set(n.kwargs) - {"approximate"}
            or n.kwargs.get("approximate", "none") != "none"
        ):
            return None
        operands = [_operand(a, env) for a in n.args]
        if any(o is None for o in operands):
            return None
        env[n] = f"t{i}"
        lines.append(f"t{i} = " + fmt.format(*operands))
    return lines, env[chain[-1]] if chain else ""


def _draft_elementwise(ops: list[torch.fx.Node], ph: list[torch.fx.Node]) -> tuple[str, str] | None:
    if not ops or any(_rank(p) is None for p in ph):
        return None
    shapes = {tuple(p.meta["tensor_meta"].shape) for p in ph}
    if len(shapes) != 1:
        return None
    env = {p: f"v{i}" for i, p in enumerate(ph)}
    got = _epilogue(ops, env)
    if got is None:
        return None
    lines, result = got
    return "elementwise", templates.elementwise(len(ph), lines, result, 256)


def _draft_matmul(ops: list[torch.fx.Node], ph: list[torch.fx.Node]) -> tuple[str, str] | None:
    if not ops or ops[0].target not in _MATMUL or len(ph) != 2:
        return None
    mm = ops[0]
    if list(mm.args) != ph or any(_rank(p) != 2 for p in ph):
        return None
    env = {mm: "acc"}
    got = _epilogue(ops[1:], env)
    if got is None:
        return None
    lines, result = got
    epi = "acc" if not lines else "; ".join(lines)  # single expression only
    if lines:
        expr = result
        for line in reversed(lines):
            var, rhs = line.split(" = ", 1)
            expr = expr.replace(var, rhs)
        epi = expr
    return "matmul", templates.matmul(epi, 16, 16, 16)


def _draft_gather(ops: list[torch.fx.Node], ph: list[torch.fx.Node]) -> tuple[str, str] | None:
    n = _single(ops, _GATHER)
    if n is None or len(ph) != 2:
        return None
    if n.target is F.embedding:
        if list(n.args[:2]) != ph[::-1] and list(n.args[:2]) != ph:
            return None
        table = n.args[1]
    else:
        if _dim(n, 1) != 0:
            return None
        table = n.args[0]
    names = "table, idx" if ph.index(table) == 0 else "idx, table"  # type: ignore[arg-type]
    return "gather", templates.gather_rows(64, names)


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))
