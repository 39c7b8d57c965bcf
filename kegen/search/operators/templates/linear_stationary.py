"""mtia rewrite of a small-K dot kernel: the weight tile stationary, a software-pipelined loop over M tiles.

A plan-form dot kernel (one `acc = tl.zeros((BM, BN))`, one K loop `for k in range(0, K, BK)` with
`tl.dot`, an epilogue, one final store) computes one output tile per program and re-reads its
[K, BN] weight tile for every M tile. Where K is small (a linear layer's in_features: 512 on
linear_bias_gelu_bf16, 768 on the hold-out linear+SiLU) the whole [K, BN] tile fits the local store,
so here each program loads it once (with every other statement that does not depend on the M tile,
such as the bias), then walks the M tiles `pid_m, pid_m + G, ...` (G programs along M, about one
program per PE in all) with the K loop unrolled into 1, 3 or 5 blocks of BK (a power of two): the
launch takes the count that pads K least (`_kegen_k_chunks`, written into the candidate: 768 is
3 x 256 where one block would pad it to 1024, a third more dot work and local store). The M loop
is then software-pipelined by `row_pipeline.pipeline_loop` (the next tile's input loads at the top
of each iteration, each tile's store deferred to the next), so the DMA keeps streaming outputs while
the DPE and SIMD compute. The module keeps the original kernel as `<kernel>_tiled` and the launch
takes it where the stationary tiles would not fit the local store of the machine the move was made
for. Measured at full size (docs/results/gemm_peak_mtia.md, stationary_moves_mtia.md):
linear_bias_gelu_bf16, 32x128 tiles, K one block: 134.1 us, 84.0% of its roofline (120.5 us under
D41); the hold-out linear+SiLU (K 768), 32x128 in three blocks: 108.4 us, 95.7% (one block did not
fit; the best other plan 145.9 us).
"""

from __future__ import annotations

import ast
import copy
from functools import partial

from kegen.search.operators.mutations.base import (
    Mutation,
    MutationError,
    RenameNames,
    constexpr_params,
    jit_functions,
    launch_of,
    reads,
)
from kegen.search.operators.mutations.blocks import find_blocks, set_block
from kegen.search.operators.mutations.memory.row_pipeline import pipeline_loop, stored_names
from kegen.search.operators.templates.gpu_launch import Launch, find_launch

PES = 64  # mtia-2i's processing elements (where no machine is read): programs along M = PES // the other axes
LOCAL_STORE = 384 * 1024  # mtia-2i's local store per PE, where no machine is read
# (BM, BN) per move, best first: at 4096x512x2048 (linear_bias_gelu_bf16) 32x128 134.1 us, 64x64 146.2
# us; 16x128 185.2, 32x64 149.4 us
TILES: tuple[tuple[int, int], ...] = ((32, 128), (64, 64))
FALLBACK = "_tiled"
# K unrolled in this many blocks of BK (a power of two); the launch takes the count that pads K least
# (K 768: 3 x 256, where one block pads it to 1024)
CHUNKS = (1, 3, 5)
HELPER = "_kegen_stationary_plan"
PLAN_VARS = ("kegen_k_chunks", "kegen_block_k", "kegen_block_m", "kegen_block_n")
BALANCE_VAR = "kegen_balance"
BALANCED = "_bal"  # the name suffix of the balanced form's kernels
HELPER_SOURCE = f'''
def {HELPER}(k, block_m, block_n, item, capacity, shrink=True, counts={CHUNKS!r}, floor=16,
             min_m=32, min_n=64):
    """(chunks, block_k, block_m, block_n) of a weight-stationary dot kernel (written by kegen's
    `linear_stationary` move): K cut into `chunks` blocks of `block_k` (a power of two), the count
    that pads K least, fewer on ties; the tile halved (its longer side first, not below
    min_m x min_n, where `shrink`) until its [K, block_n] weights, three [block_m, K] input tiles
    (prefetched, current, loop-carried), the accumulator and the epilogue's tiles fit `capacity`
    bytes; block_m 0 where none fits (smaller tiles lose to the tiled kernel)."""
    best = None
    for count in counts:
        block = max(floor, 1 << max(0, (-(-int(k) // count) - 1).bit_length()))
        if best is None or count * block < best[0] * best[1]:
            best = (count, block)
    chunks, block_k = best
    while True:
        need = chunks * block_k * (block_n + 3 * block_m) * item + block_m * block_n * (4 + 3 * item)
        if need <= capacity:
            return chunks, block_k, block_m, block_n
        if shrink and block_m >= block_n and block_m > min_m:
            block_m //= 2
        elif shrink and block_n > min_n:
            block_n //= 2
        elif shrink and block_m > min_m:
            block_m //= 2
        else:
            return chunks, block_k, 0, 0
'''


