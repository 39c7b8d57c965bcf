"""The row-loop pipeline (the `row_pipeline` move of norms.py): a unit-step row loop rewritten so
the next row's loads are issued at the top of each iteration and each row's stores are deferred to
the next one, keeping the DMA queue ahead of the arithmetic (see norms.py for the measurements)."""

from __future__ import annotations

import ast
import copy

from kegen.search.operators.mutations.base import MutationError, jit_functions, names_in


def stored_names(st: ast.stmt) -> set[str]:
    """Names a statement assigns."""
    return {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


_RANGES = ("range", "tl.range", "triton.language.range")
_EFFECTS = ("tl.atomic_", "tl.debug_barrier", "tl.device_print", "tl.device_assert")


def row_loop_var(st: ast.stmt) -> str | None:
    """The variable of `for V in range(lo, hi[, step])` / `tl.range(lo, hi[, step], ...)` with a
    positive step (1, a positive literal, or a name: a block of rows such as R), else None."""
    if not isinstance(st, ast.For) or st.orelse or not isinstance(st.target, ast.Name):
        return None
    it = st.iter
    if not isinstance(it, ast.Call) or ast.unparse(it.func) not in _RANGES or len(it.args) not in (2, 3):
        return None
    if any(k.arg == "step" for k in it.keywords) or (ast.unparse(it.func) == "range" and it.keywords):
        return None
    if len(it.args) == 3:
        step = it.args[2]
        if not (isinstance(step, ast.Name) or (isinstance(step, ast.Constant) and type(step.value) is int)):
            return None
        if isinstance(step, ast.Constant) and step.value <= 0:  # type: ignore[operator]
            return None
    return st.target.id


def loop_step(loop: ast.For) -> str:
    it = loop.iter
    assert isinstance(it, ast.Call)
    return ast.unparse(it.args[2]) if len(it.args) == 3 else "1"


def assign_target(st: ast.AST) -> str | None:
    """The target of `NAME = value`, or None."""
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        return st.targets[0].id
    return None


def call_name(n: ast.AST) -> str:
    return ast.unparse(n.func) if isinstance(n, ast.Call) else ""


def call_arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


class _Subst(ast.NodeTransformer):
    """Replaces names by expressions (deep copies)."""

    def __init__(self, env: dict[str, ast.expr]) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.env:
            return copy.deepcopy(self.env[node.id])
        return node


def _subst(e: ast.expr, env: dict[str, ast.expr]) -> ast.expr:
    return _Subst(env).visit(copy.deepcopy(e))  # type: ignore[no-any-return]


def parse_expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _and(mask: ast.expr | None, cond: str) -> ast.expr:
    return (
        parse_expr(cond)
        if mask is None
        else ast.BinOp(left=copy.deepcopy(mask), op=ast.BitAnd(), right=parse_expr(cond))
    )


class _Access:
    """A row-dependent tl.load / tl.store of the loop body, its operands with body-local names inlined."""

    def __init__(self, call: ast.Call, is_load: bool, inline: dict[str, ast.expr]) -> None:
        self.call, self.is_load = call, is_load
        allowed = {"pointer", "mask", "other", "value", "cache_modifier", "eviction_policy", "volatile"}
        if any(k.arg not in allowed for k in call.keywords):
            raise MutationError(f"`{ast.unparse(call)}` has keywords the pipelined loop does not carry")
        if len(call.args) > 3:
            raise MutationError(f"`{ast.unparse(call)}` passes positional options")
        self.ptr = _subst(call_arg(call, 0, "pointer"), inline)  # type: ignore[arg-type]
        m = call_arg(call, 1 if is_load else 2, "mask")
        self.mask = None if m is None else _subst(m, inline)
        o = call_arg(call, 2, "other") if is_load else None
        self.other = None if o is None else _subst(o, inline)
        self.value = None if is_load else call_arg(call, 1, "value")
        self.extra = [k for k in call.keywords if k.arg not in ("pointer", "mask", "other", "value")]
        for part in (self.ptr, self.mask, self.other):
            if part is not None and any(call_name(x) in ("tl.load", "tl.store") for x in ast.walk(part)):
                raise MutationError(f"`{ast.unparse(call)}`: its address depends on another load")

    def at(self, row: str, index: str, cond: str, value: ast.expr | None = None) -> ast.Call:
        """The access at row `index` (an expression of the row), masked further by `cond`."""
        env = {row: parse_expr(f"({index})")}
        kws = [
            ast.keyword(arg="mask", value=_and(None if self.mask is None else _subst(self.mask, env), cond))
        ]
        if self.other is not None:
            kws.append(ast.keyword(arg="other", value=_subst(self.other, env)))
        args = [_subst(self.ptr, env)] + ([value] if value is not None else [])
        func = parse_expr("tl.load" if self.is_load else "tl.store")
        return ast.Call(func=func, args=args, keywords=kws + copy.deepcopy(self.extra))


def pipelined(body: list[ast.stmt]) -> bool:
    """Whether the body already ends by rotating a prefetched load (`cur = nxt`)."""
    last = body[-1]
    if not (isinstance(last, ast.Assign) and isinstance(last.value, ast.Name) and len(last.targets) == 1):
        return False
    src = last.value.id
    return any(
        isinstance(st, ast.Assign)
        and src in stored_names(st)
        and any(call_name(n) == "tl.load" for n in ast.walk(st.value))
        for st in body[:-1]
    )


def _plan(loop: ast.For) -> tuple[str, list[_Access], list[tuple[int, _Access]]]:
    """(row, the row-dependent loads, (statement index, store) of each row-dependent store) of a
    row loop the pipelined form can take; MutationError otherwise."""
    row = row_loop_var(loop)
    if row is None:
        raise MutationError("not a `for row in range(lo, hi[, step])` loop")
    body = loop.body
    if any(
        isinstance(n, ast.For | ast.While | ast.If | ast.Break | ast.Continue | ast.Return | ast.With)
        for st in body
        for n in ast.walk(st)
    ):
        raise MutationError("the row loop has control flow inside; only straight-line bodies are pipelined")
    if any(call_name(n).startswith(_EFFECTS) for st in body for n in ast.walk(st)):
        raise MutationError("the row loop has atomics or debug calls")
    if pipelined(body):
        raise MutationError("the row loop is pipelined already")
    counts: dict[str, int] = {}
    for st in body:
        for name in stored_names(st):
            counts[name] = counts.get(name, 0) + 1
    if row in counts:
        raise MutationError(f"the loop variable {row} is assigned in the body")
    inline: dict[str, ast.expr] = {}
    loads: list[_Access] = []
    others: list[_Access] = []  # loads that do not follow the row (left where they are)
    stores: list[tuple[int, _Access]] = []
    for i, st in enumerate(body):
        calls = [n for n in ast.walk(st) if call_name(n) in ("tl.load", "tl.store")]
        for call in calls:
            acc = _Access(call, call_name(call) == "tl.load", inline)  # type: ignore[arg-type]
            parts = [acc.ptr, acc.mask, acc.other]
            used = set().union(*(names_in(p) for p in parts if p is not None))
            if row not in used:
                if not acc.is_load:
                    raise MutationError(f"`{ast.unparse(call)}` does not store by the row: not deferred")
                others.append(acc)
                continue
            local = used & set(counts)
            if local:
                raise MutationError(f"`{ast.unparse(call)}` depends on {sorted(local)}, computed in the loop")
            if acc.is_load:
                loads.append(acc)
            elif isinstance(st, ast.Expr) and st.value is call:
                stores.append((i, acc))
            else:
                raise MutationError(f"`{ast.unparse(call)}` is not a statement of its own")
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and counts[st.targets[0].id] == 1
            and not calls
        ):
            inline[st.targets[0].id] = _subst(st.value, inline)
    if not loads:
        raise MutationError(f"no load in the row loop depends on {row}")
    written = {_root(acc.ptr) for _, acc in stores}
    for acc in loads + others:
        if stores and (_root(acc.ptr) is None or _root(acc.ptr) in written):
            raise MutationError(f"`{ast.unparse(acc.call)}` may read what the loop stores")
    return row, loads, stores


