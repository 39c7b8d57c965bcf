"""torch.compile's code for a GPU target (nvidia, amd) as a standalone KernelBench candidate.

    source, info = draft_for_gpu(Path("problem.py"), "nvidia")        # needs a CUDA (or ROCm) device

Inductor compiles the problem's Model for the GPU and runs it once, so every kernel is autotuned the
way torch.compile autotunes it; the launch config each kernel ran with (its block sizes, warps and
stages) is read from Inductor's runtime and written into the candidate, whose kernels are Inductor's
`@triton.jit` functions and whose `forward` is Inductor's `call()`.

What differs from `torch.compile(model)`, and why: a GPU candidate may not compute with library ops
on device data (the evaluator's op guard refuses `aten.mm`, `aten.convolution`, attention, ... in a
candidate's forward: docs/THREAT_MODEL.md), so the draft is compiled with Inductor's max-autotune
Triton templates for GEMMs, batched GEMMs and convolutions instead of cuBLAS/cuDNN, attention is
decomposed into matmuls and a softmax (Inductor's flash-attention extern call is a library call) and
`aten._embedding_bag` takes kegen's device form (kegen.inductor.decompositions). Where no Triton
template applies, Inductor's ATen fallback is replaced by kegen's Triton kernel for the op
(kegen.inductor.extern_kernels). The speedups that matter are measured against the evaluator's own
`torch.compile` of the reference (cuBLAS and flash attention included): `EvalResult.times["compile"]`.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.inductor.capture import Capture, CaptureError, GraphInput, load_problem, sizes_vary
from kegen.inductor.draft import DraftInfo, _call_function, _dotted, _dropped, _rewrite_calls, assemble
from kegen.inductor.extern_kernels import REPLACEMENTS
from kegen.inductor.kernels_src import _HELPER_REF, _jit_functions

GPU_TARGETS = ("nvidia", "amd")
# Inductor settings of the GPU draft (on top of torch's defaults, which torch.compile uses)
GPU_DRAFT_CONFIG: dict[str, Any] = {
    "fx_graph_cache": False,  # compile afresh: the output code is read from this compilation
    "combo_kernels": False,
    "pattern_matcher": False,  # keeps the decomposed attention from turning back into a library call
    "layout_optimization": False,  # the reference's layouts (no channels-last copies around convs)
    "triton.cooperative_reductions": False,
    "triton.cudagraphs": False,
    # GEMMs, batched GEMMs and convolutions as Inductor's Triton templates, autotuned on the device
    "max_autotune_gemm": True,
    "max_autotune_gemm_backends": "TRITON",
    "max_autotune_conv_backends": "TRITON",
    "autotune_fallback_to_aten": True,  # no template for a shape: ATen, then kegen's Triton kernel
}
# one kernel per op: the eager-like draft (`fused=False`)
UNFUSED_CONFIG: dict[str, Any] = {"max_fusion_size": 1, "epilogue_fusion": False, "prologue_fusion": False}
# statements of the GPU call() that only serve Inductor's runtime
_GPU_DROPPED = {"torch.cuda.set_device", "torch.cuda.synchronize"}
_EMPTY_ON_DEVICE = {"empty_strided_cuda", "empty_strided_xpu", "empty_strided_mtia"}
_LIBRARY_PREFIXES = ("extern_kernels.", "aten.", "torch.ops.")

HEADER = '''"""Drafted by kegen from TorchInductor's output for {problem} on {target}: torch.compile's Triton
kernels with the launch configs Inductor's autotuning chose on {device} (GEMMs and convolutions as
Inductor's max-autotune Triton templates: a candidate may not call cuBLAS/cuDNN)."""

