"""Static local-store footprint of a dot kernel's tile plan, so whole-plan moves propose plans that compile.

The mtia compiler places every live tile in the PE's local store (384 KiB on mtia-2i) and refuses a
kernel whose live tiles exceed it (`LocalStoreOverflowError`). What dominates a dot kernel is its
float32 accumulator and the operand tiles of its reduction loop; measured on the compiler:

- every loop level that carries the accumulator holds its own copy (a conv's `for ci: for tap:` loop
  nest keeps two accumulators live, a 2-D conv's three, and its int32 index vectors), plus
  `num_stages` copies of each operand tile;
- an epilogue that derives a value from the accumulator while the accumulator is still needed (GELU:
  `u = f(acc)` then `0.5 * acc * g(u)`) holds a second accumulator-sized float32 tile; in-place
  updates (bias, ReLU) and a cast-and-store hold a half-sized one (the cast output).

`dot_footprint` evaluates that model for given block values (None when the kernel is not of that form:
the accumulator's shape or the reduction block is not known in terms of the blocks, in which case a
plan is not filtered and screening's compile rejects it at no simulation cost). Operand elements are
taken as 2 bytes (fp16/bf16, what the DPE multiplies at full rate).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from kegen.search.operators.mutations.base import MutationError, jit_functions, names_in

OPERAND_BYTES = 2  # fp16/bf16 operand elements
ACC_BYTES = 4  # float32 accumulator elements
INDEX_BYTES = 4  # int32 index vectors


def _is_tl_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names


def _dim(node: ast.AST, blocks: Mapping[str, int], consts: Mapping[str, int]) -> int | None:
    """The value of one shape dimension (a block name, an integer, or a product of those)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return blocks.get(node.id, consts.get(node.id))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        a, b = _dim(node.left, blocks, consts), _dim(node.right, blocks, consts)
        return a * b if a is not None and b is not None else None
    return None


def _accumulators(fn: ast.FunctionDef) -> dict[str, ast.Tuple | ast.List]:
    """name -> shape of the 2-D `tl.zeros`/`tl.full` tiles assigned at the kernel's top level."""
    out: dict[str, ast.Tuple | ast.List] = {}
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and _is_tl_call(stmt.value, ("zeros", "full"))
        ):
            call = stmt.value
            assert isinstance(call, ast.Call)
            shape = call.args[0] if call.args else None
            if isinstance(shape, ast.Tuple | ast.List) and len(shape.elts) == 2:
                out[stmt.targets[0].id] = shape
    return out


def _dot_updates(node: ast.AST, acc: str, depth: int = 0) -> list[tuple[int, ast.Call]]:
    """(enclosing loop depth, dot call) of every update of `acc` with a `tl.dot` under `node`."""
    out: list[tuple[int, ast.Call]] = []
    for child in ast.iter_child_nodes(node):
        inner = depth + 1 if isinstance(child, ast.For | ast.While) else depth
        target = None
        if isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name):
            target = child.target.id
        elif (
            isinstance(child, ast.Assign)
            and len(child.targets) == 1
            and isinstance(child.targets[0], ast.Name)
        ):
            target = child.targets[0].id
        if target == acc and isinstance(child, ast.Assign | ast.AugAssign):
            out.extend(
                (depth, d)
                for d in ast.walk(child.value)
                if isinstance(d, ast.Call) and _is_tl_call(d, ("dot",))
            )
        out.extend(_dot_updates(child, acc, inner))
    return out


def _epilogue_computes(fn: ast.FunctionDef, acc: str) -> bool:
    """Whether the epilogue (top-level statements after the accumulator's loops) holds a second
    accumulator-sized tile while the accumulator is live: a value derived from it while it is read
    again later (`u = f(acc)` ... `0.5 * acc * g(u)`), or several reads in one statement (`acc * acc`).
    In-place updates (`acc = acc + bias`, `acc = tl.maximum(acc, 0)`) and a cast-and-store do not
    (measured: linear+bias+ReLU compiles at 256x256, linear+bias+GELU does not)."""
    last_loop = max((i for i, s in enumerate(fn.body) if isinstance(s, ast.For | ast.While)), default=-1)
    stmts = fn.body[last_loop + 1 :]
    for i, stmt in enumerate(stmts):
        reads = _reads(stmt, acc)
        if reads == 0:
            continue
        if reads >= 2:
            return True
        if not _rebinds(stmt, acc) and any(_reads(later, acc) for later in stmts[i + 1 :]):
            return True
    return False


def _reads(stmt: ast.AST, name: str) -> int:
    n = sum(
        1 for x in ast.walk(stmt) if isinstance(x, ast.Name) and x.id == name and isinstance(x.ctx, ast.Load)
    )
    return n + (1 if isinstance(stmt, ast.AugAssign) and _rebinds(stmt, name) else 0)


