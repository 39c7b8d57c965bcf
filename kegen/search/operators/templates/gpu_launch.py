"""Source surgery shared by the template rewrites: a kernel's launch site, line splicing, module helpers,
whole rewritten modules and their constants."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from kegen.search.operators.mutations.base import MutationError

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class Launch:
    """The one statement `kernel[grid](...)` of a module and the kernel's definition lines (1-based)."""

    args: dict[str, str]  # kernel parameter -> the launch's argument source
    options: dict[str, str]  # launch options (num_warps, ...) -> source
    grid: list[str] | None  # the grid's axes as source, when a literal tuple (directly or by name)
    first_line: int
    last_line: int
    col: int
    kernel_first: int
    kernel_last: int
    forward_args: tuple[str, ...] = field(default=())

    def grid_extent(self, axis: int) -> str | None:
        return self.grid[axis] if self.grid is not None and axis < len(self.grid) else None


def _grid_axes(grid: ast.expr, scope: ast.AST) -> list[str] | None:
    if isinstance(grid, ast.Name):
        values = [
            n.value
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == [grid.id]
        ]
        if len(values) != 1:
            return None
        grid = values[0]
    if isinstance(grid, ast.Tuple):
        return [ast.unparse(e) for e in grid.elts]
    return None


def find_launch(source: str, kernel: str) -> Launch:
    """The single launch of `kernel` (an expression statement); MutationError otherwise."""
    tree = ast.parse(source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel]
    if len(fns) != 1:
        raise MutationError(f"no single definition of {kernel}")
    fn = fns[0]
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    found = []
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.FunctionDef) or scope is fn:
            continue
        for stmt in ast.walk(scope):
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                continue
            f = stmt.value.func
            if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id == kernel:
                found.append((scope, stmt, stmt.value, f.slice))
    if len(found) != 1:
        raise MutationError(f"{len(found)} launch statements of {kernel} (want one)")
    scope, stmt, call, grid = found[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise MutationError("the launch unpacks its arguments (*args / **kwargs)")
    if len(call.args) > len(params):
        raise MutationError("the launch passes more arguments than the kernel has")
    args = {p: ast.unparse(a) for p, a in zip(params, call.args, strict=False)}
    options = {}
    for kw in call.keywords:
        assert kw.arg is not None
        if kw.arg in params:
            args[kw.arg] = ast.unparse(kw.value)
        else:
            options[kw.arg] = ast.unparse(kw.value)
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    fwd = tuple(a.arg for a in scope.args.args[1:]) if scope.name == "forward" else ()
    return Launch(
        args=args,
        options=options,
        grid=_grid_axes(grid, scope),
        first_line=stmt.lineno,
        last_line=stmt.end_lineno or stmt.lineno,
        col=stmt.col_offset,
        kernel_first=first,
        kernel_last=fn.end_lineno or fn.lineno,
        forward_args=fwd,
    )


def indent(text: str, depth: int) -> str:
    """Every non-empty line of `text` indented by `depth` spaces."""
    pad = " " * depth
    return "\n".join(pad + line if line.strip() else line for line in text.split("\n"))


def replace_lines(source: str, edits: list[tuple[int, int, str]]) -> str:
    """`source` with the 1-based inclusive line ranges replaced (ranges must not overlap)."""
    lines = source.split("\n")
    for first, last, text in sorted(edits, key=lambda e: -e[0]):
        lines[first - 1 : last] = text.split("\n")
    return "\n".join(lines)


def insert_helpers(source: str, text: str) -> str:
    """`text` inserted after the module's last top-level import (module constants and helpers)."""
    tree = ast.parse(source)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
        raise MutationError("the module imports nothing (no triton import)")
    at = max(n.end_lineno or n.lineno for n in imports)
    lines = source.split("\n")
    lines[at:at] = ["", *text.rstrip("\n").split("\n")]
    return "\n".join(lines)


def module_imports(source: str) -> str:
    """The module's top-level import statements, one a line."""
    tree = ast.parse(source)
    return "".join(ast.unparse(n) + "\n" for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))


def module_support(source: str) -> str:
    """The module's top-level classes other than ModelNew and its plain (non-Triton) functions, with the
    module-level assignments they read: what a rewrite keeps beside its own kernel (a `Reference`
    class that ModelNew builds for its weights, a helper the seed's `__init__` calls)."""
    tree = ast.parse(source)
    defs = [
        n
        for n in tree.body
        if (isinstance(n, ast.ClassDef) and n.name != "ModelNew")
        or (isinstance(n, ast.FunctionDef) and not any("jit" in ast.unparse(d) for d in n.decorator_list))
    ]
    if not defs:
        return ""
    read = {x.id for d in defs for x in ast.walk(d) if isinstance(x, ast.Name)}
    assigns = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and {t.id for t in n.targets if isinstance(t, ast.Name)} & read
    ]
    return "\n" + "".join(ast.unparse(n) + "\n\n\n" for n in [*assigns, *defs])


def rewritten_module(imports: str, header: str, kernel: str, init: str, tail: str) -> str:
    """A whole rewritten module: the seed's imports, the rewrite's marker and constants (`header`), its
    kernel, and `ModelNew` from the seed's `__init__` body and the rewrite's methods (`tail`)."""
    return f"{imports}\n{header}\n{kernel}\n\nclass ModelNew(nn.Module):\n{init}\n{tail}"


def set_constants(source: str, marker: str, constants: str, what: str) -> str:
    """A rewritten module (one carrying `marker`) with the module constants named in `constants`
    (lines `NAME = int`) set to its values; MutationError when it is no such rewrite or nothing changes."""
    if marker not in source:
        raise MutationError(f"not a GPU {what} rewrite")
    values = dict(re.findall(r"^(\w+) = (\d+)$", constants, re.M))
    names = "|".join(map(re.escape, values))
    out = re.sub(rf"^({names}) = \d+$", lambda m: f"{m.group(1)} = {values[m.group(1)]}", source, flags=re.M)
    if out == source:
        raise MutationError("the module already has this configuration")
    return out
