"""mtia rewrite of a dot kernel's output tile as two halves along M sharing one K loop.

A plan-form dot kernel (one `acc = tl.zeros((BM, BN))`, one K loop with `tl.dot`, an epilogue, one
final store) ends every program the same way: the last K step's dot, the epilogue on the SIMD, then
the store, with the DMA idle until the whole tile is cast. When all programs fit one wave (a small
GEMM) the whole chip waits on that tail. Here the tile is computed as two [BM / 2, BN] accumulators
in the same K loop (each K step loads the B tile once and one A tile per half, then two dots), and
the epilogue and store run once per half, the first half's before the second's: the first half's
store then drains while the second half's last dot and epilogue run. Unlike `split_store` (halves
along N, one K loop each) nothing is loaded twice. Measured at full size (docs/results/
stationary_moves_mtia.md): gemm_fp16_512 from the seed's blocks set to 64x64x128, two stages:
64 programs, 9.74 us -> 9.11 us (78.9% -> 84.3% of its roofline).
"""

from __future__ import annotations

import ast
import copy
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, RenameNames, jit_functions, reads
from kegen.search.operators.mutations.blocks import find_blocks
from kegen.search.operators.mutations.memory.row_pipeline import stored_names
from kegen.search.operators.templates.linear_stationary import FALLBACK, PlanForm, split_dependent

SUFFIX = "_h1"
MIN_BLOCK_M = 64  # the DPE works on 32-row tiles: each half keeps at least that


def _halves(stmts: list[ast.stmt], dep: set[str], renamed: set[str]) -> list[ast.stmt]:
    """`stmts` as: those that do not depend on the M half (in order), then those that do, then their
    second-half copies. `dep` and `renamed` grow with the names the dependent statements assign."""
    if any(isinstance(st, ast.For | ast.While | ast.If | ast.With | ast.Return) for st in stmts):
        raise MutationError("control flow beside the K loop: not split into M halves")
    if any(isinstance(n, ast.Call) and "atomic" in ast.unparse(n.func) for st in stmts for n in ast.walk(st)):
        raise MutationError("atomics: not split into M halves")
    free, tied = split_dependent(stmts, dep)
    seen: set[str] = set()  # what the dependent statements so far read
    for st in stmts:
        if any(st is t for t in tied):
            seen |= reads(st)
        elif stored_names(st) & seen:
            raise MutationError("a shared statement reassigns a name the M half read before it")
    renamed |= set().union(*(stored_names(st) for st in tied))
    env = {name: name + SUFFIX for name in renamed}
    second = [RenameNames(env).visit(copy.deepcopy(st)) for st in tied]
    return [*free, *tied, *second]


def rewrite(source: str, kernel: str) -> str:
    """The module with `kernel`'s output tile computed as two M halves in one K loop (MutationError
    where the kernel is not of plan form: a split kernel has two accumulators and is not)."""
    tree = ast.parse(source)
    fn = next((f for f in jit_functions(tree) if f.name == kernel), None)
    if fn is None:
        raise MutationError(f"no jit kernel {kernel}")
    form = PlanForm(fn)
    sizes = [s.value for s in find_blocks(source) if s.kernel == kernel and s.param == form.bm]
    if sizes and min(sizes) < MIN_BLOCK_M:
        raise MutationError(f"{form.bm} of {kernel} is {min(sizes)}: halves below 32 rows waste the DPE")
    body = fn.body
    offs_stmt, acc_stmt, loop = body[form.i_offs], body[form.i_acc], body[form.i_loop]
    assert (
        isinstance(offs_stmt, ast.Assign) and isinstance(acc_stmt, ast.Assign) and isinstance(loop, ast.For)
    )
    others = [s for i, s in enumerate(body) if i not in (form.i_offs, form.i_acc)]
    if any(isinstance(n, ast.Name) and n.id == form.bm for s in others for n in ast.walk(s)):
        raise MutationError(f"{form.bm} sizes more than the M offsets and the accumulator of {kernel}")
    (offs,) = stored_names(offs_stmt)
    (acc,) = stored_names(acc_stmt)
    half = f"({form.bm} // 2)"
    arange = next(
        n for n in ast.walk(offs_stmt.value) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.arange"
    )
    arange.args[-1] = ast.parse(half, mode="eval").body
    acc_stmt.value.args[0].elts[0] = ast.parse(half, mode="eval").body  # type: ignore[attr-defined]
    second_offs = ast.parse(f"{offs}{SUFFIX} = {offs} + {half}").body[0]
    acc_h1 = RenameNames({acc: acc + SUFFIX}).visit(copy.deepcopy(acc_stmt))
    dep, renamed = {offs, acc}, {offs, acc}
    between = [
        s for i, s in enumerate(body[form.i_offs + 1 : form.i_loop], form.i_offs + 1) if i != form.i_acc
    ]
    head = [*body[: form.i_offs], offs_stmt, second_offs, *_halves(between, dep, renamed)]
    loop.body = _halves(loop.body, dep, renamed)
    if not any(acc + SUFFIX in ast.unparse(s) for s in loop.body):
        raise MutationError(f"the K loop of {kernel} does not accumulate into {acc}")
    fn.body = [*head, acc_stmt, acc_h1, loop, *_halves(body[form.i_loop + 1 :], dep, renamed)]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def m_halves_mutations(source: str) -> list[Mutation]:
    """The M-halves rewrite of every plan-form dot kernel of `source` (mtia)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    stationary = "M_TILES" in source
    for fn in jit_functions(tree):
        if stationary and fn.name.endswith(FALLBACK):
            continue  # linear_stationary's fallback: launched only where the stationary tiles do not fit
        try:
            rewrite(source, fn.name)
        except (MutationError, StopIteration):
            continue
        out.append(
            Mutation(
                name=f"m_halves@{fn.name}",
                family="store_overlap",
                description=(
                    f"compute {fn.name}'s output tile as two halves along M in the same K loop (B loaded "
                    "once per step, one dot per half), the epilogue and store once per half, the first "
                    "half's store draining while the second half's last dot and epilogue run"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("memory", "latency"),
                prior=1.5,
                remedies=("overlap",),
                kernel=fn.name,
            )
        )
    return out
