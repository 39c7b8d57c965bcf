"""Regions: the post-grad nodes one high-level op was decomposed into, cut out of Inductor's kernels as
one group whose seed is kegen's template for that op (D32).

Inductor sees an EmbeddingBag only as its device form (`kegen/inductor/host_ops.py`: a membership
mask, a row gather and a matmul) and spreads it over several kernels, some shared with other tables'
bags; attention arrives decomposed into q/k/v copies, two bmms and a softmax. FX provenance
(`node.meta["from_node"]`) names the op every post-grad node came from; the nodes of one
`aten.embedding_bag` or `scaled_dot_product_attention` call become one group (placed where its inputs
are ready and before its first reader), its problem is those aten ops, its baseline Inductor's draft
of them, and its seed kegen's template (`templates/embedding.py`, `templates/attention.py`) when the
region computes exactly that op on the values the model gave it (checked numerically; which input is
which, and the op's options, are found the same way).
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from kegen.tune.partition import (
    Group,
    Partition,
    PartitionError,
    check_order,
    is_view,
    merge,
    read_values,
    wire,
)

log = logging.getLogger(__name__)

KINDS = ("embedding_bag", "scaled_dot_product_attention")
CHANGES = {
    "embedding_bag": "the EmbeddingBag as one segment-gather kernel (templates/embedding.py) in place of "
    "Inductor's kernels of its device form",
    "scaled_dot_product_attention": "the attention as one flash-style kernel on the q/k/v views "
    "(templates/attention.py) in place of Inductor's copies, two bmms and softmax",
}


def origin(node: Any) -> str | None:
    """`kind:name` of the high-level op (one of KINDS) a post-grad node was decomposed from."""
    sources = node.meta.get("from_node") or []
    todo = list(sources) if isinstance(sources, list) else [sources]
    while todo:
        s = todo.pop()
        target = str(getattr(s, "target", ""))
        for kind in KINDS:
            if kind in target:
                return f"{kind}:{getattr(s, 'name', '')}:{getattr(s, 'graph_id', '')}"
        todo += list(getattr(s, "from_node", None) or [])
    return None


def carve(part: Partition, names: set[str], kernel: str) -> Partition:
    """`part` with the nodes `names` (of any groups) as one group named `kernel`, placed at the first
    position where the groups run in order; PartitionError if there is none."""
    groups: list[Group] = []
    region = Group(0, kernel, [])
    order = {n.name: i for i, n in enumerate(part.graph.graph.nodes)}
    nodes = {n.name: n for n in part.graph.graph.nodes}
    first = None
    for g in part.groups:
        mine = [n for n in g.nodes if n in names]
        rest = [n for n in g.nodes if n not in names]
        if mine and first is None:
            first = len(groups)
        region.nodes += mine
        computes = [nodes[n] for n in rest if not is_view(nodes[n], part.values)]
        if computes:
            kernel_name = g.kernel
            ops = [str(getattr(c.target, "__name__", c.target)).split(".")[0] for c in computes]
            if mine and not g.kernel.startswith("triton_") and g.kernel not in ops:
                kernel_name = "_".join(dict.fromkeys(ops))  # the extern call went: name what is left
            groups.append(Group(0, kernel_name, rest))
        else:
            region.nodes += rest
    if first is None:
        raise PartitionError(f"no kernel computes the {kernel} region")
    region.nodes.sort(key=lambda n: order[n])
    for at in range(first, len(groups) + 1):
        trial = groups[:at] + [region] + groups[at:]
        for g in trial:
            wire(g, part.graph, part.views, part.values)
        try:
            check_order(trial, part.graph, part.glue)
        except PartitionError:
            continue
        for k, g in enumerate(trial):
            g.index = k
        return Partition(part.graph, trial, part.glue, part.views, part.values)
    raise PartitionError(f"the {kernel} region cannot run in order with the other kernels")


def carve_regions(part: Partition) -> Partition:
    """Every KINDS region carved out (see the module docstring); region groups are named by their kind."""
    found: dict[str, list[str]] = {}
    for n in part.graph.graph.nodes:
        if n.op == "call_function" and (o := origin(n)) is not None:
            found.setdefault(o, []).append(n.name)
    owned = {n for g in part.groups for n in g.nodes}
    for key, names in found.items():
        names = [n for n in names if n in owned]
        if names:
            try:
                part = carve(part, set(names), key.split(":", 1)[0])
            except PartitionError:
                continue
    return _absorb_copies(part)


COPIES = ("aten.clone.default", "aten.copy.default")


def _absorb_copies(part: Partition) -> Partition:
    """A region whose output one group only copies (the transpose after attention made contiguous) takes
    that copy in: the template writes the copy's layout directly, one launch and one round trip fewer."""
    nodes = {n.name: n for n in part.graph.graph.nodes}
    k = 0
    while k < len(part.groups):
        g = part.groups[k]
        k += 1
        if g.kernel not in KINDS:
            continue
        readers = [j for j, c in enumerate(part.groups) if set(g.outputs) & (set(c.inputs) | set(c.viewed))]
        if len(readers) != 1:
            continue
        c = part.groups[readers[0]]
        computes = [nodes[n] for n in c.nodes if not is_view(nodes[n], part.values)]
        copies_only = computes and all(str(n.target) in COPIES for n in computes)
        if not copies_only or not set(c.inputs) <= set(g.outputs):
            continue
        try:
            part = merge(part, [k - 1, readers[0]], g.kernel)
        except PartitionError:
            continue
        k = 0
    return part


