"""Dot-kernel epilogue moves: the store overlapped with the next half tile's K loop (mtia), cheaper math.

On the simulated chip a program ends by waiting for its commands, so a GEMM program's output store
(a 256x256 bf16 tile: 128 KiB at a PE's share of DRAM, ~41 us on mtia-2i) runs while its PE computes
nothing; all PEs finish their tiles together, so the whole chip idles on DRAM once per wave of programs
(gemm_bf16_4096: four ~49 us dips of the DPE). And a store issued right after the K loop delays the
next loads: the cast tile it reads takes the local-store range the loop's operand buffers just freed,
so the next operand load waits for the store to drain (write-after-read).

`split_store` rewrites a dot kernel so that each program computes its output tile as two halves
along N, one after the other: the first half's cast tile is made before the second half's loop and
stored from inside it (at its first iteration), so the store drains while the second half's loads and
dots run, from buffers that do not alias the loop's. The launch is unchanged: the tiles inside the
kernel use half of its N block (at least `MIN_HALF` wide). gemm_bf16_4096 plan 256x256x64: 985.8 us
(78.8% of its roofline) -> 951.4 us (81.6%) as 256x(2x128) (docs/results/gemm_peak_mtia.md).

`gelu_sigmoid`: the tanh-form GELU `0.5 * a * (1 + tanh(u))` is `a / (1 + exp(-2u))`: one exponential
and one division per element on the SIMD instead of the tanh's (spelled `1 - 2 / (exp(2u) + 1)` by
the production seed) four more operations (linear_bias_gelu_bf16, plan 256x128x64: 215.2 -> 202.9 us);
GELU's cubic `u` of the same operand is folded into the exponent (two operations fewer: split-store
plan 173.4 -> 169.2 us). The tanh value must be read only by that product (it is then dropped).
"""

from __future__ import annotations

import ast
import copy

from kegen.search.operators.mutations.base import (
    Mutation,
    MutationError,
    RenameNames,
    constexpr_params,
    jit_functions,
)
from kegen.search.operators.mutations.blocks import block_axes, find_blocks, set_block
from kegen.search.operators.mutations.vectorize_loops import _assigned

SUFFIX = "_h1"  # names of the second half
MIN_HALF = 128  # narrower halves lost (256x(2x64) to 256x128 on linear+GELU: 224.6 against 215.2 us)
MAX_TILE = 512  # the largest N block a doubling may give


