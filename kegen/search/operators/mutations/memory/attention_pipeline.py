"""Attention: the next key block's scores computed while this block's softmax runs (software pipelining).

In an online-softmax loop each key block is a chain: load K, `S = Q K^T` (DPE), row max (RED),
`exp2(S - m)` (SIMD), row sum, `P V` (DPE). The core issues commands in program order and stalls
when a unit's queue is full; on mtia the SIMD queue fills with the block's softmax, so the next
block's K load and QK^T dot are issued late and the DPE and DMA wait while the SIMD works
(CORE:queue_full_SIMD, SIMD:dependency). FlashAttention-3 answers the same chain on Hopper by
overlapping the softmax of one block with the GEMM of the next. The move, as written by hand:

    S = dot(Q, K_first)                      # prologue: the first block's scores
    for start in range(lo, hi, step):
        start_next = minimum(start + step, last_start)
        S_next = dot(Q, K(start_next))       # issued before this block's softmax
        ... this block's softmax and P V, on S ...
        S = S_next

The next start is clamped to the loop's last start, so every address the rewrite computes is one
the original loop computed (the last iteration recomputes its own block's scores and drops them).
The loop keeps one more score tile live; the explicit prefetch replaces the compiler's load stages
for K, so the launch's `num_stages` drops to 1 (with 2 stages and dual core the production kernel
no longer fits its half of the local store).

Only the product goes ahead: arithmetic on it (`S = tl.dot(Q, K) * scale`) stays where it was, on a
carried raw product, since SIMD commands issued ahead would hold this block's softmax in the SIMD
unit's in-order queue (with the scale taken ahead the production seed measured 131.5 -> 153.2 us;
with the product alone 116.6 us). Measured on attention_fwd_fp16 (mtia-2i, simulated): the seed
131.5 -> 116.6 us, with dual core 110.7 -> 97.9 us; the exp2 form with 64 queries per program
118.2 -> 104.1 us, with dual core 96.9 -> 83.9 us; with 128 queries, two stages and dual core (the
budget-30 best) 93.2 -> 82.7 us. (Those figures are with the compact local-store plan; with the
rotating carried slot of docs/DECISIONS.md D38 the score tile is not copied at the yield and the
64-query dual-core kernel runs 76.4 us, 74.2 us with 128 keys per block.)

Recognised form: a `for` loop over `range(lo, hi[, step])` whose body assigns `S = <expression with
tl.dot>` from the loop variable, loop-invariant names and statements before it (simple assignments,
no stores), reads S later through `tl.max` or an exponential, and has a second `tl.dot` after S.
The rewrite assumes the loop runs at least once (the prologue computes the first block's scores).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.attention_persist import tile_prefetch_index, tile_scope
from kegen.search.operators.mutations.memory.row_pipeline import (
    _fresh,
    _subst,
    call_name,
    loop_step,
    parse_expr,
    row_loop_var,
    stored_names,
)

FAMILY = "attention_pipeline"
PRIOR = 2.2  # measured on every attention kernel it applied to: -11 to -13% time
_EXPS = ("tl.exp", "tl.exp2", "tl.math.exp", "tl.math.exp2")
_EFFECTS = ("tl.store", "tl.atomic_", "tl.debug_barrier", "tl.device_print", "tl.device_assert")


class _Plan:
    """What the rewrite needs: the loop, the score statement, the slice of statements it depends on."""

    def __init__(self, loop: ast.For, var: str, score: ast.Assign, s_name: str, slice_: list[ast.Assign],
                 removable: list[ast.Assign]) -> None:
        self.loop, self.var, self.score, self.s_name = loop, var, score, s_name
        self.slice, self.removable = slice_, removable


def _has_dot(node: ast.AST) -> bool:
    return any(call_name(n) == "tl.dot" for n in ast.walk(node))


def _simple_assign(st: ast.stmt) -> bool:
    return (
        isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and not any(call_name(n).startswith(_EFFECTS) for n in ast.walk(st))
    )


def _reads_score(st: ast.stmt, derived: set[str]) -> bool:
    """`st` reads a name of `derived` inside tl.max or an exponential."""
    for n in ast.walk(st):
        if isinstance(n, ast.Call) and (call_name(n) in _EXPS or call_name(n) in ("tl.max", "tl.math.max")):
            if names_in(n) & derived:
                return True
    return False


def _plan(loop: ast.For) -> _Plan | None:
    var = row_loop_var(loop)
    if var is None:
        return None
    body = loop.body
    at = next((i for i, st in enumerate(body) if _simple_assign(st) and _has_dot(st)), None)
    if at is None:
        return None
    score = body[at]
    assert isinstance(score, ast.Assign) and isinstance(score.targets[0], ast.Name)
    s_name = score.targets[0].id
    rest = body[at + 1:]
    if not any(_has_dot(st) for st in rest):  # no P V product after the scores: not attention
        return None
    derived = {s_name}
    for st in rest:  # names computed from S (S masked, S - m, ...)
        if names_in(st) & derived:
            derived |= stored_names(st)
    if not any(_reads_score(st, derived) for st in rest):
        return None
    assigned_later = _stored(rest)
    # the statements S depends on, walking back from S; each a simple assignment of this body
    needed = names_in(score.value)
    slice_: list[ast.Assign] = []
    for st in reversed(body[:at]):
        targets = stored_names(st)
        if not targets & needed:
            continue
        if not _simple_assign(st):
            return None
        assert isinstance(st, ast.Assign)
        slice_.insert(0, st)
        needed |= names_in(st.value)
    slice_names = _stored(slice_)
    # S must come from this iteration's loop variable and loop-invariant values only
    carried = (assigned_later | _stored(body[:at])) - slice_names
    if (needed - slice_names) & carried or s_name in needed or var in slice_names:
        return None
    if any(s_name in stored_names(st) for st in body[:at]):
        return None
    if any(isinstance(st, ast.Assign) and ast.unparse(st.value) == s_name for st in rest):
        return None  # S copied into the carried tile: the loop already computes its scores ahead
    others = [st for st in body[:at] if st not in slice_]
    used_elsewhere = set().union(*(names_in(st) for st in [*rest, *others]))
    removable = [st for st in slice_ if not stored_names(st) & used_elsewhere]
    return _Plan(loop, var, score, s_name, slice_, removable)


def _stored(stmts: Sequence[ast.stmt]) -> set[str]:
    """Names any of `stmts` assigns."""
    return set().union(*(stored_names(st) for st in stmts))


def _find(fn: ast.FunctionDef) -> _Plan | None:
    loops = [st for st in fn.body if isinstance(st, ast.For)]
    plans = [p for p in (_plan(lp) for lp in loops) if p is not None]
    return plans[0] if len(plans) == 1 else None


def _renamed(stmts: list[ast.Assign], env: dict[str, ast.expr], suffix: str, taken: set[str],
             keep: str | None = None) -> tuple[list[ast.stmt], dict[str, ast.expr]]:
    """Copies of `stmts` reading `env`'s substitutions, each target renamed NAME<suffix> (except `keep`)."""
    env = dict(env)
    out: list[ast.stmt] = []
    for st in stmts:
        name = st.targets[0].id  # type: ignore[attr-defined]
        new = name if name == keep else _fresh(taken, f"{name}{suffix}")
        out.append(ast.Assign(targets=[ast.Name(new, ast.Store())], value=_subst(st.value, env)))
        env[name] = ast.Name(new, ast.Load())
    return out, env


