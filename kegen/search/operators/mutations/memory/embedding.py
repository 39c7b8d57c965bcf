"""Embedding bags: a bag-per-program row loop rewritten as the segment gather of `templates.embedding`.

The kernel engineer's reading of a latency-bound embedding bag (DMA and RED waiting on each other,
one short gather per step, 128-256-byte rows): give each program several bags, walk their
contiguous index range in blocks across bag boundaries so one DMA gather fetches many rows, and
reduce every bag of the group at once with a membership-mask matmul accumulated in fp32 (the mean's
division folded into the accumulator before the single store). The move recognises the seed form

    start = tl.load(OFF + BAG); end = tl.load(OFF + BAG + 1)      # include_last_offset
    for i in range(start, end):
        row = tl.load(IDX + i)
        acc += tl.load(W + row * DIM + cols, ...)[.to(tl.float32)]
    [acc = acc / <bag size>]                                       # mean
    tl.store(Y + BAG * DIM + cols, ...)

in any kernel of the module (names free), replaces the kernel with the segment-gather kernel and
its launch `K[(NUM_BAGS,)](...)` with the group launch; BAG_GROUP and ROW_BLOCK become module
constants the block-size knobs tune.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.mutations.memory.segments import search_steps
from kegen.search.operators.templates import embedding

FAMILY = "embedding_bag"
PRIOR = 2.5  # a rewrite of the whole kernel that removes its per-row dependency chain
GROUP_FAMILY, GROUP_PRIOR = "embedding_bag_group", 1.2


@dataclass(frozen=True)
class BagLoop:
    """A recognised bag-per-program kernel: its name and the parameter names of its operands."""

    kernel: str
    table: str
    idx: str
    off: str
    out: str
    dim: str
    mean: bool


def _src(node: ast.AST) -> str:
    return ast.unparse(node)


def _assigned(fn: ast.FunctionDef) -> dict[str, str]:
    """name -> source of its value, for the kernel's top-level single-name assignments."""
    return {
        s.targets[0].id: _src(s.value)
        for s in fn.body
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    }


def find_bag_loop(fn: ast.FunctionDef) -> BagLoop | None:
    """The bag-per-program row loop of `fn` (see the module docstring), or None."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    values = _assigned(fn)
    loops = [s for s in fn.body if isinstance(s, ast.For) and isinstance(s.target, ast.Name)]
    if len(loops) != 1:
        return None
    loop = loops[0]
    it = loop.iter
    if not (isinstance(it, ast.Call) and _src(it.func) in ("range", "tl.range") and len(it.args) == 2):
        return None
    lo, hi = (_src(a) for a in it.args)
    m_lo = re.fullmatch(r"tl\.load\((\w+) \+ (\w+)\)", values.get(lo, ""))
    if m_lo is None or values.get(hi) != f"tl.load({m_lo[1]} + {m_lo[2]} + 1)":
        return None
    assert isinstance(loop.target, ast.Name)
    off, bag, var = m_lo[1], m_lo[2], loop.target.id
    body = [_src(s) for s in loop.body]
    if len(body) != 2:
        return None
    m_row = re.fullmatch(rf"(\w+) = tl\.load\((\w+) \+ {var}\)", body[0])
    if m_row is None:
        return None
    row, idx = m_row[1], m_row[2]
    m_acc = re.fullmatch(rf"(\w+) \+= tl\.load\((\w+) \+ {row} \* (\w+) \+ (\w+)[,)].*", body[1])
    if m_acc is None:
        return None
    acc, table, dim = m_acc[1], m_acc[2], m_acc[3]
    after = [_src(s) for s in fn.body[fn.body.index(loop) + 1 :]]
    stores = [s for s in after if s.startswith("tl.store(")]
    store = rf"tl\.store\((\w+) \+ {bag} \* {dim} \+ \w+, {acc}\b.*"
    m_out = re.fullmatch(store, stores[0]) if len(stores) == 1 else None
    if m_out is None:
        return None
    mean = any(s.startswith(f"{acc} = {acc} / ") and lo in s and hi in s for s in after)
    others = [s for s in after if not s.startswith(("tl.store(", f"{acc} = {acc} / "))]
    names = (table, idx, off, m_out[1], dim)
    if others or not all(n in params for n in names) or len(set(names)) != 5:
        return None
    return BagLoop(fn.name, table, idx, off, m_out[1], dim, mean)


def _launch(tree: ast.Module, kernel: str) -> ast.Call | None:
    """The module's one launch `kernel[grid](...)`, or None."""
    calls = [call for name, _, call in launches(tree) if name == kernel]
    return calls[0] if len(calls) == 1 else None


