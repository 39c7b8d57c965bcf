"""What the loop vectorizer (`vectorize`) must know about a kernel before it rewrites a loop.

- `Ranks`: the rank (0 = scalar, 1 = block, None = unknown or higher) of every name of a jit
  kernel, by a forward pass over its statements (`tl.arange` and `tl.zeros((B,))` are blocks,
  `[:, None]` and 2-D shapes are unknown, so kernels already working on 2-D tiles are left alone).
- `pointer_bases`: the pointer parameters an address is an offset of (`w_ptr + row * dim + cols`
  -> {w_ptr}): a store and a load of one loop body that share a base may alias, and the rewrite
  would reorder them.
- `reads_before_write`: whether statements read a name before they assign it (a body-local value
  that is still read after the loop, where the rewrite would change it).
"""

from __future__ import annotations

import ast

ELEMENTWISE = {
    "abs", "cast", "cdiv", "ceil", "clamp", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor",
    "fma", "log", "log1p", "log2", "maximum", "minimum", "rsqrt", "sigmoid", "sin", "sqrt", "sqrt_rn",
    "tanh", "umulhi", "where",
}  # fmt: skip
REDUCTIONS = {"sum", "max", "min"}
SCALARS = {"program_id", "num_programs"}
CREATORS = {"zeros", "full", "empty"}
CREATORS_LIKE = {"zeros_like", "full_like", "empty_like"}


def tl_aliases(tree: ast.Module) -> set[str]:
    """Names the module binds to `triton.language` (`tl` when it binds none)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.asname for a in node.names if a.name == "triton.language" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "triton":
            out |= {a.asname or a.name for a in node.names if a.name == "language"}
    return out or {"tl"}


def tl_func(call: ast.Call, aliases: set[str]) -> str | None:
    """`exp` for `tl.exp(...)`, `tl.math.exp(...)` or `triton.language.exp(...)`; else None."""
    f = call.func
    if not isinstance(f, ast.Attribute) or not _dotted(f.value):
        return None
    base = ast.unparse(f.value)
    if base in aliases or base == "triton.language" or any(base.startswith(a + ".") for a in aliases):
        return f.attr
    return None


def _dotted(e: ast.expr) -> bool:
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def is_cast(call: ast.Call, aliases: set[str]) -> bool:
    """`x.to(dtype)`: a method call on a value (not a `tl.` function)."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "to" and tl_func(call, aliases) is None


def reduction_axis(call: ast.Call) -> tuple[ast.expr | None, bool]:
    """The axis expression of `tl.sum(x, axis)` (None: every axis) and whether it keeps dims."""
    axis: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    keep = False
    for kw in call.keywords:
        if kw.arg == "axis":
            axis = kw.value
        elif kw.arg == "keep_dims":
            keep = not (isinstance(kw.value, ast.Constant) and not kw.value.value)
    if isinstance(axis, ast.Constant) and axis.value is None:
        axis = None
    return axis, keep


