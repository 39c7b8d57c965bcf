"""Drafting linear layers whose weight is packed 4-bit integers, recognised by the weight computed.

Int4 weight-only quantizers store two values a byte or eight an int32, along K or in planes, in
either nibble order, signed or offset, with scales and zero points per output channel or per group
of input channels (GPTQ, AWQ-style exports, torchao, hand-written ones); a reference unpacks them with
shifts, masks, stack / cat / reshape, repeat_interleave and so on, in more spellings than a pattern
could list. The weight operand of the graph's one matmul depends only on the model's tensors, so it
is computed once here (from the traced model's buffers) and every integer tensor of the right size
is decoded under each layout (`templates.packed_linear.Packing`); the weight must then be
`s * (q - z)` exactly, with one (s, z) per output channel and group of G input channels. s must be
one of the model's float tensors (or its inverse, for a division), z a constant, a tensor or a packed
tensor of the same shape (GPTQ's qzeros, with or without its +1). The evaluator checks the draft again
on fresh inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node
from torch.fx.node import map_arg

from kegen.search.operators.drafting.graph import LINEAR, MATMUL, Traced, dtype_of, shape_of
from kegen.search.operators.drafting.quant import linear_parts, reference_reads
from kegen.search.operators.drafting.weights import reference_tensor
from kegen.search.operators.templates import packed_linear as templates_packed
from kegen.search.operators.templates import pow2_block
from kegen.search.operators.templates.packed_linear import Operand, Packing

PACKED = (torch.uint8, torch.int8, torch.int16, torch.int32)
ATEN_MM = {torch.ops.aten.mm.default}  # a `kegen tune` group's matmul, unlifted
MAX_WEIGHT = 1 << 26  # elements: the weight is computed once at draft time
# a word's element order over its nibbles: in order, reversed, and AWQ's two interleaved orders
_ORDERS = {
    2: ((0, 1), (1, 0)),
    4: ((0, 1, 2, 3), (3, 2, 1, 0)),
    8: (
        (0, 1, 2, 3, 4, 5, 6, 7),
        (7, 6, 5, 4, 3, 2, 1, 0),
        (0, 2, 4, 6, 1, 3, 5, 7),
        (0, 4, 1, 5, 2, 6, 3, 7),
    ),
}
_PROBE_ROWS = 32  # rows the layout search decodes; the chosen layout is then checked on all of them


@dataclass
class _Fit:
    packing: Packing
    q_node: Node
    group: int
    scale: torch.Tensor  # (N, K / group), float64
    zero: torch.Tensor


def constant_nodes(t: Traced, leaves: Collection[Node] = ()) -> set[Node]:
    """The graph's nodes computed from the model's tensors and the inputs in `leaves` alone (tensors
    made in the forward count, as `torch.arange` shift tables, unless made at random)."""
    const: set[Node] = set()
    for n in t.gm.graph.nodes:
        if n.op == "get_attr" or n in leaves:
            const.add(n)
        elif n.op in ("call_function", "call_method", "call_module"):
            ins = n.all_input_nodes
            if all(a in const for a in ins) and (ins or not _random(n)):
                const.add(n)
    return const


def _random(n: Node) -> bool:
    """A node that makes tensors from nothing at random (torch.rand, randn, randint, randperm, ...)."""
    name = getattr(n.target, "__name__", str(n.target))
    return (
        n.op != "call_function" or "rand" in name or name in ("bernoulli", "normal", "multinomial", "empty")
    )


def evaluate(
    t: Traced, target: Node, const: set[Node], inputs: dict[Node, Any] | None = None
) -> dict[Node, Any]:
    """The values of the constant nodes up to and including `target`, computed on the traced model's
    tensors (and `inputs`, the values of the input leaves)."""
    env: dict[Node, Any] = dict(inputs or {})
    with torch.no_grad():
        for n in t.gm.graph.nodes:
            if n in const and n not in env:
                args = map_arg(n.args, lambda a: env[a])
                kwargs = map_arg(n.kwargs, lambda a: env[a])
                if n.op == "get_attr":
                    obj: Any = t.gm
                    for part in str(n.target).split("."):
                        obj = getattr(obj, part)
                    env[n] = obj
                elif n.op == "call_function":
                    env[n] = n.target(*args, **kwargs)  # type: ignore[operator]
                elif n.op == "call_method":
                    env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs)
                else:
                    env[n] = t.gm.get_submodule(str(n.target))(*args, **kwargs)
            if n is target:
                return env
    raise KeyError(target)


def _nibbles(words: torch.Tensor, per_word: int) -> torch.Tensor:
    """(..., per_word) unsigned 4-bit values of each word, nibble 0 the lowest."""
    bits = 8 * words.element_size()
    u = words.to(torch.int64) & ((1 << bits) - 1)
    return torch.stack([(u >> (4 * s)) & 15 for s in range(per_word)], -1)


def _layouts(p: torch.Tensor, n: int, k: int) -> Iterator[Packing]:
    """Each layout under which integer tensor `p` can hold an (n, k) 4-bit weight."""
    per_word = 2 * p.element_size()
    if p.dim() != 2 or p.numel() * per_word != n * k:
        return
    for along_n in (False, True):
        if (n if along_n else k) % per_word:
            continue
        for k_major in (False, True):
            if along_n:
                shape = (k, n // per_word) if k_major else (n // per_word, k)
            else:
                shape = (k // per_word, n) if k_major else (n, k // per_word)
            if tuple(p.shape) != shape:
                continue
            for signed in (False, True):
                for planes in (False, True):
                    for slots in _ORDERS[per_word]:
                        yield Packing(
                            per_word, planes, slots, signed, k_major, p.dtype == torch.uint8, along_n
                        )


def _decode(p: torch.Tensor, packing: Packing, n: int, k: int, first: int | None = None) -> torch.Tensor:
    """The (n, k) weight `p` holds under `packing`; only its first `first` rows (values along K) or
    columns (values along N), where given: enough to tell layouts apart."""
    # words as (the other axis, words along the packed axis)
    words = p.t() if packing.k_major != packing.along_n else p
    words = words[:first] if first else words
    nib = _nibbles(words, packing.per_word)
    if packing.signed:
        nib = nib - 16 * (nib >= 8).to(nib.dtype)
    sel = nib[..., list(packing.slots)]
    q = (sel.permute(0, 2, 1) if packing.planes else sel).reshape(len(words), n if packing.along_n else k)
    return q.t() if packing.along_n else q


def _fit(
    w: torch.Tensor, q: torch.Tensor, group: int, tol: float
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(s, z) per row and group with w == s * (q - z) within `tol`, or None."""
    rows, k = w.shape
    wg, qg = w.reshape(rows, k // group, group), q.reshape(rows, k // group, group).to(torch.float64)
    qm, wm = qg.mean(-1, keepdim=True), wg.mean(-1, keepdim=True)
    dq = qg - qm
    var = (dq * dq).sum(-1)
    if bool((var == 0).any()):
        return None
    s = (dq * (wg - wm)).sum(-1) / var
    c = wm.squeeze(-1) - s * qm.squeeze(-1)
    if float((wg - (s[..., None] * qg + c[..., None])).abs().max()) > tol or bool((s == 0).any()):
        return None
    return s, -c / s


def _groups(k: int) -> list[int]:
    """Group sizes tried, largest first: all of K, then powers of two from K / 2 down to 16."""
    sizes = [k]
    g = 1 << (k.bit_length() - 1)
    while g >= 16:
        if k % g == 0 and g != k:
            sizes.append(g)
        g //= 2
    return sizes


def _weight_fit(w: torch.Tensor, ints: list[tuple[Node, torch.Tensor]]) -> _Fit | None:
    """The packed tensor, layout, group and (s, z) that give `w` (N, K), or None."""
    n, k = w.shape
    w64 = w.to(torch.float64)
    tol = 8 * torch.finfo(w.dtype).eps * float(w64.abs().max()) + 1e-30
    smallest = _groups(k)[-1]
    for node, p in ints:
        for packing in _layouts(p, n, k):
            q = _decode(p, packing, n, k, min(k, 4 * smallest) if packing.along_n else _PROBE_ROWS)
            if _fit(w64[: q.shape[0], : q.shape[1]], q, smallest, tol) is None:
                continue
            full = _decode(p, packing, n, k)
            for group in _groups(k):
                got = _fit(w64, full, group, tol)
                if got is not None:
                    return _Fit(packing, node, group, got[0], got[1])
    return None


def _views(value: torch.Tensor, n: int, groups: int) -> Iterator[tuple[str, torch.Tensor]]:
    """A tensor as (n, groups) values: stored so (`n_major`), transposed (`g_major`), one value per
    output channel for every group (`row`), or one for all (`scalar`)."""
    if value.numel() == n * groups:
        yield "n_major", value.reshape(n, groups)
        if groups > 1:
            yield "g_major", value.reshape(groups, n).t()
    if value.numel() == n and groups > 1:
        yield "row", value.reshape(n, 1).expand(n, groups)
    if value.numel() == 1 and n * groups > 1:
        yield "scalar", value.reshape(1, 1).expand(n, groups)


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float) -> bool:
    return bool(torch.allclose(a, b.to(torch.float64), rtol=rtol, atol=rtol * float(a.abs().max()) * 1e-3))


