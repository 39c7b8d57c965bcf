"""The traced reference the drafting patterns match: the torch.fx graph with shapes, the op-target
sets the patterns recognise, and small accessors of node arguments, shapes and dtypes."""

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from kegen.modules import load_module_from_file, unique_module_name
from kegen.search.operators.templates.exprs import CLAMPS, ELEMENTWISE_FORMATS, MODULE_FORMATS


class DraftError(ValueError):
    """The reference uses ops the offline drafter has no template for."""


POW = {operator.pow, torch.pow, "pow"}
GELU = {F.gelu, torch._C._nn.gelu, "gelu"}
CASTS = {"to", "type", "half", "bfloat16"}
IGNORED_KWARGS = {"inplace": False, "approximate": "none"}
SOFTMAX = {torch.softmax, F.softmax, "softmax"}
LOG_SOFTMAX = {torch.log_softmax, F.log_softmax, "log_softmax"}
REDUCE = {
    **dict.fromkeys((torch.sum, "sum"), "sum"),
    **dict.fromkeys((torch.mean, "mean"), "mean"),
    **dict.fromkeys((torch.amax, "amax"), "max"),
}
ARGMAX = {torch.argmax, "argmax"}
CUMSUM = {torch.cumsum, "cumsum"}
MATMUL = {torch.matmul, torch.mm, operator.matmul, "matmul", "mm", torch.bmm, "bmm"}
LINEAR = {F.linear, torch._C._nn.linear}
GATHER = {torch.index_select, "index_select", F.embedding}
RMS_NORM = {F.rms_norm, torch.rms_norm}
TRANSPOSE = {"t", torch.t, "transpose", torch.transpose, "swapaxes", "swapdims", "permute", torch.permute}
# every target some pattern handles (the rest is named when drafting refuses)
KNOWN_TARGETS = (
    set(ELEMENTWISE_FORMATS) | POW | GELU | CASTS | SOFTMAX | LOG_SOFTMAX | set(REDUCE) | ARGMAX | CUMSUM
) | (MATMUL | LINEAR | GATHER | RMS_NORM | TRANSPOSE | {F.layer_norm, getattr, operator.getitem, "type_as"})
KNOWN_TARGETS |= {F.embedding_bag, F.conv1d, F.conv2d, torch.conv1d, torch.conv2d, F.relu, torch.relu, F.silu}
KNOWN_MODULES = (*MODULE_FORMATS, nn.Linear, nn.LayerNorm, nn.RMSNorm, nn.Embedding, nn.EmbeddingBag)
KNOWN_MODULES += (nn.Conv1d, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU, nn.SiLU, nn.ReLU6, nn.GELU)
KNOWN_MODULES += (nn.Hardswish, nn.Sigmoid, nn.ConvTranspose1d, nn.ConvTranspose2d)
KNOWN_TARGETS |= {F.relu6, F.hardtanh, F.hardswish, torch.sigmoid, F.sigmoid}
KNOWN_TARGETS |= set(CLAMPS)
# local names of the templates' forward bodies that an input must not shadow
RESERVED = {"x", "x2", "x3", "w", "y", "h", "a", "b", "a3", "b3", "c", "out", "shape", "grid", "self"}
RESERVED |= {
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


@dataclass(frozen=True)
class Drafts:
    """What a rule drafted: its candidate and other drafts of the same graph, (what differs, source)
    each, which a search evaluates beside it (a rule may return a bare source instead)."""

    source: str
    variants: tuple[tuple[str, str], ...] = ()


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
    lifted: Any = None  # drafting.aten.Lifted where the reference was an aten graph (kegen tune's groups)
    outs: list[Node] = field(default_factory=list)  # the outputs where the reference returns a tuple

    def module(self, n: Node) -> nn.Module | None:
        """The submodule a call_module node calls (None for other nodes)."""
        return self.gm.get_submodule(str(n.target)) if n.op == "call_module" else None

    @property
    def args(self) -> list[str]:
        """ModelNew.forward's parameters: the reference's, renamed where a template uses the name."""
        return [f"{p.name}_in" if p.name in RESERVED else p.name for p in self.ph]

    def arg(self, n: Any) -> str:
        """ModelNew.forward's name of input node `n`."""
        return self.args[self.ph.index(n)]


def load_problem_module(path: Path) -> Any:
    """Import a problem file as a fresh module."""
    return load_module_from_file(path, unique_module_name(path, "_kegen_problem"), wrap_errors=False)


def trace(problem_path: Path) -> Traced:
    """Import the problem, build its model (seed 0) and trace it with shapes propagated over fake
    inputs (`Traced.inputs` are fake tensors: shapes and dtypes, no data); a `get_inputs` whose sizes
    depend on its own values (`int(offsets[-1])`) is run for real."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
    from torch.fx.passes.shape_prop import ShapeProp

    mod = load_problem_module(Path(problem_path))
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with fake:  # shapes only: nothing is allocated or run at the problem's size
            inputs = mod.get_inputs()
    except DataDependentOutputException:  # get_inputs reads its own values (bag offsets, lengths)
        inputs = mod.get_inputs()
    tracer = torch.fx.Tracer()
    tracer.proxy_buffer_attributes = True  # buffers as get_attr nodes: math on them stays in the graph
    gm = torch.fx.GraphModule(model, tracer.trace(model))
    ShapeProp(gm, fake_mode=fake).propagate(*inputs)
    gm, inputs, lifted = _lifted(mod, gm, inputs, fake)
    if fold_metadata(gm):
        ShapeProp(gm, fake_mode=fake).propagate(*inputs)
    return traced_graph(mod, model, gm, inputs, lifted)


def traced_graph(
    mod: Any, model: nn.Module, gm: GraphModule, inputs: list[Any], lifted: Any = None
) -> Traced:
    """The `Traced` view of graph `gm` of the problem's model: its compute nodes, inputs and output(s)."""
    nodes = list(gm.graph.nodes)
    ops = [n for n in nodes if n.op in ("call_function", "call_method", "call_module")]
    out_args = [n for n in nodes if n.op == "output"][0].args[0]
    out = out_args if isinstance(out_args, Node) else None
    outs = list(out_args) if isinstance(out_args, tuple | list) else []
    ph = [n for n in nodes if n.op == "placeholder"]
    return Traced(mod, model, gm, ops, ph, out, inputs, lifted=lifted, outs=outs)


def fold_metadata(gm: GraphModule) -> bool:
    """Replace reads of a traced tensor's dtype and sizes (`x.dtype`, `x.shape[-1]`, `x.size(0)`,
    `x.shape`) by the values traced: a problem's inputs have fixed dtypes and shapes, so the cast
    back of `(a.float() @ b.float()).to(a.dtype)` is a cast to float16 and `F.layer_norm(x, (x.shape[-1],))`
    normalises 1024 columns, as the patterns expect. True if anything changed."""
    from torch.fx.node import map_arg

    changed = False
    for n in list(gm.graph.nodes):
        value = _metadata_value(n)
        if value is _NO_VALUE:
            continue
        for user in list(n.users):
            user.args = map_arg(user.args, lambda a, n=n, v=value: v if a is n else a)  # type: ignore[misc]
            user.kwargs = map_arg(user.kwargs, lambda a, n=n, v=value: v if a is n else a)  # type: ignore[misc]
        if not n.users:
            gm.graph.erase_node(n)
            changed = True
    for n in list(gm.graph.nodes):  # size reads whose items were all folded
        if not n.users and n.op == "call_function" and n.target is getattr and n.args[1] == "shape":
            gm.graph.erase_node(n)
    if changed:
        gm.recompile()
    return changed


_NO_VALUE = object()


def _metadata_value(n: Node) -> Any:
    """The constant a dtype or size read evaluates to (its source's traced metadata), else _NO_VALUE."""
    src = n.args[0] if n.args else None
    if not isinstance(src, Node):
        return _NO_VALUE
    if n.op == "call_function" and n.target is operator.getitem:
        if src.op == "call_function" and src.target is getattr and src.args[1] == "shape":
            dims = shape_of(src.args[0]) if isinstance(src.args[0], Node) else None
            idx = n.args[1]
            if dims is not None and isinstance(idx, int) and -len(dims) <= idx < len(dims):
                return int(dims[idx])
        return _NO_VALUE
    if src.meta.get("tensor_meta") is None:
        return _NO_VALUE
    shape = shape_of(src)
    if n.op == "call_function" and n.target is getattr and n.args[1] == "dtype":
        return dtype_of(src) or _NO_VALUE
    if n.op == "call_function" and n.target is getattr and n.args[1] == "shape" and shape is not None:
        if all(u.op == "call_function" and u.target is operator.getitem for u in n.users):
            return _NO_VALUE  # its items are folded first, then this read has no users left
        return torch.Size(shape)
    if n.op == "call_method" and n.target == "size" and shape is not None:
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        if dim is None and len(n.args) == 1 and not n.kwargs:
            return torch.Size(shape)
        if isinstance(dim, int) and -len(shape) <= dim < len(shape):
            return int(shape[dim])
    return _NO_VALUE


def _lifted(mod: Any, gm: GraphModule, inputs: list[Any], fake: Any) -> tuple[GraphModule, list[Any], Any]:
    """An aten graph (a `kegen tune` kernel group) lifted to torch-level ops (`drafting.aten`) where
    that is exact and checked on the problem's inputs; otherwise the graph as it is."""
    from kegen.search.operators.drafting import aten

    if not aten.has_aten(gm):
        return gm, inputs, None
    lifted = aten.copy_graph(gm)
    try:
        lifted_inputs, views = aten.lift(lifted, list(inputs), fake)
    except Exception:  # a recogniser: any failure leaves the aten graph, refused by its op names
        return gm, inputs, None
    if sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)) <= aten.MAX_CHECK_ELEMENTS:
        torch.manual_seed(0)
        if not aten.check(gm, lifted, list(mod.get_inputs()), views):
            return gm, inputs, None
    return lifted, lifted_inputs, views


