"""Cheaper math on the SIMD engine: divide by a scalar → multiply by its reciprocal, computed once.

On MTIA a division costs four times a multiply per element (knowledge base, "SIMD costs"). When the
divisor is a scalar (a reduction such as `tl.sum(e, axis=0)`, or a load that does not depend on
`tl.arange`), `x / d` becomes `x * inv_d` with `inv_d = 1.0 / d` computed once per program.
"""

from __future__ import annotations

import ast

from kegen.search.operators.mutations.base import MutationError, jit_functions, names_in

REDUCTIONS = {"sum", "max", "min", "xor_sum"}


def _vector_names(fn: ast.FunctionDef) -> set[str]:
    """Names whose value is a block (depends on tl.arange or another block), by a forward pass."""
    vec: set[str] = set()
    for _ in range(3):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                src = ast.unparse(node.value)
                if "arange" in src or "tl.zeros" in src or "tl.full" in src or names_in(node.value) & vec:
                    if not _is_reduction(node.value):
                        vec |= {t.id for t in targets if isinstance(t, ast.Name)}
    return vec


def _is_reduction(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in REDUCTIONS
        and (len(node.args) > 1 or any(k.arg == "axis" for k in node.keywords))
    )


def _is_scalar(node: ast.AST, vec: set[str]) -> bool:
    if _is_reduction(node):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
        return "arange" not in ast.unparse(node) and not (names_in(node) & vec)
    if isinstance(node, ast.Name):
        return node.id not in vec
    return False


class _Reciprocal(ast.NodeTransformer):
    def __init__(self, vec: set[str]) -> None:
        self.vec = vec
        self.count = 0

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Div) or not _is_scalar(node.right, self.vec):
            return node
        left = ast.unparse(node.left)
        if not (names_in(node.left) & self.vec or "arange" in left or "exp" in left):
            return node  # scalar / scalar: nothing to save
        self.count += 1
        inv = ast.BinOp(left=ast.Constant(1.0), op=ast.Div(), right=node.right)
        return ast.BinOp(left=node.left, op=ast.Mult(), right=inv)


def reciprocal(source: str) -> str:
    """The source with block / scalar divisions rewritten as multiplications by 1/scalar."""
    tree = ast.parse(source)
    total = 0
    for fn in jit_functions(tree):
        t = _Reciprocal(_vector_names(fn))
        t.visit(fn)
        total += t.count
    if total == 0:
        raise MutationError("no division of a block by a scalar")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def has_block_by_scalar_division(source: str) -> bool:
    try:
        reciprocal(source)
    except (MutationError, SyntaxError):
        return False
    return True
