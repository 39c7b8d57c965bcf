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
from kegen.search.operators.mutations.grids import bindings, grid_element

HELPER = "_kegen_wave_spans"
SPAN = "_span"  # suffix of the kernel parameter that carries a block's span (`BLOCK_M` -> `block_m_span`)
MAX_WAVES = 4  # beyond this many waves one partial wave costs little; the blocks are kept
GRANULE = 16  # spans are multiples of this many elements (or of the block, when smaller)

HELPER_SOURCE = f'''
def {HELPER}(extents, blocks, others=1, pes=64, granule={GRANULE}, max_waves={MAX_WAVES}):
    """Elements each program covers along each tiled axis (written by kegen's `wave_tiles` move).

    Each span is at most its block and a multiple of `granule`; the spans give as many programs as
    fill the waves of `pes` programs that the blocks need (every PE busy in every wave), the least
    masked such spans when several do. The blocks themselves when they fill their waves already,
    need more than `max_waves`, or tile more than two axes."""

    def cdiv(a, b):
        return -(-a // b)

    extents, blocks = [int(e) for e in extents], [int(b) for b in blocks]
    counts = [cdiv(e, b) for e, b in zip(extents, blocks)]
    total = int(others)
    for c in counts:
        total *= c
    waves = cdiv(total, pes)
    if total == 0 or total % pes == 0 or waves > max_waves or len(counts) > 2:
        return tuple(blocks)
    slots = waves * pes // max(1, int(others))

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


def _pid_vars(fn: ast.FunctionDef) -> dict[str, tuple[int, int]]:
    """name -> (program axis, index of its statement in the body) of `name = tl.program_id(axis)`."""
    out: dict[str, tuple[int, int]] = {}
    for i, stmt in enumerate(fn.body):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "tl.program_id"
            and stmt.value.args
            and isinstance(stmt.value.args[0], ast.Constant)
            and isinstance(stmt.value.args[0].value, int)
        ):
            out[stmt.targets[0].id] = (stmt.value.args[0].value, i)
    return out


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


def _offset_vars(fn: ast.FunctionDef, pid: str, span: str) -> set[str]:
    """Names assigned from `pid * span` and a `tl.arange` (the axis's offsets), and names assigned
    from those by adding a constant shift (a split tile's second half)."""
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
                if any(isinstance(s, ast.Name) and s.id in out for s in sides) and not any(
                    "ptr" in ast.unparse(s) for s in sides
                ):
                    out.add(t)
                    changed = True
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
        if not (names_in(left) & self.offsets) or names_in(right) & self.offsets:
            return node
        if not all(
            isinstance(n, ast.Name | ast.Load | ast.Attribute | ast.Constant) for n in ast.walk(right)
        ):
            return node  # only a plain extent (`M`, `n_cols`) is confined
        key = ast.unparse(right)
        lim = self.limits.setdefault(key, f"{self.prefix}_lim{len(self.limits) or ''}")
        node.comparators[0] = ast.Name(lim, ast.Load())
        return node


def balance_kernel(fn: ast.FunctionDef) -> list[tuple[int, str, str]]:
    """Rewrite `fn` in place: every block that tiles a program axis through `pid * BLOCK` gets a
    runtime span parameter. Returns (axis, block, span parameter) per tiled axis."""
    if any(a.arg.endswith(SPAN) for a in fn.args.args):
        raise MutationError(f"{fn.name} is already wave-balanced")
    pids = _pid_vars(fn)
    axes = block_axes(fn)
    plan: list[tuple[int, str, str, str, int]] = []  # axis, block, span, pid, statement index
    for block, axis in sorted(axes.items(), key=lambda kv: (kv[1] is None, kv[1] or 0)):
        if axis is None:
            raise MutationError(f"{block} tiles a program order of unknown axis in {fn.name}")
        pid = next((p for p, (ax, _) in pids.items() if ax == axis), None)
        if pid is None:
            raise MutationError(f"{fn.name} reads tl.program_id({axis}) other than as `pid = ...`")
        plan.append((axis, block, _span_name(block), pid, pids[pid][1]))
    if not plan:
        raise MutationError(f"no block of {fn.name} tiles a program axis")
    if len({a for a, *_ in plan}) != len(plan):
        raise MutationError(f"two blocks tile one program axis in {fn.name}")
    respan = _Respan([(pid, block, span) for _, block, span, pid, _ in plan])
    respan.visit(fn)
    inserts: list[tuple[int, ast.stmt]] = []
    for axis, block, span, pid, index in plan:
        offsets = _offset_vars(fn, pid, span)
        if not offsets:
            raise MutationError(f"no offsets `{pid} * {block} + tl.arange(...)` in {fn.name}")
        confine = _Confine(offsets, f"{pid}")
        confine.visit(fn)
        if not confine.limits:
            raise MutationError(f"the axis-{axis} offsets of {fn.name} are never masked to the problem")
        for extent, lim in confine.limits.items():
            stmt = ast.parse(f"{lim} = tl.minimum({extent}, {pid} * {span} + {span})").body[0]
            inserts.append((index, stmt))
        fn.args.args.append(ast.arg(span))
    for index, stmt in sorted(inserts, key=lambda x: -x[0]):
        fn.body.insert(index + 1, stmt)
    return [(axis, block, span) for axis, block, span, *_ in plan]


def _cdiv_extent(element: ast.AST) -> ast.expr | None:
    """E of a grid element `triton.cdiv(E, B)` or `(E + B - 1) // B`."""
    if isinstance(element, ast.Call) and ast.unparse(element.func) in ("triton.cdiv", "cdiv"):
        return element.args[0] if len(element.args) == 2 else None
    if (
        isinstance(element, ast.BinOp)
        and isinstance(element.op, ast.FloorDiv)
        and isinstance(element.left, ast.BinOp)
        and isinstance(element.left.op, ast.Sub)
        and isinstance(element.left.left, ast.BinOp)
        and isinstance(element.left.left.op, ast.Add)
    ):
        return element.left.left.left
    return None


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


def balance_launches(tree: ast.Module, kernel: str, axes: list[tuple[int, str, str]], pes: int) -> int:
    """Make every launch of `kernel` compute the spans and size its grid by them; returns the
    number of launches rewritten (MutationError when one cannot be)."""
    sites = _launch_sites(tree, kernel)
    if not sites:
        raise MutationError(f"{kernel} is never launched")
    for stmts, index, call in sites:
        grid_node = call.func.slice  # type: ignore[attr-defined]
        scope = _scope_of(tree, stmts)
        anchor = index
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
        keywords = {k.arg: k for k in call.keywords if k.arg}
        extents, blocks, tiled = [], [], set()
        for axis, block, _ in axes:
            element = grid_element(grid, axis)
            extent = _cdiv_extent(element) if element is not None else None
            if extent is None or block not in keywords:
                raise MutationError(f"{kernel}'s grid axis {axis} is not `triton.cdiv(extent, {block})`")
            extents.append(extent)
            blocks.append(keywords[block].value)
            tiled.add(axis)
        n_axes = len(grid.elts) if isinstance(grid, ast.Tuple | ast.List) else 1
        others = [grid_element(grid, a) for a in range(n_axes) if a not in tiled]
        others_src = " * ".join(f"({ast.unparse(o)})" for o in others if o is not None) or "1"
        spans = [span for *_, span in axes]
        stmt = ast.parse(
            f"{', '.join(spans)}, = {HELPER}(({', '.join(ast.unparse(e) for e in extents)},), "
            f"({', '.join(ast.unparse(b) for b in blocks)},), {others_src}, pes={pes})"
        ).body[0]
        for (axis, _, span), extent in zip(axes, extents, strict=True):
            new = ast.parse(f"triton.cdiv({ast.unparse(extent)}, {span})", mode="eval").body
            if isinstance(grid, ast.Tuple | ast.List):
                grid.elts[axis] = new
            elif axis == 0:
                if isinstance(grid_node, ast.Name):
                    grid_stmt.value = new
                else:
                    call.func.slice = new  # type: ignore[attr-defined]
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
    axes = balance_kernel(fn)
    balance_launches(tree, kernel, axes, pes)
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
