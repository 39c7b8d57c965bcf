"""Triton templates for linear layers (`act(x @ W.T + b)`, chains of them) and batched matmul.

Epilogues are `tN = ...` lines over `acc` (the fp32 accumulator tile) ending in a result name,
as drafting builds them from the reference's elementwise ops. Tile sizes are module constants.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.layout import MODEL_HEAD

# a GEMM program's tile: its program ids (N fastest, as the grouped-order recipe expects) and rows
PROGRAM_TILE = """    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)  # noqa: F841 - read by the grouped-order recipe
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)"""
MATMUL_PROLOGUE = (
    PROGRAM_TILE
    + """
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)"""
)

_LINEAR_KERNEL = """
@triton.jit
def {name}(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym,
           HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
{prologue}
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * stride_wn + ks[:, None] * stride_wk,
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, w)
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
{extra_loads}{epilogue}
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], {result}.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""

_LINEAR_HELPER = """

def _linear(kernel, x, weight, bias):
    x2 = x.reshape(-1, x.shape[-1])
    M, K = x2.shape
    N = weight.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N),)
    kernel[grid](x2, weight, weight if bias is None else bias, y, M, N, K, x2.stride(0), x2.stride(1),
                 weight.stride(0), weight.stride(1), y.stride(0), HAS_BIAS=bias is not None,
                 BLOCK_M=BLOCK_SIZE_M, BLOCK_N=BLOCK_SIZE_N, BLOCK_K=BLOCK_SIZE_K)
    return y.view(*x.shape[:-1], N)
"""


@dataclass(frozen=True)
class LinearStage:
    """One layer `y = epilogue(x @ weight.T + bias)`; `weight`/`bias` are forward-time expressions
    (`self.fc1.weight.detach()`, an input's name); `epilogue` lines read `acc` and end in `result`."""

    weight: str
    bias: str | None
    epilogue: tuple[str, ...] = ()
    result: str = "acc"
    extras: tuple[tuple[str, str], ...] = ()  # tensors the epilogue reads as e0, ...: (expression, kind)
    source: str = "h"  # the forward's variable holding the layer's input (`h`: the previous layer's output)
    target: str = "h"  # ... and the one its output goes to
    gate: GateLayer | None = None  # a second layer of the same input computed in the same kernel


@dataclass(frozen=True)
class GateLayer:
    """A layer fused into another of the same input (`fuse_gates`): its product accumulates in `gacc`
    beside the host layer's `acc`, and its `epilogue` (lines over `gacc`) ends in `result`, which the
    host's epilogue reads in place of the tensor the layer would have stored."""

    weight: str
    bias: str | None
    epilogue: tuple[str, ...] = ()
    result: str = "gacc"


def consts(block_m: int, block_n: int, block_k: int) -> str:
    return f"\nBLOCK_SIZE_M = {block_m}\nBLOCK_SIZE_N = {block_n}\nBLOCK_SIZE_K = {block_k}\n\n"


def indent(lines: Sequence[str], depth: int = 4) -> str:
    return "\n".join(" " * depth + line for line in lines)


# an epilogue's tensors at the output tile (rows rm, columns rn of an M x N output), and how the launch
# passes them: contiguous, so the kernel's offsets are the tile's (a strided view is copied)
_EXTRA_LOADS = {
    "row": "tl.load(e{i}_ptr + rn, mask=rn < N, other=0.0)[None, :]",
    "col": "tl.load(e{i}_ptr + rm, mask=rm < M, other=0.0)[:, None]",
    "full": "tl.load(e{i}_ptr + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N), "
    "other=0.0)",
    "scalar": "tl.load(e{i}_ptr)",
}
_EXTRA_ARGS = {
    "row": "{e}.reshape(-1).contiguous()",
    "col": "{e}.reshape(-1).contiguous()",
    "full": "{e}.reshape(-1, {e}.shape[-1]).contiguous()",
    "scalar": "{e}.reshape(-1)",
}
EPILOGUE_KINDS = frozenset(_EXTRA_LOADS)