def _is_tl(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def _half(block: str) -> ast.expr:
    return ast.BinOp(ast.Name(block, ast.Load()), ast.FloorDiv(), ast.Constant(2))


class _Halve(ast.NodeTransformer):
    """`tl.arange(0, B)` and `B` in `tl.zeros`/`tl.full` shapes -> `B // 2`."""

    def __init__(self, block: str) -> None:
        self.block = block

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        is_block = lambda n: isinstance(n, ast.Name) and n.id == self.block  # noqa: E731
        if _is_tl(node, "arange") and len(node.args) == 2 and is_block(node.args[1]):
            node.args[1] = _half(self.block)
        elif (_is_tl(node, "zeros") or _is_tl(node, "full")) and node.args:
            shape = node.args[0]
            if isinstance(shape, ast.Tuple | ast.List):
                shape.elts = [_half(self.block) if is_block(e) else e for e in shape.elts]
        return node


def _plan(fn: ast.FunctionDef) -> tuple[str, str, int, int]:
    """(accumulator, N block, index of the N offsets statement, index of the K loop) of a kernel whose
    body is: ... N offsets ... `acc = tl.zeros((BM, BN))` ... one K loop with `tl.dot` ... a final
    `tl.store`; MutationError otherwise."""
    body = fn.body
    last = body[-1] if body else None
    if not (isinstance(last, ast.Expr) and _is_tl(last.value, "store")):
        raise MutationError(f"{fn.name} does not end with its store")
    accs = [
        (i, s)
        for i, s in enumerate(body)
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and _is_tl(s.value, "zeros")
    ]
    loops = [
        i for i, s in enumerate(body) if isinstance(s, ast.For) and any(_is_tl(n, "dot") for n in ast.walk(s))
    ]
    if len(accs) != 1 or len(loops) != 1 or accs[0][0] > loops[0]:
        raise MutationError(f"{fn.name} is not one accumulator filled by one K loop")
    idx, stmt = accs[0]
    shape = stmt.value.args[0] if stmt.value.args else None  # type: ignore[attr-defined]
    if not (
        isinstance(shape, ast.Tuple | ast.List)
        and len(shape.elts) == 2
        and isinstance(shape.elts[1], ast.Name)
    ):
        raise MutationError(f"the accumulator of {fn.name} is not a (BM, BN) tile")
    block = shape.elts[1].id
    if block not in constexpr_params(fn):
        raise MutationError(f"{block} is not a constexpr of {fn.name}")
    offs = [
        i
        for i, s in enumerate(body[:idx])
        if isinstance(s, ast.Assign)
        and any(
            isinstance(n, ast.Call) and _is_tl(n, "arange") and ast.unparse(n.args[-1]) == block
            for n in ast.walk(s.value)
        )
    ]
    if len(offs) != 1:
        raise MutationError(f"no single `tl.arange(0, {block})` offsets statement in {fn.name}")
    loop = body[loops[0]]
    assert isinstance(loop, ast.For)
    if not isinstance(loop.target, ast.Name) or not (
        isinstance(loop.iter, ast.Call)
        and isinstance(loop.iter.func, ast.Name)
        and loop.iter.func.id == "range"
    ):
        raise MutationError(f"the K loop of {fn.name} is not `for k in range(...)`")
    return stmt.targets[0].id, block, offs[0], loops[0]  # type: ignore[attr-defined]


def _split_kernel(fn: ast.FunctionDef) -> str:
    """Rewrite `fn` in place; returns the N block's name."""
    _, block, i_offs, i_loop = _plan(fn)
    body = fn.body
    head, rest = body[: i_offs + 1], body[i_offs + 1 :]
    store = rest[-1]
    assert isinstance(store, ast.Expr) and isinstance(store.value, ast.Call)
    call = store.value
    value = (
        call.args[1]
        if len(call.args) > 1
        else next((k.value for k in call.keywords if k.arg == "value"), None)
    )
    if value is None:
        raise MutationError("the store has no value argument")
    tile = "kegen_tile" + SUFFIX.replace("_h1", "_h0")
    first = [*rest[:-1], ast.Assign([ast.Name(tile, ast.Store())], value)]
    offs_stmt = head[-1]
    assert isinstance(offs_stmt, ast.Assign)
    offs_names = {t.id for t in offs_stmt.targets if isinstance(t, ast.Name)}
    if len(offs_names) != 1:
        raise MutationError("the offsets statement binds more than one name")
    (offs,) = offs_names
    second = copy.deepcopy(rest)
    renamed = _assigned(second) | {offs}
    second = [RenameNames({n: n + SUFFIX for n in renamed}).visit(s) for s in second]
    loop = second[i_loop - i_offs - 1]
    assert isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and isinstance(loop.target, ast.Name)
    start = loop.iter.args[0] if len(loop.iter.args) >= 2 else ast.Constant(0)
    deferred = copy.deepcopy(call)
    if len(deferred.args) > 1:
        deferred.args[1] = ast.Name(tile, ast.Load())
    else:
        deferred.keywords = [
            ast.keyword("value", ast.Name(tile, ast.Load())) if k.arg == "value" else k
            for k in deferred.keywords
        ]
    cond = ast.Compare(ast.Name(loop.target.id, ast.Load()), [ast.Eq()], [copy.deepcopy(start)])
    loop.body.insert(0, ast.If(cond, [ast.Expr(deferred)], []))
    shift = ast.Assign(
        [ast.Name(offs + SUFFIX, ast.Store())],
        ast.BinOp(ast.Name(offs, ast.Load()), ast.Add(), _half(block)),
    )
    fn.body = [_Halve(block).visit(s) for s in [*head, *first, shift, *second]]
    return block


def split_store(source: str, kernel: str, double: bool = False) -> str:
    """`kernel` computing its output tile as two halves along N, the first half's store overlapped
    with the second half's K loop; `double`: the launch's N block doubled first (grid following, the
    halves are the parent's tile), else the launch unchanged (halves of its tile)."""
    if "kegen_tile_h0" in source:
        raise MutationError("the store is already split")
    tree = ast.parse(source)
    fn = next((f for f in jit_functions(tree) if f.name == kernel), None)
    if fn is None:
        raise MutationError(f"no jit kernel {kernel}")
    _, block, _, _ = _plan(fn)
    sites = [st for st in find_blocks(source) if st.kernel == kernel and st.param == block]
    if double:
        if len(sites) != 1 or not sites[0].tiles or not MIN_HALF <= sites[0].value <= MAX_TILE // 2:
            raise MutationError(
                f"{block} of {kernel} is not one launch block (<= {MAX_TILE // 2}) on a grid axis"
            )
        source = set_block(source, sites[0], sites[0].value * 2)
        tree = ast.parse(source)
        fn = next(f for f in jit_functions(tree) if f.name == kernel)
    elif not sites or min(st.value for st in sites) < 2 * MIN_HALF:
        raise MutationError(f"{block} of {kernel} is not a launch block of at least {2 * MIN_HALF}")
    _split_kernel(fn)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _SwapPid(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (_is_tl(node, "program_id") or _is_tl(node, "num_programs")) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and arg.value in (0, 1):
                node.args[0] = ast.Constant(1 - arg.value)
        return node


def _grid_tuple(tree: ast.Module, kernel: str) -> ast.Tuple:
    """The literal grid tuple of the one launch of `kernel` (directly or through a name bound once)."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == kernel
    ]
    if len(calls) != 1:
        raise MutationError(f"{len(calls)} launches of {kernel} (want one)")
    grid = calls[0].func.slice  # type: ignore[attr-defined]
    if isinstance(grid, ast.Name):
        binds = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == [grid.id]
        ]
        grid = binds[0] if len(binds) == 1 else None
    if not isinstance(grid, ast.Tuple) or len(grid.elts) < 2:
        raise MutationError(f"the grid of {kernel} is not a literal tuple of two or more axes")
    return grid


def swap_axes(source: str, kernel: str) -> str:
    """`kernel` with program axes 0 and 1 exchanged (its `tl.program_id`s and its launch's grid), so
    the programs dealt to the PEs together walk the other axis first."""
    tree = ast.parse(source)
    fn = next((f for f in jit_functions(tree) if f.name == kernel), None)
    if fn is None or not any(
        _is_tl(n, "program_id") and ast.unparse(n.args[0]) == "1"
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
    ):
        raise MutationError(f"{kernel} has no program axis 1")
    grid = _grid_tuple(tree, kernel)
    grid.elts[0], grid.elts[1] = grid.elts[1], grid.elts[0]
    _SwapPid().visit(fn)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _n_on_axis1(source: str, kernel: str) -> bool:
    """Whether `kernel`'s N block (its accumulator's columns) tiles program axis 1 (programs walk M first)."""
    tree = ast.parse(source)
    fn = next(f for f in jit_functions(tree) if f.name == kernel)
    _, block, _, _ = _plan(fn)
    return block_axes(fn).get(block) == 1


def _splitter(kernel: str, double: bool, swap: bool):  # type: ignore[no-untyped-def]
    def apply(src: str) -> str:
        return split_store(swap_axes(src, kernel) if swap else src, kernel, double)

    return apply


def gemm_plan_mutations(source: str) -> list[Mutation]:
    """The store-overlap split of every dot kernel it applies to: halves of its N block, or of the
    N block doubled (the parent's tile becomes the half: a GELU epilogue's plan stops at 256x128 in
    the local store, its split at 256x(2x128)); on a 2-D grid whose programs walk M first, each also
    with the program axes exchanged (a wave of programs then shares A's row panels: gemm_bf16_4096
    split alone 1052 us, with the axes exchanged 951 us)."""
    muts: list[Mutation] = []
    for fn in jit_functions(ast.parse(source)):
        try:
            swaps = (False, True) if _n_on_axis1(source, fn.name) else (False,)
        except (MutationError, SyntaxError):
            continue
        for double in (False, True):
            for swap in swaps:
                apply = _splitter(fn.name, double, swap)
                try:
                    apply(source)
                except (MutationError, SyntaxError, ValueError):
                    continue
                tag = ("x2" if double else "") + ("+swap_axes" if swap else "")
                muts.append(
                    Mutation(
                        name=f"split_store{tag}@{fn.name}",
                        family="store_overlap",
                        description=f"compute {fn.name}'s output tile as two halves along N"
                        + (" (the N block doubled, grid following)" if double else "")
                        + ", the first stored from inside the second half's K loop so it drains behind the "
                        "next loads and dots"
                        + ("; program axes exchanged (programs walk N first)" if swap else ""),
                        apply=apply,
                        helps=("memory", "latency"),
                        prior=1.5 + (0.1 if swap else 0.0) + (0.0 if double else 0.05),  # halves first
                        remedies=("overlap", "fewer_bytes") if swap else ("overlap",),
                        kernel=fn.name,
                    )
                )
    return muts


# --- epilogue math ---


def _constant(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _constant(node.operand)
        return None if v is None else -v
    ok = isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return float(node.value) if ok else None  # type: ignore[arg-type, attr-defined]


def _num(node: ast.AST, value: float) -> bool:
    return _constant(node) == value


def _call(node: ast.AST, name: str) -> ast.Call | None:
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == name) or (isinstance(f, ast.Name) and f.id == name):
            return node
    return None


def _pair(node: ast.AST, op: type, const: float) -> ast.expr | None:
    """`x` of `const <op> x` or `x <op> const` (commutative ops only)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, op):
        if _num(node.left, const):
            return node.right
        if _num(node.right, const):
            return node.left
    return None


def tanh_argument(node: ast.AST) -> ast.expr | None:
    """`u` when `node` computes tanh(u): `tanh(u)`, `1 - 2 / (exp(2u) + 1)` or `2 / (1 + exp(-2u)) - 1`."""
    call = _call(node, "tanh")
    if call is not None:
        return call.args[0]
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return None
    if _num(node.left, 1.0):  # 1 - 2 / (exp(2u) + 1)
        div = node.right
        sign = 2.0
    elif _num(node.right, 1.0):  # 2 / (1 + exp(-2u)) - 1
        div = node.left
        sign = -2.0
    else:
        return None
    if not (isinstance(div, ast.BinOp) and isinstance(div.op, ast.Div) and _num(div.left, 2.0)):
        return None
    exp = _call(_pair(div.right, ast.Add, 1.0) or ast.Constant(0), "exp")
    return _pair(exp.args[0], ast.Mult, sign) if exp is not None else None


def _assigns(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in stmt.targets
    )


def _factors(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def gelu_cubic(u: ast.expr) -> tuple[float, float, str] | None:
    """(c, d, a) when `u` is `c * (a + d * a * a * a)` (factors in any order), `a` as source."""
    factors = _factors(u)
    consts = [f for f in factors if _constant(f) is not None]
    rest = [f for f in factors if _constant(f) is None]
    if len(consts) != 1 or len(rest) != 1:
        return None
    inner = rest[0]
    if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add)):
        return None
    for a, cube in ((inner.left, inner.right), (inner.right, inner.left)):
        parts = _factors(cube)
        ds = [f for f in parts if _constant(f) is not None]
        xs = [f for f in parts if _constant(f) is None]
        if len(ds) == 1 and len(xs) == 3 and len({ast.dump(x) for x in [a, *xs]}) == 1:
            return _constant(consts[0]), _constant(ds[0]), ast.unparse(a)  # type: ignore[return-value]
    return None