class Ranks:
    """Rank of each name of a jit kernel (parameters and module constants are scalars)."""

    def __init__(self, fn: ast.FunctionDef, aliases: set[str]) -> None:
        self.aliases = aliases
        self.env: dict[str, int | None] = {a.arg: 0 for a in fn.args.args}
        for _ in range(3):  # loop-carried values settle in a pass or two
            self._block(fn.body)

    def _set(self, name: str, rank: int | None) -> None:
        old = self.env.get(name, rank)
        self.env[name] = None if old is None or rank is None else max(old, rank)

    def _block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign):
                r = self.of(s.value)
                for t in s.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self._set(n.id, r if isinstance(t, ast.Name) else None)
            elif isinstance(s, ast.AugAssign | ast.AnnAssign) and isinstance(s.target, ast.Name):
                if s.value is not None:
                    r = self.of(s.value)
                    self._set(s.target.id, r if isinstance(s, ast.AnnAssign) else _max(r, self.of(s.target)))
            elif isinstance(s, ast.For):
                for n in ast.walk(s.target):
                    if isinstance(n, ast.Name):
                        self._set(n.id, 0)
                self._block(s.body)
            elif isinstance(s, ast.If | ast.While):
                self._block(s.body)
                self._block(s.orelse)

    def of(self, e: ast.expr) -> int | None:
        """The rank of `e`; None when unknown or above 1."""
        r = self._of(e)
        return r if r is not None and r <= 1 else None

    def _of(self, e: ast.expr) -> int | None:
        if isinstance(e, ast.Constant | ast.Attribute):
            return 0
        if isinstance(e, ast.Name):
            return self.env.get(e.id, 0)  # an unassigned name is a module constant
        if isinstance(e, ast.BinOp):
            return _max(self._of(e.left), self._of(e.right))
        if isinstance(e, ast.UnaryOp):
            return self._of(e.operand)
        if isinstance(e, ast.BoolOp | ast.Compare | ast.IfExp):
            return _max_of(self._of(c) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))
        if isinstance(e, ast.Call):
            return self._call(e)
        return None

    def _call(self, c: ast.Call) -> int | None:
        if is_cast(c, self.aliases):
            return self._of(c.func.value)  # type: ignore[attr-defined]
        if isinstance(c.func, ast.Name) and c.func.id in ("float", "int"):
            return 0
        name = tl_func(c, self.aliases)
        if name == "arange":
            return 1
        if name in SCALARS:
            return 0
        if name in CREATORS:
            shape = c.args[0] if c.args else next((k.value for k in c.keywords if k.arg == "shape"), None)
            return len(shape.elts) if isinstance(shape, ast.Tuple | ast.List) else None
        if name in CREATORS_LIKE and c.args:
            return self._of(c.args[0])
        if name in REDUCTIONS and c.args:
            axis, keep = reduction_axis(c)
            inner = self._of(c.args[0])
            if inner is None:
                return None
            return inner if keep else (0 if axis is None else max(inner - 1, 0))
        if name == "load" or name in ELEMENTWISE:
            return _max_of(self._of(a) for a in [*c.args, *(k.value for k in c.keywords)])
        return None


def _max(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _max_of(ranks: object) -> int | None:
    out = 0
    for r in ranks:  # type: ignore[attr-defined]
        if r is None:
            return None
        out = max(out, r)
    return out


def assignments(fn: ast.FunctionDef) -> dict[str, list[ast.expr]]:
    """name -> every value assigned to it in the function (None-free; tuple targets excluded)."""
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(n.value)
                else:
                    for m in ast.walk(t):
                        if isinstance(m, ast.Name):
                            out.setdefault(m.id, []).append(ast.Constant(None))  # unknowable
        elif isinstance(n, ast.AugAssign | ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value:
            out.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, ast.For):
            for m in ast.walk(n.target):
                if isinstance(m, ast.Name):
                    out.setdefault(m.id, []).append(ast.Constant(0))
    return out


UNKNOWN = "?"


def pointer_bases(e: ast.expr, params: set[str], env: dict[str, list[ast.expr]], depth: int = 6) -> set[str]:
    """Parameters that `e` adds up (the candidates for its pointer base); `UNKNOWN` in the set when
    some term cannot be followed."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return pointer_bases(e.left, params, env, depth) | pointer_bases(e.right, params, env, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub):
        return pointer_bases(e.left, params, env, depth)
    if isinstance(e, ast.Name):
        if e.id in params:
            return {e.id}
        values = env.get(e.id)
        if not values or depth == 0:
            return {UNKNOWN}
        return set().union(*(pointer_bases(v, params, env, depth - 1) for v in values))
    if isinstance(e, ast.Constant) and e.value is None:
        return {UNKNOWN}
    return set()  # products, loads, aranges, constants: offsets, not bases


def reads_before_write(stmts: list[ast.stmt], name: str) -> bool:
    """Whether running `stmts` in order can read `name` before assigning it."""
    for s in stmts:
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
            return True
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
            return _reads(s.value, name)
        if isinstance(s, ast.For) and name in {n.id for n in ast.walk(s.target) if isinstance(n, ast.Name)}:
            if _reads(s.iter, name):
                return True
            continue  # the body sees the loop's own variable
        if isinstance(s, ast.For | ast.While):
            header = [s.iter, s.target] if isinstance(s, ast.For) else [s.test]
            if any(_reads(h, name) for h in header) or reads_before_write(s.body + s.orelse, name):
                return True
            continue
        if isinstance(s, ast.If):
            if _reads(s.test, name) or reads_before_write(s.body, name) or reads_before_write(s.orelse, name):
                return True
            continue
        if _reads(s, name):
            return True
    return False


def _reads(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node)
    )