def epilogue_loads(extras: Sequence[tuple[str, str]], loads: Mapping[str, str] | None = None) -> str:
    """Kernel lines loading the epilogue's tensors e0, e1, ... (kind `row` | `col` | `full` | `scalar`,
    as `drafting.elementwise.broadcast_kind` names them) at the output tile in fp32; `loads` each kind's
    load where the output is not one M x N matrix (the batched matmul's)."""
    table = _EXTRA_LOADS if loads is None else loads
    return "".join(
        f"    e{i} = " + table[k].format(i=i) + ".to(tl.float32)\n" for i, (_, k) in enumerate(extras)
    )


def epilogue_args(extras: Sequence[tuple[str, str]]) -> str:
    """The launch's arguments for the epilogue's tensors ((expression, kind) each), as the kernel
    reads them."""
    return "".join(" " + _EXTRA_ARGS[k].format(e=e) + "," for e, k in extras)


def _with_extras(kernel: str, count: int) -> str:
    """`_linear` for `kernel`, whose epilogue reads `count` more tensors (e0, ...) after y."""
    names = ", ".join(f"e{i}" for i in range(count))
    return _LINEAR_HELPER.replace(
        "def _linear(kernel, x, weight, bias):", f"def _{kernel}(x, weight, bias, {names}):"
    ).replace(
        "    kernel[grid](x2, weight, weight if bias is None else bias, y,",
        f"    {kernel}[grid](x2, weight, weight if bias is None else bias, y, {names},",
    )


def _gated_kernel() -> str:
    """The linear kernel's text with a second weight (`g_ptr`, its bias `gb_ptr`) accumulated into `gacc`
    beside `acc` in the same K loop, and the gate's epilogue before the host's (asserted edits: one
    kernel, two forms)."""
    text = _LINEAR_KERNEL
    edits = (
        (
            "def {name}(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, "
            "stride_ym,\n           HAS_BIAS: tl.constexpr,",
            "def {name}(x_ptr, w_ptr, b_ptr, g_ptr, gb_ptr, y_ptr,{extra_ptrs} M, N, K, stride_xm, "
            "stride_xk,\n"
            "           stride_wn, stride_wk, stride_gn, stride_gk, stride_ym, HAS_BIAS: tl.constexpr,\n"
            "           HAS_GATE_BIAS: tl.constexpr,",
        ),
        ("{prologue}\n", "{prologue}\n    gacc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)\n"),
        (
            "        acc += tl.dot(a, w)\n",
            "        g = tl.load(g_ptr + rn[None, :] * stride_gn + ks[:, None] * stride_gk,\n"
            "                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)\n"
            "        acc += tl.dot(a, w)\n        gacc += tl.dot(a, g)\n",
        ),
        (
            "{extra_loads}",
            "    if HAS_GATE_BIAS:\n"
            "        gacc += tl.load(gb_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]\n"
            "{gate_epilogue}\n{extra_loads}",
        ),
    )
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


_GATED_KERNEL = _gated_kernel()

_GATED_HELPER = """

def _{name}(x, weight, bias, gate_weight, gate_bias{names}):
    x2 = x.reshape(-1, x.shape[-1])
    M, K = x2.shape
    N = weight.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N),)
    {name}[grid](x2, weight, weight if bias is None else bias, gate_weight,
                 gate_weight if gate_bias is None else gate_bias, y,{call_names} M, N, K,
                 x2.stride(0), x2.stride(1), weight.stride(0), weight.stride(1),
                 gate_weight.stride(0), gate_weight.stride(1), y.stride(0),
                 HAS_BIAS=bias is not None, HAS_GATE_BIAS=gate_bias is not None,
                 BLOCK_M=BLOCK_SIZE_M, BLOCK_N=BLOCK_SIZE_N, BLOCK_K=BLOCK_SIZE_K)
    return y.view(*x.shape[:-1], N)
"""

_NAME = {
    "acc": re.compile(r"\bacc\b"),
    "t": re.compile(r"\bt(\d+)\b"),
    "e": re.compile(r"\be(\d+)\b"),
}


