"""Epilogue fusion: a pointwise kernel that reads a GEMM's or convolution's output is folded into
that kernel's epilogue (one launch instead of two; the output tile never goes through DRAM).

The rewrite works on candidates shaped like kegen's drafts: a launcher call (`kegen_addmm(...,
out=buf0)`, `buf0 = kegen_convolution(...)`) whose kernel ends with one `tl.store(base + off, value,
mask=...)`, followed by a launch of an Inductor-style pointwise kernel (`K[grid](..., xnumel,
XBLOCK=...)`) that loads that buffer only at `xindex` (element k of its storage at lane k). In the
fused kernel the pointwise body runs on the output tile with `xindex` = the tile's storage offsets and
`xmask` = the tile's mask (and `xindex < xnumel`); its loads of the buffer become the value the GEMM
would have stored, its stores into the buffer (in-place epilogues) go to the GEMM's output. The GEMM's
own store stays where the buffer is read after the launch and the epilogue does not write it back.
The launcher chain (`kegen_addmm -> kegen_matmul -> kernel[grid]`) is copied with an `epilogue=`
argument, so every other call of the original launchers is unchanged.
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

_POINTWISE_HEAD = ("xnumel", "xoffset", "xindex", "xmask")
_GLOBALS = {"tl", "triton", "libdevice", "tl_math", "triton_helpers", "math", "torch"}


def _call_name(node: ast.AST) -> str | None:
    """`f` of a statement `f(...)` or `x = f(...)`."""
    value = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id
    return None


def _launch_path(funcs: dict[str, ast.FunctionDef], kernels: set[str], start: str) -> list[str] | None:
    """The module functions from `start` down to the one that launches a kernel (depth <= 4)."""
    fn = funcs.get(start)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            if isinstance(node.func.value, ast.Name) and node.func.value.id in kernels:
                return [start]
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs:
            if node.func.id != start and (rest := _launch_path(funcs, kernels, node.func.id)):
                return [start, *rest] if len(rest) < 4 else None
    return None


def _final_store(fn: ast.FunctionDef) -> tuple[str, ast.expr, ast.expr, ast.expr]:
    """(base pointer, offsets, value, mask) of the kernel's last statement
    `tl.store(base + off, v, mask=m)`."""
    last = fn.body[-1] if fn.body else None
    call = last.value if isinstance(last, ast.Expr) else None
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.store" and len(call.args) >= 2):
        raise MutationError(f"{fn.name} does not end with one tl.store")
    ptr, value = call.args[0], call.args[1]
    mask = (
        call.args[2]
        if len(call.args) > 2
        else next((k.value for k in call.keywords if k.arg == "mask"), None)
    )
    terms = _add_terms(ptr)
    if len(terms) < 2 or not isinstance(terms[0], ast.Name):
        raise MutationError(f"the store of {fn.name} is not `base + offsets`")
    if mask is None:
        raise MutationError(f"the store of {fn.name} has no mask")
    offsets = terms[1]
    for t in terms[2:]:
        offsets = ast.BinOp(offsets, ast.Add(), t)
    return terms[0].id, offsets, value, mask


def _add_terms(expr: ast.expr) -> list[ast.expr]:
    """The terms of a left-nested sum `a + b + c`."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return [*_add_terms(expr.left), expr.right]
    return [expr]


def _resolves_to_xindex(expr: ast.expr, aliases: set[str]) -> bool:
    return isinstance(expr, ast.Name) and expr.id in aliases


