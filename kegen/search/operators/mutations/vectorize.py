"""Strip-mine and vectorize scalar-step loops: R rows per step as one 2-D block, reduced along axis 0.

Gather and jagged kernels often walk a bag or segment one row per step:

    for i in range(start, end):
        row = tl.load(idx_ptr + i)
        acc += tl.load(w_ptr + row * dim + cols, mask=cols < dim, other=0.0)

(a scalar load, one small DMA, a wait, per step: latency-bound). A kernel engineer takes R rows
per step instead:

    for i_blk in range(start, end, R):
        i = i_blk + tl.arange(0, R)[:, None]
        i_mask = i < end
        row = tl.load(idx_ptr + i, mask=i_mask, other=0)
        acc += tl.sum(tl.where(i_mask, tl.load(w_ptr + row * dim + cols, mask=(cols < dim) & i_mask,
                                                other=0.0), 0), axis=0)

The loop variable becomes an [R, 1] tensor, so scalars become [R, 1] and blocks [R, BLOCK]; every
load and store that depends on it gets the row mask; reductions into loop-carried names (`acc +=
E`, `acc = acc + E`, `acc -= E`, `acc = tl.maximum(acc, E)`, `tl.minimum`, either operand order)
sum (max, min) the masked rows; reductions inside the body (`tl.sum(x * w, axis=0)` of a row)
reduce along axis 1 keeping dims. A loop qualifies only when its body is straight-line code of
body-local assignments, such reductions and stores whose address is affine in the loop variable,
on scalars and 1-D blocks (`vectorize_analysis.Ranks`), with no store that may alias a load of the
body, no other call than `tl` element-wise functions, loads and casts, and no body-local value
read after the loop. Every qualifying loop of the kernel is rewritten; the block R is a new
`tl.constexpr` parameter passed at every launch (the block moves tune it afterwards).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.mutations.vectorize_analysis import (
    ELEMENTWISE,
    REDUCTIONS,
    UNKNOWN,
    Ranks,
    assignments,
    is_cast,
    pointer_bases,
    reads_before_write,
    tl_aliases,
    tl_func,
)

ROWS = (8, 32)
PARAM_NAMES = ("R", "ROWS_R", "R_BLOCK", "VEC_ROWS")
_MINMAX = {"maximum": "max", "minimum": "min"}


@dataclass
class _Loop:
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


def _jit_kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    return [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
    ]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


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


def _reduction(s: ast.stmt, aliases: set[str]) -> tuple[str, str, ast.expr] | None:
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


def _store_parts(s: ast.stmt, aliases: set[str]) -> ast.Call | None:
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and tl_func(s.value, aliases) == "store":
        return s.value
    return None


def _pointer(call: ast.Call) -> ast.expr:
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
            or name in ELEMENTWISE | REDUCTIONS | {"load", "store"}
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
    return not (_names(e) & dep)


def _analyse(
    fn: ast.FunctionDef, loop: ast.For, owner: list[ast.stmt], after: list, ranks: Ranks, aliases: set[str]
) -> _Loop:
    """The loop's plan, or MutationError naming why it does not qualify."""
    if not isinstance(loop.target, ast.Name) or loop.orelse:
        raise MutationError("the loop variable is not a plain name (or the loop has an else)")
    lo, hi = _range_bounds(loop, aliases)
    plan = _Loop(loop, owner, loop.target.id, lo, hi, dep={loop.target.id})
    params = {a.arg for a in fn.args.args}
    env = assignments(fn)
    local_rank: dict[str, int] = {plan.var: 0}
    affine: set[str] = {plan.var}
    loads: list[ast.Call] = []
    stores: list[ast.Call] = []
    acc_reads: dict[str, int] = {}
    for s in loop.body:
        _check_calls(s, aliases)
        red = _reduction(s, aliases)
        store = _store_parts(s, aliases)
        if red is not None and red[0] not in plan.local:
            acc, kind, e = red
            kind = "sum" if kind == "sub" else kind
            if plan.accs.setdefault(acc, kind) != kind:
                raise MutationError(f"`{acc}` is reduced two different ways in one loop")
            acc_reads[acc] = acc_reads.get(acc, 0) + (0 if isinstance(s, ast.AugAssign) else 1)
            loads += _load_calls(e, aliases)
        elif store is not None:
            stores.append(store)
            loads += _load_calls(store, aliases)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            if name in plan.accs or (
                name not in plan.local and _reads_name(loop.body[: loop.body.index(s)], name)
            ):
                raise MutationError(f"`{name}` is carried from one iteration to the next (not a reduction)")
            r = _rank_in_body(s.value, ranks, local_rank)
            if r is None:
                raise MutationError(
                    f"cannot tell the shape of `{ast.unparse(s.value)}` (only scalars and 1-D blocks)"
                )
            plan.local.add(name)
            local_rank[name] = r
            if _names(s.value) & plan.dep:
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
    if _assigned(loop.body) & _names(hi):
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
    plan: _Loop, loop: ast.For, ranks: Ranks, local_rank: dict[str, int], acc_reads: dict[str, int]
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
        red = _reduction(s, ranks.aliases)
        if red is not None and red[0] in plan.accs:
            r = _rank_in_body(red[2], ranks, local_rank)
            if r is None or r > plan.acc_rank[red[0]]:
                raise MutationError(
                    f"cannot tell the shape of `{ast.unparse(red[2])}` reduced into `{red[0]}`"
                )