def is_cast(n: Any) -> bool:
    """Whether `n` is a dtype cast method call (`.float()`, `.to(...)`, `.half()`, ...)."""
    return isinstance(n, Node) and n.op == "call_method" and n.target in CASTS | {"float"}


def strip_casts(n: Any, casts: set[Node]) -> Any:
    """`n` below any dtype casts (`.float()`, `.to(...)`, `.half()`, ...), which are added to `casts`."""
    while is_cast(n) and n.args:
        casts.add(n)
        n = n.args[0]
    return n


def op_name(target: Any) -> str:
    """The name of a node's target (a method name, or a function's __name__)."""
    return target if isinstance(target, str) else getattr(target, "__name__", repr(target))


def dim_arg(node: Node, pos: int, default: Any = None) -> Any:
    """The `dim` argument of an op (keyword, or positional at `pos`)."""
    if "dim" in node.kwargs:
        return node.kwargs["dim"]
    return node.args[pos] if len(node.args) > pos else default


def shape_of(node: Any) -> tuple[int, ...] | None:
    """The traced shape of a node, if known."""
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def rank_of(node: Any) -> int | None:
    """The traced rank of a node, if known."""
    shape = shape_of(node)
    return None if shape is None else len(shape)


def dtype_of(node: Any) -> torch.dtype | None:
    """The traced dtype of a node, if known."""
    meta = getattr(node, "meta", {}).get("tensor_meta")
    return getattr(meta, "dtype", None)


