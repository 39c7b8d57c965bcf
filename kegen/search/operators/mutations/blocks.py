"""Block-size mutations that follow the value to where it is written and keep the grid consistent.

`knobs` rewrites block sizes written as literals. Real launchers often write them elsewhere:

    BM, BN, BK = 32, 32, 32                      # local (tuple) assignment in the launcher
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    matmul_kernel[grid](..., BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)

    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))          # literal, grid in a variable
    linear_kernel[grid](..., BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)

Here a block site is one launch keyword that feeds a `tl.constexpr` parameter of the kernel, with
its value an integer literal, or a name bound to one (in the launcher or at module level). The
kernel tells which program axis the block tiles (`tl.program_id(d) * BLOCK_X`, directly or through a
name); changing the block rewrites the grid's element for that axis too (`cdiv(M, 32)` -> `cdiv(M, 64)`),
or the mutation refuses (`MutationError`) when the grid cannot be kept consistent. Blocks that
tile no program axis (`BLOCK_K` of a reduction loop) change alone.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kegen.search.operators.mutations.base import (
    BLOCKISH,
    MAX_BLOCK,
    MIN_BLOCK,
    NOT_BLOCKS,
    Mutation,
    MutationError,
    block_values,
    constexpr_params,
    jit_functions,
)
from kegen.search.operators.mutations.footprint import default_machine, dot_footprint, local_store_bytes
from kegen.search.operators.mutations.grids import bindings, follow_grid
from kegen.search.operators.mutations.launches import launch_name, launch_options_of

LAUNCH_OPTIONS = {"num_stages", "pe_mapping", "dual_core", "num_warps", "num_ctas"}


@dataclass(frozen=True)
class BlockSite:
    """A block size fed to `kernel`'s parameter `param` by launch number `index` of that kernel.

    `var` is the name the value is bound to (`""` for a literal keyword) and `slot` its position in
    a tuple assignment (`-1` for a plain one); `axis` is the program axis the block tiles, if any.
    """

    kernel: str
    index: int
    param: str
    value: int
    var: str = ""
    slot: int = -1
    axis: int | None = None
    pos: int = -1  # position in the launch's arguments when passed positionally (-1: a keyword)
    pid: bool = False  # tiles a program id whose axis is unknown (a flattened 1-D program order)
    default: bool = False  # the launch omits it: the kernel's default; setting it adds a keyword

    @property
    def key(self) -> str:
        return f"{self.kernel}:{self.index}:{self.param}"

    @property
    def tiles(self) -> bool:
        """It tiles a program axis (known or not): changing it changes the number of programs."""
        return self.axis is not None or self.pid


def _is_int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _jit_kernels(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {fn.name: fn for fn in jit_functions(tree)}


def _is_program_id(node: ast.AST) -> int | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "program_id"
        and node.args
        and _is_int(node.args[0])
    ):
        return node.args[0].value  # type: ignore[attr-defined, no-any-return]
    return None


def _has_arange(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "arange"
        for n in ast.walk(node)
    )


def _persistent_range(it: ast.AST, pids: dict[str, int | None], nprogs: set[str]) -> bool:
    """Whether `it` is `range(START, END, STEP)` with START a program id (or derived from one) and
    STEP the program count: the tile loop of a persistent program."""
    if not (isinstance(it, ast.Call) and ast.unparse(it.func) == "range" and len(it.args) == 3):
        return False
    start, step = it.args[0], it.args[2]
    from_pid = any(
        _is_program_id(n) is not None or (isinstance(n, ast.Name) and n.id in pids) for n in ast.walk(start)
    )
    by_count = any(
        (isinstance(n, ast.Name) and n.id in nprogs) or _is_num_programs(n) for n in ast.walk(step)
    )
    return from_pid and by_count


def _is_num_programs(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "tl.num_programs"


def block_axes(fn: ast.FunctionDef) -> dict[str, int | None]:
    """constexpr name -> the program axis it tiles (`None`: it multiplies a program id of unknown axis)."""
    pids: dict[str, int | None] = {}
    assigns = [
        (node.targets[0].id, node.value)
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ]
    loops = [node for node in ast.walk(fn) if isinstance(node, ast.For) and isinstance(node.target, ast.Name)]
    nprogs = {t for t, v in assigns if _is_num_programs(v)}
    changed = True
    while changed:  # pid_m = tl.program_id(0); pid_m = pid // num_pid_n (axis unknown), through names too
        changed = False
        for target, value in assigns:
            ax = _is_program_id(value)
            if ax is None and isinstance(value, ast.Name) and value.id in pids:
                ax = pids[value.id]  # an alias keeps the axis
            elif ax is None and (
                _has_arange(value)  # an offsets vector, not a program index
                or not any(
                    _is_program_id(n) is not None or (isinstance(n, ast.Name) and n.id in pids)
                    for n in ast.walk(value)
                )
            ):
                continue
            new = ax if target not in pids or pids[target] == ax else None
            if target not in pids or pids[target] != new:
                pids[target], changed = new, True
        for loop in loops:  # `for tile in range(pid, n, nprog)`: a persistent program's tile index
            assert isinstance(loop.target, ast.Name)
            if _persistent_range(loop.iter, pids, nprogs) and pids.get(loop.target.id, 0) is not None:
                pids[loop.target.id], changed = None, True

    def axis_of(node: ast.AST) -> tuple[bool, int | None]:
        ax = _is_program_id(node)
        if ax is not None:
            return True, ax
        if isinstance(node, ast.Name) and node.id in pids:
            return True, pids[node.id]
        return False, None

    params = constexpr_params(fn)
    out: dict[str, int | None] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for pid_side, blk_side in ((node.left, node.right), (node.right, node.left)):
                is_pid, ax = axis_of(pid_side)
                if is_pid and isinstance(blk_side, ast.Name) and blk_side.id in params:
                    prev = out.get(blk_side.id, ax)
                    out[blk_side.id] = ax if prev == ax else None
    return out


def _enclosing_functions(tree: ast.Module) -> dict[int, ast.FunctionDef | ast.Module]:
    """id(call) -> innermost function (or the module) holding it."""
    owner: dict[int, ast.FunctionDef | ast.Module] = {}

    def walk(scope: ast.FunctionDef | ast.Module, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef) else scope
            if isinstance(child, ast.Call):
                owner[id(child)] = scope
            walk(inner, child)

    walk(tree, tree)
    return owner


def _bound_int(scope: ast.AST, name: str) -> tuple[int, int] | None:
    """(value, slot) when `name` is assigned exactly once in `scope`, to an integer literal."""
    binds = bindings(scope, name)
    if len(binds) != 1:
        return None
    stmt, slot = binds[0]
    value = stmt.value
    if slot >= 0:
        if not isinstance(value, ast.Tuple) or slot >= len(value.elts):
            return None
        value = value.elts[slot]
    return (value.value, slot) if _is_int(value) else None  # type: ignore[attr-defined]


def _sites(tree: ast.Module) -> list[tuple[BlockSite, ast.Call, ast.AST]]:
    kernels = _jit_kernels(tree)
    owners = _enclosing_functions(tree)
    counts: dict[str, int] = {}
    out: list[tuple[BlockSite, ast.Call, ast.AST]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = launch_name(node)
        if name is None:
            continue
        idx = counts.get(name, 0)
        counts[name] = idx + 1
        fn = kernels.get(name)
        if fn is None:
            continue
        params, axes, extents = constexpr_params(fn), block_axes(fn), block_extents(fn)
        scope = owners.get(id(node), tree)
        given = [(kw.arg, kw.value, -1) for kw in node.keywords if kw.arg is not None]
        names = [a.arg for a in fn.args.args]
        given += [
            (names[i], v, i)
            for i, v in enumerate(node.args)
            if i < len(names) and not _starred(node.args[: i + 1])
        ]
        for param, value, pos in given:
            if param not in params or param in LAUNCH_OPTIONS | NOT_BLOCKS:
                continue
            if pos >= 0 and not _blockish(param, axes, extents):
                continue  # a positional flag (`EVEN_K`, `ACT`) is not a block size
            axis, pid = axes.get(param), param in axes and axes.get(param) is None
            if _is_int(value):
                site = BlockSite(name, idx, param, value.value, axis=axis, pos=pos, pid=pid)  # type: ignore[attr-defined]
                out.append((site, node, scope))
            elif isinstance(value, ast.Name):
                if not _blockish(param, axes, extents):
                    continue  # a geometry variable (`KH=kh`, `kh = 1` on a Conv1d branch) is not a block
                bound = _bound_int(scope, value.id) if scope is not tree else None
                where: ast.AST = scope
                if bound is None:
                    bound, where = _bound_int(tree, value.id), tree
                if bound is None:
                    continue
                site = BlockSite(name, idx, param, bound[0], value.id, bound[1], axis, pos, pid)
                out.append((site, node, where if where is tree else scope))
        passed = {p for p, _, _ in given}
        # omitted: the kernel's default applies (unless autotune/heuristics supply the value)
        supplied = any(k in ast.unparse(d) for d in fn.decorator_list for k in ("autotune", "heuristics"))
        for param, default in ({} if supplied else _int_defaults(fn)).items():
            if (
                param in params
                and param not in passed
                and _blockish(param, axes, extents)
                and default >= MIN_BLOCK
            ):
                axis, pid = axes.get(param), param in axes and axes.get(param) is None
                out.append(
                    (BlockSite(name, idx, param, default, axis=axis, pid=pid, default=True), node, scope)
                )
    return out


def _blockish(param: str, axes: dict[str, int | None], extents: set[str]) -> bool:
    """A constexpr taken for a block size: it tiles a program id, sizes a block (`tl.arange(0, P)`,
    `tl.zeros((P, Q))`), or its name says so."""
    if param in LAUNCH_OPTIONS | NOT_BLOCKS:
        return False
    return param in axes or param in extents or bool(BLOCKISH.search(param))


def block_extents(fn: ast.FunctionDef) -> set[str]:
    """Names that size a block in the kernel: `tl.arange(0, NAME)` extents and `tl.zeros`/`tl.full` dims."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args):
            continue
        if n.func.attr == "arange" and len(n.args) == 2:
            dims = [n.args[1]]
        elif n.func.attr in ("zeros", "full") and isinstance(n.args[0], ast.Tuple | ast.List):
            dims = list(n.args[0].elts)
        else:
            continue
        out |= {d.id for d in dims if isinstance(d, ast.Name)}
    return out