class _GeluSigmoid(ast.NodeTransformer):
    """`0.5 * a * (1 + t)` (any order) -> `a / (1 + exp(-2 u))` for the tanh `t`; a GELU cubic `u` of
    the same `a` (`cubics`) folded in: `a / (1 + exp(a * (-2c - 2cd * a * a)))`, 7 SIMD ops, not 9."""

    def __init__(self, tanh: dict[str, ast.expr], cubics: dict[str, tuple[float, float, str]]) -> None:
        self.tanh, self.cubics = tanh, cubics
        self.used: set[str] = set()
        self.folded: set[str] = set()

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        factors = _factors(node)
        if len(factors) != 3:
            return node
        half = [f for f in factors if _num(f, 0.5)]
        ones = [f for f in factors if isinstance(_pair(f, ast.Add, 1.0), ast.Name)]
        ones = [f for f in ones if _pair(f, ast.Add, 1.0).id in self.tanh]  # type: ignore[union-attr]
        if len(half) != 1 or len(ones) != 1:
            return node
        name = _pair(ones[0], ast.Add, 1.0).id  # type: ignore[union-attr]
        (a,) = [f for f in factors if f is not half[0] and f is not ones[0]]
        self.used.add(name)
        u = self.tanh[name]
        cubic = self.cubics.get(u.id) if isinstance(u, ast.Name) else gelu_cubic(u)
        if cubic is not None and cubic[2] == ast.unparse(a):
            c, d, x = cubic
            if isinstance(u, ast.Name):
                self.folded.add(u.id)
            text = f"tl.exp({x} * ({-2 * c!r} - {2 * c * d!r} * ({x} * {x})))"
        else:
            text = f"tl.exp(-2.0 * ({ast.unparse(u)}))"
        exp = ast.parse(text, mode="eval").body
        return ast.BinOp(a, ast.Div(), ast.BinOp(ast.Constant(1.0), ast.Add(), exp))