class _Epilogue(ast.NodeTransformer):
    """Rewrites the pointwise body into the fused kernel (see the module docstring)."""

    def __init__(self, param: str, base: str, value: ast.expr, rename: dict[str, str], aliases: set[str]):
        self.param, self.base, self.value, self.rename, self.aliases = param, base, value, rename, aliases
        self.stores_param = False

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.param:
            raise MutationError(f"the pointwise kernel uses {self.param} outside a load or store at xindex")
        if node.id in self.rename:
            return ast.Name(self.rename[node.id], node.ctx)
        return node

    def _mask(self, call: ast.Call, position: int) -> None:
        kw = next((k for k in call.keywords if k.arg == "mask"), None)
        mask = call.args[position] if len(call.args) > position else (kw.value if kw else None)
        xmask = ast.Name("xmask", ast.Load())
        if mask is None or (isinstance(mask, ast.Constant) and mask.value is None):
            new: ast.expr = xmask
        elif any(isinstance(n, ast.Name) and n.id == "xmask" for n in ast.walk(mask)):
            new = mask
        else:
            new = ast.BinOp(mask, ast.BitAnd(), xmask)
        if len(call.args) > position:
            call.args[position] = new
        elif kw is not None:
            kw.value = new
        else:
            call.keywords.append(ast.keyword("mask", new))

    def _on_param(self, ptr: ast.expr) -> bool:
        """Whether `ptr` is `param + (xindex)`; MutationError for any other address in the buffer."""
        names = {n.id for n in ast.walk(ptr) if isinstance(n, ast.Name)}
        if self.param not in names:
            return False
        ok = (
            isinstance(ptr, ast.BinOp)
            and isinstance(ptr.op, ast.Add)
            and isinstance(ptr.left, ast.Name)
            and ptr.left.id == self.param
            and _resolves_to_xindex(ptr.right, self.aliases)
        )
        if not ok:
            raise MutationError(
                f"the pointwise kernel reads {self.param} at {ast.unparse(ptr)}, not at xindex"
            )
        return True

    def visit_Call(self, node: ast.Call) -> ast.AST:
        fname = ast.unparse(node.func)
        if fname == "tl.load" and node.args and self._on_param(node.args[0]):
            return copy.deepcopy(self.value)
        if fname == "tl.store" and node.args and self._on_param(node.args[0]):
            self.stores_param = True
            node.args[0] = ast.BinOp(ast.Name(self.base, ast.Load()), ast.Add(), node.args[0].right)  # type: ignore[attr-defined]
        self.generic_visit(node)
        if fname == "tl.load":
            self._mask(node, 1)
        elif fname == "tl.store":
            self._mask(node, 2)
        return node


def _pointwise_parts(fn: ast.FunctionDef) -> tuple[list[str], list[ast.stmt], set[str]]:
    """(parameters without XBLOCK, body after Inductor's xoffset/xindex/xmask lines, names equal to
    xindex); MutationError if `fn` is not a 1-D pointwise kernel."""
    params = [a.arg for a in fn.args.args]
    if params[-2:] != ["xnumel", "XBLOCK"] or any(p in params for p in ("rnumel", "r0_numel", "ynumel")):
        raise MutationError(f"{fn.name} is not a 1-D pointwise kernel (xnumel, XBLOCK)")
    body, aliases = [], {"xindex"}
    for s in fn.body:
        target = s.targets[0].id if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) else None
        if target in _POINTWISE_HEAD and target != "xnumel":
            continue
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id in aliases and target:
            aliases.add(target)
        body.append(s)
    used = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
    if used & {"XBLOCK", "xoffset"}:
        raise MutationError(f"{fn.name} uses XBLOCK or xoffset in its body")
    if any(isinstance(n, ast.For | ast.While | ast.Return) for s in body for n in ast.walk(s)):
        raise MutationError(f"{fn.name} has loops")
    return params[:-1], body, aliases


def fuse_epilogue(source: str) -> str:
    """The first GEMM/convolution launch whose output a pointwise kernel reads next, fused (see the
    module docstring); MutationError when nothing in the source can be fused."""
    tree = ast.parse(source)
    kernels = {f.name: f for f in jit_functions(tree)}
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in kernels}
    forward = model_forward(tree)
    why = "no GEMM or convolution launcher followed by a pointwise kernel on its output"
    for i, stmt in enumerate(forward.body):
        name = _call_name(stmt)
        path = _launch_path(funcs, set(kernels), name) if name else None
        if not path:
            continue
        try:
            return _fuse_at(tree, forward, i, path, kernels, funcs)
        except MutationError as exc:
            why = str(exc)
    raise MutationError(why)


def _zero_offset(call: ast.Call) -> bool:
    """`torch.as_strided(x, size, stride)` or with a storage offset of literally 0."""
    offset = (
        call.args[3]
        if len(call.args) > 3
        else next((k.value for k in call.keywords if k.arg == "storage_offset"), None)
    )
    return offset is None or (isinstance(offset, ast.Constant) and offset.value == 0)