def _starred(args: list[ast.expr]) -> bool:
    return any(isinstance(a, ast.Starred) for a in args)


def _int_defaults(fn: ast.FunctionDef) -> dict[str, int]:
    args = fn.args.args
    pairs = zip(args[len(args) - len(fn.args.defaults) :], fn.args.defaults, strict=True)
    return {a.arg: d.value for a, d in pairs if _is_int(d)}  # type: ignore[attr-defined]


def _knob_covers(site: BlockSite, tree: ast.Module) -> bool:
    """`knobs` already rewrites this site: an uppercase block-like module constant."""
    return bool(site.var and site.var.isupper() and BLOCKISH.search(site.var) and bindings(tree, site.var))


def find_blocks(source: str) -> list[BlockSite]:
    """The block sites of the source, in source order."""
    return [s for s, _, _ in _sites(ast.parse(source))]


def set_block(source: str, site: BlockSite, value: int) -> str:
    """The source with the block at `site` set to `value`, the grid following."""
    tree = ast.parse(source)
    match = [(s, c, sc) for s, c, sc in _sites(tree) if s.key == site.key]
    if not match:
        raise MutationError(f"block {site.key} not found in the source")
    s, call, scope = match[0]
    if s.tiles:
        others = [o.value for o, c, _ in _sites(tree) if c is call and o.tiles and o.param != s.param]
        follow_grid(call, _owner(tree, call), s, value, others)
    if s.var:
        binds = bindings(scope, s.var)
        stmt, slot = binds[0]
        if slot >= 0:
            assert isinstance(stmt.value, ast.Tuple)
            stmt.value.elts[slot] = ast.Constant(value)
        else:
            stmt.value = ast.Constant(value)
    elif s.pos >= 0:
        call.args[s.pos] = ast.Constant(value)
    elif s.default:
        call.keywords.append(ast.keyword(arg=s.param, value=ast.Constant(value)))
    else:
        for kw in call.keywords:
            if kw.arg == s.param:
                kw.value = ast.Constant(value)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _owner(tree: ast.Module, call: ast.Call) -> ast.AST:
    return _enclosing_functions(tree).get(id(call), tree)


