"""Reading a GEMM-class seed (for the GPU rewrites): which kernel, which operands, which epilogue.

A GEMM-class kernel here is a `@triton.jit` function with one K loop that accumulates
`tl.dot(a, b)` of two `tl.load`s addressed inline (`base + rows[:, None] * s_m + ks[None, :] * s_k`),
then stores with masks on the row and column indices. What the GPU templates keep verbatim: the
kernel's parameters (so every launch passes the same arguments), the statements before the loop
that only read program ids the rewrite re-binds (`a_base = a_ptr + batch * stride_ab`), and every
statement after the loop (bias, activation, store: the epilogue stays fused). Anything else
(pointer-increment loops, a second dot, a transposed A) is refused with a reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kegen.search.operators.mutations.base import MutationError, jit_functions


@dataclass(frozen=True)
class Operand:
    """One dot operand's address: `base + outer[...] * s_outer + k[...] * s_k` (strides as source)."""

    base: str
    s_outer: str  # stride along M (for A) or N (for B)
    s_k: str


@dataclass(frozen=True)
class GemmSeed:
    """What a GEMM-class seed kernel computes, as source fragments the templates re-assemble."""

    kernel: ast.FunctionDef
    params: tuple[str, ...]
    constexprs: frozenset[str]
    acc: str
    rows: str  # the name of the row (M) index vector
    cols: str  # the name of the column (N) index vector
    m: str  # sizes as source (parameter names)
    n: str
    k: str
    block_m: str  # constexpr parameter names of the tile sizes
    block_n: str
    block_k: str
    a: Operand
    b: Operand
    batch_axes: dict[int, str]  # program-id axis -> the name the seed binds it to (batch indices)
    prelude: tuple[str, ...]  # pre-loop statements kept (they read only batch ids and parameters)
    epilogue: tuple[str, ...]  # every statement after the K loop


