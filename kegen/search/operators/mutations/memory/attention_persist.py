"""Persistent attention (mtia): one program per core walks its (query block, head) tiles.

An online-softmax attention kernel launched on a 2-D grid (`X = tl.program_id(0)` the query block,
`Y = tl.program_id(1)` the batch-head) gives each PE one program per tile: every PE loads its Q tile
at the start with nothing to compute and stores its output at the end with nothing left to overlap,
all PEs at once, so the DRAM bursts while the SIMD idles (the production attention, 128 queries per
tile: ~8 us at the start and ~6 us at the end of a 75 us kernel). The move, as a kernel engineer
writes it:

- the grid becomes `min(PERSIST_PROGRAMS, tiles)` programs (one per PE of the machine this process
  compiles for; two per PE with dual core),
  and each program walks tiles `pid, pid + nprog, ...` with `X = tile // G1`, `Y = tile % G1`: the
  programs running together cover every head first, so a program's next tile is the same head
  (its K and V stay in the SRAM cache) and the tile transitions do not all miss at once;
- every load before the key loop that depends on the tile (Q, and the first K tile of the
  score-ahead form) is issued for the *next* tile just before this tile's key loop and carried into
  the next iteration, so a tile starts with its operands on chip and the output store of one tile
  drains under the next tile's key loop.

Measured on the production attention (mtia-2i, score-ahead + exp2 kernel, 128-query tiles): 78.3 us
(one tile per program) -> 72.6 us; tiles in launch order (heads last) 74.1 us; next Q loaded at the
very start of a tile 77.2 us (it competes with the tile's own first loads). Each variant also comes
with the query blocks first (each head's query tiles run together, so the programs reading one K
block wait on one SRAM-cache fill instead of sixteen heads' fills sharing the DRAM): slower on that
kernel, faster once the softmax is on a fixed reference (attention_rescale: 62.8 -> 60.0 us).

Recognised form: a `@triton.jit` kernel with exactly one top-level `for` loop that holds a `tl.dot`
and an exponential, `X = tl.program_id(0)` and `Y = tl.program_id(1)` assigned once before it, no
other program-id or program-count reads, no `return`, a `tl.store` after the loop, and one launch
whose grid is a 2-tuple. The names a carried load's address reads are assigned once in the kernel.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions, names_in
from kegen.search.operators.mutations.blocks import find_blocks, set_block
from kegen.search.operators.mutations.footprint import compile_pes
from kegen.search.operators.mutations.grids import grid_expr
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.row_pipeline import (
    _fresh,
    assign_target,
    call_arg,
    call_name,
    parse_expr,
)

FAMILY = "attention_persist"
PRIOR = 1.6  # below the score-ahead (2.2) and exp2 (1.8) moves: persistent last carries the first K tile too
PROGRAMS = 64  # one program per PE (two per PE with dual core): mtia-2i's PEs, where no machine is read
QUERY_BLOCK = 128  # the variant's query block: 64-query tiles measured 86.7 us persistent (DPE setup)
_EXPS = ("tl.exp", "tl.exp2", "tl.math.exp", "tl.math.exp2")
_LOAD_KEYWORDS = {"pointer", "mask", "other", "cache_modifier", "eviction_policy", "volatile"}


@dataclass
class _Plan:
    x: str  # the name bound to tl.program_id(0)
    y: str  # the name bound to tl.program_id(1)
    loop: int  # index of the key loop in the kernel body
    loads: list[int]  # indices of the prologue loads that follow the tile
    env: dict[str, ast.expr]  # prologue names assigned once -> their values (inlined into addresses)


def tile_scope(fn: ast.FunctionDef) -> ast.FunctionDef:
    """The scope the attention moves read a kernel in: `fn` itself, or for a persistent kernel (its
    one top-level loop holds one loop: the key loop inside the tile loop) a stand-in whose body is the
    tile loop's body (the same list: rewrites of the stand-in change the kernel) and whose name and
    parameters are `fn`'s."""
    outer = [st for st in fn.body if isinstance(st, ast.For)]
    if len(outer) != 1 or sum(isinstance(st, ast.For) for st in outer[0].body) != 1:
        return fn
    scope = ast.FunctionDef(name=fn.name, args=fn.args, body=outer[0].body, decorator_list=[], returns=None)
    scope.type_params = []  # type: ignore[attr-defined]  # a field from Python 3.12 on
    return scope