def _output_buffer(stmt: ast.stmt, launcher: ast.FunctionDef) -> str:
    """The buffer a launcher call writes: its `out` argument, or the name it is assigned to."""
    call = stmt.value  # type: ignore[attr-defined]
    out = next((k.value for k in call.keywords if k.arg == "out"), None)
    params = [a.arg for a in launcher.args.args]
    if out is None and "out" in params and len(call.args) > params.index("out"):
        out = call.args[params.index("out")]
    if isinstance(out, ast.Name):
        return out.id
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    raise MutationError(f"cannot tell which buffer {ast.unparse(call.func)} writes")


def _fuse_at(
    tree: ast.Module,
    forward: ast.FunctionDef,
    i: int,
    path: list[str],
    kernels: dict[str, ast.FunctionDef],
    funcs: dict[str, ast.FunctionDef],
) -> str:
    stmt = forward.body[i]
    buf = _output_buffer(stmt, funcs[path[0]])
    views = {buf}
    shifted: set[str] = set()  # views of the buffer that do not start at its first element
    j = i + 1
    while j < len(forward.body):  # aliases, allocations and grids until the next launch
        s = forward.body[j]
        if launch_of(s) or _call_name(s) in funcs:
            break
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            call = s.value
            reads = {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}
            if reads & (views | shifted):
                plain = isinstance(call, ast.Name) and call.id in views
                strided = isinstance(call, ast.Call) and ast.unparse(call.func) == "torch.as_strided"
                if not plain and not strided:
                    raise MutationError(f"{ast.unparse(s)} reads the GEMM output before the pointwise kernel")
                # a view that starts where the buffer starts reads element k at k; any other is shifted
                starts = plain or (
                    isinstance(call, ast.Call)
                    and isinstance(call.args[0], ast.Name)
                    and call.args[0].id in views
                    and _zero_offset(call)
                )
                (views if starts else shifted).add(s.targets[0].id)
        elif not isinstance(s, ast.Assign):
            raise MutationError(f"{ast.unparse(s)[:60]} runs between the GEMM and its consumer")
        j += 1
    launch = launch_of(forward.body[j]) if j < len(forward.body) else None
    if launch is None or launch[0] not in kernels:
        raise MutationError(f"no pointwise launch reads {buf} after {path[0]}")
    kname, lcall = launch
    pw = kernels[kname]
    params, body, aliases = _pointwise_parts(pw)
    if any(k.arg != "XBLOCK" for k in lcall.keywords) or len(lcall.args) != len(params):
        raise MutationError(f"the launch of {kname} does not bind its parameters positionally")
    if any(isinstance(n, ast.Name) and n.id in shifted for a in lcall.args for n in ast.walk(a)):
        raise MutationError(f"{kname} reads the GEMM output through a shifted view")
    hits = [k for k, a in enumerate(lcall.args) if isinstance(a, ast.Name) and a.id in views]
    if len(hits) != 1 or any(
        isinstance(n, ast.Name) and n.id in views
        for a in lcall.args
        for n in ast.walk(a)
        if not isinstance(a, ast.Name)
    ):
        raise MutationError(f"{kname} does not take the GEMM output as exactly one plain argument")
    param = params[hits[0]]
    later = forward.body[j + 1 :]
    read_later = any(isinstance(n, ast.Name) and n.id in views | shifted for s in later for n in ast.walk(s))
    if isinstance(stmt, ast.Assign) and any(
        isinstance(n, ast.Name) and n.id in views
        for a in lcall.args
        for n in ast.walk(a)
        if not (isinstance(a, ast.Name) and a.id in views)
    ):
        raise MutationError("the epilogue's arguments need the convolution's output")
    suffix = "_epilogue"
    k = 0
    while any(f"{p}{suffix}{k}" in funcs or f"{p}{suffix}{k}" in kernels for p in (*path, kname)):
        k += 1
    suffix = f"{suffix}{k}"
    # the fused kernel: the GEMM's kernel with the pointwise body in place of (or after) its store
    launcher = funcs[path[-1]]
    gemm_kernel = next(
        node.func.value.id  # type: ignore[attr-defined]
        for node in ast.walk(launcher)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Subscript)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in kernels
    )
    fused = copy.deepcopy(kernels[gemm_kernel])
    fused.name = gemm_kernel + suffix
    base, offsets, value, mask = _final_store(fused)
    taken = {n.id for n in ast.walk(fused) if isinstance(n, ast.Name)} | {a.arg for a in fused.args.args}
    own = set(params) | {
        t.id for s in body for t in ast.walk(s) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
    }
    rename = {n: f"ep_{n}" for n in own if n not in ("xindex", "xmask") and n != param and n not in _GLOBALS}
    if set(rename.values()) & taken:
        raise MutationError("the epilogue's names clash with the GEMM kernel's")
    rewriter = _Epilogue(param, base, value, rename, aliases)
    new_body = [rewriter.visit(copy.deepcopy(s)) for s in body]
    xnumel = ast.Name(rename["xnumel"], ast.Load())
    head = [
        ast.parse(f"xindex = {ast.unparse(offsets)}").body[0],
        ast.parse(f"xmask = ({ast.unparse(mask)}) & (xindex < {xnumel.id})").body[0],
    ]
    keep_store = read_later and not rewriter.stores_param
    fused.body = fused.body[:-1] + ([fused.body[-1]] if keep_store else []) + head + new_body
    extra = [p for p in params if p != param]
    first_constexpr = next(
        (
            k
            for k, a in enumerate(fused.args.args)
            if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
        ),
        len(fused.args.args),
    )
    fused.args.args[first_constexpr:first_constexpr] = [ast.arg(rename[p]) for p in extra]
    # the launcher chain, copied with an `epilogue` argument passed down to the launch
    copies: list[ast.FunctionDef] = []
    for fname in path:
        fn = copy.deepcopy(funcs[fname])
        fn.name = fname + suffix
        fn.args.kwonlyargs.append(ast.arg("epilogue"))
        fn.args.kw_defaults.append(ast.Tuple([], ast.Load()))
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id in path and node.func.id != fname:
                node.func.id += suffix
                node.keywords.append(ast.keyword("epilogue", ast.Name("epilogue", ast.Load())))
            elif (
                isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == gemm_kernel
            ):
                node.func.value.id = fused.name
                node.args.append(ast.Starred(ast.Name("epilogue", ast.Load()), ast.Load()))
        copies.append(fn)
    # forward: the fused call where the pointwise kernel was launched (the GEMM's when assigned)
    fused_call: ast.stmt = copy.deepcopy(stmt)
    fused_call.value.func.id = path[0] + suffix  # type: ignore[attr-defined]
    ep_args = [copy.deepcopy(a) for k, a in enumerate(lcall.args) if k != hits[0]]
    fused_call.value.keywords.append(ast.keyword("epilogue", ast.Tuple(ep_args, ast.Load())))  # type: ignore[attr-defined]
    if isinstance(stmt, ast.Assign):  # a convolution returns its output: the epilogue's inputs exist already
        missing = {n.id for a in ep_args for n in ast.walk(a) if isinstance(n, ast.Name)} & {
            t.id
            for s in forward.body[i + 1 : j]
            for t in ast.walk(s)
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
        }
        if missing:
            raise MutationError(
                f"the epilogue reads {', '.join(sorted(missing))}, made after the convolution"
            )
        forward.body[i] = fused_call
        del forward.body[j]
    else:
        forward.body[j] = fused_call
        del forward.body[i]
    at = tree.body.index(funcs[path[-1]])
    tree.body[at + 1 : at + 1] = [fused, *copies]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def fusion_mutations(source: str) -> list[Mutation]:
    """The epilogue fusion, where it applies."""
    try:
        fuse_epilogue(source)
    except (MutationError, SyntaxError):
        return []
    return [
        Mutation(
            name="fuse_epilogue",
            family="fusion",
            description="fuse the pointwise kernel that reads a GEMM's (or convolution's) output into that "
            "kernel's epilogue: one launch fewer, the output tile never goes through DRAM in between",
            apply=fuse_epilogue,
            helps=("memory", "latency"),
            prior=2.5,
            remedies=("fewer_launches", "fewer_bytes"),
        )
    ]