def _root(ptr: ast.expr) -> str | None:
    """The base pointer of an address `base + ...` (the leftmost operand of its sums), if a name."""
    while isinstance(ptr, ast.BinOp) and isinstance(ptr.op, ast.Add | ast.Sub):
        ptr = ptr.left
    return ptr.id if isinstance(ptr, ast.Name) else None


def _fresh(taken: set[str], name: str) -> str:
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}{k}"
    taken.add(out)
    return out


def _target_of(body: list[ast.stmt], call: ast.Call) -> str | None:
    """The name `call`'s rows are assigned to (`x = tl.load(...)`, `x = tl.load(...).to(...)`), if any."""
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            v = st.value
            if v is call or (
                isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.value is call
            ):
                return st.targets[0].id
    return None


def _as_stored(value: ast.expr, ptr: ast.expr) -> ast.expr:
    """`value` in the pointer's element type (the held output's type), unless it is cast already to
    `P.dtype.element_ty` of a pointer P the address is computed from."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "to"
        and len(value.args) == 1
        and isinstance(value.args[0], ast.Attribute)
        and ast.unparse(value.args[0]).endswith(".dtype.element_ty")
        and ast.unparse(value.args[0]).removesuffix(".dtype.element_ty") in names_in(ptr)
    ):
        return value
    return parse_expr(f"({ast.unparse(value)}).to(({ast.unparse(ptr)}).dtype.element_ty)")


def pipeline_loop(fn: ast.FunctionDef, loop: ast.For, taken: set[str]) -> list[ast.stmt]:
    """The statements that replace `loop` (a top-level row loop of `fn`) in its pipelined form (see
    the module doc); MutationError when the loop does not qualify."""
    row, loads, stores = _plan(loop)
    taken |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    it = loop.iter
    assert isinstance(it, ast.Call)
    pre: list[ast.stmt] = []
    bounds = []
    step = loop_step(loop)
    for arg, name in zip(it.args[:2], ("lo", "hi"), strict=True):
        if isinstance(arg, ast.Name | ast.Constant):
            bounds.append(ast.unparse(arg))
            continue
        var = _fresh(taken, f"{row}_{name}")
        pre.append(ast.Assign(targets=[ast.Name(var, ast.Store())], value=arg))
        bounds.append(var)
    lo, hi = bounds
    it.args = [parse_expr(lo), parse_expr(hi), *it.args[2:]]
    last = f"{hi} - 1" if step == "1" else f"{lo} + ({hi} - {lo} - 1) // {step} * {step}"  # the last row
    top: list[ast.stmt] = []
    rotate: list[ast.stmt] = []
    replace: dict[int, str] = {}
    holders, prefetch = pre, list[ast.stmt]()  # held outputs defined first: yielded first (below)
    for acc in loads:
        base = _target_of(loop.body, acc.call) or "rows"
        cur, nxt = _fresh(taken, f"{base}_cur"), _fresh(taken, f"{base}_next")
        prefetch.append(
            ast.Assign(targets=[ast.Name(cur, ast.Store())], value=acc.at(row, lo, f"{lo} < {hi}"))
        )
        top.append(
            ast.Assign(
                targets=[ast.Name(nxt, ast.Store())],
                value=acc.at(row, f"{row} + {step}", f"{row} + {step} < {hi}"),
            )
        )
        rotate.append(ast.Assign(targets=[ast.Name(cur, ast.Store())], value=ast.Name(nxt, ast.Load())))
        replace[id(acc.call)] = cur
    post: list[ast.stmt] = []
    deferred: dict[int, ast.stmt] = {}
    for i, acc in stores:
        held = _fresh(taken, "out_prev")
        ptr0 = ast.unparse(_subst(acc.ptr, {row: parse_expr(f"({lo})")}))
        holders.append(
            ast.parse(f"{held} = tl.zeros(({ptr0}).shape, dtype=({ptr0}).dtype.element_ty)").body[0]
        )
        top.append(ast.Expr(acc.at(row, f"{row} - {step}", f"{row} > {lo}", ast.Name(held, ast.Load()))))
        value = _as_stored(acc.value, acc.ptr)  # type: ignore[arg-type]
        deferred[i] = ast.Assign(targets=[ast.Name(held, ast.Store())], value=value)
        post.append(ast.Expr(acc.at(row, last, f"{hi} > {lo}", ast.Name(held, ast.Load()))))

    class _Use(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if id(node) in replace:
                return ast.Name(replace[id(node)], ast.Load())
            self.generic_visit(node)
            return node

    body = [deferred.get(i, st) for i, st in enumerate(loop.body)]
    body = [_Use().visit(st) for st in body]
    loop.body = top + body + rotate
    # Held outputs are defined before the prefetched rows (Triton carries loop values in that order).
    # The mtia lowering once copied yielded values into their slots one after the other, so an output
    # computed in place in the dead prefetched row's slot was overwritten first; it now updates the
    # slots as one parallel copy (lowering.codegen.slots.store_slots, D34), and the order stays.
    return [*holders, *prefetch, loop, *post]


def _unit_row_loop(st: ast.stmt) -> bool:
    return isinstance(st, ast.For) and row_loop_var(st) is not None and loop_step(st) == "1"


def pipeline(source: str, kernel: str) -> str:
    """`source` with every top-level unit-step row loop of `kernel` that qualifies in its pipelined
    form. (`pipeline_loop` takes a loop over row blocks too, but on the vectorized jagged softmax the
    staged loops below measured better: 90.3% of the roofline against 81.5%.)"""
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    if not fns:
        raise MutationError(f"no @triton.jit kernel named {kernel}")
    fn, done, taken = fns[0], 0, set[str]()
    body: list[ast.stmt] = []
    for st in fn.body:
        if isinstance(st, ast.For) and _unit_row_loop(st):
            try:
                body += pipeline_loop(fn, st, taken)
                done += 1
                continue
            except MutationError:
                pass
        body.append(st)
    if not done:
        raise MutationError(f"{kernel} has no row loop the pipelined form takes")
    fn.body = body
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def row_loops_pipelinable(fn: ast.FunctionDef) -> bool:
    for st in fn.body:
        if isinstance(st, ast.For) and _unit_row_loop(st):
            try:
                _plan(st)
                return True
            except MutationError:
                continue
    return False