def fuse_gates(stages: Sequence[LinearStage]) -> list[LinearStage] | None:
    """`stages` with each layer whose output only one later layer of the same input reads, as a whole
    tile in its epilogue (a gated MLP's `act(x @ Wg.T) * (x @ Wu.T)`), computed in that layer's kernel
    (`GateLayer`): one pass over the input, and the gate's output neither stored nor read back (it
    stays in float32). None where no pair fuses."""
    out: list[LinearStage | None] = list(stages)
    fused = False
    for i, gate in enumerate(stages):
        if gate.extras or gate.gate is not None or gate.target == stages[-1].target:
            continue
        readers = [
            (j, s)
            for j, s in enumerate(out)
            if s is not None and (s.source == gate.target or any(e == gate.target for e, _ in s.extras))
        ]
        if len(readers) != 1:
            continue
        j, host = readers[0]
        slots = [k for k, (e, kind) in enumerate(host.extras) if e == gate.target and kind == "full"]
        if j <= i or host.source != gate.source or host.gate is not None or len(slots) != 1:
            continue
        if any(s is not None and s.target == gate.target for s in out[i + 1 :]):
            continue  # the name is bound again later: the host may read another value
        out[i] = None
        out[j] = _host_of(host, gate, slots[0])
        fused = True
    return [s for s in out if s is not None] if fused else None