def tile_prefetch_index(body: list[ast.stmt]) -> int | None:
    """In a persistent kernel's tile-loop body, the index of `persist_next = persist_tile + persist_nprog`
    (where the next tile's loads start), else None. A move that adds loads before the key loop puts them
    ahead of it: the next tile's loads queue behind this tile's first ones, not in front of them."""
    for i, st in enumerate(body):
        target = assign_target(st)
        v = getattr(st, "value", None)
        if (
            target is not None
            and target.startswith("persist_next")
            and isinstance(v, ast.BinOp)
            and isinstance(v.op, ast.Add)
            and all(isinstance(x, ast.Name) for x in (v.left, v.right))
            and ast.unparse(v).startswith("persist_tile")
        ):
            return i
    return None


def _program_id_axis(node: ast.AST) -> int | None:
    if call_name(node) == "tl.program_id" and isinstance(node, ast.Call) and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
            return arg.value
        return -1
    return None


def _store_counts(fn: ast.FunctionDef) -> dict[str, int]:
    """How many times each name is assigned in `fn`."""
    counts: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts


def _plan(fn: ast.FunctionDef) -> _Plan:
    """The persistent form's plan of `fn`; MutationError naming why it does not apply."""
    loops = [i for i, st in enumerate(fn.body) if isinstance(st, ast.For)]
    if len(loops) != 1:
        raise MutationError(f"{fn.name} has {len(loops)} top-level loops; the persistent form takes one")
    li = loops[0]
    loop = fn.body[li]
    calls = {call_name(n) for n in ast.walk(loop)}
    if "tl.dot" not in calls or not calls & set(_EXPS):
        raise MutationError(f"the loop of {fn.name} is not an online softmax (no tl.dot and exponential)")
    if any(isinstance(n, ast.Return) for n in ast.walk(fn)):
        raise MutationError(f"{fn.name} returns early; every program must reach the end of each tile")
    if any(call_name(n) in ("tl.num_programs", "tl.atomic_add", "tl.atomic_cas", "tl.atomic_xchg")
           for n in ast.walk(fn)):
        raise MutationError(f"{fn.name} reads the program count or uses atomics")
    counts = _store_counts(fn)
    axes: dict[int, str] = {}
    for st in fn.body[:li]:
        target = assign_target(st)
        axis = _program_id_axis(st.value) if target and isinstance(st, ast.Assign) else None
        if axis is not None and target is not None:
            if axis in axes or axis not in (0, 1) or counts.get(target) != 1:
                raise MutationError(f"{fn.name}: program ids other than X = program_id(0), Y = program_id(1)")
            axes[axis] = target
    reads = [n for n in ast.walk(fn) if _program_id_axis(n) is not None]
    if sorted(axes) != [0, 1] or len(reads) != 2:
        raise MutationError(f"{fn.name} does not read exactly program_id(0) and program_id(1) once each")
    if not any(call_name(n) == "tl.store" for st in fn.body[li + 1:] for n in ast.walk(st)):
        raise MutationError(f"{fn.name} stores nothing after its loop")
    env: dict[str, ast.expr] = {}
    loads: list[int] = []
    tile_names = {axes[0], axes[1]}
    for i, st in enumerate(fn.body[:li]):
        target = assign_target(st)
        if target is None or not isinstance(st, ast.Assign):
            continue
        value = st.value
        if call_name(value) == "tl.load":
            assert isinstance(value, ast.Call)
            if {k.arg for k in value.keywords} - _LOAD_KEYWORDS or len(value.args) > 3:
                raise MutationError(f"`{ast.unparse(value)}` has options the carried load does not take")
            if names_in(value) & tile_names:
                if any(counts.get(n, 0) > 1 for n in names_in(value) if n in env or n in tile_names):
                    raise MutationError(f"`{ast.unparse(value)}` reads a name assigned more than once")
                loads.append(i)
        if counts.get(target) == 1 and target not in (axes[0], axes[1]):
            env[target] = value
            if names_in(value) & tile_names:
                tile_names.add(target)
    if not loads:
        raise MutationError(f"{fn.name} loads nothing before its loop that depends on the tile")
    return _Plan(axes[0], axes[1], li, loads, env)


