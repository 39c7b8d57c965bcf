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
blocks and the kernel runs as before. The kernel side (`waves/kernel.py`) masks every store along a
balanced axis to the span and refuses kernels a narrower program would not reproduce (stores by tile
index, atomics); loads may read past the span (a convolution's halo).
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
)
from kegen.search.operators.mutations.blocks import (
    _uses_dot,
    find_blocks,
    set_blocks,
    still_fits,
)
from kegen.search.operators.mutations.grids import bindings
from kegen.search.operators.mutations.knobs import launch_options_of
from kegen.search.operators.mutations.plans import launch_programs
from kegen.search.operators.mutations.waves.kernel import SPAN, balance_kernel, span_name

HELPER = "_kegen_wave_spans"
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
    values = {ast.unparse(keywords[b]): span_name(b) for b, _ in tiled}
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
        rewrite = _GridBySpan({ast.unparse(keywords[block]): span_name(block)})
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
    spans = [span_name(b) for b in blocks]
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
        measured = launch_programs(profile, kernel)
        if not _uses_dot(source, kernel) or measured is None:
            continue
        programs, pes, _ = measured
        if launch_options_of(source).get(kernel, {}).get("dual_core"):
            pes *= 2  # a wave is two programs per PE, one on each core
        if any(a.arg.endswith(SPAN) for a in fn.args.args):
            muts.extend(_regrow_mutations(source, fn, programs, pes))
            continue
        tiled = [s for s in find_blocks(source) if s.kernel == kernel and s.axis is not None and s.index == 0]
        params = constexpr_params(fn)
        if not tiled or any(s.param not in params for s in tiled):
            continue
        if not _quantized(programs, pes):
            continue  # the blocks fill their waves already: nothing to balance
        variants: list[tuple[str, list[Any], int]] = [("", [], programs)]
        for site in tiled:
            variants.append((f"+2x{site.param}", [(site, site.value * 2)], -(-programs // 2)))
        for suffix, changes, count in variants:
            if not _quantized(count, pes):
                continue
            muts.append(_mutation(kernel, suffix, changes, pes))
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
    sites = [s for s in find_blocks(source) if s.kernel == fn.name and span_name(s.param) in spans]
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


def _mutation(kernel: str, suffix: str, changes: list[Any], pes: int) -> Mutation:
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
