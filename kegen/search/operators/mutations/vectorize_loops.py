"""Which loops of a jit kernel the loop vectorizer (`vectorize`) may rewrite, and their plan.

A loop `for V in range(LO, HI)` (or `tl.range`, step 1) qualifies when its body is straight-line
code of body-local assignments, reductions into loop-carried names and stores whose address is
affine in V, on scalars and 1-D blocks (`vectorize_analysis.Ranks`); it calls only `tl`
element-wise functions, loads, row reductions and casts; no store may alias a load or another
store of the body (`pointer_bases`); no accumulator is read besides its own reduction; and no
body-local value (nor V) is read after the loop. `loop_plans` gives the plans of the qualifying
loops and, for every other loop, why it does not qualify.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kegen.search.operators.mutations.base import MutationError, names_in
from kegen.search.operators.mutations.vectorize_analysis import (
    ELEMENTWISE,
    REDUCTIONS,
    SCALARS,
    UNKNOWN,
    Ranks,
    assignments,
    is_cast,
    pointer_bases,
    reads_before_write,
    tl_func,
)

_MINMAX = {"maximum": "max", "minimum": "min"}


@dataclass
class LoopPlan:
    """A qualifying loop: its variable, bounds, body-local names and reductions (acc -> kind)."""

    node: ast.For
    owner: list[ast.stmt]  # the statement list holding the loop
    var: str
    lo: ast.expr
    hi: ast.expr
    local: set[str] = field(default_factory=set)
    accs: dict[str, str] = field(default_factory=dict)  # name -> "sum" | "max" | "min"
    acc_rank: dict[str, int] = field(default_factory=dict)
    dep: set[str] = field(default_factory=set)  # the loop variable and the locals that depend on it
    stored: set[str] = field(default_factory=set)  # pointer parameters the body stores to
    loaded: set[str] = field(default_factory=set)  # pointer parameters the body loads from


def _loops(stmts: list[ast.stmt], outer: list[list[ast.stmt]]) -> list[tuple[ast.For, list[ast.stmt], list]]:
    """Every for loop with its statement list and the statements that run after it (per level)."""
    out: list[tuple[ast.For, list[ast.stmt], list]] = []
    for i, s in enumerate(stmts):
        after = [stmts[i + 1 :], *outer]
        if isinstance(s, ast.For):
            out.append((s, stmts, after))
            out += _loops(s.body, [s.body, *after])  # the next iteration runs the body again
        elif isinstance(s, ast.While):
            out += _loops(s.body, [s.body, *after])
        elif isinstance(s, ast.If):
            out += _loops(s.body, after) + _loops(s.orelse, after)
    return out


def _range_bounds(loop: ast.For, aliases: set[str]) -> tuple[ast.expr, ast.expr]:
    it = loop.iter
    if not isinstance(it, ast.Call) or it.keywords:
        raise MutationError("the loop does not iterate over a plain range(...)")
    plain = isinstance(it.func, ast.Name) and it.func.id == "range"
    if not (plain or tl_func(it, aliases) == "range"):
        raise MutationError("the loop does not iterate over range(...) or tl.range(...)")
    args = it.args
    if len(args) == 3 and not (isinstance(args[2], ast.Constant) and args[2].value == 1):
        raise MutationError("the loop's step is not 1")
    if len(args) == 1:
        return ast.Constant(0), args[0]
    if len(args) in (2, 3):
        return args[0], args[1]
    raise MutationError("range(...) with an unexpected number of arguments")


def reduction(s: ast.stmt, aliases: set[str]) -> tuple[str, str, ast.expr] | None:
    """(acc, kind, E) for `acc += E`, `acc -= E`, `acc = acc + E` / `E + acc` / `acc - E`,
    `acc = tl.maximum(acc, E)` / `(E, acc)` and `tl.minimum`; else None."""
    if (
        isinstance(s, ast.AugAssign)
        and isinstance(s.target, ast.Name)
        and isinstance(s.op, ast.Add | ast.Sub)
    ):
        return s.target.id, "sum" if isinstance(s.op, ast.Add) else "sub", s.value
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
        return None
    acc, v = s.targets[0].id, s.value

    def is_acc(e: ast.expr) -> bool:
        return isinstance(e, ast.Name) and e.id == acc

    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add | ast.Sub):
        if is_acc(v.left):
            return acc, "sum" if isinstance(v.op, ast.Add) else "sub", v.right
        if isinstance(v.op, ast.Add) and is_acc(v.right):
            return acc, "sum", v.left
    if isinstance(v, ast.Call) and tl_func(v, aliases) in _MINMAX and len(v.args) == 2 and not v.keywords:
        kind = _MINMAX[tl_func(v, aliases) or ""]
        if is_acc(v.args[0]):
            return acc, kind, v.args[1]
        if is_acc(v.args[1]):
            return acc, kind, v.args[0]
    return None


def store_call(s: ast.stmt, aliases: set[str]) -> ast.Call | None:
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and tl_func(s.value, aliases) == "store":
        return s.value
    return None


def pointer(call: ast.Call) -> ast.expr:
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == "pointer":
            return kw.value
    raise MutationError(f"no pointer in {ast.unparse(call)}")


def _check_calls(node: ast.AST, aliases: set[str]) -> None:
    """Only tl element-wise functions, loads, row reductions, casts and float()/int() constants."""
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript | ast.Lambda | ast.NamedExpr | ast.Starred | ast.comprehension):
            raise MutationError(
                f"`{ast.unparse(n)}` in the loop body (only scalars and 1-D blocks are vectorized)"
            )
        if not isinstance(n, ast.Call):
            continue
        name = tl_func(n, aliases)
        ok = (
            is_cast(n, aliases)
            or (isinstance(n.func, ast.Name) and n.func.id in ("float", "int"))
            or name in ELEMENTWISE | REDUCTIONS | SCALARS | {"arange", "load", "store"}
        )
        if not ok:
            raise MutationError(
                f"the loop body calls `{ast.unparse(n.func)}`, which the rewrite cannot prove safe"
            )


def _affine_in(e: ast.expr, dep: set[str], affine: set[str]) -> bool:
    """Whether `e` depends on the loop variable only through +, -, * (and casts) of affine names."""
    if isinstance(e, ast.Name):
        return e.id not in dep or e.id in affine
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add | ast.Sub | ast.Mult):
        return _affine_in(e.left, dep, affine) and _affine_in(e.right, dep, affine)
    if isinstance(e, ast.UnaryOp):
        return _affine_in(e.operand, dep, affine)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "to":
        return _affine_in(e.func.value, dep, affine)
    return not (names_in(e) & dep)


def _analyse(
    fn: ast.FunctionDef, loop: ast.For, owner: list[ast.stmt], after: list, ranks: Ranks, aliases: set[str]
) -> LoopPlan:
    """The loop's plan, or MutationError naming why it does not qualify."""
    if not isinstance(loop.target, ast.Name) or loop.orelse:
        raise MutationError("the loop variable is not a plain name (or the loop has an else)")
    lo, hi = _range_bounds(loop, aliases)
    plan = LoopPlan(loop, owner, loop.target.id, lo, hi, dep={loop.target.id})
    params = {a.arg for a in fn.args.args}
    env = assignments(fn)
    local_rank: dict[str, int] = {plan.var: 0}
    affine: set[str] = {plan.var}
    loads: list[ast.Call] = []
    stores: list[ast.Call] = []
    acc_reads: dict[str, int] = {}
    for s in loop.body:
        _check_calls(s, aliases)
        red = reduction(s, aliases)
        store = store_call(s, aliases)
        if red is not None and red[0] not in plan.local:
            acc, kind, e = red
            kind = "sum" if kind == "sub" else kind
            if plan.accs.setdefault(acc, kind) != kind:
                raise MutationError(f"`{acc}` is reduced two different ways in one loop")
            acc_reads[acc] = acc_reads.get(acc, 0) + (0 if isinstance(s, ast.AugAssign) else 1)
            loads += _load_calls(e, aliases)
        elif store is not None:
            for arg in [*store.args, *(k.value for k in store.keywords)]:
                if _rank_in_body(arg, ranks, local_rank) is None:
                    raise MutationError(
                        f"cannot tell the shape of `{ast.unparse(arg)}` (only scalars and 1-D blocks)"
                    )
            stores.append(store)
            loads += _load_calls(store, aliases)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            if name in plan.accs or (
                name not in plan.local
                and (name in names_in(s.value) or _reads_name(loop.body[: loop.body.index(s)], name))
            ):
                raise MutationError(f"`{name}` is carried from one iteration to the next (not a reduction)")
            r = _rank_in_body(s.value, ranks, local_rank)
            if r is None:
                raise MutationError(
                    f"cannot tell the shape of `{ast.unparse(s.value)}` (only scalars and 1-D blocks)"
                )
            plan.local.add(name)
            local_rank[name] = r
            if names_in(s.value) & plan.dep:
                plan.dep.add(name)
                if _affine_in(s.value, plan.dep - {name}, affine):
                    affine.add(name)
            loads += _load_calls(s.value, aliases)
        else:
            raise MutationError(
                f"`{ast.unparse(s).splitlines()[0]}` in the loop body is not an assignment, "
                f"reduction or store"
            )
    if not plan.accs and not stores:
        raise MutationError("the loop reduces and stores nothing")
    if plan.var in _assigned(loop.body):
        raise MutationError("the loop variable is reassigned in the body")
    if _assigned(loop.body) & names_in(hi):
        raise MutationError("the loop bound changes in the body")
    _check_accs(plan, loop, ranks, local_rank, acc_reads)
    for name in plan.local | {plan.var}:
        if any(reads_before_write(stmts, name) for stmts in after):
            raise MutationError(f"`{name}` is read after the loop; vectorizing would change its value")
    _check_aliasing(plan, loads, stores, params, env, affine)
    return plan


