"""Inductor's output → a standalone, readable KernelBench candidate (`ModelNew` + Triton kernels).

    source, info = draft_from_inductor(Path("problem.py"))

The candidate holds Inductor's Triton kernels (one launch config chosen for the simulated MTIA, its
grid written out), the Inductor helpers they call, kegen's Triton kernels for what Inductor leaves
to aten on the host (kegen.inductor.extern_kernels), and a `forward` translated from Inductor's
`call()`. Weights come from the reference: ModelNew builds the reference's module (its class copied
in, renamed `Reference`) under the evaluator's seed and reads its parameters and buffers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kegen import compat
from kegen.inductor.capture import Capture, CaptureError, capture
from kegen.inductor.extern_kernels import REPLACEMENTS, extern_sources
from kegen.inductor.kernels_src import InductorKernel, choose_config, helper_sources, parse_kernel

HEADER = '''"""Drafted by kegen from TorchInductor's output for {problem}: Inductor's Triton kernels (launch
configs chosen for the simulated MTIA) and kegen's kernels for the ops Inductor leaves to the host."""

import operator  # noqa: F401
from typing import Any  # noqa: F401

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language import math as tl_math  # noqa: F401
from triton.language.extra import libdevice  # noqa: F401
'''
# statements of Inductor's call() that are bookkeeping for its own runtime
_DROPPED_CALLS = {"get_raw_stream", "args.clear"} | compat.INDUCTOR_RUNTIME_CHECKS
_HOST_ALLOWED = {"torch.as_strided", "torch.empty_strided", "operator.attrgetter"}


@dataclass
class DraftInfo:
    """What the Inductor draft contains."""

    kernels: list[str] = field(default_factory=list)
    extern: list[str] = field(default_factory=list)
    configs: dict[str, dict[str, int]] = field(default_factory=dict)


def draft_from_inductor(problem_path: Path) -> tuple[str, DraftInfo]:
    """A standalone candidate for the problem from Inductor's output; CaptureError names what blocks."""
    cap = capture(Path(problem_path))
    return write_candidate(cap, Path(problem_path))


def write_candidate(cap: Capture, problem_path: Path) -> tuple[str, DraftInfo]:
    """The candidate source for a capture."""
    from kegen.inductor.routing import restore_default_driver

    tree = ast.parse(cap.code)
    try:
        kernels = {k.name: k for k in _kernels(tree)}
    finally:  # loading Inductor's kernel modules activated the `cpu` backend's driver
        restore_default_driver()
    call = _call_function(tree)
    info = DraftInfo(kernels=list(kernels))
    body = _translate(call, kernels, info)
    return assemble(HEADER.format(problem=problem_path.name), cap, kernels, body, info), info


class KernelSource(Protocol):
    """What a drafted kernel brings to the candidate: its source and the Inductor helpers it calls."""

    source: str
    helpers: set[str]


def assemble(
    header: str, cap: Capture, kernels: Mapping[str, KernelSource], body: list[str], info: DraftInfo
) -> str:
    """The candidate's source: header, the helpers the kernels call, the kernels, kegen's extern kernels,
    the reference module where weights come from it, and `ModelNew` with the translated `body`."""
    helpers = helper_sources(set().union(*(k.helpers for k in kernels.values())) if kernels else set())
    parts = [header]
    parts += [f"\n{h}" for h in helpers]
    parts += [f"\n{k.source}" for k in kernels.values()]
    parts += [f"\n{s}" for s in extern_sources(info.extern)]
    needs_reference = any(i.kind != "user" for i in cap.inputs)
    if needs_reference:
        parts.append("\n" + reference_source(cap))
    parts.append("\n" + _model_new(cap, body, needs_reference))
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


def _kernels(tree: ast.Module) -> list[InductorKernel]:
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        f = node.value.func
        if isinstance(f, ast.Attribute) and f.attr == "triton" and len(node.value.args) >= 2:
            name, src = (a.value if isinstance(a, ast.Constant) else None for a in node.value.args[:2])
            if isinstance(name, str) and isinstance(src, str):
                found.append(parse_kernel(name, src))
    return found


def _call_function(tree: ast.Module) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise CaptureError("Inductor's output has no call() function")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _translate(call: ast.FunctionDef, kernels: dict[str, InductorKernel], info: DraftInfo) -> list[str]:
    """forward's body from call()'s statements."""
    lines: list[str] = []
    stmts = list(call.body)
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Delete) or _dropped(stmt):
            continue
        if isinstance(stmt, ast.Assign) and _dotted(stmt.value) == "args":
            continue  # `arg0_1, arg1_1 = args`: forward binds these names itself
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = _dotted(stmt.value.func)
            if name.endswith(".run") and name[: -len(".run")] in kernels:
                lines += _launch(kernels[name[: -len(".run")]], stmt.value, info)
                continue
        stmt = _rewrite_calls(stmt, stmts[i + 1 :], info)
        lines.append(ast.unparse(stmt))
    return lines


def _dropped(stmt: ast.stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign) else None
    return isinstance(value, ast.Call) and _dotted(value.func) in _DROPPED_CALLS


def _launch(kernel: InductorKernel, call: ast.Call, info: DraftInfo) -> list[str]:
    """`kernel.run(args..., stream=s)` → a grid line and `kernel[grid](args..., BLOCK=...)`."""
    args = list(call.args)
    if len(args) > len(kernel.params):
        raise CaptureError(
            f"kernel {kernel.name}: launched with {len(args)} arguments, takes {len(kernel.params)}"
        )
    numels = {}
    for p, a in zip(kernel.params, args, strict=False):
        if p.endswith("numel"):
            if not (isinstance(a, ast.Constant) and isinstance(a.value, int)):
                raise CaptureError(
                    f"kernel {kernel.name}: {p} is not a constant ({ast.unparse(a)}); "
                    "dynamic shapes are not drafted"
                )
            numels[p] = a.value
    passed = set(kernel.params[: len(args)])
    cfg = {
        k: v for k, v in choose_config(kernel, numels).items() if k in kernel.constexprs and k not in passed
    }
    info.configs[kernel.name] = cfg
    grid = kernel.launch_grid(numels, cfg)
    kwargs = "".join(f", {k}={v}" for k, v in cfg.items())
    arg_text = ", ".join(ast.unparse(a) for a in args)
    return [f"grid = ({', '.join(grid)},)", f"{kernel.name}[grid]({arg_text}{kwargs})"]


class _CallRewriter(ast.NodeTransformer):
    def __init__(self, info: DraftInfo, following: list[ast.stmt]) -> None:
        self.info = info
        self.following = following

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = _dotted(node.func)
        if name == "empty_strided_cpu":
            node.func = ast.parse("torch.empty_strided", mode="eval").body
            node.keywords = [ast.keyword("dtype", node.args[2]), ast.keyword("device", ast.Name("device"))]
            node.args = node.args[:2]
        elif name == "reinterpret_tensor":
            node.func = ast.parse("torch.as_strided", mode="eval").body
        elif name in REPLACEMENTS:
            new = REPLACEMENTS[name]
            if new not in self.info.extern:
                self.info.extern.append(new)
            node.func = ast.Name(new)
        elif name.startswith(("extern_kernels.", "aten.", "torch.ops.")):
            op = name.removeprefix("torch.ops.")
            raise CaptureError(
                f"Inductor leaves {op} to a library call on the host, and kegen has no Triton kernel for it"
            )
        return node


def _rewrite_calls(stmt: ast.stmt, following: list[ast.stmt], info: DraftInfo) -> ast.stmt:
    stmt = _CallRewriter(info, following).visit(stmt)
    # an extern convolution returns a new buffer: give it the layout Inductor asserts next
    if (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and _dotted(stmt.value.func) == "kegen_convolution"
    ):
        target = stmt.targets[0]
        for nxt in following[:3]:
            v = nxt.value if isinstance(nxt, ast.Expr) else None
            if not isinstance(v, ast.Call):
                continue
            layout = compat.LAYOUT_CHECKS.get(_dotted(v.func))
            if layout is not None and ast.unparse(v.args[0]) == ast.unparse(target):
                stmt.value.keywords += [
                    ast.keyword("out_size", v.args[layout[0]]),
                    ast.keyword("out_stride", v.args[layout[1]]),
                ]
                break
    return ast.fix_missing_locations(stmt)


def reference_source(cap: Capture) -> str:
    """The problem's module-level definitions (imports, constants, classes, helpers) with `Model`
    renamed `Reference`; get_inputs/get_init_inputs left out."""
    path = getattr(cap.model_source_module, "__file__", None)
    if path is None:
        raise CaptureError("the problem's source is not available to rebuild its weights")
    return reference_source_of(Path(path))


def reference_source_of(path: Path) -> str:
    """`reference_source` of the problem file at `path`: its definitions with `Model` renamed
    `Reference`, for a ModelNew that builds it for its weights."""
    tree = ast.parse(Path(path).read_text())
    keep = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue  # re-added below
        keep.append(node)
    for sub in ast.walk(ast.Module(body=keep, type_ignores=[])):
        if isinstance(sub, ast.Name) and sub.id == "Model":
            sub.id = "Reference"
        if isinstance(sub, ast.ClassDef) and sub.name == "Model":
            sub.name = "Reference"
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    header = (
        "# The reference's module, built in ModelNew.__init__ for its weights (its forward never runs).\n"
    )
    return header + "\n".join(imports) + "\n\n\n" + "\n".join(ast.unparse(n) + "\n\n" for n in keep)


_FORWARD_NAMES = {"device", "grid", "torch", "triton", "tl", "tl_math", "libdevice", "nn", "operator", "self"}


def _input_names(cap: Capture, body: list[str]) -> tuple[dict[str, str], list[str]]:
    """Readable names for Inductor's `argK_1` graph inputs (the forward's own argument names, and
    `p_`/`b_`/`c_` + the dotted name of parameters, buffers and constants) and the lines binding
    the non-user ones."""
    taken = set(_FORWARD_NAMES) | {w for ln in body for w in re.findall(r"\b\w+\b", ln)}
    names: dict[str, str] = {}
    bind: list[str] = []
    kept: list[tuple[str, str]] = []  # (Inductor's name, forward's argument): bound all at once
    for k, gi in enumerate(cap.inputs):
        if gi.kind == "user":
            arg = cap.forward_args[gi.index]
            if arg in taken - {f"arg{k}_1"}:  # the kernels' own names would shadow it: keep Inductor's
                kept.append((f"arg{k}_1", arg))
                continue
            names[f"arg{k}_1"] = arg
            continue
        prefix = {"parameter": "p", "buffer": "b"}.get(gi.kind, "c")
        name = f"{prefix}_" + re.sub(r"\W", "_", gi.target)
        while name in taken or name in names.values():
            name += "_"
        names[f"arg{k}_1"] = name
        getter = {
            "parameter": f"self.reference.get_parameter({gi.target!r})",
            "buffer": f"self.reference.get_buffer({gi.target!r})",
        }.get(gi.kind, f"operator.attrgetter({gi.target!r})(self.reference)")
        bind.append(f"{name} = {getter}")
    if kept:  # one assignment: a forward argument may itself be named like another `argK_1`
        bind.insert(0, f"{', '.join(a for a, _ in kept)}, = {', '.join(b for _, b in kept)},")
    return names, bind


def _model_new(cap: Capture, body: list[str], needs_reference: bool) -> str:
    args = cap.forward_args
    names, bind = _input_names(cap, body)
    if names:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
        body = [pattern.sub(lambda m: names[m.group(1)], ln) for ln in body]
    first_tensor = args[0] if args else "None"
    out_line = next((ln for ln in reversed(body) if ln.startswith("return ")), None)
    if out_line is None:
        raise CaptureError("Inductor's call() returns nothing")
    body = [ln for ln in body if ln is not out_line]
    result = ast.parse(out_line.removeprefix("return "), mode="eval").body
    elts = result.elts if isinstance(result, ast.Tuple) else [result]
    outs = [ast.unparse(e) for e in elts[: cap.user_outputs]]
    ret = outs[0] if cap.single_output and len(outs) == 1 else f"({', '.join(outs)},)"
    init = ["super().__init__()"]
    if needs_reference:
        init.append("self.reference = Reference(*args, **kwargs)")
    lines = [
        "class ModelNew(nn.Module):",
        "    def __init__(self, *args, **kwargs):",
        *(f"        {ln}" for ln in init),
        "",
        f"    def forward(self, {', '.join(args)}):",
        f"        device = {first_tensor}.device if isinstance({first_tensor}, torch.Tensor) else 'cpu'",
        *(f"        {ln}" for ln in bind),
        *(f"        {ln}" for ln in _wrap(body)),
        f"        return {ret}",
    ]
    return "\n".join(lines) + "\n"


def _wrap(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        out += ln.splitlines()
    return [re.sub(r"\s+$", "", ln) for ln in out]