def _is_call(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def _terms(e: ast.expr) -> list[ast.expr]:
    """The summands of an addition chain."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _terms(e.left) + _terms(e.right)
    return [e]


def _subscript_base(e: ast.expr) -> tuple[str, str] | None:
    """(index name, 'row'|'col') of `name[:, None]` / `name[None, :]`, else None."""
    if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)):
        return None
    sl = e.slice
    if not (isinstance(sl, ast.Tuple) and len(sl.elts) == 2):
        return None
    first, second = sl.elts
    if isinstance(first, ast.Slice) and isinstance(second, ast.Constant) and second.value is None:
        return e.value.id, "row"
    if isinstance(second, ast.Slice) and isinstance(first, ast.Constant) and first.value is None:
        return e.value.id, "col"
    return None


def _split_term(t: ast.expr) -> tuple[tuple[str, str], str] | None:
    """((index, orientation), stride source) of `idx[..] * stride`, `stride * idx[..]` or `idx[..]`."""
    got = _subscript_base(t)
    if got is not None:
        return got, "1"
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult):
        for idx, stride in ((t.left, t.right), (t.right, t.left)):
            got = _subscript_base(idx)
            if got is not None:
                return got, ast.unparse(stride)
    return None


def _operand(load: ast.Call, outer: str, outer_side: str) -> Operand:
    """Split a dot operand's load address into base, outer stride and K stride."""
    if not load.args:
        raise MutationError("a dot operand's load has no address")
    base: list[str] = []
    s_outer = s_k = None
    for t in _terms(load.args[0]):
        split = _split_term(t)
        if split is None:
            base.append(ast.unparse(t))
            continue
        (idx, side), stride = split
        if idx == outer:
            if side != outer_side:
                raise MutationError(f"operand indexed by {outer} along the other axis (a transposed tile)")
            s_outer = stride
        else:
            s_k = stride
    if not base or s_outer is None or s_k is None:
        raise MutationError("a dot operand's address is not base + rows * stride + ks * stride")
    return Operand(" + ".join(base), s_outer, s_k)


def _dot_in(loop: ast.For) -> tuple[str, str, str]:
    """(acc, a, b) of the loop's one `acc += tl.dot(a, b)` / `acc = tl.dot(a, b, acc)`."""
    found = []
    target: ast.expr
    for n in ast.walk(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and _is_call(n.value, "dot"):
            call = n.value
            target = n.target
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and _is_call(n.value, "dot"):
            call, target = n.value, n.targets[0]
        else:
            continue
        assert isinstance(call, ast.Call)
        if (
            isinstance(target, ast.Name)
            and len(call.args) >= 2
            and all(isinstance(a, ast.Name) for a in call.args[:2])
        ):
            found.append((target.id, ast.unparse(call.args[0]), ast.unparse(call.args[1])))
    if len(found) != 1:
        raise MutationError(f"{len(found)} accumulating dots in the K loop (want one)")
    return found[0]


def _loads(loop: ast.For) -> dict[str, ast.Call]:
    out = {}
    for n in ast.walk(loop):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            v = n.value
            while _is_call(v, "to"):
                assert isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                v = v.func.value
            if _is_call(v, "load"):
                assert isinstance(v, ast.Call)
                out[n.targets[0].id] = v
    return out


def _converted(loop: ast.For, name: str, load: ast.Call) -> bool:
    """Whether `name = tl.load(...).to(<another tile's dtype>)`: a conversion to a dtype named by
    another value (`.to(a.dtype)`), not a fixed one the seed's own loads already have."""
    for n in ast.walk(loop):
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == [name]:
            v = n.value
            while _is_call(v, "to") and v is not load:
                assert isinstance(v, ast.Call)
                if any(isinstance(a, ast.Attribute) and a.attr == "dtype" for a in v.args):
                    return True
                assert isinstance(v.func, ast.Attribute)
                v = v.func.value
    return False


def _bound(mask: ast.expr | None, idx: str) -> str | None:
    """X of a comparison `idx[...] < X` inside a store mask."""
    for n in ast.walk(mask) if mask is not None else ():
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Lt):
            got = _subscript_base(n.left)
            if got is not None and got[0] == idx:
                return ast.unparse(n.comparators[0])
    return None


def _arange_block(fn: ast.FunctionDef, name: str) -> str:
    """BLOCK of `name = ... + tl.arange(0, BLOCK)`."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == [name]:
            for c in ast.walk(n.value):
                if _is_call(c, "arange") and isinstance(c, ast.Call) and len(c.args) == 2:
                    return ast.unparse(c.args[1])
    raise MutationError(f"{name} is not a tl.arange tile of a block size")


def _program_ids(fn: ast.FunctionDef) -> dict[str, int]:
    out = {}
    for n in fn.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            if _is_call(n.value, "program_id") and isinstance(n.value, ast.Call):
                arg = n.value.args[0] if n.value.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                    out[n.targets[0].id] = arg.value
    return out


def _reads(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _tile_pids(fn: ast.FunctionDef, rows: str, cols: str) -> set[str]:
    """Names the row/column tiles are derived from, transitively (pid_m, pid_n, pid, num_pid_n...)."""
    assigns = {
        n.targets[0].id: n.value
        for n in fn.body
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    }
    seen: set[str] = set()
    todo = [rows, cols]
    while todo:
        name = todo.pop()
        if name in seen or name not in assigns:
            continue
        seen.add(name)
        todo += [x.id for x in ast.walk(assigns[name]) if isinstance(x, ast.Name)]
    return seen


def _k_loop(fn: ast.FunctionDef) -> tuple[int, ast.For]:
    loops = [
        (i, s)
        for i, s in enumerate(fn.body)
        if isinstance(s, ast.For) and any(_is_call(n, "dot") for n in ast.walk(s))
    ]
    if len(loops) != 1:
        raise MutationError(f"{len(loops)} top-level loops with a dot (want one K loop)")
    return loops[0]


def _k_bounds(loop: ast.For) -> tuple[str, str]:
    it = loop.iter
    if not (isinstance(it, ast.Call) and ast.unparse(it.func) in ("range", "tl.range") and len(it.args) == 3):
        raise MutationError("the K loop is not range(0, K, BLOCK_K)")
    return ast.unparse(it.args[1]), ast.unparse(it.args[2])


def match_gemm(source: str) -> GemmSeed:
    """The GEMM-class kernel of a candidate module; MutationError (with the reason) when none is."""
    tree = ast.parse(source)
    errors = []
    for fn in jit_functions(tree):
        try:
            return _match_kernel(fn)
        except MutationError as e:
            errors.append(f"{fn.name}: {e}")
    raise MutationError("no GEMM-class kernel: " + ("; ".join(errors) or "no @triton.jit function"))


def _match_kernel(fn: ast.FunctionDef) -> GemmSeed:
    li, loop = _k_loop(fn)
    acc, a_name, b_name = _dot_in(loop)
    loads = _loads(loop)
    if a_name not in loads or b_name not in loads:
        raise MutationError("the dot's operands are not loaded in the K loop")
    if _converted(loop, a_name, loads[a_name]) or _converted(loop, b_name, loads[b_name]):
        # the rewrites load each operand as stored: a quantized weight's integers would meet the
        # activations' floats in the dot (a compile error on every rewrite)
        raise MutationError("a dot operand is converted to another dtype after its load")
    epilogue = fn.body[li + 1 :]
    stores = [n for s in epilogue for n in ast.walk(s) if _is_call(n, "store")]
    if len(stores) != 1:
        raise MutationError("the epilogue does not end in one tl.store")
    store = stores[0]
    assert isinstance(store, ast.Call)
    mask = next(
        (kw.value for kw in store.keywords if kw.arg == "mask"),
        store.args[2] if len(store.args) > 2 else None,
    )
    rows = cols = None
    for n in ast.walk(mask) if mask is not None else ():
        got = _subscript_base(n) if isinstance(n, ast.expr) else None
        if got is not None:
            rows, cols = (got[0], cols) if got[1] == "row" else (rows, got[0])
    if rows is None or cols is None:
        raise MutationError("the store's mask does not bound rows[:, None] and cols[None, :]")
    m, n_ = _bound(mask, rows), _bound(mask, cols)
    k, block_k = _k_bounds(loop)
    if m is None or n_ is None:
        raise MutationError("the store's mask names no M / N bound")
    pids = _program_ids(fn)
    tile_names = _tile_pids(fn, rows, cols)
    batch_axes = {axis: name for name, axis in pids.items() if name not in tile_names}
    prelude = []
    own = tile_names | {acc, *pids, "num_pid_m", "num_pid_n"}
    for s in fn.body[:li]:
        w = _writes(s)
        if w & own or w & {rows, cols}:
            continue
        if _reads(s) & (tile_names - set(batch_axes.values())):
            raise MutationError(f"a pre-loop statement depends on the tile ids: {ast.unparse(s)}")
        prelude.append(ast.unparse(s))
    args = fn.args.posonlyargs + fn.args.args
    constexprs = frozenset(
        a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
    )
    return GemmSeed(
        kernel=fn,
        params=tuple(a.arg for a in args),
        constexprs=constexprs,
        acc=acc,
        rows=rows,
        cols=cols,
        m=m,
        n=n_,
        k=k,
        block_m=_arange_block(fn, rows),
        block_n=_arange_block(fn, cols),
        block_k=block_k,
        a=_operand(loads[a_name], rows, "row"),
        b=_operand(loads[b_name], cols, "col"),
        batch_axes=batch_axes,
        prelude=tuple(prelude),
        epilogue=tuple(ast.unparse(s) for s in epilogue),
    )