def _uses_dot(source: str, kernel: str) -> bool:
    fn = _jit_kernels(ast.parse(source)).get(kernel)
    return fn is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "dot"
        for n in ast.walk(fn)
    )


def block_mutations(source: str) -> list[Mutation]:
    """Every single block-size change of the source (x2, x4, /2), each applying cleanly.

    Mutation names match `knobs` (`PARAM=VALUE@kernel`), so a caller can let these replace the
    knob mutations of the same name (which do not follow a grid held in a variable).
    """
    tree = ast.parse(source)
    muts: list[Mutation] = []
    seen: set[tuple[str, str, int]] = set()
    for site in find_blocks(source):
        if _knob_covers(site, tree):
            continue
        # one mutation per binding: a variable feeding two launches changes both
        ident = (site.kernel, site.var or site.key, site.slot)
        if ident in seen:
            continue
        seen.add(ident)
        dot = _uses_dot(source, site.kernel)
        for v in block_values(site.value):
            if dot and v < 16:
                continue  # the DPE works on 32x32 tiles; a smaller block wastes it
            try:
                out = set_block(source, site, v)
            except MutationError:
                continue
            if dot and v > site.value and not still_fits(source, out, site.kernel):
                continue  # the tiles would overflow the local store: a compile error, not a candidate
            up = v > site.value
            via = f" (via {site.var})" if site.var else ""
            follow = ", grid following" if site.tiles else ""
            muts.append(
                Mutation(
                    name=f"{site.param}={v}@{site.kernel}",
                    family="block_up" if up else "block_down",
                    description=f"set {site.param} {site.value} -> {v} in {site.kernel}{via}{follow}",
                    apply=_setter(site, v),
                    helps=("memory", "latency", "compute")
                    if up and dot
                    else (("memory", "latency") if up else ("compute",)),
                    prior=1.3 if up else 0.6,
                    **_block_effects(up, site.tiles, dot),
                    kernel=site.kernel,
                )
            )
    return muts


