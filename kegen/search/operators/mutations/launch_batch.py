"""Launch batching: consecutive launches of one Inductor pointwise kernel on different buffers (the
copies of a `cat`, the q/k/v splits) become one launch whose second grid axis picks the buffers.

Inductor writes a `cat` of separate inputs as one copy kernel launched once per input; at small sizes
each launch costs more than its copy. The batched kernel takes every launch's pointers (suffixed by
the launch's position) and the shared scalar arguments once; `tl.program_id(1)` selects, through
scalar branches, which launch's body a program runs. Launches are batched only while none reads a
buffer an earlier one in the run writes (through `torch.as_strided` views of it), their grids and
scalar arguments are the same, and only view and grid assignments run between them (the merged launch
takes the last one's place, where every pointer exists).
"""

from __future__ import annotations

import ast
import copy

from kegen.search.operators.mutations.base import (
    Mutation,
    MutationError,
    jit_functions,
    launch_of,
    model_forward,
)

POINTER = ("in_ptr", "out_ptr", "in_out_ptr")


def _is_pointer(param: str) -> bool:
    return param.startswith(POINTER)


def _pointwise(fn: ast.FunctionDef) -> list[str] | None:
    params = [a.arg for a in fn.args.args]
    if params[-2:] != ["xnumel", "XBLOCK"] or "tl.program_id(1)" in ast.unparse(fn):
        return None
    return params[:-1]


def _root(expr: ast.expr, alias: dict[str, str]) -> str | None:
    """The buffer a pointer argument addresses: a name, or `torch.as_strided(name, ...)`, through aliases."""
    if isinstance(expr, ast.Call) and ast.unparse(expr.func) == "torch.as_strided" and expr.args:
        expr = expr.args[0]
    if isinstance(expr, ast.Name):
        return alias.get(expr.id, expr.id)
    return None


def batch_launches(source: str) -> str:
    """The first run of batchable launches in ModelNew.forward as one launch (see the module docstring);
    MutationError when there is none."""
    tree = ast.parse(source)
    kernels = {f.name: f for f in jit_functions(tree)}
    forward = model_forward(tree)
    body = forward.body
    for i in range(len(body)):
        run = _run_from(body, i, kernels)
        if len(run) >= 2:
            return _rewrite(tree, body, run, kernels)
    raise MutationError("no two launches of one pointwise kernel in a row to batch")


def _run_from(body: list[ast.stmt], i: int, kernels: dict[str, ast.FunctionDef]) -> list[int]:
    first = launch_of(body[i])
    if first is None or first[0] not in kernels:
        return []
    name, call = first
    params = _pointwise(kernels[name])
    if params is None or len(call.args) != len(params) or any(k.arg != "XBLOCK" for k in call.keywords):
        return []
    key = (
        ast.unparse(call.func),
        [ast.unparse(a) for a, p in zip(call.args, params, strict=True) if not _is_pointer(p)],
    )
    key_kw = [ast.unparse(k) for k in call.keywords]
    alias: dict[str, str] = {}
    grids: dict[str, str] = {  # grid tuples assigned before the run (Inductor's `grid = (...)`)
        s.targets[0].id: ast.unparse(s.value)
        for s in body[:i]
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Tuple)
    }
    written: set[str | None] = set()
    run: list[int] = []
    first_grid = ""
    for j in range(i, len(body)):
        s = body[j]
        launch = launch_of(s)
        if launch is None:
            if not isinstance(s, ast.Assign) or len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                break
            value = s.value
            target = s.targets[0].id
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "torch.as_strided" and value.args:
                root = _root(value, alias)
                if root is not None:
                    alias[target] = root
                continue
            if isinstance(value, ast.Tuple):  # a grid
                grids[target] = ast.unparse(value)
                continue
            break
        lname, lcall = launch
        if lname != name or len(lcall.args) != len(params):
            break
        grid = lcall.func.slice  # type: ignore[attr-defined]
        gsrc = grids.get(grid.id, "?") if isinstance(grid, ast.Name) else ast.unparse(grid)
        args_key = [ast.unparse(a) for a, p in zip(lcall.args, params, strict=True) if not _is_pointer(p)]
        if args_key != key[1] or [ast.unparse(k) for k in lcall.keywords] != key_kw:
            break
        if run and gsrc != first_grid:
            break
        reads = {
            _root(a, alias)
            for a, p in zip(lcall.args, params, strict=True)
            if p.startswith(("in_ptr", "in_out_ptr"))
        }
        if reads & written:
            break
        written |= {
            _root(a, alias)
            for a, p in zip(lcall.args, params, strict=True)
            if p.startswith(("out_ptr", "in_out_ptr"))
        }
        if not run:
            first_grid = gsrc
        run.append(j)
    return run


