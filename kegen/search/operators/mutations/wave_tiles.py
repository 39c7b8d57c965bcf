"""Wave-balanced tiles: output tiles sized so their count fills every wave of programs on the PEs.

A dot kernel's power-of-two blocks rarely divide a model's shapes into a multiple of the PE count:
a 1536x768 GEMM is 72 tiles of 128x128 on 64 PEs (two waves, the second with 8 programs) or 36 of
256x128 (one wave, 28 PEs idle). Each program pays its block's full dot work whatever is masked, but
only the rows and columns it covers cost DRAM and SRAM bytes, and memory sets most GEMMs' time. So a
program may cover fewer rows than its block: `wave_tiles` gives each tiled axis a runtime *span*
(`pid * span + tl.arange(0, BLOCK)`, masked to the span) that the launcher computes from the
problem's extents, so that the programs fill the waves the blocks need (1536x768 with 256x128 blocks:
8x8 programs of 192x96, one full wave; hold-out GEMM 53.0 -> 40.4 us, 65% -> 85% of its roofline).

The spans are computed at run time by `_kegen_wave_spans` (added to the candidate's module), so a
kernel installed for a model stays balanced at every shape it serves; where the blocks already fill
their waves (or need more than `MAX_WAVES`, where one partial wave matters little) the spans are the
blocks and the kernel runs as before. Correctness does not depend on the masks that confine a program
to its span (neighbouring programs would compute the same values), only its bytes do; the masks
against the problem's extents stay as they were.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from kegen.search.operators.mutations.base import (
    Mutation,
    MutationError,
    constexpr_params,
    jit_functions,
    launch_of,
    names_in,
)
from kegen.search.operators.mutations.blocks import (
    _uses_dot,
    block_axes,
    find_blocks,
    set_blocks,
    still_fits,
)
from kegen.search.operators.mutations.grids import bindings

HELPER = "_kegen_wave_spans"
SPAN = "_span"  # suffix of the kernel parameter that carries a block's span (`BLOCK_M` -> `block_m_span`)
MAX_WAVES = 4  # beyond this many waves one partial wave costs little; the blocks are kept
GRANULE = 16  # spans are multiples of this many elements (or of the block, when smaller)

HELPER_SOURCE = f'''
def {HELPER}(extents, blocks, grid=1, pes=64, granule={GRANULE}, max_waves={MAX_WAVES}):
    """Elements each program covers along each tiled axis (written by kegen's `wave_tiles` move).

    `grid` is the launch's grid with the blocks (its programs beyond the tiles' count, a batch
    axis, multiply every choice). Each span is at most its block and a multiple of `granule`; the
    spans give as many programs as fill the waves of `pes` programs that the blocks need (every PE
    busy in every wave), the least masked such spans when several do. The blocks themselves when
    they fill their waves already, need more than `max_waves`, or tile more than two axes."""

    def cdiv(a, b):
        return -(-a // b)

    extents, blocks = [int(e) for e in extents], [int(b) for b in blocks]
    counts = [cdiv(e, b) for e, b in zip(extents, blocks)]
    total = 1
    for g in grid if isinstance(grid, (tuple, list)) else (grid,):
        total *= int(g)
    tiles = 1
    for c in counts:
        tiles *= c
    others = total // tiles if tiles else 1
    waves = cdiv(total, pes)
    if total == 0 or total % pes == 0 or waves > max_waves or len(counts) > 2:
        return tuple(blocks)
    slots = waves * pes // max(1, others)

    def spans_for(want):
        out = []
        for e, b, c in zip(extents, blocks, want):
            g = min(granule, b)
            out.append(min(b, cdiv(cdiv(e, c), g) * g))
        return out

    choices = []
    for c0 in range(counts[0], slots + 1):
        if len(counts) == 1:
            choices.append([c0])
        elif c0 * counts[1] <= slots:
            choices.append([c0, slots // c0])
    best, best_key = tuple(blocks), None
    for want in choices:
        spans = spans_for(want)
        n = 1
        for e, s in zip(extents, spans):
            n *= cdiv(e, s)
        if n > slots:
            continue
        key = (n, min(s / b for s, b in zip(spans, blocks)))
        if best_key is None or key > best_key:
            best, best_key = tuple(spans), key
    return best
'''


def _helper_node() -> ast.FunctionDef:
    fn = ast.parse(HELPER_SOURCE).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn


def _span_name(block: str) -> str:
    return block.lower() + SPAN


def _product_sides(node: ast.AST, pid: str, block: str) -> bool:
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return False
    sides = {ast.unparse(node.left), ast.unparse(node.right)}
    return sides == {pid, block}


class _Respan(ast.NodeTransformer):
    """`pid * BLOCK` (either order) -> `pid * span` for each (pid, block, span)."""

    def __init__(self, axes: list[tuple[str, str, str]]) -> None:
        self.axes = axes
        self.hits = 0

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        for pid, block, span in self.axes:
            if _product_sides(node, pid, block):
                self.hits += 1
                return ast.BinOp(ast.Name(pid, ast.Load()), ast.Mult(), ast.Name(span, ast.Load()))
        return node


def _offset_vars(fn: ast.FunctionDef, pid: str, span: str, block: str) -> set[str]:
    """Names assigned from `pid * span` and a `tl.arange` (the axis's offsets), and names assigned
    from those plus a shift made of the block alone (a split tile's second half, `offs + BLOCK // 2`);
    a shift by anything else (`pos + k - PAD`: a convolution's input halo) is not this program's
    span and stays unconfined."""
    assigns = [
        (n.targets[0].id, n.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    ]
    out = {
        t
        for t, v in assigns
        if any(_product_sides(n, pid, span) for n in ast.walk(v))
        and any(isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.arange" for n in ast.walk(v))
    }
    changed = True
    while changed:
        changed = False
        for t, v in assigns:
            if t not in out and isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add):
                sides = (v.left, v.right)
                for base, shift in (sides, sides[::-1]):
                    if (
                        isinstance(base, ast.Name)
                        and base.id in out
                        and names_in(shift) == {block}
                        and all(
                            isinstance(n, ast.Name | ast.Load | ast.Constant | ast.BinOp | ast.operator)
                            for n in ast.walk(shift)
                        )
                    ):
                        out.add(t)
                        changed = True
                        break
    return out


class _Confine(ast.NodeTransformer):
    """`OFFS... < EXTENT` -> `OFFS... < lim` where OFFS is one of the axis's offsets; records the
    extents met so each gets its `lim = tl.minimum(EXTENT, pid * span + span)`."""

    def __init__(self, offsets: set[str], prefix: str) -> None:
        self.offsets, self.prefix = offsets, prefix
        self.limits: dict[str, str] = {}  # extent source -> lim name

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Lt):
            return node
        left, right = node.left, node.comparators[0]
        base = left.value if isinstance(left, ast.Subscript) else left
        if not (isinstance(base, ast.Name) and base.id in self.offsets) or names_in(right) & self.offsets:
            return node  # `offs < E` only: `offs + k - PAD < E` reads a neighbour's halo
        if not all(
            isinstance(n, ast.Name | ast.Load | ast.Attribute | ast.Constant) for n in ast.walk(right)
        ):
            return node  # only a plain extent (`M`, `n_cols`) is confined
        key = ast.unparse(right)
        lim = self.limits.setdefault(key, f"{self.prefix}_lim{len(self.limits) or ''}")
        node.comparators[0] = ast.Name(lim, ast.Load())
        return node


def _derived(fn: ast.FunctionDef, roots: set[str]) -> set[str]:
    """`roots` and every name assigned (anywhere in `fn`) from an expression that reads one of them."""
    assigns = [
        (t.id, n.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and n.value is not None
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    ]
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for target, value in assigns:
            if target not in out and names_in(value) & out:
                out.add(target)
                changed = True
    return out


def _check_confined(fn: ast.FunctionDef, block: str, pid: str, offsets: set[str], lims: set[str]) -> None:
    """Refuse a kernel whose programs could still write outside their span: every store addressed by
    the axis's offsets must be masked by the span's limit, nothing may be stored by tile index alone
    (per-program partial results change meaning with the program count), and no atomics
    (overlapping rows would be counted twice). Loads may read past the span (a halo): what a program
    writes is then what the narrower program would write."""
    addressed = _derived(fn, offsets)
    by_tile = _derived(fn, {pid})
    confined = _derived(fn, lims)
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        name = ast.unparse(n.func)
        if name.startswith("tl.atomic_"):
            raise MutationError(f"{fn.name} uses {name}: programs may not overlap")
        if name not in ("tl.load", "tl.store") or not n.args:
            continue
        pointer = names_in(n.args[0])
        mask = next((k.value for k in n.keywords if k.arg == "mask"), n.args[2] if len(n.args) > 2 else None)
        if (
            name == "tl.store"
            and pointer & addressed
            and not (mask is not None and names_in(mask) & confined)
        ):
            raise MutationError(f"a store of {fn.name} addressed by {block}'s offsets is not masked by them")
        if name == "tl.store" and pointer & by_tile and not pointer & addressed:
            raise MutationError(f"{fn.name} stores by tile index along {block}")


def _tile_index(fn: ast.FunctionDef, block: str) -> tuple[str, int]:
    """(name, statement index) of the tile index that multiplies `block` (`pid_m * BLOCK_M`): one
    name, assigned once at the top level of the kernel (a program id or derived from one)."""
    names = {
        side.id
        for n in ast.walk(fn)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
        for side, other in ((n.left, n.right), (n.right, n.left))
        if isinstance(side, ast.Name)
        and isinstance(other, ast.Name)
        and other.id == block
        and side.id != block
    }
    index = {
        t.id: i
        for i, st in enumerate(fn.body)
        if isinstance(st, ast.Assign)
        for t in st.targets
        if isinstance(t, ast.Name)
    }
    found = [n for n in names if n in index]
    if len(found) != 1:
        raise MutationError(f"{block} in {fn.name} is not multiplied by one top-level tile index")
    assigned = sum(
        1
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == found[0] for t in n.targets)
    )
    if assigned != 1:
        raise MutationError(f"the tile index {found[0]} of {fn.name} is assigned more than once")
    return found[0], index[found[0]]


class _CountsBySpan(ast.NodeTransformer):
    """`tl.cdiv(E, BLOCK)` -> `tl.cdiv(E, span)` in the kernel (a flattened program order's tile
    counts, which must follow the spans)."""

    def __init__(self, spans: dict[str, str]) -> None:
        self.spans = spans

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if ast.unparse(node.func) in ("tl.cdiv", "triton.cdiv") and len(node.args) == 2:
            b = node.args[1]
            if isinstance(b, ast.Name) and b.id in self.spans:
                node.args[1] = ast.Name(self.spans[b.id], ast.Load())
        return node


def _hoist_program_ids(fn: ast.FunctionDef, blocks: set[str]) -> None:
    """`tl.program_id(d) * BLOCK` written inline -> a top-level `kegen_pid_d = tl.program_id(d)`."""
    hoisted: dict[int, str] = {}
    for n in ast.walk(fn):
        if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
            continue
        for attr, other in (("left", n.right), ("right", n.left)):
            side = getattr(n, attr)
            if (
                isinstance(other, ast.Name)
                and other.id in blocks
                and isinstance(side, ast.Call)
                and ast.unparse(side.func) == "tl.program_id"
                and len(side.args) == 1
                and isinstance(side.args[0], ast.Constant)
                and isinstance(side.args[0].value, int)
            ):
                axis = side.args[0].value
                name = hoisted.setdefault(axis, f"kegen_pid_{axis}")
                setattr(n, attr, ast.Name(name, ast.Load()))
    for axis, name in sorted(hoisted.items(), reverse=True):
        fn.body.insert(0, ast.parse(f"{name} = tl.program_id({axis})").body[0])


def balance_kernel(fn: ast.FunctionDef) -> list[tuple[str, int | None]]:
    """Rewrite `fn` in place: every block that tiles the programs through `index * BLOCK` (a program
    id, or a tile index decoded from a flattened program id) gets a runtime span parameter, its
    kernel-side tile counts (`tl.cdiv(E, BLOCK)`) follow the span, and its masks are confined to the
    span. Returns (block, program axis or None) in order."""
    if any(a.arg.endswith(SPAN) for a in fn.args.args):
        raise MutationError(f"{fn.name} is already wave-balanced")
    ranged = {
        n.args[1].id
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and ast.unparse(n.func) == "tl.arange"
        and len(n.args) == 2
        and isinstance(n.args[1], ast.Name)
    }
    axes = {b: ax for b, ax in block_axes(fn).items() if b in ranged}  # tile sizes, not GROUP_M
    if not axes:
        raise MutationError(f"no block of {fn.name} tiles the programs")
    _hoist_program_ids(fn, set(axes))
    plan: list[tuple[str, str, str, int]] = []  # block, span, tile index, statement index
    for block in sorted(axes, key=lambda b: (axes[b] is None, axes[b] or 0, b)):
        pid, index = _tile_index(fn, block)
        plan.append((block, _span_name(block), pid, index))
    if len({pid for _, _, pid, _ in plan}) != len(plan):
        raise MutationError(f"two blocks share one tile index in {fn.name}")
    _Respan([(pid, block, span) for block, span, pid, _ in plan]).visit(fn)
    _CountsBySpan({block: span for block, span, _, _ in plan}).visit(fn)
    inserts: list[tuple[int, ast.stmt]] = []
    for block, span, pid, index in plan:
        offsets = _offset_vars(fn, pid, span, block)
        if not offsets:
            raise MutationError(f"no offsets `{pid} * {block} + tl.arange(...)` in {fn.name}")
        confine = _Confine(offsets, f"{pid}")
        confine.visit(fn)
        if not confine.limits:
            raise MutationError(f"the {block} offsets of {fn.name} are never masked to the problem")
        for extent, lim in confine.limits.items():
            stmt = ast.parse(f"{lim} = tl.minimum({extent}, {pid} * {span} + {span})").body[0]
            inserts.append((index, stmt))
        _check_confined(fn, block, pid, offsets, set(confine.limits.values()))
        fn.args.args.append(ast.arg(span))
    for index, stmt in sorted(inserts, key=lambda x: -x[0]):
        fn.body.insert(index + 1, stmt)
    if any(isinstance(n, ast.Name) and n.id in axes for n in ast.walk(fn) if _in_index_math(fn, n)):
        raise MutationError(f"a block of {fn.name} still sizes its program decode")
    return [(block, axes[block]) for block, *_ in plan]


def _in_index_math(fn: ast.FunctionDef, node: ast.AST) -> bool:
    """Whether `node` sits in a `//` or `%` (a program decode that a span must replace)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv | ast.Mod):
            if any(m is node for m in ast.walk(n.right)):
                return True
    return False


def _cdiv_parts(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """(E, B) of `triton.cdiv(E, B)` or `(E + B - 1) // B`."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("triton.cdiv", "cdiv"):
        return (node.args[0], node.args[1]) if len(node.args) == 2 else None
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.FloorDiv)
        and isinstance(node.left, ast.BinOp)
        and isinstance(node.left.op, ast.Sub)
        and isinstance(node.left.left, ast.BinOp)
        and isinstance(node.left.left.op, ast.Add)
        and ast.unparse(node.left.left.right) == ast.unparse(node.right)
    ):
        return node.left.left.left, node.right
    return None


class _GridBySpan(ast.NodeTransformer):
    """In a grid expression, each `triton.cdiv(E, B)` whose B is a tiled block's launch value ->
    `triton.cdiv(E, span)`; records E per block."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values  # unparsed launch value -> span name
        self.extents: dict[str, ast.expr] = {}

    def visit(self, node: ast.AST) -> ast.AST:
        parts = _cdiv_parts(node)
        if parts is not None and ast.unparse(parts[1]) in self.values:
            span = self.values[ast.unparse(parts[1])]
            if span in self.extents:
                raise MutationError(f"the grid divides by the block of {span} twice")
            self.extents[span] = parts[0]
            return ast.parse(f"triton.cdiv({ast.unparse(parts[0])}, {span})", mode="eval").body
        return self.generic_visit(node)


def _launch_sites(tree: ast.Module, kernel: str) -> list[tuple[list[ast.stmt], int, ast.Call]]:
    """(statement list, index, call) of every `kernel[grid](...)` statement in the module."""
    out: list[tuple[list[ast.stmt], int, ast.Call]] = []
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts):
                hit = launch_of(stmt)
                if hit is not None and hit[0] == kernel:
                    out.append((stmts, i, hit[1]))
    return out


def _scope_of(tree: ast.Module, stmts: list[ast.stmt]) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.body is stmts:
            return node
    return tree


def _respan_grid(
    grid: ast.expr, tiled: list[tuple[str, int | None]], keywords: dict[str, ast.expr]
) -> tuple[ast.expr, dict[str, ast.expr] | None]:
    """The grid with each block's `triton.cdiv(E, block)` divided by its span instead, and E per
    span; blocks launched with one value (`BLOCK_M=32, BLOCK_N=32`) are told apart by their program
    axis in a tuple grid, else (grid, None)."""
    values = {ast.unparse(keywords[b]): _span_name(b) for b, _ in tiled}
    if len(values) == len(tiled):
        rewrite = _GridBySpan(values)
        return rewrite.visit(grid), rewrite.extents  # type: ignore[return-value]
    if not (
        isinstance(grid, ast.Tuple | ast.List)
        and all(ax is not None and ax < len(grid.elts) for _, ax in tiled)
        and len({ax for _, ax in tiled}) == len(tiled)
    ):
        return grid, None
    found: dict[str, ast.expr] = {}
    for block, axis in tiled:
        assert axis is not None
        rewrite = _GridBySpan({ast.unparse(keywords[block]): _span_name(block)})
        new = rewrite.visit(grid.elts[axis])
        assert isinstance(new, ast.expr)
        grid.elts[axis] = new
        found.update(rewrite.extents)
    return grid, found


def balance_launches(tree: ast.Module, kernel: str, tiled: list[tuple[str, int | None]], pes: int) -> int:
    """Make every launch of `kernel` compute the spans (from the extents its grid divides by the
    blocks, and the grid itself) and size its grid by them; returns the number of launches
    rewritten (MutationError when one cannot be)."""
    sites = _launch_sites(tree, kernel)
    if not sites:
        raise MutationError(f"{kernel} is never launched")
    blocks = [b for b, _ in tiled]
    spans = [_span_name(b) for b in blocks]
    for stmts, index, call in sites:
        grid_node = call.func.slice  # type: ignore[attr-defined]
        scope = _scope_of(tree, stmts)
        anchor = index
        grid_stmt: ast.Assign | None = None
        if isinstance(grid_node, ast.Name):
            binds = bindings(scope, grid_node.id)
            if len(binds) != 1 or binds[0][1] != -1:
                raise MutationError(f"the grid of {kernel} is not one assignment")
            grid_stmt = binds[0][0]
            if grid_stmt not in stmts:
                raise MutationError(f"the grid of {kernel} is assigned in another block")
            anchor = stmts.index(grid_stmt)
            grid = grid_stmt.value
        else:
            grid = grid_node
        if isinstance(grid, ast.Lambda):
            raise MutationError(f"the grid of {kernel} is a function of its meta-parameters")
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        missing = [b for b in blocks if b not in keywords]
        if missing:
            raise MutationError(f"{kernel}'s launch does not pass {', '.join(missing)} by keyword")
        original = ast.unparse(grid)
        new_grid, found = _respan_grid(copy.deepcopy(grid), tiled, keywords)
        if found is None:
            raise MutationError(f"two blocks of {kernel} are launched with one value")
        if set(found) != set(spans):
            raise MutationError(f"{kernel}'s grid is not sized by `triton.cdiv(extent, block)` per block")
        extents = ", ".join(ast.unparse(found[sp]) for sp in spans)
        launch_blocks = ", ".join(ast.unparse(keywords[b]) for b in blocks)
        stmt = ast.parse(
            f"{', '.join(spans)}, = {HELPER}(({extents},), ({launch_blocks},), {original}, pes={pes})"
        ).body[0]
        if grid_stmt is not None:
            grid_stmt.value = new_grid  # type: ignore[assignment]
        else:
            call.func.slice = new_grid  # type: ignore[attr-defined]
        for span in spans:
            call.keywords.append(ast.keyword(span, ast.Name(span, ast.Load())))
        stmts.insert(anchor, stmt)
    return len(sites)


def wave_tiles(source: str, kernel: str, pes: int) -> str:
    """`source` with `kernel`'s tiled axes given runtime spans (see the module docstring)."""
    tree = ast.parse(source)
    fns = {fn.name: fn for fn in jit_functions(tree)}
    fn = fns.get(kernel)
    if fn is None:
        raise MutationError(f"no jit kernel {kernel}")
    blocks = balance_kernel(fn)
    balance_launches(tree, kernel, blocks, pes)
    if not any(isinstance(n, ast.FunctionDef) and n.name == HELPER for n in tree.body):
        where = next(i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef))
        tree.body.insert(where, _helper_node())
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _measured(profile: Any, kernel: str) -> tuple[int, int] | None:
    """(programs, PEs) of the largest measured launch of `kernel`."""
    best: tuple[int, int] | None = None
    for launch in getattr(profile, "launches", None) or []:
        if launch.kernel == kernel and launch.programs and launch.pes_total:
            if best is None or launch.programs > best[0]:
                best = (int(launch.programs), int(launch.pes_total))
    return best


def _quantized(programs: int, pes: int) -> bool:
    waves = -(-programs // pes)
    return programs % pes != 0 and waves <= MAX_WAVES


def wave_tile_mutations(source: str, profile: Any) -> list[Mutation]:
    """`wave_tiles` for each dot kernel whose measured launch leaves PEs idle in a wave, with its
    blocks as they are and with one tiled block doubled (fewer, larger programs that the spans then
    spread over every PE), when that still fits the local store. A kernel balanced already gets its
    span blocks doubled while its programs take more than one wave (the spans follow at run time)."""
    tree = ast.parse(source)
    muts: list[Mutation] = []
    for fn in jit_functions(tree):
        kernel = fn.name
        measured = _measured(profile, kernel)
        if not _uses_dot(source, kernel) or measured is None:
            continue
        programs, pes = measured
        if any(a.arg.endswith(SPAN) for a in fn.args.args):
            muts.extend(_regrow_mutations(source, fn, programs, pes))
            continue
        tiled = [s for s in find_blocks(source) if s.kernel == kernel and s.axis is not None and s.index == 0]
        params = constexpr_params(fn)
        if not tiled or any(s.param not in params for s in tiled):
            continue
        variants: list[tuple[str, list[Any], int]] = [("", [], programs)]
        for site in tiled:
            variants.append((f"+2x{site.param}", [(site, site.value * 2)], -(-programs // 2)))
        for suffix, changes, count in variants:
            if not _quantized(count, pes):
                continue
            muts.append(_mutation(kernel, suffix, changes, pes, source))
    out = []
    for m in muts:
        try:
            m.apply(source)
        except (MutationError, SyntaxError, ValueError, KeyError):
            continue
        out.append(m)
    return out


def _regrow_mutations(source: str, fn: ast.FunctionDef, programs: int, pes: int) -> list[Mutation]:
    """Double one block of a balanced kernel whose programs need several waves: the launcher's spans
    then cover the extents in fewer, larger programs (a 128x128 kernel balanced to two waves of 96x96
    becomes one wave of 192x96 in 256x128 blocks)."""
    if programs <= pes:
        return []
    spans = {a.arg for a in fn.args.args if a.arg.endswith(SPAN)}
    sites = [s for s in find_blocks(source) if s.kernel == fn.name and _span_name(s.param) in spans]
    out = []
    for site in sites:
        changes = [(site, site.value * 2)]

        def apply(src: str, changes: list[Any] = changes, kernel: str = fn.name) -> str:
            out = set_blocks(src, changes)
            if not still_fits(src, out, kernel):
                raise MutationError("the doubled block does not fit the local store")
            return out

        out.append(
            Mutation(
                name=f"wave_tiles_regrow+2x{site.param}@{fn.name}",
                family="wave_tiles",
                description=(
                    f"wave-balanced {fn.name} with {site.param} {site.value} -> {site.value * 2}: fewer "
                    f"waves of larger programs, the runtime spans still filling every PE"
                ),
                apply=apply,
                helps=("memory", "latency"),
                prior=1.7,
                remedies=("balance", "fewer_bytes", "bigger_commands"),
                costs=(),
                kernel=fn.name,
            )
        )
    return out


def _mutation(kernel: str, suffix: str, changes: list[Any], pes: int, parent: str) -> Mutation:
    def apply(src: str) -> str:
        base = set_blocks(src, changes) if changes else src
        if changes and not still_fits(src, base, kernel):
            raise MutationError(f"{suffix[1:]} does not fit the local store")
        return wave_tiles(base, kernel, pes)

    grown = f" after {', '.join(f'{s.param} {s.value} -> {v}' for s, v in changes)}" if changes else ""
    return Mutation(
        name=f"wave_tiles{suffix}@{kernel}",
        family="wave_tiles",
        description=(
            f"wave-balanced tiles in {kernel}{grown}: each program covers a runtime span of its blocks "
            f"so the programs fill every wave of {pes} PEs"
        ),
        apply=apply,
        helps=("memory", "latency"),
        prior=1.7,
        remedies=("balance", "parallelism", "fewer_bytes"),
        costs=(),
        kernel=kernel,
    )