def _note_cubic(cubics: dict[str, tuple[float, float, str]], st: ast.stmt) -> None:
    """`cubics` (names bound to a GELU cubic whose `a`, a name, is not rebound since) past `st`."""
    for name, (_, _, a) in list(cubics.items()):
        if _assigns(st, a):
            del cubics[name]
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        name, cubic = st.targets[0].id, gelu_cubic(st.value)
        cubics.pop(name, None)
        if cubic is not None and cubic[2].isidentifier() and cubic[2] != name:
            cubics[name] = cubic


def _reads(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(fn))


def _gelu_block(fn: ast.FunctionDef, stmts: list[ast.stmt]) -> bool:
    """Rewrite the GELUs of one statement list of `fn` in place; whether any was rewritten."""
    tanh = {
        s.targets[0].id: u
        for s in stmts
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and (u := tanh_argument(s.value)) is not None
    }
    folded, used = set(), set()
    cubics: dict[str, tuple[float, float, str]] = {}
    for i, st in enumerate(list(stmts) if tanh else []):
        rewriter = _GeluSigmoid(tanh, cubics)
        stmts[i] = rewriter.visit(st)
        folded |= rewriter.folded
        used |= rewriter.used
        _note_cubic(cubics, stmts[i])
    for name in used:
        if _reads(fn, name):
            raise MutationError(f"{name} (a tanh) is read elsewhere in {fn.name}")
        stmts[:] = [s for s in stmts if not _assigns(s, name)]
    for name in folded:  # a folded cubic's binding goes where nothing else reads it
        if not _reads(fn, name):
            stmts[:] = [s for s in stmts if not _assigns(s, name)]
    return bool(used)


def gelu_sigmoid(source: str) -> str:
    """The source with every tanh-form GELU of its jit kernels (in the body or a loop's) written as
    `a / (1 + exp(-2u))`."""
    tree = ast.parse(source)
    changed = False
    for fn in jit_functions(tree):
        blocks = [fn.body, *(n.body for n in ast.walk(fn) if isinstance(n, ast.For | ast.While))]
        changed = any([_gelu_block(fn, block) for block in blocks]) or changed
    if not changed:
        raise MutationError("no tanh-form GELU (0.5 * a * (1 + tanh(u))) in the kernels")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def epilogue_mutations(source: str) -> list[Mutation]:
    """The epilogue rewrites that apply to the source."""
    try:
        gelu_sigmoid(source)
    except MutationError:
        return []
    return [
        Mutation(
            name="gelu_sigmoid",
            family="epilogue",
            description="write the tanh-form GELU as a / (1 + exp(-2u)): one exponential and one division "
            "per element on the SIMD instead of the tanh's extra tile operations",
            apply=gelu_sigmoid,
            helps=("compute", "latency"),
            prior=1.6,
            remedies=("cheaper_math",),
        )
    ]