def _rewrite(
    tree: ast.Module, body: list[ast.stmt], run: list[int], kernels: dict[str, ast.FunctionDef]
) -> str:
    name, _ = launch_of(body[run[0]])  # type: ignore[misc]
    fn = kernels[name]
    params = [a.arg for a in fn.args.args]
    pointers = [p for p in params if _is_pointer(p)]
    scalars = [p for p in params[:-1] if not _is_pointer(p)]
    n = len(run)
    batched = copy.deepcopy(fn)
    batched.name = f"{name}_x{n}"
    k = 0
    while any(f.name == batched.name for f in kernels.values()):
        k += 1
        batched.name = f"{name}_x{n}_{k}"
    args = [ast.arg(f"{p}_{m}") for m in range(n) for p in pointers]
    batched.args.args = [*args, *[a for a in fn.args.args if a.arg in scalars], fn.args.args[-1]]
    branches: list[ast.stmt] = []
    for m in reversed(range(n)):

        class _Suffix(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name, m: int = m) -> ast.AST:
                return ast.Name(f"{node.id}_{m}", node.ctx) if node.id in pointers else node

        part = [_Suffix().visit(copy.deepcopy(s)) for s in fn.body]
        test = ast.parse(f"which == {m}", mode="eval").body
        branches = part if m == n - 1 else [ast.If(test=test, body=part, orelse=branches)]
    batched.body = [ast.parse("which = tl.program_id(1)").body[0], *branches]
    # the launch: every launch's pointers, the shared scalars, at the last launch's place
    calls = [launch_of(body[j])[1] for j in run]  # type: ignore[index]
    first = calls[0]
    ptr_args = [a for c in calls for a, p in zip(c.args, params[:-1], strict=True) if _is_pointer(p)]
    scalar_args = [a for a, p in zip(first.args, params[:-1], strict=True) if not _is_pointer(p)]
    grid = calls[-1].func.slice  # type: ignore[attr-defined,union-attr]
    new_grid = ast.parse(f"({ast.unparse(grid)}[0], {n})", mode="eval").body
    merged = ast.Expr(
        ast.Call(
            func=ast.Subscript(ast.Name(batched.name, ast.Load()), new_grid, ast.Load()),
            args=[*ptr_args, *scalar_args],
            keywords=first.keywords,
        )
    )
    last = run[-1]
    body[last] = merged
    for j in reversed(run[:-1]):
        del body[j]
    tree.body.insert(tree.body.index(fn) + 1, batched)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def batch_mutations(source: str) -> list[Mutation]:
    """The launch batching, where it applies."""
    try:
        batch_launches(source)
    except (MutationError, SyntaxError):
        return []
    return [
        Mutation(
            name="batch_launches",
            family="fusion",
            description="launch the copies of one pointwise kernel on different buffers (a cat's inputs, "
            "q/k/v splits) as one launch whose second grid axis picks the buffers",
            apply=batch_launches,
            helps=("latency",),
            prior=2.0,
            remedies=("fewer_launches",),
        )
    ]
