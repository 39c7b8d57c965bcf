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
reduce along axis 1 keeping dims. Which loops qualify (straight-line bodies on scalars and 1-D
blocks, no store that may alias a load, no body-local value read after the loop) is decided by
`vectorize_loops`. Every qualifying loop of the kernel is rewritten; the block R is a new
`tl.constexpr` parameter passed at every launch (the block moves tune it afterwards).
"""

from __future__ import annotations

import ast

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.launches import launch_name
from kegen.search.operators.mutations.vectorize_analysis import REDUCTIONS, tl_aliases, tl_func
from kegen.search.operators.mutations.vectorize_loops import (
    LoopPlan,
    loop_plans,
    pointer,
    reduction,
    store_call,
)

ROWS = (8, 32)
PARAM_NAMES = ("R", "ROWS_R", "R_BLOCK", "VEC_ROWS")

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
        if name == "load" and names_in(pointer(node)) & self.dep:
            return _with_mask(node, self.mask, _LOAD_ARGS, other=True)
        if name in REDUCTIONS and node.args and names_in(node.args[0]) & self.dep:
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


def _rewrite(plan: LoopPlan, rparam: str, tl: str, aliases: set[str], used: set[str]) -> None:
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
        red = reduction(s, aliases)
        store = store_call(s, aliases)
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
        if isinstance(f, ast.Subscript) and launch_name(n) == kernel:
            if any(k.arg is None for k in n.keywords):
                raise MutationError(f"a launch of {kernel} passes **kwargs; cannot add the row block")
            launches.append(n)
        elif ast.unparse(f).split(".")[-1] == kernel:
            raise MutationError(f"{kernel} is called without a grid (a device function); not rewritten")
    if not launches:
        raise MutationError(f"no launch `{kernel}[grid](...)` to pass the row block to")
    return launches


def _check_launch_aliasing(fn: ast.FunctionDef, plans: list[LoopPlan], launches: list[ast.Call]) -> None:
    """MutationError when a launch passes one buffer (the same expression) both as a parameter a
    loop stores to and as one it loads from (an in-place call the rewrite would reorder)."""
    params = [a.arg for a in fn.args.args]
    for call in launches:
        arg = {p: ast.unparse(a) for p, a in zip(params, call.args, strict=False)}
        arg |= {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
        for plan in plans:
            stored = {arg[p] for p in plan.stored if p in arg}
            loaded = {arg[p] for p in plan.loaded if p in arg}
            if stored & loaded:
                raise MutationError(
                    f"a launch of {fn.name} passes {sorted(stored & loaded)[0]} to a stored and "
                    "a loaded parameter of one loop; not rewritten"
                )


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
    used = names_in(tree) | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    used |= {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg}
    changed, reasons = False, []
    for fn in jit_functions(tree):
        if kernel is not None and fn.name != kernel:
            continue
        plans, why = loop_plans(fn, aliases)
        reasons += why
        if not plans:
            continue
        launches = _launches(tree, fn.name)
        _check_launch_aliasing(fn, plans, launches)
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
    for fn in jit_functions(tree):
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