def rewrite(
    source: str, kernel: str, bags: int = embedding.BAG_GROUP, rows: int = embedding.ROW_BLOCK
) -> str:
    """`source` with the bag loop kernel `kernel` replaced by the segment gather (see module doc)."""
    tree = ast.parse(source)
    fns = [f for f in jit_functions(tree) if f.name == kernel]
    loop = find_bag_loop(fns[0]) if fns else None
    call = _launch(tree, kernel)
    if loop is None or call is None:
        raise MutationError(f"{kernel} is not a bag-per-program embedding bag loop with one launch")
    grid = call.func.slice  # type: ignore[attr-defined]
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    if not (isinstance(grid, ast.Tuple) and len(grid.elts) == 1) or starred:
        raise MutationError(f"the launch of {kernel} has no one-axis grid (NUM_BAGS,)")
    fn = fns[0]
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    bound = dict(zip(params, (_src(a) for a in call.args), strict=False))
    bound |= {k.arg: _src(k.value) for k in call.keywords if k.arg}
    names = (loop.table, loop.idx, loop.off, loop.out, loop.dim)
    if not all(n in bound for n in names):
        missing = ", ".join(n for n in names if n not in bound)
        raise MutationError(f"the launch of {kernel} does not pass {missing}")
    num_bags = _src(grid.elts[0])
    operands = (*(bound[n] for n in names[:4]), num_bags, "0", bound[loop.dim])
    lines = source.splitlines(keepends=True)
    indent = " " * call.col_offset
    launch = embedding.bag_launch(kernel, operands, loop.mean, True, indent)
    # replace the launch first (it follows the kernel), then the kernel, then add the constants
    start, end = call.lineno - 1, call.end_lineno or call.lineno
    head = lines[start][: call.col_offset]
    tail = lines[end - 1][call.end_col_offset or 0 :]
    lines[start:end] = [head + launch + tail]
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    lines[first : fn.end_lineno] = [embedding.bag_kernel(kernel).lstrip("\n")]
    out = "".join(lines)
    consts = embedding.constants(bags, rows)
    if re.search(r"^(BAG_GROUP|ROW_BLOCK) = ", out, flags=re.M):
        raise MutationError("the module already defines BAG_GROUP or ROW_BLOCK")
    at = first_code_line(out)
    return out[:at] + consts + "\n\n" + out[at:]


def first_code_line(source: str) -> int:
    """Offset of the first top-level statement after the imports (where module constants go)."""
    tree = ast.parse(source)
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom | ast.Expr):
            return offsets[min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1]
    return len(source)


def _set_group(source: str, bags: int) -> str:
    out, n = re.subn(r"^BAG_GROUP = \d+$", f"BAG_GROUP = {bags}", source, count=1, flags=re.M)
    if n != 1:
        raise MutationError("no module constant BAG_GROUP")
    return out


