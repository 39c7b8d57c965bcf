"""Algorithmic rewrites from the knowledge base's recipes.

- softmax: a multi-pass row softmax (three passes: max, sum, write) becomes the online softmax
  (running max and rescaled sum in one pass, then the write pass); a row that fits the local store
  becomes one block per row (no loop). The kernel is recognised on the AST (loops over the row,
  tl.max/tl.exp/tl.sum, no logarithm, and a store of exp(x - max) / sum: log_softmax and other
  max/exp/sum kernels are not softmaxes) and replaced by the knowledge base's recipe, keeping its
  block size and launch options.
- matmul: the row-major program order `pid_m = pid // num_pid_n; pid_n = pid % num_pid_n` becomes
  the grouped order (GROUP_M rows of tiles share B's columns while they are on chip), an AST
  rewrite of those two statements.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from kegen.search.operators import templates
from kegen.search.operators.mutations.arith import has_block_by_scalar_division, reciprocal
from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions
from kegen.search.operators.mutations.knobs import apply_launch_options, find_knobs, launch_options_of


def _calls(fn: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            out.add(n.func.attr)
    return out


_LOG_CALLS = {"log", "log2", "log1p"}


def _assignments(fn: ast.FunctionDef) -> dict[str, list[ast.expr]]:
    """name -> every value assigned to it in the function (plain `name = value` statements)."""
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out.setdefault(n.targets[0].id, []).append(n.value)
    return out


def _values(e: ast.expr, env: dict[str, list[ast.expr]], depth: int = 3) -> list[ast.expr]:
    """`e` and, for a name, the values assigned to it (followed `depth` names deep); casts
    (`v.to(...)`) are looked through."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "to":
        e = e.func.value
    if isinstance(e, ast.Name) and depth > 0:
        return [v for a in env.get(e.id, []) for v in _values(a, env, depth - 1)]
    return [e]


def _is_call(e: ast.AST, attr: str) -> TypeGuard[ast.Call]:
    """Whether `e` is a call of a method or module function named `attr` (`tl.exp(...)`)."""
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == attr


def _is_exp_of_shifted(e: ast.expr, env: dict[str, list[ast.expr]]) -> bool:
    """exp(x - m), directly or through names (`x = x - tl.max(x)`; `e = tl.exp(x)`)."""
    for v in _values(e, env):
        if _is_call(v, "exp") and v.args:
            arg = v.args[0]
            if any(isinstance(a, ast.BinOp) and isinstance(a.op, ast.Sub) for a in _values(arg, env)):
                return True
    return False


def _is_denominator(e: ast.expr, env: dict[str, list[ast.expr]]) -> bool:
    """A row sum: tl.sum(...) or a statistic loaded from memory (the two-kernel form)."""
    return any(any(_is_call(c, "sum") or _is_call(c, "load") for c in ast.walk(v)) for v in _values(e, env))


def _stores_softmax(fn: ast.FunctionDef) -> bool:
    """Whether the kernel stores exp(x - max) / sum (or exp(x - max) * (1 / sum))."""
    env = _assignments(fn)
    for n in ast.walk(fn):
        if not (_is_call(n, "store") and len(n.args) >= 2):
            continue
        for v in _values(n.args[1], env):
            if not isinstance(v, ast.BinOp):
                continue
            if (
                isinstance(v.op, ast.Div)
                and _is_exp_of_shifted(v.left, env)
                and _is_denominator(v.right, env)
            ):
                return True
            if isinstance(v.op, ast.Mult):
                for num, rec in ((v.left, v.right), (v.right, v.left)):
                    if (
                        _is_exp_of_shifted(num, env)
                        and isinstance(rec, ast.BinOp)
                        and isinstance(rec.op, ast.Div)
                        and _is_denominator(rec.right, env)
                    ):
                        return True
    return False


def softmax_shape(source: str) -> str | None:
    """'three_pass' | 'online' | 'single_block' | 'two_kernel' when the module computes a row softmax:
    its kernels call max/exp/sum/load/store, none takes a logarithm (log_softmax is not a softmax),
    and the output kernel stores exp(x - max) / sum."""
    tree = ast.parse(source)
    fns = jit_functions(tree)
    if not fns or len(fns) > 2:
        return None
    calls = set().union(*(_calls(fn) for fn in fns))
    if not {"max", "exp", "sum", "load", "store"} <= calls or calls & _LOG_CALLS:
        return None
    if not any(_stores_softmax(fn) for fn in fns):
        return None
    if len(fns) == 2:
        return "two_kernel"
    loops = [n for n in fns[0].body if isinstance(n, ast.For)]
    if not loops:
        return "single_block"
    return "three_pass" if len(loops) >= 3 else "online"


def _block_of(source: str) -> int:
    for k in find_knobs(source, launch_options=False):
        if isinstance(k.value, int):
            return k.value
    return 64


def _rewrite_softmax(variant: str):  # type: ignore[no-untyped-def]
    def apply(source: str) -> str:
        if softmax_shape(source) is None:
            raise MutationError("not a row-softmax kernel")
        new = templates.softmax(variant, _block_of(source))
        opts = launch_options_of(source)
        keep = {"softmax_kernel": opts["softmax_kernel"]} if "softmax_kernel" in opts else {}
        return apply_launch_options(new, keep)

    return apply