def _machine() -> tuple[int, int]:
    """(PEs, local-store bytes) of the machine this process compiles for (mtia-2i's where unknown)."""
    from kegen.search.operators.mutations.footprint import default_machine, local_store_bytes, machine_pes

    name = default_machine()
    return machine_pes(name) or PES, local_store_bytes(name) or LOCAL_STORE


def _helper_node() -> ast.FunctionDef:
    fn = ast.parse(HELPER_SOURCE).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn


def _is_tl(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


class PlanForm:
    """The parts of a plan-form dot kernel this rewrite needs; MutationError where it is not one."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        body = fn.body
        if not (body and isinstance(body[-1], ast.Expr) and _is_tl(body[-1].value, "store")):
            raise MutationError(f"{fn.name} does not end with its store")
        params = {a.arg for a in fn.args.args}
        consts = constexpr_params(fn)
        accs = [i for i, s in enumerate(body) if isinstance(s, ast.Assign) and _is_tl(s.value, "zeros")]
        loops = [i for i, s in enumerate(body) if isinstance(s, ast.For)]
        if len(accs) != 1 or len(loops) != 1 or accs[0] > loops[0]:
            raise MutationError(f"{fn.name} is not one accumulator filled by one K loop")
        self.i_acc, self.i_loop = accs[0], loops[0]
        shape = body[self.i_acc].value.args[0] if body[self.i_acc].value.args else None  # type: ignore[attr-defined]
        if not (isinstance(shape, ast.Tuple | ast.List) and len(shape.elts) == 2):
            raise MutationError(f"the accumulator of {fn.name} is not a (BM, BN) tile")
        bm, bn = (ast.unparse(e) for e in shape.elts)
        if bm not in consts or bn not in consts:
            raise MutationError(f"the tile ({bm}, {bn}) of {fn.name} is not two constexpr parameters")
        loop = body[self.i_loop]
        assert isinstance(loop, ast.For)
        it = loop.iter
        if not (
            isinstance(it, ast.Call)
            and ast.unparse(it.func) == "range"
            and len(it.args) == 3
            and ast.unparse(it.args[0]) == "0"
            and isinstance(loop.target, ast.Name)
            and not loop.orelse
            and any(_is_tl(n, "dot") for n in ast.walk(loop))
        ):
            raise MutationError(f"the K loop of {fn.name} is not `for k in range(0, K, BK)` with a dot")
        self.k_var, self.k_extent, self.bk = loop.target.id, ast.unparse(it.args[1]), ast.unparse(it.args[2])
        if self.k_extent not in params or self.bk not in consts:
            raise MutationError(f"the K loop of {fn.name} does not run over a parameter in constexpr steps")
        offs = [
            i
            for i, s in enumerate(body[: self.i_acc])
            if isinstance(s, ast.Assign)
            and any(_is_tl(n, "arange") and ast.unparse(n.args[-1]) == bm for n in ast.walk(s))  # type: ignore[attr-defined]
        ]
        if len(offs) != 1:
            raise MutationError(f"no single `tl.arange(0, {bm})` offsets statement in {fn.name}")
        self.i_offs = offs[0]
        value = body[self.i_offs].value  # type: ignore[attr-defined]
        if not (
            isinstance(value, ast.BinOp)
            and isinstance(value.op, ast.Add)
            and isinstance(value.left, ast.BinOp)
            and isinstance(value.left.op, ast.Mult)
            and isinstance(value.left.left, ast.Name)
            and ast.unparse(value.left.right) == bm
        ):
            raise MutationError(f"the M offsets of {fn.name} are not `pid * {bm} + tl.arange(0, {bm})`")
        self.pid = value.left.left.id
        pids = [
            (i, s)
            for i, s in enumerate(body)
            if isinstance(s, ast.Assign) and stored_names(s) == {self.pid} and _is_tl(s.value, "program_id")
        ]
        if len(pids) != 1 or not isinstance(pids[0][1].value.args[0], ast.Constant):  # type: ignore[attr-defined]
            raise MutationError(f"{self.pid} of {fn.name} is not one `tl.program_id(axis)`")
        self.i_pid, self.axis = pids[0][0], int(pids[0][1].value.args[0].value)  # type: ignore[attr-defined, arg-type]
        if sum(self.pid in reads(s) for s in body) != 1:
            raise MutationError(f"{self.pid} of {fn.name} is read beyond the M offsets")
        self.bm, self.bn = bm, bn


def split_dependent(stmts: list[ast.stmt], dep: set[str]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(statements that do not depend on the M tile, those that do), `dep` grown in place."""
    free, tied = [], []
    for st in stmts:
        if reads(st) & dep or _is_tl(getattr(st, "value", None) or st, "store"):
            dep |= stored_names(st)
            tied.append(st)
        else:
            free.append(st)
    return free, tied


def _chunk_bodies(fn: ast.FunctionDef, form: PlanForm, chunks: int) -> list[list[ast.stmt]]:
    """The K loop's body once per K chunk: chunk i at `k = i * BK`, its loop-local names suffixed."""
    loop = fn.body[form.i_loop]
    assert isinstance(loop, ast.For)
    if chunks == 1:
        return [[ast.parse(f"{form.k_var} = 0").body[0], *loop.body]]
    before = set().union(*(stored_names(s) for s in fn.body[: form.i_loop]))
    local = (set().union(*(stored_names(s) for s in loop.body)) - before) | {form.k_var}
    out = []
    for i in range(chunks):
        env = {name: f"{name}_c{i}" for name in local}
        start = ast.parse(f"{env[form.k_var]} = {i} * {form.bk}").body[0]
        out.append([start, *(RenameNames(env).visit(copy.deepcopy(s)) for s in loop.body)])
    return out


def _other_pid(fn: ast.FunctionDef, form: PlanForm) -> str | None:
    """The name of the kernel's one other program id (`X = tl.program_id(c)`, c not the M axis) where
    it is the only other program-id or program-count read, else None."""
    found = []
    for st in fn.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            value = st.value
            if _is_tl(value, "program_id") and ast.unparse(value) != f"tl.program_id({form.axis})":
                found.append(st.targets[0].id)
    calls = [n for n in ast.walk(fn) if _is_tl(n, "program_id") or _is_tl(n, "num_programs")]
    return found[0] if len(found) == 1 and len(calls) == 2 else None


def rewrite_kernel(fn: ast.FunctionDef, chunks: int = 1, balanced: bool = False) -> PlanForm:
    """`fn` rewritten in place (a new runtime parameter `M_TILES`: the number of M tiles); the K loop
    unrolled into `chunks` blocks of BK (the launch sets BK to cover K). `balanced` (a 2-D grid, see
    `_other_pid`): a 1-D grid whose programs each take an even, contiguous run of the (N tile, M
    tile) items, N-major (a second parameter `N_TILES`), reloading the weights where the run
    crosses into the next N tile: every PE works even where the N tiles do not divide the PEs."""
    form = PlanForm(fn)
    other = _other_pid(fn, form) if balanced else None
    if balanced and other is None:
        raise MutationError(f"{fn.name}: no single other program id to balance")
    body = fn.body
    skip = {form.i_pid, form.i_offs, form.i_acc, form.i_loop}
    offs_name = stored_names(body[form.i_offs])
    dep = offs_name | stored_names(body[form.i_acc])
    pre_free, pre_tied = split_dependent([s for i, s in enumerate(body[: form.i_loop]) if i not in skip], dep)
    loop_free: list[ast.stmt] = []
    loop_tied: list[ast.stmt] = []
    for chunk in _chunk_bodies(fn, form, chunks):
        free, tied = split_dependent(chunk, dep)
        loop_free += free
        loop_tied += tied
    post_free, post_tied = split_dependent(body[form.i_loop + 1 :], dep)
    if any(reads(s) & stored_names(t) for s in post_free for t in loop_tied):
        raise MutationError(f"{fn.name}: a statement after the K loop reads the loop's M-tile values")
    tile = "kegen_m_tile"
    offs = copy.deepcopy(body[form.i_offs])
    for n in ast.walk(offs):
        if isinstance(n, ast.Name) and n.id == form.pid:
            n.id = tile
    bounds = "kegen_m_lo, kegen_m_hi" if other else f"{form.pid}, M_TILES, kegen_m_step"
    m_loop = ast.For(
        target=ast.Name(tile, ast.Store()),
        iter=ast.parse(f"range({bounds})", mode="eval").body,
        body=[offs, *pre_tied, body[form.i_acc], *loop_tied, *post_tied],
        orelse=[],
    )
    fn.args.args.append(ast.arg("M_TILES"))
    if other is None:
        head = [body[form.i_pid], *pre_free, *loop_free, *post_free]
        step = ast.parse(f"kegen_m_step = tl.num_programs({form.axis})").body[0]
        fn.body = [*head, step, m_loop]
        fn.body[-1:] = pipeline_loop(fn, m_loop, set())
        return form
    fn.args.args.append(ast.arg("N_TILES"))
    pre = [s for s in pre_free if not (isinstance(s, ast.Assign) and _is_tl(s.value, "program_id"))]
    run = ast.parse(
        "kegen_items = M_TILES * N_TILES\n"
        "kegen_item = tl.program_id(0) * kegen_items // tl.num_programs(0)\n"
        "kegen_end = (tl.program_id(0) + 1) * kegen_items // tl.num_programs(0)"
    ).body
    segment = ast.parse(
        f"{other} = kegen_item // M_TILES\n"
        f"kegen_seg_end = tl.minimum(kegen_end, ({other} + 1) * M_TILES)\n"
        f"kegen_m_lo = kegen_item - {other} * M_TILES\n"
        f"kegen_m_hi = kegen_seg_end - {other} * M_TILES"
    ).body
    work = ast.If(
        test=ast.parse("kegen_item < kegen_end", mode="eval").body,
        body=[*pre, *loop_free, *post_free, m_loop],
        orelse=[],
    )
    seg_loop = ast.For(
        target=ast.Name("kegen_segment", ast.Store()),
        iter=ast.parse("range(SEGMENTS)", mode="eval").body,  # the N tiles a run can touch
        body=[*segment, work, *ast.parse("kegen_item = kegen_seg_end").body],
        orelse=[],
    )
    fn.args.args.append(ast.arg("SEGMENTS"))
    fn.body = [*run, seg_loop]
    i = work.body.index(m_loop)
    work.body[i : i + 1] = pipeline_loop(fn, m_loop, set())
    return form


def _launch_site(tree: ast.Module, kernel: str) -> tuple[ast.Expr, list[ast.stmt]]:
    """The launch statement of `kernel` and the statement list holding it."""
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for st in stmts:
                hit = launch_of(st)
                if hit is not None and hit[0] == kernel:
                    assert isinstance(st, ast.Expr)
                    return st, stmts
    raise MutationError(f"no launch statement of {kernel}")


def _rewritten(name: str, fn: ast.FunctionDef, names: set[str]) -> bool:
    """Whether `fn` is a stationary kernel, or the fallback or a K-chunk copy of one (other kernels of
    the module may still take the move: a model's MLP has several)."""
    if "M_TILES" in {a.arg for a in fn.args.args} or name + FALLBACK in names:
        return True
    base = name.removesuffix(FALLBACK).removesuffix(BALANCED)
    for count in CHUNKS[1:]:
        base = base.removesuffix(f"_k{count}")
    return base != name and base in names


def rewrite(source: str, kernel: str, block_m: int = 32, block_n: int = 128) -> str:
    """The module with `kernel` rewritten (block_m x block_n tiles, the weights stationary, the M loop
    pipelined) and its launch choosing between it and the original kernel (`<kernel>_tiled`)."""
    fns = {f.name: f for f in jit_functions(ast.parse(source))}
    fn0 = fns.get(kernel)
    if fn0 is None:
        raise MutationError(f"no jit kernel {kernel}")
    if _rewritten(kernel, fn0, set(fns)):
        raise MutationError(f"{kernel} is rewritten already (or is a stationary rewrite's own kernel)")
    form0 = PlanForm(fn0)
    for param, value in ((form0.bm, block_m), (form0.bn, block_n)):
        sites = [s for s in find_blocks(source) if s.kernel == kernel and s.param == param]
        if len(sites) != 1:
            raise MutationError(f"{param} of {kernel} is not one launch block")
        if sites[0].value != value:
            source = set_block(source, sites[0], value)
    launch = find_launch(source, kernel)
    if launch.grid is None or form0.axis >= len(launch.grid):
        raise MutationError(f"the grid of {kernel} is not a literal tuple with axis {form0.axis}")
    missing = {form0.k_extent, form0.bm, form0.bn, fn0.args.args[0].arg} - set(launch.args)
    if missing:
        raise MutationError(f"the launch of {kernel} does not pass {', '.join(sorted(missing))}")
    tree = ast.parse(source)
    fn = next(f for f in jit_functions(tree) if f.name == kernel)
    balanced = len(launch.grid) == 2 and _other_pid(fn, form0) is not None
    kernels, form = _add_kernels(tree, fn, balanced)
    stmt, stmts = _launch_site(tree, kernel)
    call = stmt.value
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
    params = [a.arg for a in fn.args.args]
    if any(isinstance(a, ast.Starred) for a in call.args) or params.index(form.bk) < len(call.args):
        raise MutationError(f"the launch of {kernel} passes {form.bk} positionally")
    i = stmts.index(stmt)
    stmts[i : i + 1] = _launch(call, launch, form, kernels, params[0], balanced)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _add_kernels(
    tree: ast.Module, fn: ast.FunctionDef, balanced: bool
) -> tuple[dict[tuple[int, bool], str], PlanForm]:
    """`fn` rewritten with K in one block, copies with K in each other count of `CHUNKS` after it
    (and, with `balanced`, each count again in the balanced form: `<name>_bal`), then the original
    (`<kernel>_tiled`); the plan helper before the first function."""
    kernel = fn.name
    original = copy.deepcopy(fn)
    original.name = kernel + FALLBACK
    where = tree.body.index(fn)
    kernels: dict[tuple[int, bool], str] = {}
    form = PlanForm(fn)
    for bal in (False, True) if balanced else (False,):
        for chunks in CHUNKS:
            first = chunks == 1 and not bal
            fast = fn if first else copy.deepcopy(original)
            fast.name = (kernel if chunks == 1 else f"{kernel}_k{chunks}") + (BALANCED if bal else "")
            form = rewrite_kernel(fast, chunks, bal)
            kernels[(chunks, bal)] = fast.name
            if not first:
                where += 1
                tree.body.insert(where, fast)
    tree.body.insert(where + 1, original)
    if not any(isinstance(s, ast.FunctionDef) and s.name == HELPER for s in tree.body):
        first_fn = next(i for i, s in enumerate(tree.body) if isinstance(s, ast.FunctionDef))
        tree.body.insert(first_fn, _helper_node())
    return kernels, form


def _launch(
    call: ast.Call,
    launch: Launch,
    form: PlanForm,
    kernels: dict[tuple[int, bool], str],
    ptr: str,
    balanced: bool,
) -> list[ast.stmt]:
    """The statements replacing the launch `call`: the plan chosen (K chunks, a tile that fits the
    local store), then the stationary kernel of that chunk count (the balanced form where the N
    tiles would leave more than an eighth of the PEs idle), else the original kernel."""
    chunks, block_k, block_m, block_n = PLAN_VARS
    bm, bn, k = launch.args[form.bm], launch.args[form.bn], launch.args[form.k_extent]
    shrink = bm.isidentifier() and bn.isidentifier() and bm != bn  # the grid can follow the new blocks
    env = {bm: block_m, bn: block_n} if shrink else {}

    def on_plan(text: str) -> ast.expr:
        return RenameNames(env).visit(ast.parse(text, mode="eval").body)  # type: ignore[no-any-return]

    tiles = launch.grid[form.axis]  # type: ignore[index]
    others = " * ".join(f"({g})" for i, g in enumerate(launch.grid or ()) if i != form.axis) or "1"
    strided = list(launch.grid or ())
    pes, capacity = _machine()
    strided[form.axis] = f"min({tiles}, max(1, {pes} // ({others})))"
    programs = f"min({pes}, ({tiles}) * ({others}))"  # the balanced form: one program per PE
    runs = {
        "N_TILES": others,
        "SEGMENTS": f"triton.cdiv(triton.cdiv(({tiles}) * ({others}), {programs}), {tiles}) + 1",
    }

    def fast(count: int, bal: bool) -> ast.stmt:
        call_ = copy.deepcopy(call)
        call_.func.value.id = kernels[(count, bal)]  # type: ignore[attr-defined]
        grid = [programs] if bal else strided
        call_.func.slice = on_plan(f"({', '.join(grid)},)")  # type: ignore[attr-defined]
        # the M loop is pipelined by hand and walks one program per PE: no stages, no second core
        given = {form.bk, form.bm, form.bn, "num_stages", "dual_core"}
        call_.keywords = [kw for kw in call_.keywords if kw.arg not in given] + [
            ast.keyword(form.bm, ast.Name(block_m, ast.Load())),
            ast.keyword(form.bn, ast.Name(block_n, ast.Load())),
            ast.keyword(form.bk, ast.Name(block_k, ast.Load())),
            ast.keyword("M_TILES", on_plan(tiles)),
            *(ast.keyword(arg, on_plan(value)) for arg, value in (runs.items() if bal else ())),
        ]
        return ast.Expr(call_)

    def pick(count: int) -> list[ast.stmt]:
        if not balanced:
            return [fast(count, False)]
        test = ast.Name(BALANCE_VAR, ast.Load())
        return [ast.If(test=test, body=[fast(count, True)], orelse=[fast(count, False)])]

    slow = copy.deepcopy(call)
    slow.func.value.id = kernels[(1, False)] + FALLBACK  # type: ignore[attr-defined]
    item = f"({launch.args[ptr]}).element_size()"  # the first pointer's elements
    plan = f"{', '.join(PLAN_VARS)} = {HELPER}({k}, {bm}, {bn}, {item}, {capacity}, shrink={shrink})"
    chain: list[ast.stmt] = pick(CHUNKS[-1])
    for count in reversed(CHUNKS[:-1]):
        test = ast.parse(f"{chunks} == {count}", mode="eval").body
        chain = [ast.If(test=test, body=pick(count), orelse=chain)]
    cond = ast.parse(f"{block_m} > 0", mode="eval").body
    if balanced:  # the strided form idles PEs where the N tiles do not divide them (blocks known here)
        idle = f"8 * ({others}) * ({pes} // ({others})) < 7 * {pes}"
        chain.insert(0, ast.Assign(targets=[ast.Name(BALANCE_VAR, ast.Store())], value=on_plan(idle)))
    return [ast.parse(plan).body[0], ast.If(test=cond, body=chain, orelse=[ast.Expr(slow)])]


def stationary_mutations(source: str) -> list[Mutation]:
    """The stationary rewrite of every plan-form dot kernel of `source` (mtia)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for fn in jit_functions(tree):
        try:
            rewrite(source, fn.name)
        except MutationError:
            continue
        for rank, (bm, bn) in enumerate(TILES):
            out.append(
                Mutation(
                    name=f"linear_stationary={bm}x{bn}@{fn.name}",
                    family="gemm_plan",
                    description=(
                        f"{fn.name}: the [K, {bn}] weight tile loaded once per program (K in the 1, 3 or 5 "
                        f"power-of-two blocks that pad it least), the programs walking {bm}x{bn} output "
                        "tiles along M (halved until they fit the local store) in a software-pipelined loop "
                        "(next input tile loaded first, each output's store deferred); the original kernel "
                        "where K does not fit"
                    ),
                    apply=partial(rewrite, kernel=fn.name, block_m=bm, block_n=bn),
                    helps=("memory", "latency"),
                    prior=1.45 - 0.05 * rank,
                    remedies=("fewer_bytes", "overlap"),
                    kernel=fn.name,
                )
            )
    return out