def _close(a: Any, b: Any) -> bool:
    """The same values up to rounding: a fused op against its decomposition (float32 tight, halves loose)."""
    import torch

    half = a.dtype in (torch.float16, torch.bfloat16)
    return bool(torch.allclose(a.float(), b.float(), *((2e-2, 2e-3) if half else (1e-4, 1e-5))))


def _arg(part: Partition, g: Group, name: str) -> str:
    """The forward-time expression of graph value `name` inside g's problem (see subgraph_code)."""
    if name in g.viewed:
        root, size, stride, offset = g.viewed[name]
        return f"torch.as_strided({_arg(part, g, root)}, {tuple(size)}, {tuple(stride)}, {offset})"
    if name in g.flat:
        v = part.values[name]
        return (
            f"torch.as_strided(in_{name}_storage, {tuple(v.shape)}, {tuple(v.stride())}, "
            f"{int(v.storage_offset())})"
        )
    return f"in_{name}"


def region_seed(part: Partition, g: Group) -> str | None:
    """kegen's template for the region group `g`, or None when its computation is not recognised (a
    region without a seed keeps Inductor's kernels: nothing that goes wrong here stops the run)."""
    try:
        return _region_seed(part, g)
    except Exception as exc:
        log.debug("no template for %s: %s", g.name, exc)
        return None


def _region_seed(part: Partition, g: Group) -> str | None:
    if g.kernel == "embedding_bag":
        return _embedding_bag_seed(part, g)
    if g.kernel == "scaled_dot_product_attention":
        return _attention_seed(part, g)
    return None


def _raw_inputs(part: Partition, g: Group) -> list[str]:
    """The graph values g's nodes read from outside g, then the roots those are views of."""
    raw = read_values(g, part.graph)
    roots = [part.views[r][0] for r in raw if r in part.views] + [v[0] for v in g.viewed.values()]
    return raw + [r for r in roots if r not in raw]


