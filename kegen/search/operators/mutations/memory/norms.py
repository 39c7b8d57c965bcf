"""Row kernels (norms, softmax, jagged softmax): several rows per program, pipelined row loops.

Three moves, ranked so that a seed's chunk loops first become one block per row (`rows.py`, prior
2.0), then the pipelined rows-per-program form comes first (2.2):

- `rows_per_program` (plain 1.6, pipelined 2.2): a row-per-program kernel (`row =
  tl.program_id(0)`, launched over `(n_rows,)`) that already reads its row once (one block per row)
  takes ROWS_PER consecutive rows per program in `for row in tl.range(first, last, num_stages=2)`;
  statements that do not depend on the row (the column offsets and masks, the weight and bias rows)
  are hoisted out of the loop and read once per program.
- `row_pipeline` (1.8; with the rows move, 2.2): a unit-step row loop software-pipelined by hand.
  The plain loop leaves the DMA idle while each row is computed: DMA commands start in order, the
  store of row i waits for row i's arithmetic, the next row's load queues behind that store, and
  the next iteration's first arithmetic reuses the local-store range the store is still reading.
  On mtia-2i every PE then idles its DMA at the same moment (all rows take the same time), DRAM
  sits at ~80% of its peak (layer_norm 79% of its roofline, CORE:end_wait_DMA 9%, DMA:dependency
  20%). Pipelined, the row-dependent loads of row i+1 are issued at the top of iteration i (the
  first row's before the loop; loop-carried, masked off past the last row) and each row's stores
  are deferred to the next iteration (the value held in the output's dtype, the last row's store
  after the loop), so the DMA queue holds [load i+1, store i-1] ahead of row i's arithmetic and
  the units never wait for a store to drain: layer_norm_bf16 97.5% of its roofline (414 -> 336
  us), rms_norm_fp16 98.3% (390 -> 334 us). The loop must be straight-line, every store in it
  must address by the row, and no load may read a pointer the loop stores through.
- `row_block_stages` (1.9): loops over row blocks (`range(lo, hi, R)`, what `vectorize` leaves)
  that load by their variable walk `tl.range(..., num_stages=2)`: the next block's load gets its
  own buffer and overlaps this block's reduction (jagged_softmax_fp32 after vectorize R=32:
  139.0 -> 133.0 us at one input seed, 84.1% -> 87.8%; with dual core 91.1%: offered as one more
  move, `row_block_stages=2+dual_core`, since a budget-8 search from the seed took the staging but
  not the dual core after it). For these loops the hand pipeline measured worse (81.5% against 90.3%
  at other inputs) and is not offered.
"""

from __future__ import annotations

import ast
import copy
import re
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.rows import find_row_loops

FAMILY = "rows_per_program"
PRIOR = 1.6
PIPELINE_FAMILY = "row_pipeline"
PIPELINE_PRIOR = 2.2  # above one-block-per-row's 2.0: proposed first once the row is one block
LOOP_PIPELINE_PRIOR = 1.8  # an existing row loop pipelined
STAGE_FAMILY = "row_block_stages"
STAGE_PRIOR = 1.9  # below one-block-per-row (2.0): a seed's chunk loops become one block first
ROWS_PER_PROGRAM = 16
STAGES = 2


def _row_assign(fn: ast.FunctionDef) -> ast.Assign | None:
    """The kernel's `ROW = tl.program_id(0)`, when the kernel reads no other program id."""
    ids = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.program_id"]
    if len(ids) != 1 or ast.unparse(ids[0]) not in ("tl.program_id(0)", "tl.program_id(axis=0)"):
        return None
    for st in fn.body:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and st.value is ids[0]
        ):
            return st
    return None