def _check_aliasing(
    plan: _Loop,
    loads: list[ast.Call],
    stores: list[ast.Call],
    params: set[str],
    env: dict[str, list[ast.expr]],
    affine: set[str],
) -> None:
    """Stores write distinct rows (affine address) of bases no load or other store of the body uses."""
    load_bases: set[str] = set()
    for c in loads:
        load_bases |= pointer_bases(_pointer(c), params, env)
    seen: set[str] = set()
    for c in stores:
        ptr = _pointer(c)
        if not (_names(ptr) & plan.dep) or not _affine_in(ptr, plan.dep, affine):
            raise MutationError(f"the store address `{ast.unparse(ptr)}` is not affine in `{plan.var}`")
        bases = pointer_bases(ptr, params, env)
        if not bases or UNKNOWN in bases or UNKNOWN in load_bases and stores:
            raise MutationError(f"cannot tell which buffers `{ast.unparse(ptr)}` and the loads address")
        if bases & (load_bases | seen):
            raise MutationError(f"the store to `{ast.unparse(ptr)}` may alias a load or store of the loop")
        seen |= bases


def _plans(fn: ast.FunctionDef, aliases: set[str]) -> tuple[list[_Loop], list[str]]:
    """The kernel's qualifying loops, and why each other loop does not qualify."""
    ranks = Ranks(fn, aliases)
    plans: list[_Loop] = []
    reasons: list[str] = []
    for loop, owner, after in _loops(fn.body, []):
        try:
            plans.append(_analyse(fn, loop, owner, after, ranks, aliases))
        except MutationError as e:
            reasons.append(f"{fn.name} line {loop.lineno}: {e}")
    return plans, reasons


_LOAD_ARGS = ("mask", "other")
_STORE_ARGS = ("value", "mask")


def _with_mask(call: ast.Call, mask: str, positional: tuple[str, ...], other: bool) -> ast.Call:
    """`call` with `mask` and-ed into its mask (loads also get `other=0` when they had none)."""
    kws = {k.arg: k.value for k in call.keywords if k.arg is not None}
    for name, arg in zip(positional, call.args[1:], strict=False):
        kws[name] = arg
    if len(call.args) > 1 + len(positional):
        raise MutationError(f"too many positional arguments in `{ast.unparse(call)}`")
    old = kws.get("mask")
    row_mask = ast.Name(mask, ast.Load())
    none = old is None or (isinstance(old, ast.Constant) and old.value is None)
    kws["mask"] = row_mask if none else ast.BinOp(old, ast.BitAnd(), row_mask)  # type: ignore[arg-type]
    if other and (kws.get("other") is None or _is_none(kws["other"])):
        kws["other"] = ast.Constant(0)
    args = call.args[:1] + ([kws.pop("value")] if "value" in kws else [])
    call.args = args
    call.keywords = [ast.keyword(k, v) for k, v in kws.items()]
    return call


