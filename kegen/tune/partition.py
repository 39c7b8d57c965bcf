"""A model cut along Inductor's own fusion groups: one standalone problem per kernel.

Inductor's post-grad FX graph and the nodes each of its kernels computes (`capture(keep_graph=True)`)
give the groups: every node belongs to the first kernel (in call() order) that computes it; views
(a node whose value shares its input's storage) go with the group of the value they view, or, for
views of the model's inputs and weights, to the wrapper as `torch.as_strided`. A group's problem
file is its subgraph as a KernelBench `Model` (aten ops), its inputs replayed from the values the
real model produced (integers exactly, floats with a 1% relative jitter drawn per call).
"""

from __future__ import annotations

import base64
import io
import operator
from dataclasses import dataclass, field
from typing import Any

JITTER = 0.01  # relative noise on replayed float inputs: fresh values per call, the same signs and scales


class PartitionError(ValueError):
    """The model cannot be cut into per-kernel problems (the message says why)."""


@dataclass
class Group:
    """One of Inductor's kernels as a problem: the graph nodes it computes, what it reads and returns."""

    index: int
    kernel: str  # Inductor's kernel name (extern calls: the aten op, e.g. "addmm")
    nodes: list[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    # inputs that are strided views: the problem takes their whole storage (this many elements)
    # and makes the view itself, so that any layout the evaluator gives a 1-D input is the same
    flat: dict[str, int] = field(default_factory=dict)
    # views of graph inputs the group reads: it takes the input itself and makes the view, so views
    # of one input are one argument (as in the whole graph, where Inductor fuses over shared reads)
    viewed: dict[str, tuple[str, list[int], list[int], int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"g{self.index}_{self.kernel}"


@dataclass
class Partition:
    """The post-grad graph cut into groups (in run order) and the wrapper's views of graph inputs."""

    graph: Any  # torch.fx.GraphModule
    groups: list[Group]
    glue: list[str]  # views of the graph's inputs, made in the wrapper
    views: dict[str, tuple[str, list[int], list[int], int]]  # glue view -> (root, size, stride, offset)
    values: dict[str, Any]  # each node's value in the real model (for the problems' inputs)


def _tensors(v: Any) -> list[Any]:
    import torch

    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, list | tuple):
        return [t for x in v for t in _tensors(x)]
    return []


def record_values(gm: Any, args: list[Any]) -> dict[str, Any]:
    """Every node's value when the graph runs on `args` (real tensors)."""
    import torch

    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        Recorder(gm).run(*args)
    return values


def is_view(n: Any, values: dict[str, Any]) -> bool:
    """A node whose value aliases one of its inputs (views, getitem of a tuple)."""
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return True
    outs = _tensors(values.get(n.name))
    if not outs:
        return False
    ins = {t.untyped_storage().data_ptr() for a in n.all_input_nodes for t in _tensors(values.get(a.name))}
    return all(t.untyped_storage().data_ptr() in ins for t in outs)


def merge_duplicate_outputs(part: Partition) -> int:
    """Each output of a group that repeats another output of it as a view (the same op on the same
    value with the same arguments: a normalised activation reshaped once per projection that reads
    it) replaced by that one in the graph, so the groups that read them share one input (a gated MLP's
    two projections then read one tensor); the number of outputs removed. Views inside a group, or
    read by other groups through no group output, are left alone."""

    def frozen(v: Any) -> Any:
        return tuple(frozen(x) for x in v) if isinstance(v, list | tuple) else v

    gm = part.graph
    nodes = {n.name: n for n in gm.graph.nodes}
    returned = next(n for n in gm.graph.nodes if n.op == "output")
    removed = 0
    for g in part.groups:
        seen: dict[Any, Any] = {}
        for name in list(g.outputs):
            n = nodes[name]
            if not is_view(n, part.values) or n.target is operator.getitem or returned in n.users:
                continue
            try:
                key = (n.target, frozen(n.args), frozen(tuple(sorted(n.kwargs.items()))))
                hash(key)
            except TypeError:  # an argument that cannot be compared: left as it is
                continue
            if key not in seen:
                seen[key] = n
                continue
            n.replace_all_uses_with(seen[key])
            gm.graph.erase_node(n)
            g.nodes.remove(name)
            removed += 1
    if removed:
        gm.recompile()
        for g in part.groups:
            wire(g, gm, part.views, part.values)
        check_order(part.groups, gm, part.glue)
    return removed


def cut(gm: Any, kernel_nodes: list[tuple[str, list[str]]], values: dict[str, Any]) -> Partition:
    """Groups from Inductor's kernels (see the module docstring); PartitionError when a node cannot
    be placed or the groups cannot run in order."""
    import torch

    nodes = {n.name: n for n in gm.graph.nodes}
    compute = [n for n in gm.graph.nodes if n.op == "call_function" and not is_view(n, values)]
    computed = {n.name for n in compute}
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        raise PartitionError(
            "the post-grad graph holds constants (get_attr); only graph inputs are supported"
        )
    kernels = [kernel.removeprefix("extern_kernels.").split(".")[-1] for kernel, _ in kernel_nodes]
    listed: dict[str, list[int]] = {}
    for k, (_, names) in enumerate(kernel_nodes):
        for name in names:
            if name in computed:
                listed.setdefault(name, []).append(k)
    owner: dict[str, int] = {}

    def after(n: Any) -> int:
        """The latest group that computes one of n's inputs (looking through views)."""
        lo = -1
        for a in n.all_input_nodes:
            while a.name not in computed and a.all_input_nodes and a.op == "call_function":
                a = a.all_input_nodes[0]
            lo = max(lo, owner.get(a.name, -1))
        return lo

    for n in compute:  # the first kernel naming the node that runs after its inputs are computed
        lo = after(n)
        if n.name in listed:
            owner[n.name] = next((k for k in listed[n.name] if k >= lo), lo)
        elif lo >= 0:  # named by no kernel (a cat its producers write into): with its last producer
            owner[n.name] = lo
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    for n in reversed(compute):  # of graph inputs only (e.g. a constant folded into its users):
        if n.name in owner:  # the group of its first user that computes something (through views)
            continue
        users, todo = [], list(n.users)
        while todo:
            u = todo.pop()
            if u.name in owner:
                users.append(u)
            elif u.op == "call_function" and u.name not in computed:
                todo += list(u.users)
        users.sort(key=lambda u: order[u.name])
        if not users:
            raise PartitionError(f"no Inductor kernel computes {n.name} ({n.target})")
        owner[n.name] = owner[users[0].name]
    views: dict[str, tuple[str, list[int], list[int], int]] = {}
    glue: list[str] = []
    for n in gm.graph.nodes:  # views: with the group of the value they view, else wrapper glue
        if n.op != "call_function" or n.name in owner:
            continue
        root = n.all_input_nodes[0] if n.all_input_nodes else None
        if root is None:
            raise PartitionError(f"{n.name} ({n.target}) reads no graph value")
        base = views[root.name][0] if root.name in views else root.name
        if base in owner:
            owner[n.name] = owner[base]
            continue
        if nodes[base].op != "placeholder":
            raise PartitionError(f"{n.name} ({n.target}) views {base}, which no kernel computes")
        t = values[n.name]
        if isinstance(t, torch.Tensor):
            views[n.name] = (base, list(t.shape), list(t.stride()), int(t.storage_offset()))
            glue.append(n.name)
        else:  # a list of views (unbind): its items are the glue
            views[n.name] = (base, [], [], -1)
    groups = [Group(k, kernels[k], []) for k in range(len(kernels))]
    for n in gm.graph.nodes:
        if n.name in owner:
            groups[owner[n.name]].nodes.append(n.name)
    groups = [g for g in groups if g.nodes]
    for g in groups:
        wire(g, gm, views, values)
    check_order(groups, gm, glue)
    for k, g in enumerate(groups):
        g.index = k
    return Partition(gm, groups, glue, views, values)


def read_values(g: Group, gm: Any) -> list[str]:
    """The graph values g's nodes read from outside g, in first-read order (views as they are read)."""
    nodes = {n.name: n for n in gm.graph.nodes}
    mine = set(g.nodes)
    raw: list[str] = []
    for name in g.nodes:
        for a in nodes[name].all_input_nodes:
            if a.name not in mine and a.name not in raw:
                raw.append(a.name)
    return raw


def wire(g: Group, gm: Any, views: dict[str, Any], values: dict[str, Any]) -> None:
    """A group's inputs (views of graph inputs taken whole, strided ones as their storage) and
    outputs (its nodes read outside it or returned), from its nodes."""
    import torch

    nodes = {n.name: n for n in gm.graph.nodes}
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    g.inputs, g.outputs, g.flat, g.viewed = [], [], {}, {}
    mine = set(g.nodes)
    g.outputs = [
        name for name in g.nodes if any(u.name not in mine or u is out_node for u in nodes[name].users)
    ]
    for name in read_values(g, gm):
        if name in views and views[name][3] >= 0:
            g.viewed[name] = views[name]
            name = views[name][0]
        if name not in g.inputs:
            g.inputs.append(name)
    for name in g.inputs:
        v = values[name]
        if isinstance(v, torch.Tensor) and v.numel() and not _plain(v):
            g.flat[name] = v.untyped_storage().nbytes() // v.element_size()


def merge(part: Partition, members: list[int], kernel: str) -> Partition:
    """The partition with the groups at `members` (indices into part.groups) as one group that runs
    where the last of them ran, named `kernel`; PartitionError when the groups cannot run in order."""
    import copy

    keep = [g for i, g in enumerate(part.groups) if i not in members[:-1]]
    order = {n.name: i for i, n in enumerate(part.graph.graph.nodes)}
    merged = Group(
        0, kernel, sorted((n for i in members for n in part.groups[i].nodes), key=lambda n: order[n])
    )
    groups = [merged if g is part.groups[members[-1]] else copy.copy(g) for g in keep]
    wire(merged, part.graph, part.views, part.values)
    check_order(groups, part.graph, part.glue)
    for k, g in enumerate(groups):
        g.index = k
    return Partition(part.graph, groups, part.glue, part.views, part.values)


def _plain(t: Any) -> bool:
    """A contiguous tensor that is its whole storage."""
    return bool(
        t.is_contiguous()
        and t.storage_offset() == 0
        and t.numel() * t.element_size() == t.untyped_storage().nbytes()
    )


def check_order(groups: list[Group], gm: Any, glue: list[str]) -> None:
    """PartitionError unless every group reads only graph inputs, glue and earlier groups' outputs."""
    ready = {n.name for n in gm.graph.nodes if n.op == "placeholder"} | set(glue)
    for g in groups:
        missing = [i for i in g.inputs if i not in ready]
        if missing:
            raise PartitionError(
                f"kernel {g.kernel} reads {', '.join(missing)} before any kernel computes it"
            )
        if not g.outputs:
            raise PartitionError(f"kernel {g.kernel} returns nothing the model uses")
        ready |= set(g.outputs)


def _as_aten_max_pool(n: Any, original: Any) -> None:
    """Inductor's low-memory 2-D max pool (a prim Inductor registers when it is imported) as
    `aten.max_pool2d_with_indices` with the same window arguments, where only its values are read
    (`getitem` 0: the same tensor; the offsets and the indices differ): the group's problem then runs,
    and lifts, without Inductor."""
    import torch

    prim = getattr(getattr(torch.ops.prims, "_low_memory_max_pool_with_offsets", None), "default", None)
    if prim is None or n.target is not prim or n.kwargs or len(n.args[1]) != 2:
        return
    if all(u.target is operator.getitem and u.args[1] == 0 for u in original.users):
        n.target = torch.ops.aten.max_pool2d_with_indices.default


def subgraph_code(part: Partition, g: Group) -> str:
    """The group's computation as a `forward(self, <inputs>)` (aten ops, FX's printed code)."""
    import torch

    nodes = {n.name: n for n in part.graph.graph.nodes}
    sub = torch.fx.Graph()
    env: dict[str, Any] = {}
    for name in g.inputs:
        if name in g.flat:
            v = part.values[name]
            storage = sub.placeholder(f"in_{name}_storage")
            args = (storage, list(v.shape), list(v.stride()), int(v.storage_offset()))
            env[name] = sub.call_function(torch.ops.aten.as_strided.default, args)
        else:
            env[name] = sub.placeholder(f"in_{name}")  # never Inductor's own `argK_1` names
    for name, (root, size, stride, offset) in g.viewed.items():
        env[name] = sub.call_function(torch.ops.aten.as_strided.default, (env[root], size, stride, offset))
    for name in g.nodes:
        env[name] = sub.node_copy(nodes[name], lambda a: env[a.name])
        _as_aten_max_pool(env[name], nodes[name])
    outs = [env[o] for o in g.outputs]
    sub.output(outs[0] if len(outs) == 1 else tuple(outs))
    return torch.fx.GraphModule(torch.nn.Module(), sub).code


PROBLEM = '''"""kegen tune: kernel {name} of {model} (variant {variant}) as a standalone problem: the graph
nodes Inductor's kernel computes ({nodes}), at the shapes and strides the model gives it."""

import base64
import io

import torch
import torch.nn as nn
from torch import device, inf, nan  # noqa: F401

_SAVED = {saved!r}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{forward}

def get_inputs():
    """The values the model fed this kernel: integers as they were, floats with a {jitter:.0%} relative
    jitter (fresh per call); a strided view as its whole storage (forward makes the view)."""
    saved = torch.load(io.BytesIO(base64.b64decode(_SAVED)))
    out = []
    for flat, size, stride, offset in saved:
        if flat.is_floating_point():
            flat = flat * (1 + {jitter} * torch.randn_like(flat))
        out.append(torch.as_strided(flat, size, stride, offset))
    return out


def get_init_inputs():
    return []
'''


def _storage_of(t: Any) -> Any:
    import torch

    flat = torch.empty(0, dtype=t.dtype)
    n = t.untyped_storage().nbytes() // t.element_size()
    flat.set_(t.untyped_storage(), 0, (n,), (1,))
    return flat.clone()


def problem_source(part: Partition, g: Group, model: str, variant: int) -> str:
    """The group's standalone KernelBench problem (inputs embedded)."""
    import torch

    saved = []
    for name in g.inputs:
        v = part.values[name]
        if not isinstance(v, torch.Tensor):
            raise PartitionError(
                f"kernel {g.kernel} reads {name}, which is not a tensor ({type(v).__name__})"
            )
        if name in g.flat:
            saved.append((_storage_of(v), [g.flat[name]], [1], 0))
        else:
            saved.append((_storage_of(v), list(v.shape), list(v.stride()), int(v.storage_offset())))
    buf = io.BytesIO()
    torch.save(saved, buf)
    forward = "\n".join(
        "    " + ln if ln.strip() else "" for ln in subgraph_code(part, g).strip("\n").splitlines()
    )
    return PROBLEM.format(
        name=g.name,
        model=model,
        variant=variant,
        nodes=", ".join(g.nodes),
        saved=base64.b64encode(buf.getvalue()).decode(),
        forward=forward,
        jitter=JITTER,
    )


def model_tensor_inputs(cap: Any) -> frozenset[str]:
    """The post-grad graph's inputs (placeholder names) that are the model's parameters, buffers and
    constants (`cap.inputs` is in placeholder order, as `graph_args` reads it), not the user's inputs."""
    placeholders = [n for n in cap.post_grad.graph.nodes if n.op == "placeholder"]
    return frozenset(n.name for n, gi in zip(placeholders, cap.inputs, strict=False) if gi.kind != "user")


def graph_args(cap: Any, model: Any, inputs: list[Any]) -> list[Any]:
    """The post-grad graph's arguments for a built model and one input list (in `cap.inputs` order),
    each contiguous one in a storage of its own (as the evaluator places them on the device)."""
    import torch

    args: list[Any] = []
    for gi in cap.inputs:
        if gi.kind == "user":
            args.append(inputs[gi.index])
        elif gi.kind == "parameter":
            args.append(model.get_parameter(gi.target))
        elif gi.kind == "buffer":
            args.append(model.get_buffer(gi.target))
        else:
            args.append(operator.attrgetter(gi.target)(model))
    return [a.detach().clone() if isinstance(a, torch.Tensor) and a.is_contiguous() else a for a in args]