def _match_scale(
    t: Traced, s: torch.Tensor, floats: list[tuple[Node, torch.Tensor]], rtol: float
) -> tuple[Operand, Node] | None:
    n, groups = s.shape
    for node, value in floats:
        for layout, view in _views(value, n, groups):
            for inverse in (False, True):
                v = 1.0 / view.to(torch.float64) if inverse else view
                if _close(s, v, rtol):
                    return Operand(_expr(t, node), layout, divide=inverse), node
    return None


def _near(z: torch.Tensor, v: torch.Tensor) -> bool:
    """Zero points agree: fitted from a rounded weight, each is off by up to ~eps * 16 of the weight's
    dtype (bf16: ~0.1), so the test is on the mean (an integer off by one, GPTQ's +1, differs by 1)."""
    d = (z - v.to(torch.float64)).abs()
    return float(d.mean()) < 0.05 and float(d.max()) < 0.5


def _simple(value: float) -> float:
    """A fitted constant zero point as the simple fraction it stands for (8, 7.5), else as fitted."""
    for denominator in (1, 2, 4, 8, 16):
        near = round(value * denominator) / denominator
        if abs(value - near) < (0.05 if denominator == 1 else 1e-4):
            return float(near)
    return value


def _match_zero(
    t: Traced, z: torch.Tensor, leaves: list[tuple[Node, torch.Tensor]]
) -> tuple[Operand | None, float, Node | None] | None:
    """(tensor, constant, node) giving z: a constant, a tensor of z's shape, or one packed along N."""
    n, groups = z.shape
    middle = float(z.median())
    if _near(z, torch.full_like(z, middle)):
        return None, _simple(middle), None
    for node, value in leaves:
        for layout, view in _views(value, n, groups):
            if _near(z, view):  # an integer tensor's zero is subtracted in the integers
                return Operand(_expr(t, node), layout, integer=not value.is_floating_point()), 0.0, node
    for node, value in leaves:  # GPTQ's qzeros: (groups, N / E) words, E values along N
        if value.dtype not in PACKED or value.dim() != 2:
            continue
        per = 2 * value.element_size()
        if tuple(value.shape) != (groups, n // per) or n % per:
            continue
        nib = _nibbles(value, per)  # (groups, N / E, E)
        for slots in _ORDERS[per]:
            decoded = nib[..., list(slots)].reshape(groups, n).t()
            for offset in (0, 1):
                if _near(z, decoded + offset):
                    return Operand(_expr(t, node), "g_major", per, slots, offset, integer=True), 0.0, node
    return None


def _expr(t: Traced, node: Node) -> str:
    return t.arg(node) if node.op == "placeholder" else reference_tensor(t.model, str(node.target))


def _input_values(t: Traced, leaves: set[Node]) -> dict[Node, Any] | None:
    """Real values of the input leaves (the problem's get_inputs, seeded), None where they do not
    match the traced inputs."""
    if not leaves:
        return {}
    torch.manual_seed(0)
    real = list(t.problem.get_inputs())
    if len(real) != len(t.ph):
        return None
    got: dict[Node, Any] = {}
    for node, value in zip(t.ph, real, strict=True):
        if node in leaves:
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape_of(node) or ()):
                return None
            got[node] = value
    return got