def _is_none(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is None


class _Masker(ast.NodeTransformer):
    """Row-masks the loads that depend on the loop variable; row reductions reduce along axis 1."""

    def __init__(self, dep: set[str], mask: str, aliases: set[str]) -> None:
        self.dep, self.mask, self.aliases = dep, mask, aliases

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = tl_func(node, self.aliases)
        if name == "load" and _names(_pointer(node)) & self.dep:
            return _with_mask(node, self.mask, _LOAD_ARGS, other=True)
        if name in REDUCTIONS and node.args and _names(node.args[0]) & self.dep:
            keep = [k for k in node.keywords if k.arg not in ("axis", "keep_dims")]
            axis = [ast.keyword("axis", ast.Constant(1)), ast.keyword("keep_dims", ast.Constant(True))]
            return ast.Call(node.func, node.args[:1], axis + keep)
        return node


def _reduce(acc: str, kind: str, e: str, rank: int, mask: str, tl: str, sub: bool) -> ast.stmt:
    neutral = "0" if kind == "sum" else acc
    w = f"{tl}.where({mask}, {e}, {neutral})"
    red = f"{tl}.{kind}({w}, axis=0)" if rank >= 1 else f"{tl}.{kind}({tl}.{kind}({w}, axis=1), axis=0)"
    if kind == "sum":
        return ast.parse(f"{acc} {'-=' if sub else '+='} {red}").body[0]
    return ast.parse(f"{acc} = {tl}.{'maximum' if kind == 'max' else 'minimum'}({acc}, {red})").body[0]


def _fresh(base: str, used: set[str]) -> str:
    name, i = base, 1
    while name in used:
        name, i = f"{base}{i}", i + 1
    used.add(name)
    return name


def _rewrite(plan: _Loop, rparam: str, tl: str, aliases: set[str], used: set[str]) -> None:
    loop, v = plan.node, plan.var
    blk, mask = _fresh(f"{v}_blk", used), _fresh(f"{v}_mask", used)
    hi = plan.hi
    if not isinstance(hi, ast.Name | ast.Constant):
        end = _fresh(f"{v}_end", used)
        plan.owner.insert(plan.owner.index(loop), ast.parse(f"{end} = {ast.unparse(hi)}").body[0])
        hi = ast.Name(end, ast.Load())
    assert isinstance(loop.iter, ast.Call)
    loop.iter = ast.Call(loop.iter.func, [plan.lo, hi, ast.Name(rparam, ast.Load())], [])
    loop.target = ast.Name(blk, ast.Store())
    body = ast.parse(
        f"{v} = {blk} + {tl}.arange(0, {rparam})[:, None]\n{mask} = {v} < {ast.unparse(hi)}\n"
    ).body
    masker = _Masker(plan.dep, mask, aliases)
    for s in loop.body:
        red = _reduction(s, aliases)
        store = _store_parts(s, aliases)
        if red is not None and red[0] in plan.accs:
            acc, kind, e = red
            e2 = ast.unparse(masker.visit(e))
            body.append(_reduce(acc, plan.accs[acc], e2, plan.acc_rank[acc], mask, tl, kind == "sub"))
        elif store is not None:
            store.args = [masker.visit(a) for a in store.args]
            store.keywords = [ast.keyword(k.arg, masker.visit(k.value)) for k in store.keywords]
            body.append(ast.Expr(_with_mask(store, mask, _STORE_ARGS, other=False)))
        else:
            body.append(masker.visit(s))
    loop.body = body


def _launches(tree: ast.Module, kernel: str) -> list[ast.Call]:
    """Every `kernel[grid](...)` call; MutationError when the kernel is called another way."""
    launches: list[ast.Call] = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Subscript) and ast.unparse(f.value).split(".")[-1] == kernel:
            if any(k.arg is None for k in n.keywords):
                raise MutationError(f"a launch of {kernel} passes **kwargs; cannot add the row block")
            launches.append(n)
        elif ast.unparse(f).split(".")[-1] == kernel:
            raise MutationError(f"{kernel} is called without a grid (a device function); not rewritten")
    if not launches:
        raise MutationError(f"no launch `{kernel}[grid](...)` to pass the row block to")
    return launches


def _add_param(fn: ast.FunctionDef, name: str, rows: int, tl: str) -> None:
    if fn.args.vararg or fn.args.kwonlyargs or fn.args.kwarg:
        raise MutationError(f"{fn.name} has *args / keyword-only parameters; cannot add the row block")
    fn.args.args.append(ast.arg(name, ast.parse(f"{tl}.constexpr", mode="eval").body))
    if fn.args.defaults:
        fn.args.defaults.append(ast.Constant(rows))


def vectorize(source: str, rows: int, kernel: str | None = None) -> str:
    """The source with every qualifying loop of `kernel` (default: of every jit kernel) taking
    `rows` rows per step; MutationError (with each loop's reason) when none qualifies."""
    tree = ast.parse(source)
    aliases = tl_aliases(tree)
    tl = sorted(aliases)[0]
    used = _names(tree) | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    used |= {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg}
    changed, reasons = False, []
    for fn in _jit_kernels(tree):
        if kernel is not None and fn.name != kernel:
            continue
        plans, why = _plans(fn, aliases)
        reasons += why
        if not plans:
            continue
        launches = _launches(tree, fn.name)
        rparam = next((p for p in PARAM_NAMES if p not in used), None)
        if rparam is None:
            raise MutationError(f"no free name for the row block in {fn.name}")
        used.add(rparam)
        _add_param(fn, rparam, rows, tl)
        for call in launches:
            call.keywords.append(ast.keyword(rparam, ast.Constant(rows)))
        for plan in plans:
            _rewrite(plan, rparam, tl, aliases, used)
        changed = True
    if not changed:
        raise MutationError("no loop to vectorize: " + ("; ".join(reasons) or "the kernel has no for loop"))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def vectorize_mutations(source: str) -> list[Mutation]:
    """One move per kernel with qualifying loops and per row block in `ROWS`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    muts: list[Mutation] = []
    for fn in _jit_kernels(tree):
        try:
            vectorize(source, ROWS[0], fn.name)
        except MutationError:
            continue
        for rows in ROWS:
            muts.append(
                Mutation(
                    name=f"vectorize_rows={rows}@{fn.name}",
                    family="vectorize",
                    description=f"vectorize the row loops of {fn.name}: {rows} rows per step as one "
                    f"[{rows}, BLOCK] gather, masked and reduced along the rows",
                    apply=_vectorizer(rows, fn.name),
                    helps=("latency",),
                    prior=1.6,
                    remedies=("bigger_commands", "overlap"),
                    kernel=fn.name,
                )
            )
    return muts


def _vectorizer(rows: int, kernel: str):  # type: ignore[no-untyped-def]
    return lambda src: vectorize(src, rows, kernel)