def _stored(st: ast.stmt) -> set[str]:
    """Names a statement assigns."""
    return {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _launch(tree: ast.Module, kernel: str) -> ast.Call | None:
    """The module's one launch `kernel[grid](...)`, or None."""
    calls = [call for name, _, call in launches(tree) if name == kernel]
    return calls[0] if len(calls) == 1 else None


def _qualifies(tree: ast.Module, fn: ast.FunctionDef) -> bool:
    if _row_assign(fn) is None or any(isinstance(n, ast.For | ast.While) for n in ast.walk(fn)):
        return False
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args}
    if {"total_rows", "ROWS_PER"} & params:
        return False
    call = _launch(tree, fn.name)
    if call is None or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    grid = call.func.slice  # type: ignore[attr-defined]
    return isinstance(grid, ast.Tuple) and len(grid.elts) == 1


def rewrite(
    source: str, kernel: str, rows_per: int = ROWS_PER_PROGRAM, stages: int = STAGES, pipelined: bool = False
) -> str:
    """`source` with row kernel `kernel` taking ROWS_PER rows per program (see the module doc); with
    `pipelined`, the row loop in its pipelined form (next row's loads first, stores deferred)."""
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    if not fns or not _qualifies(tree, fns[0]):
        raise MutationError(f"{kernel} is not a loop-free row-per-program kernel with a one-axis launch")
    if re.search(r"^ROWS_PER_PROGRAM = ", source, flags=re.M):
        raise MutationError("the module already defines ROWS_PER_PROGRAM")
    fn = fns[0]
    assign = _row_assign(fn)
    assert assign is not None
    row = assign.targets[0].id  # type: ignore[attr-defined]
    at = fn.body.index(assign)
    before, body = fn.body[:at], fn.body[at + 1 :]
    counts: dict[str, int] = {}
    for st in body:
        for name in _stored(st) | (_stored(st) if isinstance(st, ast.AugAssign) else set()):
            counts[name] = counts.get(name, 0) + 1
    dependent, hoisted, looped = {row}, [], []
    for st in body:
        is_store = any(isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.store" for n in ast.walk(st))
        once = all(counts.get(n, 0) == 1 for n in _stored(st))  # not an accumulator (re-set per row)
        if isinstance(st, ast.Assign) and once and not (names_in(st.value) & dependent) and not is_store:
            hoisted.append(st)
        else:
            looped.append(st)
            dependent |= _stored(st)
    if not looped:
        raise MutationError(f"{kernel} has nothing that depends on the row")
    bounds = "first_row, tl.minimum(first_row + ROWS_PER, total_rows)"
    loop_head = f"for {row} in tl.range({bounds}, num_stages={stages}):\n    pass\n"
    head = ast.parse(f"first_row = tl.program_id(0) * ROWS_PER\n{loop_head}").body
    loop = head[1]
    assert isinstance(loop, ast.For)
    loop.body = looped
    fn.body = [*before, *hoisted, *head]
    if pipelined:
        fn.body = [*before, *hoisted, head[0], *pipeline_loop(fn, loop, set())]
    constexpr = ast.parse("tl.constexpr", mode="eval").body
    fn.args.args.extend([ast.arg(arg="total_rows"), ast.arg(arg="ROWS_PER", annotation=constexpr)])
    call = _launch(tree, kernel)
    assert call is not None
    grid = call.func.slice  # type: ignore[attr-defined]
    n_rows = ast.unparse(grid.elts[0])
    grid.elts[0] = ast.parse(f"triton.cdiv({n_rows}, ROWS_PER_PROGRAM)", mode="eval").body
    call.keywords.append(ast.keyword(arg="total_rows", value=ast.parse(n_rows, mode="eval").body))
    call.keywords.append(ast.keyword(arg="ROWS_PER", value=ast.Name("ROWS_PER_PROGRAM", ast.Load())))
    code = (i for i, n in enumerate(tree.body) if not isinstance(n, ast.Import | ast.ImportFrom | ast.Expr))
    first = next(code)
    tree.body.insert(first, ast.parse(f"ROWS_PER_PROGRAM = {rows_per}").body[0])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


_RANGES = ("range", "tl.range", "triton.language.range")
_EFFECTS = ("tl.atomic_", "tl.debug_barrier", "tl.device_print", "tl.device_assert")


def _row_loop(st: ast.stmt) -> str | None:
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


def _step(loop: ast.For) -> str:
    it = loop.iter
    assert isinstance(it, ast.Call)
    return ast.unparse(it.args[2]) if len(it.args) == 3 else "1"


def _call_name(n: ast.AST) -> str:
    return ast.unparse(n.func) if isinstance(n, ast.Call) else ""


def _arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
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


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _and(mask: ast.expr | None, cond: str) -> ast.expr:
    return (
        _expr(cond)
        if mask is None
        else ast.BinOp(left=copy.deepcopy(mask), op=ast.BitAnd(), right=_expr(cond))
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
        self.ptr = _subst(_arg(call, 0, "pointer"), inline)  # type: ignore[arg-type]
        m = _arg(call, 1 if is_load else 2, "mask")
        self.mask = None if m is None else _subst(m, inline)
        o = _arg(call, 2, "other") if is_load else None
        self.other = None if o is None else _subst(o, inline)
        self.value = None if is_load else _arg(call, 1, "value")
        self.extra = [k for k in call.keywords if k.arg not in ("pointer", "mask", "other", "value")]
        for part in (self.ptr, self.mask, self.other):
            if part is not None and any(_call_name(x) in ("tl.load", "tl.store") for x in ast.walk(part)):
                raise MutationError(f"`{ast.unparse(call)}`: its address depends on another load")

    def at(self, row: str, index: str, cond: str, value: ast.expr | None = None) -> ast.Call:
        """The access at row `index` (an expression of the row), masked further by `cond`."""
        env = {row: _expr(f"({index})")}
        kws = [
            ast.keyword(arg="mask", value=_and(None if self.mask is None else _subst(self.mask, env), cond))
        ]
        if self.other is not None:
            kws.append(ast.keyword(arg="other", value=_subst(self.other, env)))
        args = [_subst(self.ptr, env)] + ([value] if value is not None else [])
        func = _expr("tl.load" if self.is_load else "tl.store")
        return ast.Call(func=func, args=args, keywords=kws + copy.deepcopy(self.extra))


def _pipelined(body: list[ast.stmt]) -> bool:
    """Whether the body already ends by rotating a prefetched load (`cur = nxt`)."""
    last = body[-1]
    if not (isinstance(last, ast.Assign) and isinstance(last.value, ast.Name) and len(last.targets) == 1):
        return False
    src = last.value.id
    return any(
        isinstance(st, ast.Assign)
        and src in _stored(st)
        and any(_call_name(n) == "tl.load" for n in ast.walk(st.value))
        for st in body[:-1]
    )


def _plan(loop: ast.For) -> tuple[str, list[_Access], list[tuple[int, _Access]]]:
    """(row, the row-dependent loads, (statement index, store) of each row-dependent store) of a
    row loop the pipelined form can take; MutationError otherwise."""
    row = _row_loop(loop)
    if row is None:
        raise MutationError("not a `for row in range(lo, hi[, step])` loop")
    body = loop.body
    if any(
        isinstance(n, ast.For | ast.While | ast.If | ast.Break | ast.Continue | ast.Return | ast.With)
        for st in body
        for n in ast.walk(st)
    ):
        raise MutationError("the row loop has control flow inside; only straight-line bodies are pipelined")
    if any(_call_name(n).startswith(_EFFECTS) for st in body for n in ast.walk(st)):
        raise MutationError("the row loop has atomics or debug calls")
    if _pipelined(body):
        raise MutationError("the row loop is pipelined already")
    counts: dict[str, int] = {}
    for st in body:
        for name in _stored(st):
            counts[name] = counts.get(name, 0) + 1
    if row in counts:
        raise MutationError(f"the loop variable {row} is assigned in the body")
    inline: dict[str, ast.expr] = {}
    loads: list[_Access] = []
    others: list[_Access] = []  # loads that do not follow the row (left where they are)
    stores: list[tuple[int, _Access]] = []
    for i, st in enumerate(body):
        calls = [n for n in ast.walk(st) if _call_name(n) in ("tl.load", "tl.store")]
        for call in calls:
            acc = _Access(call, _call_name(call) == "tl.load", inline)  # type: ignore[arg-type]
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
    return _expr(f"({ast.unparse(value)}).to(({ast.unparse(ptr)}).dtype.element_ty)")


def pipeline_loop(fn: ast.FunctionDef, loop: ast.For, taken: set[str]) -> list[ast.stmt]:
    """The statements that replace `loop` (a top-level row loop of `fn`) in its pipelined form (see
    the module doc); MutationError when the loop does not qualify."""
    row, loads, stores = _plan(loop)
    taken |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    it = loop.iter
    assert isinstance(it, ast.Call)
    pre: list[ast.stmt] = []
    bounds = []
    step = _step(loop)
    for arg, name in zip(it.args[:2], ("lo", "hi"), strict=True):
        if isinstance(arg, ast.Name | ast.Constant):
            bounds.append(ast.unparse(arg))
            continue
        var = _fresh(taken, f"{row}_{name}")
        pre.append(ast.Assign(targets=[ast.Name(var, ast.Store())], value=arg))
        bounds.append(var)
    lo, hi = bounds
    it.args = [_expr(lo), _expr(hi), *it.args[2:]]
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
        ptr0 = ast.unparse(_subst(acc.ptr, {row: _expr(f"({lo})")}))
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
    # slots as one parallel copy (lowering.codegen.lower.store_slots, D34), and the order stays.
    return [*holders, *prefetch, loop, *post]


def _unit_row_loop(st: ast.stmt) -> bool:
    return isinstance(st, ast.For) and _row_loop(st) is not None and _step(st) == "1"


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


def _pipelinable(fn: ast.FunctionDef) -> bool:
    for st in fn.body:
        if isinstance(st, ast.For) and _unit_row_loop(st):
            try:
                _plan(st)
                return True
            except MutationError:
                continue
    return False


def _block_loops(fn: ast.FunctionDef, tree: ast.Module) -> list[ast.For]:
    """The top-level loops over row blocks (`range(lo, hi, R)`, R not 1) that load by their variable
    and are single-buffered (no num_stages on the loop nor on a launch of the kernel)."""
    for name, _, call in launches(tree):
        if name == fn.name and any(k.arg == "num_stages" for k in call.keywords):
            return []
    out = []
    for st in fn.body:
        if not (isinstance(st, ast.For) and _row_loop(st) is not None and _step(st) != "1"):
            continue
        it = st.iter
        assert isinstance(it, ast.Call)
        if any(k.arg == "num_stages" for k in it.keywords):
            continue
        var = _row_loop(st)
        follows = {var}
        for n in st.body:
            if isinstance(n, ast.Assign) and names_in(n.value) & follows:
                follows |= _stored(n)
        loads = [n for n in ast.walk(st) if _call_name(n) == "tl.load"]
        if any(names_in(_arg(c, 0, "pointer") or c) & follows for c in loads):  # type: ignore[arg-type]
            out.append(st)
    return out


def stage_loops(source: str, kernel: str, stages: int = STAGES) -> str:
    """`source` with `kernel`'s loops over row blocks walked by `tl.range(..., num_stages=stages)`:
    each block's load gets a ring of `stages` buffers, so the next block loads while this one is
    reduced (the launch option num_stages does the same for every loop of the kernel)."""
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    loops = _block_loops(fns[0], tree) if fns else []
    if not loops:
        raise MutationError(f"{kernel} has no single-buffered loop over row blocks that loads")
    for loop in loops:
        it = loop.iter
        assert isinstance(it, ast.Call)
        it.func = _expr("tl.range")
        it.keywords = [ast.keyword(arg="num_stages", value=ast.Constant(stages))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _staged_dual(source: str, kernel: str) -> str:
    """`stage_loops`, then `dual_core=True` on the kernel's launches (MutationError where the launch
    cannot take it)."""
    from kegen.search.operators.mutations.knobs import apply_launch_options

    staged = stage_loops(source, kernel)
    out = apply_launch_options(staged, {kernel: {"dual_core": True}})
    if out == staged:
        raise MutationError(f"{kernel}: no launch takes dual_core")
    return out


def norm_mutations(source: str) -> list[Mutation]:
    """The rows-per-program rewrite (pipelined and plain) of every loop-free row-per-program kernel
    in `source`, and the pipelined form of every kernel's row loops."""
    tree = ast.parse(source)
    one_block = {r.kernel for r in find_row_loops(source)}  # loops that read the row once instead
    out = []
    for fn in jit_functions(tree):
        if _pipelinable(fn):
            out.append(
                Mutation(
                    name=f"row_pipeline@{fn.name}",
                    family=PIPELINE_FAMILY,
                    description=(
                        f"{fn.name}: row loop software-pipelined (the next row's loads issued before this "
                        "row's arithmetic, each row's store deferred to the next iteration) so the DMA "
                        "never waits for the units"
                    ),
                    apply=partial(pipeline, kernel=fn.name),
                    helps=("memory", "latency"),
                    prior=LOOP_PIPELINE_PRIOR,
                    remedies=("overlap",),
                    kernel=fn.name,
                )
            )
        if fn.name not in one_block and _block_loops(fn, tree):
            out.append(
                Mutation(
                    name=f"row_block_stages={STAGES}@{fn.name}",
                    family=STAGE_FAMILY,
                    description=(
                        f"{fn.name}: its loops over row blocks walked by tl.range(num_stages={STAGES}): "
                        "the next block's load overlaps this block's reduction"
                    ),
                    apply=partial(stage_loops, kernel=fn.name),
                    helps=("memory", "latency"),
                    prior=STAGE_PRIOR,
                    remedies=("overlap",),
                    kernel=fn.name,
                )
            )
            out.append(
                Mutation(
                    name=f"row_block_stages={STAGES}+dual_core@{fn.name}",
                    family=STAGE_FAMILY,
                    description=(
                        f"{fn.name}: its loops over row blocks walked by tl.range(num_stages={STAGES}), and "
                        "two programs per PE (dual_core): while one program waits for its last store or an "
                        "uneven segment, the other computes"
                    ),
                    apply=partial(_staged_dual, kernel=fn.name),
                    helps=("memory", "latency"),
                    prior=STAGE_PRIOR - 0.05,
                    remedies=("overlap", "balance"),
                    kernel=fn.name,
                )
            )
        if not _qualifies(tree, fn):
            continue
        try:
            rewrite(source, fn.name, pipelined=True)
            pipelinable = True
        except MutationError:
            pipelinable = False
        if pipelinable:
            out.append(
                Mutation(
                    name=f"rows_per_program={ROWS_PER_PROGRAM},pipelined@{fn.name}",
                    family=PIPELINE_FAMILY,
                    description=(
                        f"{fn.name}: {ROWS_PER_PROGRAM} rows per program, row-invariant loads hoisted, the "
                        "row loop software-pipelined (next row's loads first, each row's store deferred to "
                        "the next iteration): the DMA streams while the units compute"
                    ),
                    apply=partial(rewrite, kernel=fn.name, pipelined=True),
                    helps=("memory", "latency"),
                    prior=PIPELINE_PRIOR,
                    remedies=("overlap", "fewer_bytes"),
                    costs=("parallelism",),
                    kernel=fn.name,
                )
            )
        out.append(
            Mutation(
                name=f"rows_per_program={ROWS_PER_PROGRAM}@{fn.name}",
                family=FAMILY,
                description=(
                    f"{fn.name}: {ROWS_PER_PROGRAM} rows per program in a loop pipelined with "
                    f"num_stages={STAGES} (the next row's load overlaps this row's store), row-invariant "
                    "loads (weight, bias, offsets) hoisted and read once per program"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("memory", "latency"),
                prior=PRIOR,
                remedies=("overlap", "fewer_bytes"),
                costs=("parallelism",),
                kernel=fn.name,
            )
        )
    return out