def _rebinds(stmt: ast.AST, name: str) -> bool:
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in stmt.targets
    )


def dot_footprint(source: str, kernel: str, blocks: Mapping[str, int], stages: int) -> int | None:
    """Estimated local-store bytes of `kernel` with constexpr `blocks` and `stages` operand buffers,
    or None when the kernel has no float32 accumulator fed by `tl.dot` whose shape the blocks give."""
    try:
        fn = next((f for f in jit_functions(ast.parse(source)) if f.name == kernel), None)
    except SyntaxError:
        return None
    if fn is None:
        return None
    consts = _constexpr_defaults(fn)
    best: int | None = None
    for acc, shape in _accumulators(fn).items():
        updates = _dot_updates(fn, acc)
        if not updates:
            continue
        rows, cols = (_dim(e, blocks, consts) for e in shape.elts)
        if rows is None or cols is None:
            return None
        depth = max(1, max(d for d, _ in updates))
        acc_bytes = rows * cols * ACC_BYTES
        dims = {e.id for e in shape.elts if isinstance(e, ast.Name)}
        k = _reduction_block(fn, updates, dims, blocks)
        operands = 0 if k is None else (rows * k + k * cols) * OPERAND_BYTES * max(1, stages)
        loop = acc_bytes * depth + operands
        if depth > 1:  # a loop nest also carries its index vectors (measured: `co`, `ci` of a conv)
            loop += INDEX_BYTES * (rows + cols + (k or 0))
        epilogue = 2 * acc_bytes if _epilogue_computes(fn, acc) else acc_bytes + acc_bytes // 2
        total = max(loop, epilogue)
        best = total if best is None else max(best, total)
    return best


def _reduction_block(
    fn: ast.FunctionDef, updates: list[tuple[int, ast.Call]], acc_dims: set[str], blocks: Mapping[str, int]
) -> int | None:
    """The reduction block of the accumulator's dots: the one block, other than the accumulator's own
    dimensions, whose `tl.arange(0, BLOCK)` the dots' operands are computed from (through the names the
    kernel binds: `offs_k = tl.arange(0, BLOCK_K)`, `ks = k + offs_k`, `a = tl.load(... ks ...)`)."""
    deps: dict[str, set[str]] = {}
    aranges: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        if not targets or value is None:
            continue
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        for name in names:
            deps.setdefault(name, set()).update(names_in(value))
            aranges.setdefault(name, set()).update(_arange_blocks(value))
    found: set[str] = set()
    for _, dot in updates:
        seen: set[str] = set()
        todo = list(names_in(dot))
        found.update(_arange_blocks(dot))
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            found.update(aranges.get(name, ()))
            todo.extend(deps.get(name, ()))
    k = {b for b in found - acc_dims if b in blocks}
    return blocks[k.pop()] if len(k) == 1 else None


def _arange_blocks(node: ast.AST) -> set[str]:
    """Block names in the `tl.arange(0, NAME)` calls of an expression."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _is_tl_call(n, ("arange",)) and len(n.args) == 2:
            if isinstance(n.args[1], ast.Name):
                out.add(n.args[1].id)
    return out


def _constexpr_defaults(fn: ast.FunctionDef) -> dict[str, int]:
    args = fn.args.args
    out: dict[str, int] = {}
    for a, d in zip(args[len(args) - len(fn.args.defaults) :], fn.args.defaults, strict=True):
        if isinstance(d, ast.Constant) and type(d.value) is int:
            out[a.arg] = d.value
    return out


def local_store_bytes(device: str, dual_core: bool = False) -> int | None:
    """The local store one program of `device` (a machine name) may use; None when unknown."""
    try:
        from lowering.pipeline import local_store_capacity

        cap = local_store_capacity(device or "mtia-2i")
    except Exception:  # the backend or the machine description is absent: no filtering
        return None
    return cap // 2 if dual_core else cap


def machine_pes(device: str) -> int | None:
    """The processing elements of `device` (a machine name); None when unknown."""
    try:
        from mtia_sim.machine import load_machine

        return int(load_machine(device or "mtia-2i").num_pes)
    except Exception:  # the simulator or the machine description is absent
        return None


def compile_pes(fallback: int = 64) -> int:
    """The PEs of the machine this process compiles for (`fallback`, mtia-2i's, where it cannot be read)."""
    return machine_pes(default_machine()) or fallback


def default_machine() -> str:
    """The machine every compile in this process targets (`--machine`, else KEGEN_MACHINE, else mtia-2i)."""
    try:
        from lowering.backend.options import default_machine as process_machine
    except ImportError:  # the mtia backend is not installed
        return "mtia-2i"
    return process_machine()


__all__ = [
    "MutationError",
    "default_machine",
    "dot_footprint",
    "local_store_bytes",
    "machine_pes",
]