def _block_effects(up: bool, grid_axis: bool, dot: bool) -> dict[str, tuple[str, ...]]:
    """Remedies and costs of a block change: on a grid axis a larger block means fewer programs; a
    dot kernel's output tile (its grid axes) is also operand reuse, its K block only bigger commands."""
    bigger = ("bigger_commands", "fewer_bytes") if dot and grid_axis else ("bigger_commands",)
    if up:
        return {"remedies": bigger, "costs": ("parallelism",) if grid_axis else ()}
    return {"remedies": ("parallelism",) if grid_axis else (), "costs": bigger}


def _setter(site: BlockSite, value: int):  # type: ignore[no-untyped-def]
    return lambda src: set_block(src, site, value)


def set_blocks(source: str, changes: list[tuple[BlockSite, int]]) -> str:
    """The source with several blocks set at once (each site found again by its key)."""
    for site, value in changes:
        source = set_block(source, site, value)
    return source


def tile_mutations(source: str) -> list[Mutation]:
    """Grow or shrink a dot kernel's whole output tile (every block that tiles a program axis) at once.

    One step from 32x32 to 64x64 outputs per program: a matmul's DRAM traffic per FLOP falls with
    the tile (`BM*BN/(BM+BN)` reuse), which single-block steps reach only in two evaluations.
    """
    by_launch: dict[tuple[str, int], list[BlockSite]] = {}
    for site in find_blocks(source):
        if site.tiles:
            by_launch.setdefault((site.kernel, site.index), []).append(site)
    muts: list[Mutation] = []
    for (kernel, _), sites in by_launch.items():
        if len(sites) < 2 or not _uses_dot(source, kernel):
            continue
        for factor, up in ((2, True), (0.5, False)):
            changes = [(s, int(s.value * factor)) for s in sites]
            if any(not 32 <= v <= MAX_BLOCK for _, v in changes):  # the DPE tile is 32x32
                continue
            try:
                out = set_blocks(source, changes)
            except MutationError:
                continue
            if up and not still_fits(source, out, kernel):
                continue
            old = "x".join(str(s.value) for s in sites)
            new = "x".join(str(v) for _, v in changes)
            names = "x".join(s.param for s in sites)
            muts.append(
                Mutation(
                    name=f"tile={new}@{kernel}",
                    family="block_up" if up else "block_down",
                    description=f"set the output tile {names} {old} -> {new} in {kernel}, grid following",
                    apply=_tile_setter(changes),
                    helps=("memory", "latency", "compute") if up else ("compute",),
                    prior=1.5 if up else 0.5,
                    **_block_effects(up, True, True),
                    kernel=kernel,
                )
            )
    return muts


def _tile_setter(changes: list[tuple[BlockSite, int]]):  # type: ignore[no-untyped-def]
    return lambda src: set_blocks(src, changes)


def launch_fits(source: str, kernel: str, stages: int, dual_core: bool, machine: str | None = None) -> bool:
    """Whether `kernel`'s launch with its current blocks still fits the local store with `stages`
    operand buffers (and `dual_core`: half the store); True when the model does not apply or
    already misjudges the source as it is (it compiled, so it fit)."""
    blocks = {s.param: s.value for s in find_blocks(source) if s.kernel == kernel}
    capacity = local_store_bytes(machine or default_machine(), dual_core)
    need = dot_footprint(source, kernel, blocks, stages)
    if capacity is None or need is None:
        return True
    full = local_store_bytes(machine or default_machine(), False)
    now = dot_footprint(source, kernel, blocks, 1)
    if full is not None and now is not None and now > full:
        return True  # the model overestimates this kernel: do not filter
    return need <= capacity


def still_fits(parent: str, child: str, kernel: str) -> bool:
    """Whether `child` (a block change of `parent`) keeps `kernel`'s tiles in the local store, with the
    launch options it has; True when the model does not apply or misjudges the parent."""

    def need(src: str) -> tuple[int | None, int | None]:
        opts = launch_options_of(src).get(kernel, {})
        blocks = {s.param: s.value for s in find_blocks(src) if s.kernel == kernel}
        cap = local_store_bytes(default_machine(), bool(opts.get("dual_core")))
        return dot_footprint(src, kernel, blocks, int(opts.get("num_stages", 1) or 1)), cap

    before, cap = need(parent)
    if before is None or cap is None or before > cap:
        return True
    after, cap = need(child)
    return after is None or cap is None or after <= cap