def _host_of(host: LinearStage, gate: LinearStage, slot: int) -> LinearStage:
    """`host` computing `gate` beside it, its epilogue reading the gate's result for extra `slot`."""

    def rename_gate(line: str) -> str:
        return _NAME["t"].sub(r"g\1", _NAME["acc"].sub("gacc", line))

    gate_result = rename_gate(gate.result)

    def renumber(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return gate_result if k == slot else f"e{k - (k > slot)}"

    epilogue = tuple(_NAME["e"].sub(renumber, line) for line in host.epilogue)
    extras = tuple(e for k, e in enumerate(host.extras) if k != slot)
    layer = GateLayer(gate.weight, gate.bias, tuple(rename_gate(x) for x in gate.epilogue), gate_result)
    return replace(
        host, epilogue=epilogue, result=_NAME["e"].sub(renumber, host.result), extras=extras, gate=layer
    )


def _kernel_key(s: LinearStage) -> tuple[Any, ...]:
    gate = (s.gate.epilogue, s.gate.result) if s.gate is not None else None
    return s.epilogue, s.result, tuple(k for _, k in s.extras), gate


def _launch(s: LinearStage, kernel: str) -> str:
    """The forward's line running stage `s` through its kernel's launcher."""
    extras = epilogue_args(s.extras).rstrip(",")
    if s.gate is not None:
        gate = f"{s.gate.weight}, {s.gate.bias or 'None'}" + ("," + extras if extras else "")
        return f"{s.target} = _{kernel}({s.source}, {s.weight}, {s.bias or 'None'}, {gate})"
    if not s.extras:
        return f"{s.target} = _linear({kernel}, {s.source}, {s.weight}, {s.bias or 'None'})"
    return f"{s.target} = _{kernel}({s.source}, {s.weight}, {s.bias or 'None'},{extras})"


def linear_chain(
    stages: Sequence[LinearStage],
    args: Sequence[str],
    x: str,
    init: Sequence[str] = (),
    block_m: int = 16,
    block_n: int = 16,
    block_k: int = 16,
    prelude: str = "",
) -> str:
    """A stack (or a graph: `LinearStage.source`/`target`) of linear layers, each one launch of a kernel
    with its bias and epilogue fused.

    `args` are ModelNew.forward's parameters, `x` the expression of the first layer's input and
    `init` the lines of `__init__` that rebuild the reference's modules (same seeded weights), or that
    build the reference itself (`prelude`: its source, placed before ModelNew)."""
    kernels: dict[tuple[Any, ...], str] = {}
    for s in stages:
        kernels.setdefault(_kernel_key(s), f"linear_kernel_{len(kernels)}")
    src = ""
    helpers = ""
    for (epi, res, kinds, gate), name in kernels.items():
        fields = {
            "name": name,
            "prologue": MATMUL_PROLOGUE,
            "extra_ptrs": "".join(f" e{i}_ptr," for i in range(len(kinds))),
            "extra_loads": epilogue_loads([("", k) for k in kinds]),
            "epilogue": indent(epi),
            "result": res,
        }
        names = "".join(f", e{i}" for i in range(len(kinds)))
        if gate is not None:
            src += _GATED_KERNEL.format(**fields, gate_epilogue=indent(gate[0]))
            call_names = "".join(f" e{i}," for i in range(len(kinds)))
            helpers += _GATED_HELPER.format(name=name, names=names, call_names=call_names)
        else:
            src += _LINEAR_KERNEL.replace("y_ptr, M,", "y_ptr,{extra_ptrs} M,").format(**fields)
            if kinds:  # a launcher of its own, passing the epilogue's tensors (no *args: moves read launches)
                helpers += _with_extras(name, len(kinds))
    if any(not kinds and gate is None for _, _, kinds, gate in kernels):
        helpers = _LINEAR_HELPER + helpers
    body = [f"h = {x}"] + [_launch(s, kernels[_kernel_key(s)]) for s in stages]
    init_body = indent(["super().__init__()", *init], 8)
    model = (
        "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        f"{init_body}\n\n    def forward(self, {', '.join(args)}):\n{indent(body, 8)}\n"
        f"        return {stages[-1].target}\n"
    )
    prelude = f"\n\n{prelude.strip()}\n" if prelude else ""
    return HEADER + consts(block_m, block_n, block_k) + src + helpers + prelude + model


_BMM_KERNEL = """
@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr,{extra_ptrs} M, N, K, stride_ab, stride_am, stride_ak,
               stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
{prologue}
    batch = tl.program_id(1)
    a_base = a_ptr + batch * stride_ab
    b_base = b_ptr + batch * stride_bb
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_base + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
{extra_loads}{epilogue}
    tl.store(c_ptr + batch * stride_cb + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
             {result}.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
"""

_BMM_EXTRA_LOADS = {
    "row": "tl.load(e{i}_ptr + rn, mask=rn < N, other=0.0)[None, :]",
    "full": "tl.load(e{i}_ptr + (batch * M + rm[:, None]) * N + rn[None, :],\n"
    "                 mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)",
    "scalar": "tl.load(e{i}_ptr)",
}

_BMM_OPERANDS = {
    False: "        a3 = a.reshape(-1, a.shape[-2], a.shape[-1])\n"
    "        b3 = b.reshape(-1, b.shape[-2], b.shape[-1])",
    True: "        a3 = a.reshape(1, -1, a.shape[-1])\n        b3 = b.unsqueeze(0)",
}
_BMM_FWD = """        a = {a}
        b = {b}
{operands}
        n_batch, M, K = a3.shape
        N = b3.shape[2]
        c = torch.empty((n_batch, M, N), dtype={dtype}, device=a.device)
        grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N), n_batch)
        bmm_kernel[grid](a3, b3, c,{extra_args} M, N, K, a3.stride(0), a3.stride(1), a3.stride(2),
                         b3.stride(0), b3.stride(1), b3.stride(2), c.stride(0), c.stride(1), c.stride(2),
                         BLOCK_M=BLOCK_SIZE_M, BLOCK_N=BLOCK_SIZE_N, BLOCK_K=BLOCK_SIZE_K)
        return c.view(*a.shape[:-1], N)"""


def bmm(
    args: Sequence[str],
    a: str,
    b: str,
    epilogue: Sequence[str] = (),
    result: str = "acc",
    dtype: str = "a.dtype",
    fold: bool = False,
    extras: Sequence[tuple[str, str]] = (),
    block_m: int = 16,
    block_n: int = 16,
    block_k: int = 16,
) -> str:
    """C[i] = epilogue(A[i] @ B[i]) over equal leading (batch) dims; `a`/`b` are forward-time
    expressions of the operands (views such as `k.transpose(-1, -2)` are read through strides).
    `fold`: B is 2-D and A's leading dims fold into M ((..., M, K) @ (K, N)). `extras` are more
    inputs the epilogue reads as e0, e1, ...: (forward-time expression, kind), kind `row` (a vector
    along N, e.g. a bias), `full` (C's shape, e.g. a residual) or `scalar`."""
    loads = epilogue_loads(extras, _BMM_EXTRA_LOADS)
    kernel = _BMM_KERNEL.format(
        prologue=MATMUL_PROLOGUE,
        extra_ptrs="".join(f" e{i}_ptr," for i in range(len(extras))),
        extra_loads=loads,
        epilogue=indent(epilogue),
        result=result,
    )
    fwd = _BMM_FWD.format(
        a=a,
        b=b,
        operands=_BMM_OPERANDS[fold],
        dtype=dtype,
        extra_args="".join(f" {expr}.contiguous()," for expr, _ in extras),
    )
    model = MODEL_HEAD + f"    def forward(self, {', '.join(args)}):\n{fwd}\n"
    return HEADER + consts(block_m, block_n, block_k) + kernel + model
