"""Epilogue rewrites of dot kernels: cheaper math on the accumulator tile before the store.

`gelu_sigmoid`: the tanh-form GELU `0.5 * a * (1 + tanh(u))` is `a * sigmoid(2u)` =
`a / (1 + exp(-2u))`. Written with the tanh spelled through an exponential (`1 - 2 / (exp(2u) + 1)`,
as the production linear+GELU seed does) the epilogue spends a division, an exponential and four
more tile operations per element on the SIMD; the sigmoid form one exponential, one division and two
operations (measured at full size on linear_bias_gelu_bf16, plan 256x128x64: 215.2 -> 202.9 us).
The tanh value must be read only by that product (it is then dropped).
"""

from __future__ import annotations

import ast

from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions


def _num(node: ast.AST, value: float) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _num(node.operand, -value)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == value


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


class _GeluSigmoid(ast.NodeTransformer):
    """`0.5 * a * (1 + t)` (any order of the factors) -> `a / (1 + exp(-2 u))` for the tanh `t`."""

    def __init__(self, tanh: dict[str, ast.expr]) -> None:
        self.tanh = tanh
        self.used: set[str] = set()

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
        exp = ast.parse(f"tl.exp(-2.0 * ({ast.unparse(u)}))", mode="eval").body
        return ast.BinOp(a, ast.Div(), ast.BinOp(ast.Constant(1.0), ast.Add(), exp))


def gelu_sigmoid(source: str) -> str:
    """The source with every tanh-form GELU of its jit kernels written as `a / (1 + exp(-2u))`."""
    tree = ast.parse(source)
    changed = False
    for fn in jit_functions(tree):
        tanh = {
            s.targets[0].id: u
            for s in fn.body
            if isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and (u := tanh_argument(s.value)) is not None
        }
        if not tanh:
            continue
        rewriter = _GeluSigmoid(tanh)
        fn.body = [rewriter.visit(s) for s in fn.body]
        for name in rewriter.used:
            if any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(fn)
            ):
                raise MutationError(f"{name} (a tanh) is read elsewhere in {fn.name}")
            fn.body = [s for s in fn.body if not _assigns(s, name)]
            changed = True
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