class _GroupedOrder(ast.NodeTransformer):
    """Rewrites `pid_m = pid // npn` / `pid_n = pid % npn` into the grouped order."""

    def __init__(self) -> None:
        self.num_pid_m: str | None = None
        self.done = False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        body: list[ast.stmt] = []
        stmts = node.body
        i = 0
        while i < len(stmts):
            s = stmts[i]
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            if (
                isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Call)
                and "cdiv" in ast.unparse(s.value.func)
            ):
                tgt = ast.unparse(s.targets[0])
                if "m" in tgt.split("_")[-1] or tgt.endswith("_m"):
                    self.num_pid_m = tgt
            pair = self._match(s, nxt)
            if pair is not None and self.num_pid_m is not None and not self.done:
                pid_m, pid_n, pid, npn = pair
                code = (
                    f"num_pid_in_group = GROUP * {npn}\ngroup_id = {pid} // num_pid_in_group\n"
                    f"first_pid_m = group_id * GROUP\n"
                    f"group_size_m = tl.minimum({self.num_pid_m} - first_pid_m, GROUP)\n"
                    f"{pid_m} = first_pid_m + {pid} % num_pid_in_group % group_size_m\n"
                    f"{pid_n} = {pid} % num_pid_in_group // group_size_m\n"
                )
                body.extend(ast.parse(code).body)
                self.done = True
                i += 2
                continue
            body.append(s)
            i += 1
        node.body = body
        return node

    @staticmethod
    def _match(a: ast.stmt, b: ast.stmt | None) -> tuple[str, str, str, str] | None:
        if not (isinstance(a, ast.Assign) and isinstance(b, ast.Assign)):
            return None
        va, vb = a.value, b.value
        if not (
            isinstance(va, ast.BinOp)
            and isinstance(va.op, ast.FloorDiv)
            and isinstance(vb, ast.BinOp)
            and isinstance(vb.op, ast.Mod)
        ):
            return None
        if ast.unparse(va.left) != ast.unparse(vb.left) or ast.unparse(va.right) != ast.unparse(vb.right):
            return None
        return (
            ast.unparse(a.targets[0]),
            ast.unparse(b.targets[0]),
            ast.unparse(va.left),
            ast.unparse(va.right),
        )


def _grouped(group: int):  # type: ignore[no-untyped-def]
    def apply(source: str) -> str:
        tree = ast.parse(source)
        changed = False
        for fn in jit_functions(tree):
            t = _GroupedOrder()
            t.visit(fn)
            if t.done:
                changed = True
                fn.body.insert(0, ast.parse(f"GROUP: tl.constexpr = {group}").body[0])
        if not changed:
            raise MutationError("no `pid // n` / `pid % n` program order to regroup")
        return ast.unparse(ast.fix_missing_locations(tree)) + "\n"

    return apply


def recipe_mutations(source: str, platform: str = "mtia") -> list[Mutation]:
    """The recipes that apply to this source on `platform` (priors follow the platform's guide)."""
    muts: list[Mutation] = []
    if has_block_by_scalar_division(source):
        muts.append(
            Mutation(
                "reciprocal",
                "recipe_reciprocal",
                "recipe: divide by a scalar -> multiply by its reciprocal (division costs 4x on SIMD)",
                reciprocal,
                helps=("compute", "latency"),
                prior=1.0,
                remedies=("cheaper_math",),
            )
        )
    shape = softmax_shape(source)
    if shape in ("three_pass", "two_kernel"):
        muts.append(
            Mutation(
                "online_softmax",
                "recipe_online_softmax",
                f"recipe: {shape.replace('_', '-')} softmax -> online softmax (one read pass fewer)",
                _rewrite_softmax("online"),
                helps=("memory", "latency"),
                prior=2.0,
                remedies=("fewer_bytes", "fewer_launches"),
            )
        )
    if shape in ("three_pass", "two_kernel", "online"):
        muts.append(
            Mutation(
                "row_in_one_block",
                "recipe_single_block",
                "recipe: one block per row (row held in the local store, no loop)",
                _rewrite_softmax("single_block"),
                helps=("memory", "latency"),
                prior=1.6,
                remedies=("fewer_bytes", "fewer_launches", "bigger_commands"),
            )
        )
    tree = ast.parse(source)
    for fn in jit_functions(tree):
        if "dot" in _calls(fn) and "GROUP:" not in ast.unparse(fn) and _has_row_major_order(fn):
            for g in (4, 8):
                muts.append(
                    Mutation(
                        f"grouped_order_{g}",
                        "recipe_grouped_order",
                        f"recipe: grouped tile order (GROUP={g}) for operand reuse in the cache",
                        _grouped(g),
                        # the MTIA guide: no cache between PEs and DRAM, grouping does not help there
                        helps=() if platform == "mtia" else ("memory",),
                        prior=0.3 if platform == "mtia" else 1.3,
                        remedies=() if platform == "mtia" else ("fewer_bytes",),
                        kernel=fn.name,
                    )
                )
            break
    return muts


def _has_row_major_order(fn: ast.FunctionDef) -> bool:
    return any(_GroupedOrder._match(a, b) is not None for a, b in zip(fn.body, fn.body[1:], strict=False))
