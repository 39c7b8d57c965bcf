"""Keeping a launch's grid consistent with a block size that tiles a program axis.

A block that tiles axis `d` (`tl.program_id(d) * BLOCK`) sets how many programs axis `d` needs; the
launcher writes that count in the grid, as `triton.cdiv(n, BM)` (the block's variable),
`meta["BLOCK_M"]` (a grid function) or a literal (`triton.cdiv(n, 32)`, `(n + 31) // 32`). A block of
unknown axis (a flattened program order: `pid // num_pid_n`) is found in the grid as a whole. The grid
follows when it names the block (the variable's rewrite carries it) or when its literal can be rewritten
unambiguously; otherwise the change is refused (`MutationError`): a grid left behind computes a wrong
(too few programs) or wasteful result.
"""

from __future__ import annotations

import ast
from typing import Any

from kegen.search.operators.mutations.base import MutationError


def bindings(scope: ast.AST, name: str) -> list[tuple[ast.Assign, int]]:
    """Assignments of `name` in `scope` (not in nested functions): (statement, tuple slot or -1)."""
    out: list[tuple[ast.Assign, int]] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.Lambda | ast.ClassDef):
                continue
            if isinstance(child, ast.Assign):
                for t in child.targets:
                    if isinstance(t, ast.Name) and t.id == name:
                        out.append((child, -1))
                    elif isinstance(t, ast.Tuple):
                        for i, e in enumerate(t.elts):
                            if isinstance(e, ast.Name) and e.id == name:
                                out.append((child, i))
            walk(child)

    walk(scope)
    return out


def grid_expr(call: ast.Call, scope: ast.AST) -> ast.AST | None:
    """The launch's grid expression (through one binding of a grid variable; a grid lambda's body)."""
    if not isinstance(call.func, ast.Subscript):
        return None
    grid: ast.AST = call.func.slice
    if isinstance(grid, ast.Name):
        binds = bindings(scope, grid.id)
        if len(binds) != 1 or binds[0][1] != -1:
            return None
        grid = binds[0][0].value
    if isinstance(grid, ast.Lambda):
        grid = grid.body
    return grid


def grid_element(grid: ast.AST, axis: int) -> ast.AST | None:
    """The expression that sizes `axis` (a scalar grid sizes axis 0)."""
    if isinstance(grid, ast.Tuple | ast.List):
        return grid.elts[axis] if axis < len(grid.elts) else None
    return grid if axis == 0 else None


def mentions(expr: ast.AST, var: str, param: str) -> bool:
    """Whether `expr` names the block: its variable, or `meta["PARAM"]` in a grid function."""
    for n in ast.walk(expr):
        if var and isinstance(n, ast.Name) and n.id == var:
            return True
        if isinstance(n, ast.Constant) and n.value == param:
            return True
    return False


def _ints(expr: ast.AST, value: int) -> list[ast.Constant]:
    return [
        n for n in ast.walk(expr) if isinstance(n, ast.Constant) and type(n.value) is int and n.value == value
    ]


def follow_grid(call: ast.Call, scope: ast.AST, site: Any, value: int, others: list[int]) -> None:
    """Rewrite, in place, the grid of `call` for the block `site` (a `BlockSite`) becoming `value`.

    `others`: the values of the launch's other program-tiling blocks (a literal shared with one of
    them is ambiguous in a grid of unknown axis). Raises `MutationError` when it cannot follow."""
    grid = grid_expr(call, scope)
    if grid is None:
        raise MutationError(f"cannot read the grid of {site.kernel} to follow {site.param}")
    if site.axis is not None:
        elt = grid_element(grid, site.axis)
        if elt is None:
            raise MutationError(f"the grid of {site.kernel} has no axis {site.axis} for {site.param}")
    else:
        elt = grid
    if mentions(elt, site.var, site.param):
        return  # the variable's (or meta's) new value carries the grid
    if site.axis is None and site.value in others:
        raise MutationError(
            f"{site.param}={site.value} of {site.kernel} tiles a program id of unknown axis and another "
            f"block has the same value; the grid's literal is ambiguous"
        )
    hits = _ints(elt, site.value)
    if not hits:
        where = f"grid axis {site.axis}" if site.axis is not None else "grid (program axis unknown)"
        raise MutationError(
            f"{where} of {site.kernel} does not use {site.param}={site.value}; set it by hand"
        )
    for n in _ints(elt, site.value - 1) if site.value > 1 else []:  # (n + B - 1) // B
        n.value = value - 1
    for n in hits:
        n.value = value