class _Inline(ast.NodeTransformer):
    def __init__(self, env: dict[str, ast.expr]) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.env:
            return self.visit(copy.deepcopy(self.env[node.id]))
        return node


def tile_coords(tile: str, nm: _Names, heads_first: bool) -> tuple[str, str]:
    """(X, Y) of tile `tile`: heads first (X = tile // G1, Y = tile % G1: the programs running together
    cover every head) or query blocks first (X = tile % G0, Y = tile // G0: each head's query blocks
    run together, the launch order)."""
    if heads_first:
        return f"({tile}) // {nm.g1}", f"({tile}) % {nm.g1}"
    return f"({tile}) % {nm.g0}", f"({tile}) // {nm.g0}"


def _load_at(
    call: ast.Call, env: dict[str, ast.expr], x: str, y: str, tile: str, nm: _Names, heads_first: bool
) -> ast.Call:
    """`call` (a tl.load) for tile `tile`: prologue names inlined, X and Y from the tile, masked to tiles."""
    tiles = nm.tiles
    at = dict(env)
    cx, cy = tile_coords(tile, nm, heads_first)
    at[x] = parse_expr(cx)
    at[y] = parse_expr(cy)
    inline = _Inline(at)
    out = inline.visit(copy.deepcopy(call))
    assert isinstance(out, ast.Call)
    valid = parse_expr(f"({tile}) < {tiles}")
    mask = call_arg(out, 1, "mask")
    new_mask = valid if mask is None else ast.BinOp(left=mask, op=ast.BitAnd(), right=valid)
    other = call_arg(out, 2, "other")
    kws = [k for k in out.keywords if k.arg not in ("mask", "other")]
    kws.append(ast.keyword(arg="mask", value=new_mask))
    if other is not None:
        kws.append(ast.keyword(arg="other", value=other))
    load = ast.Call(func=out.func, args=[call_arg(out, 0, "pointer")], keywords=kws)  # type: ignore[list-item]
    if sum(call_name(n) == "tl.load" for n in ast.walk(load)) != 1:
        raise MutationError(f"the address of `{ast.unparse(call)}` depends on another load")
    return load


def _check_free(load: ast.Call, allowed: set[str]) -> None:
    """MutationError unless `load` (a carried load, inlined) reads only kernel parameters and globals."""
    free = sorted(n for n in names_in(load) if n not in allowed)
    if free:
        raise MutationError(f"the carried load `{ast.unparse(load)}` reads {free}, assigned more than once")


@dataclass
class _Names:
    """The fresh names the persistent form introduces."""

    g0: str
    g1: str
    pid: str
    nprog: str
    tiles: str
    tile: str
    next: str
    grid: str

    @classmethod
    def fresh(cls, taken: set[str]) -> _Names:
        return cls(*(_fresh(taken, f"persist_{n}") for n in ("g0", "g1", "pid", "nprog", "tiles", "tile",
                                                               "next", "grid")))


def _globals(tree: ast.Module) -> set[str]:
    """Names bound at module level (assignments and imports): what a kernel may read besides its
    parameters."""
    out: set[str] = set()
    for st in tree.body:
        if isinstance(st, ast.Import | ast.ImportFrom):
            out |= {a.asname or a.name.split(".")[0] for a in st.names}
        for t in getattr(st, "targets", []):
            out |= names_in(t)
    return out


