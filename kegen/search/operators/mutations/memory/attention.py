"""Attention: the online-softmax loop's per-score arithmetic cut to what the SIMD unit must do.

In a flash-attention style kernel every score of the [BLOCK_M, BLOCK_N] tile passes through the
SIMD unit several times per key block (scale, key mask, subtract the running max, exponential,
cast), and the diagnosis of such a kernel on mtia is the SIMD queue (CORE:queue_full_SIMD) with
the DMA and DPE waiting on it. The move, as a kernel engineer writes it:

- the softmax scale and log2(e) are folded into the Q tile once per program (`q * (scale *
  log2 e)`, a [BLOCK_M, D] multiply instead of a [BLOCK_M, BLOCK_N] one per key block), and every
  exponential of the loop becomes `tl.exp2` of the same differences (exp(x) = exp2(x log2 e);
  the running max and sum live in the scaled domain, so the output is unchanged up to rounding);
- the key mask `s = tl.where(keys < seq, s, -inf)` runs only when the sequence length does not
  divide the key block: a constexpr EVEN_N (`seq % BLOCK_N == 0`, computed at the launch) guards it.

Recognised form: `S = tl.dot(Q, K) * SCALE` inside a `for` loop, or `S = D * SCALE` with D carrying
such a product from an earlier iteration (the score-ahead form of `attention_pipeline`, so the two
moves compose in either order); Q a tile assigned before the loop and read by nothing but those dots
(folding the scale into it must change nothing else), every `tl.exp` of the kernel inside the loop;
S read only by tl.where / tl.max / the exponentials' differences.
"""

from __future__ import annotations

import ast
import re
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.attention_persist import tile_scope
from kegen.search.operators.mutations.memory.row_pipeline import assign_target

FAMILY = "attention_exp2"
PRIOR = 1.8
LOG2E = "1.4426950408889634"


def _stores(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)


def _dot_operand(v: ast.AST | None) -> ast.Name | None:
    """Q of `tl.dot(Q, ...)` with Q a name, or None."""
    if isinstance(v, ast.Call) and ast.unparse(v.func) == "tl.dot" and len(v.args) >= 2:
        return v.args[0] if isinstance(v.args[0], ast.Name) else None
    return None


def _dot_chain(fn: ast.FunctionDef, name: str) -> tuple[str, set[str]] | None:
    """(Q, the names) when `name` only ever holds `tl.dot(Q, ...)`: every assignment of it is such a
    dot or another name that does (the score-ahead form carries the product: `s_dot = tl.dot(q, k0)`
    before the loop, `s_dot_next = tl.dot(q, k)` and `s_dot = s_dot_next` in it); else None."""
    names, todo, qs = set(), [name], set()
    while todo:
        n = todo.pop()
        if n in names:
            continue
        names.add(n)
        stores = [x for x in ast.walk(fn) if _stores(x, n)]
        assigns = [st for st in ast.walk(fn) if assign_target(st) == n]
        if not assigns or len(assigns) != len(stores):  # a tuple target, a loop variable, an augmented store
            return None
        for st in assigns:
            v = st.value if isinstance(st, ast.Assign) else None
            if (q := _dot_operand(v)) is not None:
                qs.add(q.id)
            elif isinstance(v, ast.Name):
                todo.append(v.id)
            else:
                return None
    return (qs.pop(), names) if len(qs) == 1 else None


def _scaled_dot(fn: ast.FunctionDef, loop: ast.For) -> tuple[str, str, str, ast.Assign, set[str]] | None:
    """(S, Q, SCALE, the assignment, the names carrying the product) of `S = tl.dot(Q, K) * SCALE`
    directly in `loop`'s body, or of `S = D * SCALE` with D carrying such a product (`_dot_chain`)."""
    for st in loop.body:
        target = assign_target(st)
        if target is None or not isinstance(st, ast.Assign):
            continue
        v = st.value
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult)):
            continue
        left = v.left
        if (q := _dot_operand(left)) is not None:
            return target, q.id, ast.unparse(v.right), st, set()
        if isinstance(left, ast.Name) and (chain := _dot_chain(fn, left.id)) is not None:
            return target, chain[0], ast.unparse(v.right), st, chain[1]
    return None


def _statement_of(node: ast.AST, parents: dict[int, ast.AST]) -> int:
    """The id of the statement holding `node`."""
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return id(node)


def _q_only_scaled(fn: ast.FunctionDef, q_name: str, s_assign: ast.Assign, carried: set[str]) -> bool:
    """Whether Q is read only as the first operand of dots whose products reach nothing but S's
    scaling (directly or through the carried names): folding the scale into Q changes nothing else."""
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    scaled = s_assign.value.left  # type: ignore[attr-defined]
    q_defs = {id(st) for st in fn.body if assign_target(st) == q_name}

    def into_carried(node: ast.AST | None) -> bool:
        parent = parents.get(id(node))
        target = assign_target(parent) if parent is not None else None
        return target is not None and target in carried

    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            continue
        if n.id == q_name:
            dot = parents.get(id(n))
            if isinstance(dot, ast.Attribute) and dot.attr in ("dtype", "shape"):
                continue
            if _statement_of(n, parents) in q_defs:  # `q = f(q)`: part of Q's definition
                continue
            if _dot_operand(dot) is not n:
                return False
            if dot is not scaled and not into_carried(dot):
                return False
        elif n.id in carried and n is not scaled and not into_carried(n):
            return False
    return True