def _attention_seed(part: Partition, g: Group) -> str | None:
    import torch
    import torch.nn.functional as F

    from kegen.search.operators.templates import attention

    outs = [part.values[o] for o in g.outputs]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    out = outs[0]
    vals = {r: part.values[r] for r in _raw_inputs(part, g) if isinstance(part.values.get(r), torch.Tensor)}
    four = [r for r, v in vals.items() if v.is_floating_point() and v.dim() == 4]
    masks: list[str | None] = [None]  # an additive float attn_mask: any other float input
    masks += [r for r, v in vals.items() if v.is_floating_point() and 1 < v.dim() <= 4]
    scales: list[float | None] = [None]  # the default, or a constant of the region (or its square:
    for n in part.graph.graph.nodes:  # torch's math attention scales q and k by sqrt(scale) each)
        if n.name in g.nodes and n.op == "call_function":
            for a in n.args:
                if isinstance(a, float) and a > 0:
                    scales += [a, a * a]
    tried = itertools.product(itertools.permutations(four, 3), (False, True), masks, dict.fromkeys(scales))
    for (q, k, v), causal, m, scale in tried:
        if m in (q, k, v) or (causal and m is not None):
            continue
        try:
            ref = F.scaled_dot_product_attention(
                vals[q], vals[k], vals[v], attn_mask=vals[m] if m else None, is_causal=causal, scale=scale,
                enable_gqa=True,
            )  # fmt: skip
        except (RuntimeError, ValueError):
            continue
        for perm in ((0, 1, 2, 3), (0, 2, 1, 3)):  # the output, or its heads/sequence transpose
            mine = ref.permute(perm)
            if out.dim() == 4:  # a view of the output: its strides, permuted back
                strides = list(out.stride())
            elif out.is_contiguous() and out.numel() == ref.numel():  # a copy of it, reshaped
                strides = list(torch.empty(mine.shape).stride())
            else:
                continue
            stride = [0] * 4
            for d, p in enumerate(perm):
                stride[p] = strides[d]
            store = torch.empty_strided(ref.shape, stride, dtype=ref.dtype)
            store.copy_(ref)  # the kernel's output buffer: every output is a view of it
            views = [(list(o.shape), list(o.stride()), int(o.storage_offset())) for o in outs]
            if any(
                o.dtype != ref.dtype or not _close(torch.as_strided(store, *view), o)
                for o, view in zip(outs, views, strict=True)
            ):
                continue
            args = [f"in_{n}_storage" if n in g.flat else f"in_{n}" for n in g.inputs]
            return attention.attention(
                args, _arg(part, g, q), _arg(part, g, k), _arg(part, g, v), list(ref.shape), stride,
                vals[q].shape[2], vals[k].shape[2], causal, scale=scale, returns=views,
                mask=_arg(part, g, m) if m else None, kv_heads=vals[k].shape[1],
            )  # fmt: skip
    return None


def _embedding_bag_seed(part: Partition, g: Group) -> str | None:
    import torch
    import torch.nn.functional as F

    from kegen.search.operators.templates import embedding

    if len(g.outputs) != 1:
        return None
    out = part.values[g.outputs[0]]
    vals = {r: part.values[r] for r in _raw_inputs(part, g) if isinstance(part.values.get(r), torch.Tensor)}
    tables = [r for r, v in vals.items() if v.is_floating_point() and v.dim() == 2]
    ints = [r for r, v in vals.items() if not v.is_floating_point() and v.dim() == 1]
    weights = [None, *(r for r, v in vals.items() if v.is_floating_point() and v.dim() == 1)]
    for table, (idx, off), psw in itertools.product(tables, itertools.permutations(ints, 2), weights):
        for mode, last in itertools.product(("sum",) if psw else ("sum", "mean"), (False, True)):
            try:
                ref = F.embedding_bag(vals[idx], vals[table], vals[off], mode=mode, include_last_offset=last,
                                      per_sample_weights=vals[psw] if psw else None)
            except (RuntimeError, IndexError, ValueError):
                continue
            if ref.shape == out.shape and ref.dtype == out.dtype and _close(ref, out):
                args = [f"in_{n}_storage" if n in g.flat else f"in_{n}" for n in g.inputs]
                return embedding.embedding_bag(
                    args, _arg(part, g, table), _arg(part, g, idx), _arg(part, g, off), mode == "mean", last,
                    weights=_arg(part, g, psw) if psw else None,
                )  # fmt: skip
    return None