def _persist_kernel(fn: ast.FunctionDef, plan: _Plan, nm: _Names, taken: set[str], allowed: set[str],
                    heads_first: bool = True) -> None:
    """`fn`'s body as the tile loop (module doc), in place; its parameters gain G0 and G1."""
    fn.args.args += [ast.arg(arg=nm.g0), ast.arg(arg=nm.g1)]
    allowed = allowed | {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    allowed |= {nm.pid, nm.tiles}
    head = [
        ast.parse(f"{nm.pid} = tl.program_id(0)").body[0],
        ast.parse(f"{nm.nprog} = tl.num_programs(0)").body[0],
        ast.parse(f"{nm.tiles} = {nm.g0} * {nm.g1}").body[0],
    ]
    body = [
        ast.parse(f"{plan.x} = {tile_coords(nm.tile, nm, heads_first)[0]}").body[0],
        ast.parse(f"{plan.y} = {tile_coords(nm.tile, nm, heads_first)[1]}").body[0],
    ]
    ahead: list[ast.stmt] = [ast.parse(f"{nm.next} = {nm.tile} + {nm.nprog}").body[0]]
    rotate: list[ast.stmt] = []
    for i, st in enumerate(fn.body[: plan.loop]):
        if isinstance(st, ast.Assign) and _program_id_axis(st.value) is not None:
            continue
        target = assign_target(st)
        if i not in plan.loads or target is None or not isinstance(st, ast.Assign):
            body.append(st)
            continue
        load = st.value
        assert isinstance(load, ast.Call)
        cur, later = _fresh(taken, f"{target}_tile"), _fresh(taken, f"{target}_next_tile")
        first = _load_at(load, plan.env, plan.x, plan.y, nm.pid, nm, heads_first)
        _check_free(first, allowed)
        head.append(ast.Assign(targets=[ast.Name(cur, ast.Store())], value=first))
        body.append(ast.Assign(targets=[ast.Name(target, ast.Store())], value=ast.Name(cur, ast.Load())))
        following = _load_at(load, plan.env, plan.x, plan.y, nm.next, nm, heads_first)
        ahead.append(ast.Assign(targets=[ast.Name(later, ast.Store())], value=following))
        rotate.append(ast.Assign(targets=[ast.Name(cur, ast.Store())], value=ast.Name(later, ast.Load())))
    walk = ast.For(
        target=ast.Name(nm.tile, ast.Store()),
        iter=parse_expr(f"range({nm.pid}, {nm.tiles}, {nm.nprog})"),
        body=body + ahead + fn.body[plan.loop :] + rotate,
        orelse=[],
    )
    fn.body = [*head, walk]


_COMPOUND = (ast.FunctionDef, ast.ClassDef, ast.For, ast.If, ast.While, ast.With, ast.Try)


def _statement_list(scope: ast.AST, call: ast.Call) -> tuple[list[ast.stmt], ast.stmt]:
    """(the statement list holding the statement that makes `call`, that statement)."""
    for parent in ast.walk(scope):
        for field in ("body", "orelse"):
            stmts = getattr(parent, field, None)
            if not isinstance(stmts, list):
                continue
            for st in stmts:
                if isinstance(st, _COMPOUND) or not isinstance(st, ast.stmt):
                    continue
                if any(n is call for n in ast.walk(st)):
                    return stmts, st
    raise MutationError("the launch is not a statement of its own")


def _persist_launch(tree: ast.Module, kernel: str, nm: _Names) -> None:
    """The launch of `kernel`: min(programs, tiles) programs, the grid's two sizes passed, in place."""
    found = [call for name, _, call in launches(tree) if name == kernel]
    if len(found) != 1:
        raise MutationError(f"{kernel} is launched {len(found)} times; the persistent form takes one launch")
    call = found[0]
    scope = next(
        (f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and any(n is call for n in ast.walk(f))),
        tree,
    )
    grid = grid_expr(call, scope)
    if not isinstance(call.func, ast.Subscript) or isinstance(call.func.slice, ast.Lambda):
        raise MutationError(f"the grid of {kernel} is a function of the launch's meta-parameters")
    if not (isinstance(grid, ast.Tuple | ast.List) and len(grid.elts) == 2):
        raise MutationError(f"the grid of {kernel} is not a 2-tuple")
    stmts, stmt = _statement_list(scope, call)
    bind = ast.Assign(targets=[ast.Name(nm.grid, ast.Store())], value=call.func.slice)
    stmts.insert(stmts.index(stmt), bind)
    dual = any(
        k.arg == "dual_core" and isinstance(k.value, ast.Constant) and k.value.value for k in call.keywords
    )
    programs = "2 * PERSIST_PROGRAMS" if dual else "PERSIST_PROGRAMS"
    call.func.slice = parse_expr(f"(min({programs}, {nm.grid}[0] * {nm.grid}[1]),)")
    call.keywords += [
        ast.keyword(arg=nm.g0, value=parse_expr(f"{nm.grid}[0]")),
        ast.keyword(arg=nm.g1, value=parse_expr(f"{nm.grid}[1]")),
    ]


def _with_query_block(source: str, kernel: str, query_block: int) -> str:
    sites = [s for s in find_blocks(source) if s.kernel == kernel and s.axis == 0]
    if len(sites) != 1:
        raise MutationError(f"no single block of {kernel} tiles program axis 0")
    if sites[0].value == query_block:
        raise MutationError(f"{kernel}'s query block is {query_block} already")
    return set_block(source, sites[0], query_block)


def rewrite(source: str, kernel: str, query_block: int | None = None, heads_first: bool = True) -> str:
    """`source` with `kernel` in the persistent form (module doc); `query_block`: first set the block
    that tiles program axis 0 to it (the grid following); `heads_first`: the tile order
    (`tile_coords`). MutationError when it does not apply."""
    if query_block is not None:
        source = _with_query_block(source, kernel, query_block)
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    if not fns:
        raise MutationError(f"no @triton.jit kernel named {kernel}")
    fn = fns[0]
    plan = _plan(fn)
    taken = names_in(tree) | {a.arg for a in fn.args.args}
    nm = _Names.fresh(taken)
    _persist_kernel(fn, plan, nm, taken, _globals(tree) | {"float", "int", "min", "max"}, heads_first)
    _persist_launch(tree, kernel, nm)
    out = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    if "PERSIST_PROGRAMS = " not in source:
        lines = out.splitlines(keepends=True)
        at = next((i for i, ln in enumerate(lines) if ln.startswith(("@triton.jit", "@jit"))), len(lines))
        lines.insert(at, f"PERSIST_PROGRAMS = {compile_pes(PROGRAMS)}  # one program per PE\n\n")
        out = "".join(lines)
    return out


def attention_persist_mutations(source: str) -> list[Mutation]:
    """The persistent form of every 2-D-grid online-softmax kernel in `source`, with its query block
    and with a 128-query block."""
    out: list[Mutation] = []
    tree = ast.parse(source)
    for fn in jit_functions(tree):
        try:
            _plan(fn)
        except MutationError:
            continue
        sites = [s for s in find_blocks(source) if s.kernel == fn.name and s.axis == 0]
        variants: list[int | None] = [None]
        if len(sites) == 1 and sites[0].value != QUERY_BLOCK:
            variants.append(QUERY_BLOCK)
        for qb, heads_first in ((qb, order) for qb in variants for order in (True, False)):
            blocks = f", {qb}-query tiles" if qb else ""
            order = "heads first" if heads_first else "query blocks first"
            out.append(
                Mutation(
                    name=(f"attention_persist@{fn.name}" + (f"/q{qb}" if qb else "")
                          + ("" if heads_first else "/qfirst")),
                    family=FAMILY,
                    description=(
                        f"{fn.name}: persistent, one program per PE walking its (query block, head) tiles "
                        f"{order}{blocks}; the next tile's Q (and first K) loaded before this tile's "
                        "key loop"
                    ),
                    apply=partial(rewrite, kernel=fn.name, query_block=qb, heads_first=heads_first),
                    helps=("latency", "memory"),
                    prior=PRIOR if heads_first else PRIOR * 0.75,
                    remedies=("overlap", "balance"),
                    kernel=fn.name,
                )
            )
    return out
