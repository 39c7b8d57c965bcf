"""The kernel side of wave-balanced tiles (`wave_tiles`): each tiled block gets a runtime span.

`balance_kernel` rewrites a jit kernel in place so that a program covers `span` rows (columns) of
its power-of-two block: `index * BLOCK` becomes `index * span`, the kernel's own tile counts
(`tl.cdiv(E, BLOCK)`, a flattened program order's decode) follow the span, and every mask that
compares the axis's offsets with the problem's extent compares them with `min(extent, index * span +
span)` instead. It refuses kernels a narrower program would not reproduce: stores along the axis not
masked by its offsets, stores by tile index alone, atomics (docs/DECISIONS.md D42).
"""

from __future__ import annotations

import ast

from kegen.search.operators.mutations.base import MutationError, names_in
from kegen.search.operators.mutations.blocks import block_axes

SPAN = "_span"  # suffix of the kernel parameter that carries a block's span (`BLOCK_M` -> `block_m_span`)


def span_name(block: str) -> str:
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

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        for pid, block, span in self.axes:
            if _product_sides(node, pid, block):
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
        plan.append((block, span_name(block), pid, index))
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
            inserts.append((_after_definitions(fn, names_in(ast.parse(extent, mode="eval")), index), stmt))
        _check_confined(fn, block, pid, offsets, set(confine.limits.values()))
        fn.args.args.append(ast.arg(span))
    for index, stmt in sorted(inserts, key=lambda x: -x[0]):
        fn.body.insert(index + 1, stmt)
    if _decode_divisors(fn) & set(axes):
        raise MutationError(f"a block of {fn.name} still sizes its program decode")
    return [(block, axes[block]) for block, *_ in plan]


def _after_definitions(fn: ast.FunctionDef, names: set[str], index: int) -> int:
    """The top-level statement of `fn` after which a statement reading `names` can go: statement
    `index` or, where the kernel computes one of those names in its body (`M = BATCH * OH * OW` below
    the program ids), the last statement assigning one. MutationError where one is assigned inside a
    loop or branch (no single place would see its value)."""
    pos = index
    for i, stmt in enumerate(fn.body):
        for n in ast.walk(stmt):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, ast.AugAssign | ast.AnnAssign) else []  # fmt: skip
            if not any(isinstance(t, ast.Name) and t.id in names for t in targets):
                continue
            if n is not stmt:
                raise MutationError(f"{fn.name} assigns an extent its masks read inside a block")
            pos = max(pos, i)
    return pos


def _decode_divisors(fn: ast.FunctionDef) -> set[str]:
    """Names on the right of a `//` or `%` (a program decode that a span must replace)."""
    return {
        name
        for n in ast.walk(fn)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv | ast.Mod)
        for name in names_in(n.right)
    }
