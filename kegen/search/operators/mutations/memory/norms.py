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
import re
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.knobs import apply_launch_options
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.row_pipeline import (
    call_arg,
    call_name,
    loop_step,
    parse_expr,
    pipeline,
    pipeline_loop,
    pipelined,
    row_loop_var,
    row_loops_pipelinable,
    stored_names,
)
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
        for name in stored_names(st) | (stored_names(st) if isinstance(st, ast.AugAssign) else set()):
            counts[name] = counts.get(name, 0) + 1
    dependent, hoisted, looped = {row}, [], []
    for st in body:
        is_store = any(isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.store" for n in ast.walk(st))
        once = all(counts.get(n, 0) == 1 for n in stored_names(st))  # not an accumulator (re-set per row)
        if isinstance(st, ast.Assign) and once and not (names_in(st.value) & dependent) and not is_store:
            hoisted.append(st)
        else:
            looped.append(st)
            dependent |= stored_names(st)
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


def _block_loops(fn: ast.FunctionDef, tree: ast.Module) -> list[ast.For]:
    """The top-level loops over row blocks (`range(lo, hi, R)`, R not 1) that load by their variable
    and are single-buffered (no num_stages on the loop nor on a launch of the kernel)."""
    for name, _, call in launches(tree):
        if name == fn.name and any(k.arg == "num_stages" for k in call.keywords):
            return []
    out = []
    for st in fn.body:
        if not (isinstance(st, ast.For) and row_loop_var(st) is not None and loop_step(st) != "1"):
            continue
        it = st.iter
        assert isinstance(it, ast.Call)
        if any(k.arg == "num_stages" for k in it.keywords) or pipelined(st.body):
            continue  # staged already, or software-pipelined by hand (its prefetch is its second buffer)
        var = row_loop_var(st)
        follows = {var}
        for n in st.body:
            if isinstance(n, ast.Assign) and names_in(n.value) & follows:
                follows |= stored_names(n)
        loads = [n for n in ast.walk(st) if call_name(n) == "tl.load"]
        if any(names_in(call_arg(c, 0, "pointer") or c) & follows for c in loads):  # type: ignore[arg-type]
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
        it.func = parse_expr("tl.range")
        it.keywords = [ast.keyword(arg="num_stages", value=ast.Constant(stages))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _staged_dual(source: str, kernel: str) -> str:
    """`stage_loops`, then `dual_core=True` on the kernel's launches (MutationError where the launch
    cannot take it)."""
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
        if row_loops_pipelinable(fn):
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
            rows_pipelined = True
        except MutationError:
            rows_pipelined = False
        if rows_pipelined:
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
