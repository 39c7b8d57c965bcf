"""One block per row: a row kernel's chunked passes become straight-line code over one block.

A row kernel often walks its row in chunks, once per pass (statistics, then normalise):

    for start in range(0, n_cols, BLOCK):       # pass 1: x read from DRAM
        ...
    for start in range(0, n_cols, BLOCK):       # pass 2: x read again
        ...

When the row fits the local store a kernel engineer makes one block cover the row: every loop
`for V in range(0, N, BLOCK)` of a `@triton.jit` kernel (start 0, `N` a kernel parameter, `BLOCK` a
`tl.constexpr` parameter, the loop at the top level of the kernel with no loop inside it) becomes its
body after `V = 0` (the body runs once, so loop-carried accumulators stay right), every launch of the
kernel passes `BLOCK=triton.next_power_of_2(<the launch's argument for N>)`, and repeated loads are
reused (`reuse_loads`): x is read once and kept on chip for every pass.

The move declines (`MutationError`) when no loop qualifies, when `BLOCK` tiles a program axis, when
an access whose pointer depends on `BLOCK` or `V` has no mask (a block wider than the row would read
past it), when `V` is read after its loops, or when a launch's argument for `N` cannot be found.
Loops over other bounds, nested loops and loops with loops inside are left as they are. Whether the
row fits is the compiler's call: a block that overflows the local store fails to compile, which
screening rejects before any simulation (`kegen.search.screening`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kegen.search.operators.mutations.base import Mutation, MutationError, constexpr_params
from kegen.search.operators.mutations.blocks import _jit_kernels, block_axes
from kegen.search.operators.mutations.launches import launch_name
from kegen.search.operators.mutations.loads import reuse_loads

ROW_FAMILY = "row_block"
REUSE_PRIOR = 2.0  # loads reused: tried early (the online-softmax recipe's prior)
SINGLE_PASS_PRIOR = 0.8
_RANGES = {"range", "tl.range", "triton.language.range"}
_NOT_JIT_ONLY = ("autotune", "heuristics")  # decorators that choose BLOCK themselves


@dataclass(frozen=True)
class RowLoops:
    """The loops `for V in range(0, bound, block)` at the top level of `kernel` (`count` of them)."""

    kernel: str
    bound: str
    block: str
    count: int


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args]


def _row_loop(stmt: ast.stmt, params: list[str], constexprs: set[str]) -> tuple[str, str, str] | None:
    """(V, N, BLOCK) of `for V in range(0, N, BLOCK)` with N a parameter and BLOCK a constexpr one."""
    if not isinstance(stmt, ast.For) or stmt.orelse or not isinstance(stmt.target, ast.Name):
        return None
    it = stmt.iter
    if not isinstance(it, ast.Call) or ast.unparse(it.func) not in _RANGES or len(it.args) != 3:
        return None
    if ast.unparse(it.func) == "range" and it.keywords:
        return None
    start, stop, step = it.args
    if not (isinstance(start, ast.Constant) and type(start.value) is int and start.value == 0):
        return None
    if not (isinstance(stop, ast.Name) and stop.id in params):
        return None
    if not (isinstance(step, ast.Name) and step.id in constexprs):
        return None
    return stmt.target.id, stop.id, step.id


def _has_inner_loop_or_jump(loop: ast.For) -> bool:
    return any(
        isinstance(n, ast.For | ast.While | ast.Break | ast.Continue | ast.AsyncFor)
        for s in loop.body
        for n in ast.walk(s)
    )


def _loops(fn: ast.FunctionDef) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """(N, BLOCK) -> [(index in the body, V)] of the top-level loops that can become one block."""
    params, constexprs = _params(fn), constexpr_params(fn)
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for i, stmt in enumerate(fn.body):
        m = _row_loop(stmt, params, constexprs)
        if m is not None and isinstance(stmt, ast.For) and not _has_inner_loop_or_jump(stmt):
            out.setdefault((m[1], m[2]), []).append((i, m[0]))
    return out


def _reads_last_value(body: list[ast.stmt], loops: set[int], v: str) -> bool:
    """Whether a statement reads `v` while it holds the last value of one of `loops` (0 once they
    become one block): after such a loop and before `v` is bound again at the top level."""
    stale = False
    for i, s in enumerate(body):
        if i in loops:
            stale = True
            continue
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and s.target.id == v:
            if stale and v in _names_read([ast.Expr(s.iter)]):
                return True
            continue  # another loop binds v in its body (it may run no iteration: v stays as it was)
        if stale and v in _names_read([s]):
            return True
        if isinstance(s, ast.Assign | ast.AnnAssign) and v in _stored_names(s):
            stale = False
    return False


def _stored_names(s: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _names_read(nodes: list[ast.stmt]) -> set[str]:
    return {
        n.id for s in nodes for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _tainted(fn: ast.FunctionDef, seeds: set[str]) -> set[str]:
    """Names whose value depends on `seeds` (through any assignment in the kernel)."""
    taint = set(seeds)
    assigns: list[tuple[list[str], ast.AST]] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            targets = [t.id for tgt in n.targets for t in ast.walk(tgt) if isinstance(t, ast.Name)]
            assigns.append((targets, n.value))
        elif isinstance(n, ast.AugAssign | ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value:
            assigns.append(([n.target.id], n.value))
        elif isinstance(n, ast.For):
            assigns.append(([t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)], n.iter))
    changed = True
    while changed:
        changed = False
        for targets, value in assigns:
            if set(targets) - taint and any(
                isinstance(x, ast.Name) and x.id in taint for x in ast.walk(value)
            ):
                taint |= set(targets)
                changed = True
    return taint


def _arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


def _unmasked_access(fn: ast.FunctionDef, taint: set[str]) -> str | None:
    """The first load/store whose pointer depends on `taint` and that has no mask, as text."""
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        if n.func.attr not in ("load", "store"):
            continue
        ptr = _arg(n, 0, "pointer")
        if ptr is None or not any(isinstance(x, ast.Name) and x.id in taint for x in ast.walk(ptr)):
            continue
        mask = _arg(n, 1 if n.func.attr == "load" else 2, "mask")
        if mask is None and not any(k.arg == "boundary_check" for k in n.keywords):
            return ast.unparse(n)
    return None


def _check_kernel(fn: ast.FunctionDef, bound: str, block: str, loops: list[tuple[int, str]]) -> None:
    """Raise MutationError when the loops over (`bound`, `block`) cannot become one block."""
    deco = " ".join(ast.unparse(d) for d in fn.decorator_list)
    if any(word in deco for word in _NOT_JIT_ONLY):
        raise MutationError(f"{fn.name}: a decorator ({deco}) chooses {block}; the launch does not")
    if block in block_axes(fn):
        raise MutationError(f"{fn.name}: {block} tiles a program axis, not the row")
    assigned = _stored_names(fn)
    for name in (bound, block):
        if name in assigned:
            raise MutationError(
                f"{fn.name}: {name} is reassigned in the kernel; the launch's value is not the loop's"
            )
    indices = {i for i, _ in loops}
    for v in {v for _, v in loops}:
        if v in _params(fn):
            raise MutationError(f"{fn.name}: the loop variable {v} is a kernel parameter")
        if _reads_last_value(fn.body, indices, v):
            raise MutationError(f"{fn.name}: the loop variable {v} is read after its loop (its last value)")
    bad = _unmasked_access(fn, _tainted(fn, {block} | {v for _, v in loops}))
    if bad is not None:
        raise MutationError(
            f"{fn.name}: `{bad}` has no mask; a block of next_power_of_2({bound}) would reach past the row"
        )


def find_row_loops(source: str) -> list[RowLoops]:
    """Every (kernel, N, BLOCK) whose row loops can become one block (the move applies to each)."""
    tree = ast.parse(source)
    out: list[RowLoops] = []
    for name, fn in _jit_kernels(tree).items():
        for (bound, block), loops in _loops(fn).items():
            try:
                _check_kernel(fn, bound, block, loops)
                _launch_edits(tree, fn, bound, block)
            except (MutationError, RecursionError):
                continue
            out.append(RowLoops(name, bound, block, len(loops)))
    return out


def _launches(tree: ast.Module, kernel: str) -> list[ast.Call]:
    jit = set(_jit_kernels(tree))
    calls: list[ast.Call] = []
    for top in tree.body:
        if isinstance(top, ast.FunctionDef) and top.name in jit:
            continue
        calls += [n for n in ast.walk(top) if isinstance(n, ast.Call) and launch_name(n) == kernel]
    return calls


def _launch_edits(
    tree: ast.Module, fn: ast.FunctionDef, bound: str, block: str
) -> list[tuple[ast.Call, ast.expr]]:
    """(launch, its expression for `bound`) for every launch of `fn`; MutationError if one is unclear."""
    params = _params(fn)
    calls = _launches(tree, fn.name)
    if not calls:
        raise MutationError(f"no launch of {fn.name} in the module")
    out: list[tuple[ast.Call, ast.expr]] = []
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise MutationError(f"a launch of {fn.name} passes *args/**kwargs: cannot map {bound}")
        value = _arg(call, params.index(bound), bound)
        if value is None:
            raise MutationError(f"a launch of {fn.name} does not pass {bound}")
        out.append((call, value))
    return out


def _set_block(call: ast.Call, fn: ast.FunctionDef, block: str, value: ast.expr) -> None:
    for k in call.keywords:
        if k.arg == block:
            k.value = value
            return
    pos = _params(fn).index(block)
    if pos < len(call.args):
        call.args[pos] = value
    else:
        call.keywords.append(ast.keyword(arg=block, value=value))


def _triton_name(tree: ast.Module) -> str:
    """How the module names `triton` (`import triton` added when it is not imported)."""
    for n in tree.body:
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == "triton":
                    return a.asname or "triton"
    last = max((i for i, n in enumerate(tree.body) if isinstance(n, ast.Import | ast.ImportFrom)), default=-1)
    tree.body.insert(last + 1, ast.Import(names=[ast.alias(name="triton")]))
    return "triton"


def one_block_per_row(source: str, kernel: str, bound: str, block: str) -> tuple[str, int]:
    """`source` with `kernel`'s loops over (`bound`, `block`) made one block, and how many loads
    were reused; MutationError when they do not qualify."""
    try:
        return _one_block_per_row(source, kernel, bound, block)
    except RecursionError as e:  # an expression nested deeper than the AST walkers go
        raise MutationError(f"{kernel}: an expression is nested too deeply to rewrite") from e


def _one_block_per_row(source: str, kernel: str, bound: str, block: str) -> tuple[str, int]:
    tree = ast.parse(source)
    fn = _jit_kernels(tree).get(kernel)
    if fn is None:
        raise MutationError(f"no @triton.jit kernel named {kernel}")
    loops = _loops(fn).get((bound, block))
    if not loops:
        raise MutationError(f"{kernel} has no top-level loop `for V in range(0, {bound}, {block})`")
    _check_kernel(fn, bound, block, loops)
    edits = _launch_edits(tree, fn, bound, block)
    triton = _triton_name(tree)
    for call, n_expr in edits:
        new = ast.parse(f"{triton}.next_power_of_2({ast.unparse(n_expr)})", mode="eval").body
        _set_block(call, fn, block, new)
    body: list[ast.stmt] = []
    starts = dict(loops)
    for i, stmt in enumerate(fn.body):
        if i in starts and isinstance(stmt, ast.For):
            body.append(ast.Assign(targets=[ast.Name(starts[i], ast.Store())], value=ast.Constant(0)))
            body.extend(stmt.body)
        else:
            body.append(stmt)
    fn.body = body
    reused = reuse_loads(fn, taken={n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", reused


def _apply(kernel: str, bound: str, block: str):  # type: ignore[no-untyped-def]
    def apply(source: str) -> str:
        return one_block_per_row(source, kernel, bound, block)[0]

    return apply


def row_mutations(source: str) -> list[Mutation]:
    """The one-block-per-row move for every kernel whose row loops qualify."""
    muts: list[Mutation] = []
    for r in find_row_loops(source):
        try:
            _, reused = one_block_per_row(source, r.kernel, r.bound, r.block)
        except MutationError:
            continue
        loops = f"{r.count} loop{'s' if r.count > 1 else ''}"
        muts.append(
            Mutation(
                name=f"row_block={r.bound}@{r.kernel}",
                family=ROW_FAMILY,
                description=(
                    f"one block per row in {r.kernel}: its {loops} over {r.bound} in steps of {r.block} "
                    f"become straight-line code ({r.block} = next_power_of_2({r.bound})), "
                    f"{reused} repeated load{'s' if reused != 1 else ''} reused from the local store"
                ),
                apply=_apply(r.kernel, r.bound, r.block),
                # passes that re-read the row read it once: the move for a memory-bound row kernel;
                # a single pass only gets bigger commands and no loop (one K-loop of a GEMM, say)
                helps=("memory", "latency") if reused else ("latency",),
                prior=REUSE_PRIOR if reused else SINGLE_PASS_PRIOR,
                remedies=("fewer_bytes",) if reused else ("bigger_commands",),
                kernel=r.kernel,
            )
        )
    return muts
