"""Jagged kernels: one program per segment becomes one program per PE walking a run of segments
balanced by their rows.

A jagged kernel launched with one program per segment (`SEG = tl.program_id(0)`, the segment's rows
`tl.load(OFF + SEG)` .. `tl.load(OFF + SEG + 1)`) is dealt to the PEs round robin: PE i runs
segments i, i + 64, ... whatever their lengths. With long-tail lengths the PEs' row counts differ
and the last PEs run alone at the end: the production jagged softmax spent its last ~30 of 133 us
with the DRAM under half busy. The move, as a kernel engineer writes it:

    pid, nprog = tl.program_id(0), tl.num_programs(0)
    base, total = OFF[0], OFF[NSEG]
    share_lo = base + pid * (total - base) // nprog          # this program's rows
    share_hi = base + (pid + 1) * (total - base) // nprog
    s0 = #segments starting before share_lo; s1 = the same for share_hi (NSEG for the last program)
    for SEG in range(s0, s1):
        ... the kernel's body ...

Each segment is counted by its start, so the runs tile [0, NSEG) exactly (offsets are non-decreasing,
as a jagged tensor's are). The counts are a two-level search over the offsets: COARSE strided starts,
then FINE consecutive ones (COARSE x FINE >= NSEG, both powers of two chosen at launch, so the loads
stay small for a million segments). The launch becomes `min(SEG_PROGRAMS, NSEG)` programs (the PEs of
the compile machine; twice that with dual core) and passes NSEG. Measured on the production jagged
softmax (mtia-2i, simulated, same inputs): 133.4 -> 122.4 us (87.6% -> 95.4% of its roofline).

Recognised form: a `@triton.jit` kernel whose top-level `SEG = tl.program_id(0)` is its only
program-id read (no `tl.num_programs`, no `return`, no parameter defaults), which loads
`OFF + SEG` and `OFF + SEG + 1` with OFF a parameter, launched once on a 1-D grid `(NSEG,)`.
"""

from __future__ import annotations

import ast
import re
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.footprint import compile_pes
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.row_pipeline import _fresh, assign_target, call_name, parse_expr

FAMILY = "segment_balance"
PRIOR = 1.6

_PARTITION = """
{pid} = tl.program_id(0)
{nprog} = tl.num_programs(0)
{base} = tl.load({off}).to(tl.int64)
{total} = tl.load({off} + {nseg}).to(tl.int64)
{lo} = {base} + {pid} * ({total} - {base}) // {nprog}
{hi} = {base} + ({pid} + 1) * ({total} - {base}) // {nprog}
{steps} = tl.arange(0, {coarse}) * {fine}
{firsts} = tl.load({off} + {steps}, mask={steps} < {nseg}, other={total})
{at_lo} = tl.maximum(tl.sum(({firsts} < {lo}).to(tl.int32)) - 1, 0) * {fine}
{at_hi} = tl.maximum(tl.sum(({firsts} < {hi}).to(tl.int32)) - 1, 0) * {fine}
{near_lo} = {at_lo} + tl.arange(0, {fine})
{near_hi} = {at_hi} + tl.arange(0, {fine})
{s0} = {at_lo} + tl.sum(
    (tl.load({off} + {near_lo}, mask={near_lo} < {nseg}, other={total}) < {lo}).to(tl.int32))
{s1} = {at_hi} + tl.sum(
    (tl.load({off} + {near_hi}, mask={near_hi} < {nseg}, other={total}) < {hi}).to(tl.int32))
{s1} = tl.where({pid} == {nprog} - 1, {nseg}, {s1})
"""


def _pid_name(fn: ast.FunctionDef) -> str | None:
    pids = ("tl.program_id", "tl.num_programs")
    reads = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and call_name(n).startswith(pids)]
    binds = [st for st in fn.body if isinstance(st, ast.Assign) and _is_pid0(st.value)]
    if len(reads) != 1 or len(binds) != 1 or assign_target(binds[0]) is None:
        return None
    return assign_target(binds[0])


def _is_pid0(e: ast.AST) -> bool:
    return (isinstance(e, ast.Call) and call_name(e) == "tl.program_id" and len(e.args) == 1
            and isinstance(e.args[0], ast.Constant) and e.args[0].value == 0)


def _offsets_param(fn: ast.FunctionDef, seg: str) -> str | None:
    """OFF of top-level loads `tl.load(OFF + SEG)` and `tl.load(OFF + SEG + 1)`, OFF a parameter."""
    params = {a.arg for a in fn.args.args}
    found: dict[str, set[str]] = {}
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Call) and call_name(n) == "tl.load" and n.args):
            continue
        text = ast.unparse(n.args[0]).replace(" ", "")
        q = re.escape(seg)
        m = re.fullmatch(rf"(\w+)\+(?:(?P<start>{q})|\({q}\+1\)|{q}\+1)", text)
        if m and m[1] in params:
            found.setdefault(m[1], set()).add("start" if m["start"] else "end")
    both = [name for name, kinds in found.items() if kinds == {"start", "end"}]
    return both[0] if len(both) == 1 else None