def dtype_src(n: Node | None) -> str | None:
    """`torch.float32`-style source text of a floating node's dtype, else None."""
    dtype = dtype_of(n)
    return str(dtype) if dtype is not None and dtype.is_floating_point else None


def is_last_dim(dim: Any, rank: int | None) -> bool:
    """Whether `dim` (an int or a one-element list) names the last dim of a rank-`rank` tensor."""
    if isinstance(dim, list | tuple) and len(dim) == 1:
        dim = dim[0]
    return isinstance(dim, int) and rank is not None and rank > 0 and dim in (-1, rank - 1)


@dataclass
class ReferenceRun:
    """The reference run once at its own inputs, for recognisers that confirm an op numerically."""

    model: nn.Module
    names: list[str]  # Model.forward's parameter names
    inputs: list[Any]
    output: Any


def run_reference(
    problem_path: Path, words: tuple[str, ...], max_inputs: int, max_elements: int
) -> ReferenceRun | None:
    """The reference's output at its own inputs (model and inputs drawn at seed 0), where the source
    of its Model names one of `words` (cheap: most problems stop there) and `get_inputs` gives 1 to
    `max_inputs` tensors of at most `max_elements` each (sized on the meta device first); else None."""
    mod = load_problem_module(Path(problem_path))
    try:
        source = inspect.getsource(mod.Model)
    except (OSError, TypeError):
        return None
    if not any(word in source.lower() for word in words):
        return None
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(0)
    with torch.device("meta"):
        shapes = mod.get_inputs()
    if not isinstance(shapes, list | tuple) or not 1 <= len(shapes) <= max_inputs:
        return None
    if any(not isinstance(s, torch.Tensor) or s.numel() > max_elements for s in shapes):
        return None
    torch.manual_seed(0)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        output = model(*inputs)
    names = list(inspect.signature(model.forward).parameters)
    return ReferenceRun(model, names, inputs, output) if len(names) == len(inputs) else None
