"""Exact float32 dots in the kernels kegen drafts for NVIDIA GPUs.

`tl.dot` of float32 operands defaults to TF32 on NVIDIA GPUs (10-bit mantissas: about 1e-3 relative
error), while PyTorch's float32 matmul, convolution and attention on the same GPU are exact float32, and
so is the evaluator's float32 tolerance (atol 1e-4 + rtol 1e-4). A drafted attention over float32 heads
passed on the simulator (mtia's and AMD's default is "ieee") and failed on an H100 (2026-12-07: 112,450
of 262,144 outputs out of tolerance). A draft of a float32 problem for nvidia therefore states
`input_precision="ieee"` on every dot, and every move the offline operator offers there states it too
(the GPU rewrites, and moves that write kernels from a template's text: D84).

Only there: on fp16/bf16 operands Triton 3.7 keeps its tensor-core instructions under "ieee" (sm_90 PTX
checked), but Triton 3.6 falls back to FMA (a GEGLU draft on an H100: 836 us with it, 30.6 us without),
so a problem whose tensors are fp16/bf16 (or mixed) keeps Triton's default. mtia's and AMD's Triton
default to "ieee" already; their drafts are left as written (the mtia moves match dots by their
positional form).
"""

from __future__ import annotations

import ast
from pathlib import Path

PRECISION = "ieee"
TF32_DEFAULT_TARGETS = ("nvidia",)  # targets whose Triton backend defaults float32 dots to TF32
_KEYWORD = f'input_precision="{PRECISION}"'


def _dot_calls(tree: ast.AST) -> list[ast.Call]:
    """The `tl.dot(...)` calls of `tree` that state no input precision (nor allow_tf32, its old name)."""
    calls = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "dot"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "tl"
            and not any(k.arg in ("input_precision", "allow_tf32") for k in node.keywords)
        ):
            calls.append(node)
    return calls


def exact_dots(source: str) -> str:
    """`source` with `input_precision="ieee"` added to every `tl.dot` call that states no precision;
    `source` unchanged where it has none or does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    calls = _dot_calls(tree)
    if not calls:
        return source
    lines = [line.encode() for line in source.splitlines(keepends=True)]  # ast's columns are bytes
    # from the last call back, so earlier positions stay valid; end_col_offset is the closing paren + 1
    for call in sorted(calls, key=lambda c: (c.end_lineno or 0, c.end_col_offset or 0), reverse=True):
        row, col = (call.end_lineno or 1) - 1, (call.end_col_offset or 1) - 1
        line = lines[row]
        if line[col : col + 1] != b")":
            continue  # not where ast says the call closes: left as written
        last = _last_byte(lines, row, col)
        sep = b"" if last == b"," else b", "
        lines[row] = line[:col] + sep + _KEYWORD.encode() + line[col:]
    out = b"".join(lines).decode()
    try:
        ast.parse(out)
    except SyntaxError:  # a spelling this edit does not foresee: the source as written
        return source
    return out


def _last_byte(lines: list[bytes], row: int, col: int) -> bytes:
    """The last non-blank byte before column `col` of line `row` (looking back over earlier lines)."""
    text = lines[row][:col].rstrip()
    while not text and row > 0:
        row -= 1
        text = lines[row].split(b"#")[0].rstrip()
    return text[-1:]


def states_exact_dots(source: str) -> bool:
    """Whether some `tl.dot` of `source` asks for exact ("ieee") float32 products."""
    return _KEYWORD in source.replace("'", '"')


def keep_exact_dots(before: str, after: str) -> str:
    """`after` (a rewrite of `before`) with exact dots where `before` asked for them."""
    return exact_dots(after) if states_exact_dots(before) else after


def for_target(source: str, target: str, problem: Path | None = None) -> str:
    """A drafted candidate as it should run on `target`: exact float32 dots where its Triton would
    otherwise use TF32 and the problem computes in float32 (`computes_in_float32`)."""
    if target not in TF32_DEFAULT_TARGETS or problem is None or not computes_in_float32(problem):
        return source
    return exact_dots(source)


def computes_in_float32(problem: Path) -> bool:
    """Whether every floating-point input, parameter and buffer of the problem's model is float32 (and
    there is one): its dots then take float32 operands. A problem that can't be built here counts as
    not (its drafts stay as written)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kegen.search.operators.drafting.graph import load_problem_module

    try:
        mod = load_problem_module(problem)
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs())
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                inputs = list(mod.get_inputs())
        except Exception:  # sizes read from its own values: built for real
            inputs = list(mod.get_inputs())
    except Exception:
        return False
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers())
    floats = {x.dtype for x in tensors if x.is_floating_point()}
    return floats == {torch.float32}