import operator  # noqa: F401
from typing import Any  # noqa: F401

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language import math as tl_math  # noqa: F401
from triton.language.extra import libdevice  # noqa: F401
'''


@dataclass
class GpuKernel:
    """One kernel of Inductor's GPU output: its `@triton.jit` source, runtime signature and metadata."""

    var: str  # the name call() launches it by
    name: str  # the @triton.jit function's name
    source: str
    params: list[str]
    constexprs: list[str]
    kind: str  # pointwise | reduction | persistent_reduction | template | user_autotune | ...
    inductor_meta: dict[str, Any] = field(default_factory=dict)
    decorator_config: dict[str, Any] = field(default_factory=dict)  # a template's num_warps/num_stages
    helpers: set[str] = field(default_factory=set)


@dataclass
class GpuCapture:
    """Inductor's GPU output for a problem and the launch config each kernel ran with."""

    capture: Capture
    configs: dict[str, dict[str, Any]]  # kernel name -> {"kwargs": {...}, "num_warps": n, "num_stages": n}
    device: str = "GPU"


def require_gpu(target: str) -> None:
    """CaptureError unless torch sees a GPU of `target`'s kind."""
    import torch

    if target not in GPU_TARGETS:
        raise CaptureError(f"target {target!r} is not a GPU target ({', '.join(GPU_TARGETS)})")
    if not torch.cuda.is_available():
        raise CaptureError(
            f"drafting torch.compile's code for {target} needs a CUDA device "
            "(torch.cuda.is_available() is False on this machine): Inductor compiles and autotunes "
            "its kernels on the GPU"
        )
    hip = getattr(torch.version, "hip", None)
    if (target == "amd") != bool(hip):
        raise CaptureError(f"target {target} needs {'a ROCm' if target == 'amd' else 'an NVIDIA'} GPU")


def draft_for_gpu(
    problem_path: Path, target: str, fused: bool = True, seed: int = 0
) -> tuple[str, DraftInfo]:
    """The candidate source for the problem: torch.compile's kernels on this machine's GPU."""
    cap = capture_gpu(Path(problem_path), target, fused=fused, seed=seed)
    return write_gpu_candidate(cap, Path(problem_path), target)


# ---- capture on the device ------------------------------------------------------------------------
def capture_gpu(problem_path: Path, target: str, fused: bool = True, seed: int = 0) -> GpuCapture:
    """Export the problem's Model on the GPU, compile it with Inductor (GPU_DRAFT_CONFIG) and run it
    once; the output code and each kernel's launch config. CaptureError names what blocks."""
    import torch

    from kegen import compat
    from kegen.inductor.capture import _first_line, _forward_args, _graph_inputs
    from kegen.inductor.decompositions import decomposition_table

    require_gpu(target)
    problem = load_problem(problem_path)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(problem, attr):
            raise CaptureError(f"{problem_path} has no {attr} (KernelBench layout)")
    varying = sizes_vary(problem, seed)
    if varying:
        raise CaptureError(
            f"get_inputs' sizes depend on its own random values ({varying}): a draft would fix them at one "
            "draw and fail at the others"
        )
    with torch.device("cuda"):
        torch.manual_seed(seed)
        model = problem.Model(*problem.get_init_inputs()).eval()
        inputs = tuple(
            x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()
        )  # fmt: skip
    try:
        with torch.no_grad(), compat.quiet_torch_internals():
            ep = torch.export.export(model, inputs, strict=False).run_decompositions(decomposition_table())
    except Exception as exc:
        raise CaptureError(
            f"torch.export cannot trace the reference: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    outputs = [s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    if len(outputs) != len(ep.graph_signature.output_specs):
        raise CaptureError(
            "the reference mutates its buffers or inputs in forward; only pure forwards are drafted"
        )
    graph_inputs = _graph_inputs(ep)
    values = _input_values(ep, graph_inputs, inputs)
    options = dict(GPU_DRAFT_CONFIG) | ({} if fused else UNFUSED_CONFIG)
    configs: dict[str, dict[str, Any]] = {}
    try:
        with compat.patched_inductor_options(options), torch.no_grad(), compat.quiet_torch_internals():
            with _recording_launch_configs(configs):
                code = _compile_and_run(ep.graph_module, values)
    except CaptureError:
        raise
    except Exception as exc:
        raise CaptureError(
            f"Inductor cannot compile the reference for {target}: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    cap = Capture(
        code=code,
        inputs=graph_inputs,
        forward_args=_forward_args(model, len(inputs)),
        user_outputs=len(outputs),
        single_output=compat.spec_is_single(ep.call_spec.out_spec, len(outputs)),
        model_source_module=problem,
    )
    return GpuCapture(cap, configs, torch.cuda.get_device_name())


def _input_values(ep: Any, graph_inputs: list[GraphInput], inputs: tuple[Any, ...]) -> list[Any]:
    """The real tensors of the exported graph's inputs, in its placeholder order."""
    values = []
    for gi in graph_inputs:
        if gi.kind == "user":
            values.append(inputs[gi.index])
        elif gi.target in ep.state_dict:
            values.append(ep.state_dict[gi.target])
        else:
            values.append(ep.constants[gi.target])
    return values


def _compile_and_run(gm: Any, values: list[Any]) -> str:
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    compiled: Any = None

    def compile_and_run() -> Any:
        nonlocal compiled
        compiled = compile_fx(gm, values)
        return compiled(*values)

    _, codes = run_and_get_code(compile_and_run)
    # the graph's own module comes last (autotuning may lower subgraphs of its own before it)
    codes = [c for c in codes if "def call(" in c]
    if not codes:
        raise CaptureError("Inductor produced no output code for the reference")
    return codes[-1]


@contextlib.contextmanager
def _recording_launch_configs(out: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Record the config each Inductor kernel launches with (after its autotuning) while it runs."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        launchers = getattr(self, "launchers", None) or []
        if len(launchers) == 1 and getattr(launchers[0], "config", None) is not None:
            cfg = launchers[0].config
            name = (getattr(self, "inductor_meta", None) or {}).get("kernel_name") or self.fn.__name__
            out[name] = {
                "kwargs": dict(cfg.kwargs),
                "num_warps": int(cfg.num_warps),
                "num_stages": int(cfg.num_stages),
            }
        return result

    CachingAutotuner.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        CachingAutotuner.run = original  # type: ignore[method-assign]


# ---- output code -> candidate (pure text work: runs anywhere) --------------------------------------
def parse_gpu_kernel(var: str, name: str, module_source: str) -> GpuKernel:
    """The kernel of one `async_compile.triton(name, source, device_str=...)`, read from its source
    text (nothing is loaded or compiled): the `@triton_heuristics.<kind>(...)` decorator's signature,
    inductor_meta and template warps/stages, and the `@triton.jit` functions."""
    tree = ast.parse(module_source)
    deco = next(
        (
            d
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == name
            for d in node.decorator_list
            if isinstance(d, ast.Call) and _dotted(d.func).startswith("triton_heuristics.")
        ),
        None,
    )
    if deco is None:
        raise CaptureError(f"kernel {name}: no @triton_heuristics decorator in Inductor's output")
    keywords = {k.arg: k.value for k in deco.keywords if k.arg}
    signature = _literal_entry(keywords.get("triton_meta"), "signature")
    if not isinstance(signature, dict) or not signature:
        raise CaptureError(f"kernel {name}: Inductor's kernel has no signature")
    body = _jit_functions(name, module_source)
    deco_cfg: dict[str, Any] = {
        k: _literal(keywords[k]) for k in ("num_warps", "num_stages") if k in keywords
    }
    return GpuKernel(
        var=var,
        name=name,
        source=_HELPER_REF.sub(r"\1", body).rstrip() + "\n",
        params=list(signature),
        constexprs=[p for p, ty in signature.items() if ty == "constexpr"],
        kind=_dotted(deco.func).removeprefix("triton_heuristics."),
        inductor_meta=_literal_dict(keywords.get("inductor_meta")),
        decorator_config=deco_cfg,
        helpers=set(_HELPER_REF.findall(body)),
    )


def _literal(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _literal_dict(node: ast.AST | None) -> dict[str, Any]:
    """A dict display's entries that are literals (e.g. `set()` or `DeviceProperties(...)` are left out)."""
    if not isinstance(node, ast.Dict):
        return {}
    out = {}
    for k, v in zip(node.keys, node.values, strict=True):
        key = _literal(k)
        if isinstance(key, str):
            value = _literal(v)
            if value is not None or (isinstance(v, ast.Constant) and v.value is None):
                out[key] = value
    return out


def _literal_entry(node: ast.AST | None, key: str) -> Any:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if _literal(k) == key:
                return _literal(v)
    return None


def gpu_kernels(tree: ast.Module) -> dict[str, GpuKernel]:
    """Every `x = async_compile.triton('name', '''source''', ...)` of the output module, by `x`."""
    found: dict[str, GpuKernel] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        f = node.value.func
        target = node.targets[0]
        if isinstance(f, ast.Attribute) and f.attr == "triton" and isinstance(target, ast.Name):
            name, src = (_literal(a) for a in node.value.args[:2])
            if isinstance(name, str) and isinstance(src, str):
                found[target.id] = parse_gpu_kernel(target.id, name, src)
    return found


def write_gpu_candidate(gcap: GpuCapture, problem_path: Path, target: str) -> tuple[str, DraftInfo]:
    """The candidate source for a GPU capture."""
    cap = gcap.capture
    tree = ast.parse(cap.code)
    kernels = gpu_kernels(tree)
    names = [k.name for k in kernels.values()]
    if len(set(names)) != len(names):
        raise CaptureError(f"Inductor's output defines a kernel twice ({', '.join(sorted(names))})")
    call = _call_function(tree)
    info = DraftInfo(kernels=names)
    body = _translate_gpu(_flat_body(call.body), kernels, gcap.configs, info)
    header = HEADER.format(problem=problem_path.name, target=target, device=gcap.device)
    return assemble(header, cap, kernels, body, info), info


def _flat_body(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """call()'s statements with `with torch.cuda._DeviceGuard(0):` blocks opened up."""
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, ast.With) and all("DeviceGuard" in _dotted(i.context_expr.func) for i in s.items
                                           if isinstance(i.context_expr, ast.Call)):  # fmt: skip
            out += _flat_body(s.body)
        else:
            out.append(s)
    return out


def _translate_gpu(
    stmts: list[ast.stmt], kernels: dict[str, GpuKernel], configs: dict[str, dict[str, Any]], info: DraftInfo
) -> list[str]:
    lines: list[str] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Delete) or _dropped(stmt) or _gpu_dropped(stmt):
            continue
        if isinstance(stmt, ast.Assign) and _dotted(stmt.value) == "args":
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            fn = _dotted(stmt.value.func)
            if fn.endswith(".run") and fn.removesuffix(".run") in kernels:
                kernel = kernels[fn.removesuffix(".run")]
                lines.append(gpu_launch(kernel, stmt.value, _config_of(kernel, configs), info))
                continue
        _refuse_library_calls(stmt)
        stmt = _EmptyOnDevice().visit(stmt)
        lines.append(ast.unparse(_rewrite_calls(stmt, stmts[i + 1 :], info)))
    return lines


def _gpu_dropped(stmt: ast.stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign) else None
    return isinstance(value, ast.Call) and _dotted(value.func) in _GPU_DROPPED


class _EmptyOnDevice(ast.NodeTransformer):
    """`empty_strided_cuda(size, stride, dtype)` -> the form draft.py rewrites to torch.empty_strided."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _dotted(node.func) in _EMPTY_ON_DEVICE:
            node.func = ast.Name("empty_strided_cpu")
        return node


def _refuse_library_calls(stmt: ast.stmt) -> None:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith(_LIBRARY_PREFIXES) and name not in REPLACEMENTS:
                raise CaptureError(
                    f"Inductor calls the library op {name.removeprefix('torch.ops.')} on the GPU; a GPU "
                    "candidate may not compute with library ops (the evaluator's op guard) and kegen "
                    "has no Triton kernel for it"
                )


def _config_of(kernel: GpuKernel, configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The launch config the kernel ran with (recorded at the capture), else its template's own."""
    cfg = configs.get(kernel.name) or configs.get(kernel.var)
    if cfg is None and kernel.decorator_config:
        cfg = {"kwargs": {}, **kernel.decorator_config}
    if cfg is None:
        raise CaptureError(f"kernel {kernel.name}: no launch config was recorded (did the capture run it?)")
    return cfg


def gpu_launch(kernel: GpuKernel, call: ast.Call, cfg: dict[str, Any], info: DraftInfo) -> str:
    """`kernel.run(args..., [grid args], stream=s)` -> `name[(gx, gy, gz)](args..., BLOCK=.., num_warps=..)`
    with the grid Inductor's launcher computes for that config (its GridExpr), as constants."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    extra = list(kernel.inductor_meta.get("extra_launcher_args") or [])
    args = list(call.args)
    kernel_args, extra_args = (
        (args[: len(args) - len(extra)], args[len(args) - len(extra) :]) if extra else (args, [])
    )
    if len(kernel_args) > len(kernel.params):
        raise CaptureError(
            f"kernel {kernel.name}: launched with {len(kernel_args)} arguments, takes {len(kernel.params)}"
        )
    scope: dict[str, Any] = {}
    for p, a in [*zip(kernel.params, kernel_args, strict=False), *zip(extra, extra_args, strict=True)]:
        value = _literal(a)
        if isinstance(value, int):
            scope[p] = value
        elif p.endswith("numel") or p in extra:
            raise CaptureError(
                f"kernel {kernel.name}: {p} is not a constant ({ast.unparse(a)}); "
                "dynamic shapes are not drafted"
            )
    passed = set(kernel.params[: len(kernel_args)])
    kwargs = {k: v for k, v in cfg["kwargs"].items() if k in kernel.constexprs and k not in passed}
    if "grid_type" not in kernel.inductor_meta:
        raise CaptureError(f"kernel {kernel.name}: Inductor's metadata names no grid type")
    try:
        expr = GridExpr.from_meta(kernel.inductor_meta, dict(cfg["kwargs"]))
        grid = _eval_grid(expr, {**cfg["kwargs"], **scope})
    except Exception as exc:
        raise CaptureError(
            f"kernel {kernel.name}: its grid ({kernel.inductor_meta['grid_type']}) cannot be computed: {exc}"
        ) from exc
    info.configs[kernel.name] = {**kwargs, "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    launch = ", ".join(
        [ast.unparse(_rewrite_calls(ast.Expr(_EmptyOnDevice().visit(a)), [], info)) for a in kernel_args]
        + [f"{k}={v}" for k, v in kwargs.items()]
        + [f"num_warps={cfg['num_warps']}", f"num_stages={cfg['num_stages']}"]
    )
    return f"{kernel.name}[({', '.join(str(int(g)) for g in grid)},)]({launch})"


def _eval_grid(expr: Any, scope: dict[str, Any]) -> tuple[int, int, int]:
    """The three grid sizes of an Inductor GridExpr (python mode) for constant sizes and config."""
    env = dict(scope)
    for line in expr.prefix:
        exec(line, env)  # noqa: S102 - Inductor's own grid arithmetic (`y_grid_raw_ = ...`)
    return tuple(int(eval(str(g), env)) for g in (expr.x_grid, expr.y_grid, expr.z_grid))  # type: ignore[return-value]  # noqa: S307