def _load_calls(node: ast.AST, aliases: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and tl_func(n, aliases) == "load"]


def _reads_name(stmts: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for s in stmts for n in ast.walk(s))


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
    return out


def _rank_in_body(e: ast.expr, ranks: Ranks, local_rank: dict[str, int]) -> int | None:
    saved = dict(ranks.env)
    ranks.env.update(local_rank)
    try:
        return ranks.of(e)
    finally:
        ranks.env = saved


def _check_accs(
    plan: LoopPlan, loop: ast.For, ranks: Ranks, local_rank: dict[str, int], acc_reads: dict[str, int]
) -> None:
    """Each accumulator is read only by its own reductions; its shape and E's are known."""
    for acc in plan.accs:
        reads = sum(
            1
            for n in ast.walk(loop)
            if isinstance(n, ast.Name) and n.id == acc and isinstance(n.ctx, ast.Load)
        )
        if reads != acc_reads.get(acc, 0):
            raise MutationError(f"`{acc}` is read inside the loop besides its reduction")
        rank = ranks.env.get(acc)
        if rank is None:
            raise MutationError(f"cannot tell the shape of the accumulator `{acc}`")
        plan.acc_rank[acc] = rank
    for s in loop.body:
        red = reduction(s, ranks.aliases)
        if red is not None and red[0] in plan.accs:
            r = _rank_in_body(red[2], ranks, local_rank)
            if r is None or r > plan.acc_rank[red[0]]:
                raise MutationError(
                    f"cannot tell the shape of `{ast.unparse(red[2])}` reduced into `{red[0]}`"
                )