def _find(fn: ast.FunctionDef) -> tuple[ast.For, str, str, str, ast.Assign, ast.Assign] | None:
    """(loop, S, Q, SCALE, S's assignment, Q's last assignment before the loop) or None."""
    loops = [s for s in fn.body if isinstance(s, ast.For)]
    if len(loops) != 1:
        return None
    loop = loops[0]
    found = _scaled_dot(fn, loop)
    if found is None:
        return None
    s_name, q_name, scale, s_assign, carried = found
    before = fn.body[: fn.body.index(loop)]
    q_assigns = [
        st for st in before
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == q_name for t in st.targets)
    ]
    inside = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if not q_assigns or q_name in inside or re.search(r"\b" + s_name + r"\b", scale):
        return None
    if not _q_only_scaled(fn, q_name, s_assign, carried):
        return None
    exps = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.exp"]
    in_loop = {id(n) for n in ast.walk(loop)}
    if not exps or any(id(e) not in in_loop for e in exps):
        return None
    if any(not (len(e.args) == 1 and isinstance(e.args[0], ast.BinOp) and isinstance(e.args[0].op, ast.Sub))
           for e in exps):
        return None
    return loop, s_name, q_name, scale, s_assign, q_assigns[-1]


def _launch_keywords(tree: ast.Module, kernel: str) -> ast.Call | None:
    """The module's one launch `kernel[grid](...)`, or None."""
    calls = [call for name, _, call in launches(tree) if name == kernel]
    return calls[0] if len(calls) == 1 else None


def rewrite(source: str, kernel: str) -> str:
    """`source` with `kernel`'s scale folded into Q, exp2 for exp, and the key mask guarded by EVEN_N."""
    tree = ast.parse(source)
    fns = [tile_scope(f) for f in jit_functions(tree) if f.name == kernel]
    found = _find(fns[0]) if fns else None
    if found is None:
        raise MutationError(f"{kernel} has no online-softmax loop with a scaled tl.dot")
    fn = fns[0]
    loop, s_name, q_name, scale, s_assign, q_assign = found
    s_assign.value = s_assign.value.left  # type: ignore[attr-defined]
    fold = ast.parse(f"{q_name} = ({q_name}.to(tl.float32) * ({scale} * {LOG2E})).to({q_name}.dtype)").body[0]
    fn.body.insert(fn.body.index(q_assign) + 1, fold)
    for n in ast.walk(loop):
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.exp":
            n.func = ast.parse("tl.exp2", mode="eval").body
    _guard_key_mask(tree, fn, loop, s_name)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _guard_key_mask(tree: ast.Module, fn: ast.FunctionDef, loop: ast.For, s_name: str) -> None:
    """`S = tl.where(KEYS < SEQ, S, ...)` in the loop runs only `if not EVEN_N`, EVEN_N passed by the
    launch as `SEQ_ARG % BLOCK_N_ARG == 0` (left alone when the pieces are not found)."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    call = _launch_keywords(tree, fn.name)
    if call is None or "EVEN_N" in params:
        return
    bound = dict(zip(params, (ast.unparse(a) for a in call.args), strict=False))
    bound |= {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
    for i, st in enumerate(loop.body):
        text = ast.unparse(st)
        m = re.fullmatch(rf"{s_name} = tl\.where\(\w+\[None, :\] < (\w+), {s_name}, .+\)", text)
        if m is None or m[1] not in bound:
            continue
        block = re.search(r"range\(0, \w+, (\w+)", ast.unparse(loop.iter))
        if block is None or block[1] not in bound:
            return
        loop.body[i] = ast.If(test=ast.parse("not EVEN_N", mode="eval").body, body=[st], orelse=[])
        fn.args.args.append(ast.arg(arg="EVEN_N", annotation=ast.parse("tl.constexpr", mode="eval").body))
        key_block = bound[block[1]]
        if key_block.isdigit():  # a literal becomes a module constant, so a block move keeps EVEN_N true
            key_block = _hoist(tree, call, block[1], int(key_block))
        even = f"({bound[m[1]]}) % ({key_block}) == 0"
        call.keywords.append(ast.keyword(arg="EVEN_N", value=ast.parse(even, mode="eval").body))
        return


def _hoist(tree: ast.Module, call: ast.Call, param: str, value: int) -> str:
    """Pass `param` as the module constant KEY_BLOCK (= value) instead of a literal; its name."""
    if any(isinstance(n, ast.Name) and n.id == "KEY_BLOCK" for n in ast.walk(tree)):
        raise MutationError("the module already uses the name KEY_BLOCK")
    for k in call.keywords:
        if k.arg == param:
            k.value = ast.Name("KEY_BLOCK", ast.Load())
    at = next(i for i, n in enumerate(tree.body) if not isinstance(n, ast.Import | ast.ImportFrom | ast.Expr))
    tree.body.insert(at, ast.parse(f"KEY_BLOCK = {value}").body[0])
    return "KEY_BLOCK"


def attention_mutations(source: str) -> list[Mutation]:
    """The exp2 / folded-scale rewrite of every online-softmax attention kernel in `source`."""
    out = []
    for fn in jit_functions(ast.parse(source)):
        if _find(tile_scope(fn)) is None:
            continue
        out.append(
            Mutation(
                name=f"attention_exp2@{fn.name}",
                family=FAMILY,
                description=(
                    f"{fn.name}: softmax scale and log2(e) folded into the Q tile, tl.exp2 for tl.exp, "
                    "the key mask only when the sequence does not divide the key block (EVEN_N)"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("compute", "latency"),
                prior=PRIOR,
                remedies=("cheaper_math", "bigger_commands"),
                kernel=fn.name,
            )
        )
    return out
