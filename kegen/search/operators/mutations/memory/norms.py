"""Row kernels (norms, softmax): several rows per program, walked by a pipelined loop.

A row-per-program kernel (`row = tl.program_id(0)`, launched over `(n_rows,)`) that already reads
its row once (one block per row, the `rows` move) is memory-bound on mtia with the DMA waiting:
each program loads its row, reduces, stores, and ends waiting for the store (CORE:end_wait_DMA,
DMA:dependency), and every program reloads the weight and bias rows. The kernel engineer's move:
one program takes ROWS_PER consecutive rows; the body runs in `for row in tl.range(first, last,
num_stages=2)` so the next row's load overlaps this row's arithmetic and store; statements that do
not depend on the row (the column offsets and masks, the weight and bias rows) are hoisted out of
the loop and read once per program. The loop is a scalar-step row loop, which the `vectorize`
move then takes R rows per step (larger DMA commands).
"""

from __future__ import annotations

import ast
import re
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.launches import launches

FAMILY = "rows_per_program"
PRIOR = 1.6
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


def rewrite(source: str, kernel: str, rows_per: int = ROWS_PER_PROGRAM, stages: int = STAGES) -> str:
    """`source` with row kernel `kernel` taking ROWS_PER rows per program (see the module doc)."""
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


def norm_mutations(source: str) -> list[Mutation]:
    """The rows-per-program rewrite of every loop-free row-per-program kernel in `source`."""
    tree = ast.parse(source)
    out = []
    for fn in jit_functions(tree):
        if not _qualifies(tree, fn):
            continue
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