def _check_aliasing(
    plan: LoopPlan,
    loads: list[ast.Call],
    stores: list[ast.Call],
    params: set[str],
    env: dict[str, list[ast.expr]],
    affine: set[str],
) -> None:
    """Stores write distinct rows (affine address) of bases no load or other store of the body uses."""
    load_bases: set[str] = set()
    for c in loads:
        load_bases |= pointer_bases(pointer(c), params, env)
        rest = [*c.args[1:], *(k.value for k in c.keywords if k.arg != "pointer")]
        if not (names_in(pointer(c)) & plan.dep) and any(names_in(a) & plan.dep for a in rest):
            raise MutationError(
                f"`{ast.unparse(c)}`: the mask depends on `{plan.var}` but the address does not"
            )
    seen: set[str] = set()
    for c in stores:
        ptr = pointer(c)
        if not (names_in(ptr) & plan.dep) or not _affine_in(ptr, plan.dep, affine):
            raise MutationError(f"the store address `{ast.unparse(ptr)}` is not affine in `{plan.var}`")
        bases = pointer_bases(ptr, params, env)
        if not bases or UNKNOWN in bases or UNKNOWN in load_bases and stores:
            raise MutationError(f"cannot tell which buffers `{ast.unparse(ptr)}` and the loads address")
        if bases & (load_bases | seen):
            raise MutationError(f"the store to `{ast.unparse(ptr)}` may alias a load or store of the loop")
        seen |= bases
    plan.stored, plan.loaded = seen, load_bases


def loop_plans(fn: ast.FunctionDef, aliases: set[str]) -> tuple[list[LoopPlan], list[str]]:
    """The kernel's qualifying loops, and why each other loop does not qualify."""
    ranks = Ranks(fn, aliases)
    plans: list[LoopPlan] = []
    reasons: list[str] = []
    for loop, owner, after in _loops(fn.body, []):
        try:
            plans.append(_analyse(fn, loop, owner, after, ranks, aliases))
        except MutationError as e:
            reasons.append(f"{fn.name} line {loop.lineno}: {e}")
    return plans, reasons