def rewrite(source: str, kernel: str) -> str:
    """`source` with `kernel`'s online-softmax loop computing the next key block's scores first."""
    tree = ast.parse(source)
    fns = [tile_scope(f) for f in jit_functions(tree) if f.name == kernel]
    plan = _find(fns[0]) if fns else None
    if plan is None:
        raise MutationError(f"{kernel} has no online-softmax loop whose scores can be computed a block ahead")
    fn = fns[0]
    loop, var, s = plan.loop, plan.var, plan.s_name
    it = loop.iter
    assert isinstance(it, ast.Call)
    lo = ast.unparse(it.args[0])
    hi = ast.unparse(it.args[1])
    step = loop_step(loop)
    taken = names_in(tree)
    last = _fresh(taken, f"{var}_last")
    nxt = _fresh(taken, f"{var}_next")
    score, drop_score = plan.score, True
    dots = [n for n in ast.walk(score.value) if isinstance(n, ast.Call) and call_name(n) == "tl.dot"]
    if len(dots) != 1:
        raise MutationError(f"{kernel}: the scores are not one tl.dot product")
    if score.value is not dots[0]:
        # only the product goes ahead (DMA and DPE work); the arithmetic on it (a scale) stays in
        # place: SIMD commands issued ahead would hold this block's softmax in the in-order queue
        carried = _fresh(taken, f"{s}_dot")
        product = ast.Assign(targets=[ast.Name(carried, ast.Store())], value=dots[0])
        score.value = _replace(score.value, dots[0], ast.Name(carried, ast.Load()))
        s, score, drop_score = carried, product, False
    chain = [*plan.slice, score]
    first, _ = _renamed(chain, {var: parse_expr(f"({lo})")}, "_first", taken, keep=s)
    ahead, env = _renamed(chain, {var: ast.Name(nxt, ast.Load())}, "_next", taken)
    s_next = env[s]
    assert isinstance(s_next, ast.Name)
    at = fn.body.index(loop)
    ahead_of = tile_prefetch_index(fn.body[:at])  # a persistent kernel: before the next tile's loads
    at = ahead_of if ahead_of is not None else at
    last_start = ast.parse(f"{last} = ({lo}) + (({hi}) - 1 - ({lo})) // ({step}) * ({step})").body[0]
    fn.body[at:at] = [last_start, *first]
    drop = {id(st) for st in [*plan.removable, *([plan.score] if drop_score else [])]}
    loop.body = [
        ast.parse(f"{nxt} = tl.minimum({var} + ({step}), {last})").body[0],
        *ahead,
        *(st for st in loop.body if id(st) not in drop),
        ast.parse(f"{s} = {s_next.id}").body[0],
    ]
    _single_stage(tree, kernel)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _replace(expr: ast.expr, node: ast.AST, by: ast.expr) -> ast.expr:
    """`expr` with the subtree `node` (by identity) replaced by `by`."""

    class _Swap(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            return by if n is node else super().visit(n)

    out = _Swap().visit(expr)
    assert isinstance(out, ast.expr)
    return out


def _single_stage(tree: ast.Module, kernel: str) -> None:
    """num_stages=1 on the kernel's launches (the rewrite prefetches K itself)."""
    for name, _, call in launches(tree):
        if name != kernel:
            continue
        for k in call.keywords:
            if k.arg == "num_stages" and not (isinstance(k.value, ast.Constant) and k.value.value == 1):
                k.value = ast.Constant(1)


def attention_pipeline_mutations(source: str) -> list[Mutation]:
    """The score-ahead rewrite of every online-softmax attention kernel in `source`."""
    out = []
    tree = ast.parse(source)
    for fn in jit_functions(tree):
        plan = _find(tile_scope(fn))
        if plan is None:
            continue
        out.append(
            Mutation(
                name=f"attention_pipeline@{fn.name}",
                family=FAMILY,
                description=(
                    f"{fn.name}: the next key block's K load and QK^T dot issued before this block's "
                    "softmax (scores computed one block ahead, num_stages=1)"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("latency", "compute"),
                prior=PRIOR,
                remedies=("overlap",),
                kernel=fn.name,
            )
        )
    return out