def _plan(fn: ast.FunctionDef) -> tuple[str, str] | None:
    seg = _pid_name(fn)
    if seg is None or any(isinstance(n, ast.Return) for n in ast.walk(fn)):
        return None
    if fn.args.defaults or fn.args.kw_defaults or fn.args.kwonlyargs or fn.args.vararg:
        return None
    if sum(seg in {t.id for t in ast.walk(st) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
           for st in ast.walk(fn) if isinstance(st, ast.stmt) and not isinstance(st, ast.FunctionDef)) != 1:
        return None  # SEG is bound once
    off = _offsets_param(fn, seg)
    return (seg, off) if off is not None else None


def _launch(tree: ast.Module, kernel: str) -> tuple[ast.Call, ast.expr]:
    found = [call for name, _, call in launches(tree) if name == kernel]
    if len(found) != 1 or not isinstance(found[0].func, ast.Subscript):
        raise MutationError(f"{kernel} is not launched exactly once with a grid")
    grid = found[0].func.slice
    elts = grid.elts if isinstance(grid, ast.Tuple | ast.List) else None
    if elts is None or len(elts) != 1 or isinstance(elts[0], ast.Starred):
        raise MutationError(f"the grid of {kernel} is not one dimension (NSEG,)")
    return found[0], elts[0]


def search_steps(count: str, least: str = "32") -> tuple[str, str]:
    """Launch expressions of the two-level search over `count` offsets: FINE ~ sqrt(count), at least
    `least` (both levels' loads stay small, up to a million segments), and COARSE =
    next_power_of_2(cdiv(count, FINE)); both powers of two."""
    fine = f"max({least}, triton.next_power_of_2(int(({count}) ** 0.5)))"
    return fine, f"triton.next_power_of_2(triton.cdiv({count}, {fine}))"


def rewrite(source: str, kernel: str) -> str:
    """`source` with `kernel` walking row-balanced runs of segments (module doc)."""
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    plan = _plan(fns[0]) if fns else None
    if plan is None:
        raise MutationError(f"{kernel} is not a one-program-per-segment jagged kernel")
    fn = fns[0]
    seg, off = plan
    call, nseg_expr = _launch(tree, kernel)
    taken = names_in(tree) | {a.arg for a in fn.args.args}
    nm = {k: _fresh(taken, f"kegen_{k}") for k in
          ("pid", "nprog", "base", "total", "lo", "hi", "steps", "firsts", "at_lo", "at_hi", "near_lo",
           "near_hi", "s0", "s1", "nseg")}
    fine, coarse = _fresh(taken, "SEG_FINE_BLOCK"), _fresh(taken, "SEG_COARSE_BLOCK")
    fn.args.args += [ast.arg(arg=nm["nseg"]), ast.arg(arg=fine), ast.arg(arg=coarse)]
    fn.args.args[-2].annotation = parse_expr("tl.constexpr")
    fn.args.args[-1].annotation = parse_expr("tl.constexpr")
    at = next(i for i, st in enumerate(fn.body) if isinstance(st, ast.Assign) and _is_pid0(st.value))
    head = ast.parse(_PARTITION.format(off=off, coarse=coarse, fine=fine, **nm)).body
    loop = ast.For(target=ast.Name(seg, ast.Store()), iter=parse_expr(f"range({nm['s0']}, {nm['s1']})"),
                   body=fn.body[at + 1:], orelse=[])
    fn.body = [*fn.body[:at], *head, loop]
    # the launch: one program per PE (two with dual core), the segment count and the search's blocks
    dual = any(k.arg == "dual_core" and isinstance(k.value, ast.Constant) and k.value.value
               for k in call.keywords)
    programs = "2 * SEG_PROGRAMS" if dual else "SEG_PROGRAMS"
    nseg = ast.unparse(nseg_expr)
    assert isinstance(call.func, ast.Subscript)
    call.func.slice = parse_expr(f"(min({programs}, {nseg}),)")
    call.keywords = [k for k in call.keywords if k.arg != "pe_mapping"]
    fine_value, coarse_value = search_steps(nseg)
    call.keywords += [
        ast.keyword(arg=nm["nseg"], value=parse_expr(nseg)),
        ast.keyword(arg=fine, value=parse_expr(fine_value)),
        ast.keyword(arg=coarse, value=parse_expr(coarse_value)),
    ]
    out = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    if not re.search(r"^SEG_PROGRAMS = ", out, flags=re.M):
        lines = out.splitlines(keepends=True)
        first = next((i for i, ln in enumerate(lines) if ln.startswith(("@triton.jit", "@jit"))), len(lines))
        lines.insert(first, f"SEG_PROGRAMS = {compile_pes()}  # one program per PE\n\n")
        out = "".join(lines)
    return out


def segment_balance_mutations(source: str) -> list[Mutation]:
    """The row-balanced form of every one-program-per-segment kernel in `source`."""
    out = []
    tree = ast.parse(source)
    for fn in jit_functions(tree):
        if _plan(fn) is None:
            continue
        try:
            _launch(tree, fn.name)
        except MutationError:
            continue
        out.append(
            Mutation(
                name=f"segment_balance@{fn.name}",
                family=FAMILY,
                description=(
                    f"{fn.name}: one program per PE walking a run of segments balanced by their rows "
                    "(a two-level search over the offsets), instead of one program per segment dealt "
                    "round robin"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("latency", "memory"),
                prior=PRIOR,
                remedies=("balance",),
                kernel=fn.name,
            )
        )
    return out