def group_mutations(source: str) -> list[Mutation]:
    """For a segment gather already in place: fewer bags per program (more programs: the remedy when
    PEs idle or the group's chain of index load, gather and matmul is the latency) and more (fewer,
    larger gathers). The generic knob moves make the same edits without the parallelism remedy."""
    m = re.search(r"^BAG_GROUP = (\d+)$", source, flags=re.M)
    if m is None or "member.to(vals.dtype)" not in source:
        return []
    bags = int(m[1])
    out = []
    for value, remedies, costs in ((bags // 2, ("parallelism", "balance"), ("bigger_commands",)),
                                   (bags * 2, ("bigger_commands",), ("parallelism",))):
        if not 2 <= value <= 128:
            continue
        out.append(
            Mutation(
                name=f"BAG_GROUP={value}@module",
                family=GROUP_FAMILY,
                description=f"set BAG_GROUP {bags} -> {value} (bags pooled per program)",
                apply=partial(_set_group, bags=value),
                helps=("latency", "occupancy"),
                prior=GROUP_PRIOR,
                remedies=remedies,
                costs=costs,
            )
        )
    return out


BALANCE_FAMILY, BALANCE_PRIOR = "embedding_bag_balance", 2.5  # a whole-kernel rewrite, as the segment gather
BALANCED_BAGS, BALANCED_ROWS = 32, 16  # measured best with the balance (docs/results/memory_moves_mtia.md)


def _segment_gather_kernel(tree: ast.Module) -> ast.FunctionDef | None:
    """The module's one segment-gather kernel that is not balanced yet, or None."""
    found = [
        fn for fn in jit_functions(tree)
        if "member.to(vals.dtype)" in _src(fn) and embedding.BALANCED_MARKER not in _src(fn)
    ]
    return found[0] if len(found) == 1 else None


def _set_constant(source: str, name: str, value: int) -> str:
    out, n = re.subn(rf"^{name} = \d+$", f"{name} = {value}", source, count=1, flags=re.M)
    if n != 1:
        raise MutationError(f"no module constant {name}")
    return out


def balance(source: str, prefetch: int = 0) -> str:
    """`source`'s segment gather rewritten in the balanced form (`templates.embedding.balanced_kernel`):
    BAG_PROGRAMS programs on both cores of every PE, each taking the bags that start in its equal
    share of the indices, BALANCED_BAGS bags per chunk, ROW_BLOCK BALANCED_ROWS; with `prefetch`
    (a power of two), the second core of each PE first gathers that many rows of its share and of
    its mate's into the SRAM cache while the offsets are searched."""
    tree = ast.parse(source)
    fn = _segment_gather_kernel(tree)
    call = _launch(tree, fn.name) if fn is not None else None
    if fn is None or call is None:
        raise MutationError("no segment-gather embedding bag kernel with one launch to balance")
    grid = call.func.slice  # type: ignore[attr-defined]
    elts = grid.elts if isinstance(grid, ast.Tuple) else []
    m = re.fullmatch(r"triton\.cdiv\((.+), BAG_GROUP\)", _src(elts[0])) if len(elts) == 1 else None
    if m is None:
        raise MutationError(f"the launch of {fn.name} has no grid (triton.cdiv(num_bags, BAG_GROUP),)")
    num_bags = m[1]
    new_call = ast.parse(_src(call), mode="eval").body
    assert isinstance(new_call, ast.Call) and isinstance(new_call.func, ast.Subscript)
    new_call.func.slice = ast.Tuple([ast.Name("BAG_PROGRAMS", ast.Load())], ast.Load())
    new_call.keywords = [
        k for k in new_call.keywords if k.arg not in ("FINE", "COARSE", "PREFETCH", "dual_core")
    ]
    # FINE ~ sqrt(num_bags), at least BAG_FINE (segment_balance's rule); fp16 sum bags (2048) with the
    # prefetch: FINE 64 21.1 us, 32 21.6 us
    fine, coarse = search_steps(num_bags, "BAG_FINE")
    new_call.keywords += [
        ast.keyword("FINE", ast.parse(fine, mode="eval").body),
        ast.keyword("COARSE", ast.parse(coarse, mode="eval").body),
        ast.keyword("PREFETCH", ast.Name("BAG_PREFETCH", ast.Load())),
        ast.keyword("dual_core", ast.Constant(True)),
    ]
    lines = source.splitlines(keepends=True)
    start, end = call.lineno - 1, call.end_lineno or call.lineno
    head = lines[start][: call.col_offset]
    tail = lines[end - 1][call.end_col_offset or 0 :]
    lines[start:end] = [head + ast.unparse(new_call) + tail]
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    params = {a.arg for a in fn.args.args}  # per-sample weights (sum), a padding index
    weighted, padded = embedding.WEIGHTS_PARAM in params, embedding.PAD_PARAM in params
    kernel = embedding.balanced_kernel(fn.name, weighted, padded)
    lines[first : fn.end_lineno] = [kernel.lstrip("\n")]
    out = "".join(lines)
    if re.search(r"^(BAG_FINE|BAG_PROGRAMS|BAG_PREFETCH) = ", out, flags=re.M):
        raise MutationError("the module already defines BAG_FINE, BAG_PROGRAMS or BAG_PREFETCH")
    out = _set_constant(_set_constant(out, "BAG_GROUP", BALANCED_BAGS), "ROW_BLOCK", BALANCED_ROWS)
    m_rows = re.search(r"^ROW_BLOCK = \d+\n", out, flags=re.M)
    assert m_rows is not None
    consts = (
        f"BAG_FINE = {embedding.BAG_FINE}\nBAG_PROGRAMS = {embedding.BAG_PROGRAMS}\n"
        f"BAG_PREFETCH = {prefetch}\n"
    )
    return out[: m_rows.end()] + consts + out[m_rows.end() :]


def balance_mutations(source: str) -> list[Mutation]:
    """The balanced form of a segment gather in place (mtia: it launches one program per core)."""
    tree = ast.parse(source)
    fn = _segment_gather_kernel(tree)
    if fn is None or _launch(tree, fn.name) is None:
        return []
    if not re.search(r"^BAG_GROUP = \d+$", source, flags=re.M):
        return []
    variants = ((0, ""), (embedding.BAG_PREFETCH, "+prefetch"))
    return [
        Mutation(
            name=f"bag_balance{suffix}@{fn.name}",
            family=BALANCE_FAMILY,
            description=(
                f"{fn.name}: one program per core, each pooling the bags that start in its equal share of "
                f"the indices (found with two small offset loads), {BALANCED_BAGS} bags per chunk, "
                f"row blocks of {BALANCED_ROWS}: every core gathers about as many rows"
                + (f"; the second core of each PE gathers {rows} rows ahead of both programs while the "
                   "offsets are searched (the DRAM is idle then)" if rows else "")
            ),
            apply=partial(balance, prefetch=rows),
            helps=("latency", "occupancy"),
            prior=BALANCE_PRIOR,
            remedies=("balance", "overlap"),
            kernel=fn.name,
        )
        for rows, suffix in variants
    ]


def embedding_mutations(source: str) -> list[Mutation]:
    """The segment-gather rewrite of every bag-per-program embedding bag kernel in `source`, and the
    bag-group moves of a segment gather already in place."""
    tree = ast.parse(source)
    out = group_mutations(source)
    for fn in jit_functions(tree):
        loop = find_bag_loop(fn)
        if loop is None or _launch(tree, fn.name) is None:
            continue
        pool = "mean" if loop.mean else "sum"
        out.append(
            Mutation(
                name=f"segment_gather@{fn.name}",
                family=FAMILY,
                description=(
                    f"{fn.name}: {embedding.BAG_GROUP} bags ({pool}) per program, their indices walked in "
                    f"blocks of {embedding.ROW_BLOCK} across bag boundaries (one DMA gather of many rows), "
                    "pooled by a membership-mask matmul accumulated in fp32"
                ),
                apply=partial(rewrite, kernel=fn.name),
                helps=("latency", "memory"),
                prior=PRIOR,
                remedies=("bigger_commands", "overlap", "parallelism"),
                kernel=fn.name,
            )
        )
    return out