def draft_packed_linear(t: Traced) -> str | None:
    """A linear layer whose weight is unpacked from 4-bit integers in the forward (module docstring),
    with an elementwise epilogue that may read a bias, a residual or a scalar."""
    mms = [n for n in t.ops if n.target in MATMUL | LINEAR | ATEN_MM]
    if len(mms) != 1 or t.out is None or t.out is not t.ops[-1] or len(mms[0].args) < 2:
        return None
    mm = mms[0]
    w_node = mm.args[1]
    if not isinstance(w_node, Node) or not isinstance(mm.args[0], Node):
        return None
    # inputs that reach only the weight (a `kegen tune` group's packed buffers, or words passed per call)
    weight_inputs = {a for a in _ancestors(w_node, None) if a in t.ph} - set(_ancestors(mm.args[0], None))
    const = constant_nodes(t, weight_inputs)
    w_shape = shape_of(w_node)
    if w_node not in const or w_shape is None or len(w_shape) != 2:
        return None
    weight_nodes = _ancestors(w_node, const)
    attrs = [a for a in weight_nodes if a.op in ("get_attr", "placeholder")]
    # only integer leaves can hold packed values: nothing is computed for a float weight (a GEMM's B)
    if not any(a.op == "get_attr" or dtype_of(a) in PACKED for a in attrs):
        return None
    if w_shape[0] * w_shape[1] > MAX_WEIGHT:
        t.notes.append(f"a packed weight of {w_shape[0]} x {w_shape[1]}: larger than the drafter computes")
        return None
    inputs = _input_values(t, weight_inputs)
    if inputs is None:
        return None
    env = evaluate(t, w_node, const, inputs)
    values = {a: env[a] for a in attrs}
    ints = [
        (a, v)
        for a, v in values.items()
        if isinstance(v, torch.Tensor) and v.dtype in PACKED and v.dim() == 2
    ]
    w = env[w_node]
    if not ints or not isinstance(w, torch.Tensor) or not w.is_floating_point():
        return None
    w = w.detach() if mm.target in LINEAR else w.detach().t()  # (N, K)
    fit = _weight_fit(w, ints)
    if fit is None:
        t.notes.append(
            "a matmul on a weight computed from integer tensors that is no packed 4-bit layout kegen knows"
        )
        return None
    rtol = 64 * torch.finfo(w.dtype).eps
    floats = [(a, v) for a, v in values.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    scale = _match_scale(t, fit.scale, floats, rtol)
    tensors = [(a, v) for a, v in values.items() if isinstance(v, torch.Tensor) and a is not fit.q_node]
    zero = _match_zero(t, fit.zero, tensors)
    if scale is None or zero is None:
        t.notes.append("a packed 4-bit weight whose scales or zero points are not among the model's tensors")
        return None
    leaves = {fit.q_node, scale[1]} | ({zero[2]} if zero[2] is not None else set())
    bias = mm.kwargs.get("bias", mm.args[2] if len(mm.args) > 2 else None) if mm.target in LINEAR else None
    parts = linear_parts(
        t, mm, bias, [n for n in weight_nodes if n.op not in ("get_attr", "placeholder")], leaves
    )
    if parts is None:
        return None
    n_out, k = w.shape
    group = fit.group if fit.group < k else None
    p_expr = _expr(t, fit.q_node)
    reads = [p_expr, scale[0].expr, zero[0].expr if zero[0] else "", *(e for e, _ in parts.extras)]
    init, prelude = reference_reads(t, reads, "the packed weights and scales")
    bm, bn, bk = _first_tiles(parts.m, n_out, k, group, fit.packing.per_word)
    return templates_packed.packed_linear(
        t.args,
        parts.x,
        p_expr,
        fit.packing,
        n_out,
        group,
        scale[0],
        zero[0],
        zero[1],
        parts.dtype,
        parts.epilogue,
        parts.result,
        parts.extras,
        init,
        prelude,
        ieee=parts.ieee,
        blocks=(bm, bn, bk),
    )


def _first_tiles(m: int, n: int, k: int, group: int | None, per_word: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of the draft: unpacking costs SIMD work per weight tile and row
    block, so rows first (up to 128) and N halved down to 32 while fewer tiles than mtia's 64 PEs
    cover the output; K blocks of 128 (within a group; dots of at least 16 per element position).
    On the probe (256 x 2048 -> 2048 bf16): 64 x 128 x 64 ran 64.5 us, 128 x 64 x 128 38.2 us."""
    bm, bn = pow2_block(m, 16, 128), pow2_block(n, 16, 128)
    while -(-m // bm) * -(-n // bn) < 64 and bn > 32:
        bn //= 2
    bk = min(pow2_block(k, 16, max(128, 16 * per_word)), group or k)
    return bm, bn, bk


def _ancestors(node: Node, const: set[Node] | None) -> list[Node]:
    """`node` and the nodes it is computed from (those in `const`, where given)."""
    seen: dict[Node, None] = {}  # in the order found
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen or const is not None and n not in const:
            continue
        seen[n] = None
        stack.extend(n.all_input_nodes)
    return list(seen)
