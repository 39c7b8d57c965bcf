"""Inductor's output code for a KernelBench problem, traced with fake tensors (nothing runs at full size).

The reference is built and its inputs made under a `FakeTensorMode` (shapes and dtypes only, no
storage), exported with `torch.export` (parameters, buffers and inputs become graph inputs in a known
order) and compiled by Inductor with `cpu_backend="triton"`; `get_code` keeps the output module's
source without compiling or running its kernels.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Inductor settings for drafting (on top of kegen.inductor.routing.INDUCTOR_CONFIG)
DRAFT_CONFIG: dict[str, Any] = {
    "cpu_backend": "triton",
    "compile_threads": 1,
    "fx_graph_cache": False,
    "combo_kernels": False,
    # variances in two plain reductions: the mtia reduction engine has no Welford combine function
    "mtia.disable_welford_reduction": True,
    # its attention patterns would turn the decomposed attention back into a library call
    "pattern_matcher": False,
    "layout_optimization": False,  # keep the reference's layouts (no channels-last copies around convs)
    "triton.cooperative_reductions": False,
}


class CaptureError(ValueError):
    """The reference cannot be traced or compiled by Inductor; the message names the op or step."""


@dataclass(frozen=True)
class GraphInput:
    """One input of the compiled graph: a parameter/buffer/constant of the model (by its dotted
    name) or the forward's user input number `index`."""

    kind: str  # parameter | buffer | constant | user
    target: str = ""
    index: int = -1


@dataclass
class Capture:
    """Inductor's output code and how to feed and read it."""

    code: str
    inputs: list[GraphInput]
    forward_args: list[str]
    user_outputs: int
    single_output: bool
    model_source_module: Any = None
    notes: list[str] = field(default_factory=list)
    # with keep_graph: Inductor's post-grad FX graph (a GraphModule; placeholders in `inputs` order)
    # and each kernel launch or extern call of call(), in order, with the graph nodes it computes
    post_grad: Any = None
    kernel_nodes: list[tuple[str, list[str]]] = field(default_factory=list)


def load_problem(path: Path) -> Any:
    """Import a problem file as a fresh module."""
    name = f"_kegen_inductor_problem_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"cannot import problem {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _forward_args(model: Any, n: int) -> list[str]:
    import inspect

    names = [
        p.name
        for p in inspect.signature(model.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return names[:n] if len(names) >= n else [f"input{i}" for i in range(n)]


def capture(problem_path: Path, seed: int = 0, keep_graph: bool = False) -> Capture:
    """Trace the problem's Model with fake tensors and return Inductor's output code (not run).
    `keep_graph` also keeps the post-grad FX graph and which graph nodes each kernel computes
    (Inductor's own fusion groups: `Capture.post_grad`, `Capture.kernel_nodes`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kegen import compat
    from kegen.inductor.decompositions import decomposition_table
    from kegen.inductor.routing import enable

    try:
        enable()
    except RuntimeError as exc:  # e.g. a GPU machine: the drafter falls back to templates
        raise CaptureError(f"TorchInductor drafting is unavailable here: {exc}") from exc
    problem = load_problem(Path(problem_path))
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(problem, attr):
            raise CaptureError(
                f"{problem_path} has no {attr} (KernelBench format needs Model, get_inputs, get_init_inputs)"
            )
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with fake:
            torch.manual_seed(seed)
            model = problem.Model(*problem.get_init_inputs()).eval()
            inputs = tuple(problem.get_inputs())
    except Exception as exc:
        varying = sizes_vary(problem, seed)
        if varying:
            raise CaptureError(
                f"get_inputs' sizes depend on its own random values ({varying}): Inductor's draft would fix "
                "them at one draw and fail at the others (kegen's templates draft such problems)"
            ) from exc
        model, inputs = _build_with_real_inputs(problem, fake, seed, exc)
    try:
        with fake, torch.no_grad(), compat.quiet_torch_internals():
            ep = torch.export.export(model, inputs, strict=False).run_decompositions(decomposition_table())
    except Exception as exc:
        raise CaptureError(
            f"torch.export cannot trace the reference: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    graph_inputs = _graph_inputs(ep)
    outputs = [s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    if len(outputs) != len(ep.graph_signature.output_specs):
        raise CaptureError(
            "the reference mutates its buffers or inputs in forward; only pure forwards are drafted"
        )
    gm = ep.graph_module
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    kept: dict[str, Any] = {}
    code = _compile_code(gm, vals, kept if keep_graph else None)
    single = compat.spec_is_single(ep.call_spec.out_spec, len(outputs))
    return Capture(
        code=code,
        inputs=graph_inputs,
        forward_args=_forward_args(model, len(inputs)),
        user_outputs=len(outputs),
        single_output=single,
        model_source_module=problem,
        post_grad=kept.get("graph"),
        kernel_nodes=kept.get("kernels", []),
    )


def sizes_vary(problem: Any, seed: int = 0) -> str | None:
    """Where get_inputs sizes its tensors from its own random values (`int(lengths.sum())` indices of
    an EmbeddingBag), the first size that differs between two draws; None where the sizes agree or
    get_inputs runs on fake tensors (its sizes then cannot depend on its values)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode():
            torch.manual_seed(seed)
            problem.get_inputs()
        return None
    except Exception:  # a data-dependent size: compare two real draws
        pass
    shapes = []
    for s in (seed, seed + 1):
        torch.manual_seed(s)
        shapes.append([tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in problem.get_inputs()])
    for i, (a, b) in enumerate(zip(*shapes, strict=False)):
        if a != b:
            return f"input {i} is {a} in one draw and {b} in another"
    return None


def _build_with_real_inputs(
    problem: Any, fake: Any, seed: int, first: Exception
) -> tuple[Any, tuple[Any, ...]]:
    """The model and inputs where building both under fake tensors failed: the inputs made for real
    and then faked (get_inputs that read values, e.g. `int(lengths.sum())` sizing EmbeddingBag
    indices, cannot run on fake tensors), the model under fake tensors or, where its constructor
    cannot run on them either (`nn.Conv2d(...).to(torch.float16)`: `Module._apply` cannot swap a
    fake parameter's dtype), for real: export fakes its parameters itself."""
    import torch

    try:
        torch.manual_seed(seed)
        real = tuple(problem.get_inputs())
        inputs = tuple(fake.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in real)
    except Exception as exc:
        raise CaptureError(
            f"building the reference's inputs failed ({type(first).__name__}: {first}; "
            f"for real: {type(exc).__name__}: {exc})"
        ) from exc
    errors = []
    for under_fake in (True, False):
        try:
            torch.manual_seed(seed)
            with fake if under_fake else contextlib.nullcontext():
                model = problem.Model(*problem.get_init_inputs()).eval()
            return model, inputs
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    raise CaptureError(
        f"building the reference failed with fake tensors ({type(first).__name__}: {first}) and for "
        f"real ({errors[-1]})"
    )


def _graph_inputs(ep: Any) -> list[GraphInput]:
    result: list[GraphInput] = []
    user = 0
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            result.append(GraphInput("user", index=user))
            user += 1
        elif kind in ("PARAMETER", "BUFFER"):
            result.append(GraphInput(kind.lower(), target=str(spec.target)))
        elif kind == "CONSTANT_TENSOR":
            result.append(GraphInput("constant", target=str(spec.target)))
        else:
            raise CaptureError(f"graph input kind {kind} ({spec.arg}) is not supported by the drafter")
    return result


def _compile_code(gm: Any, example_inputs: list[Any], kept: dict[str, Any] | None = None) -> str:
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import get_code

    from kegen import compat

    options = dict(DRAFT_CONFIG)
    keeping: Any = contextlib.nullcontext()
    if kept is not None:
        options["post_grad_custom_post_pass"] = _keep_graph_pass(kept)
        options["trace.provenance_tracking_level"] = 1
        keeping = _kernel_provenance(kept.setdefault("kernels", []))
    try:
        with (
            compat.patched_inductor_options(options),
            torch.no_grad(),
            compat.quiet_torch_internals(),
            keeping,
        ):
            codes = get_code(lambda: compile_fx(gm, example_inputs))
    except Exception as exc:
        raise CaptureError(
            f"Inductor cannot compile the reference: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    if not codes:
        raise CaptureError("Inductor produced no output code for the reference")
    return codes[0]


def _keep_graph_pass(kept: dict[str, Any]) -> Any:
    """A post-grad pass that changes nothing and keeps a copy of the graph Inductor lowers."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class KeepGraph(CustomGraphPass):
        """A post-grad pass that changes nothing and keeps a copy of the graph Inductor lowers."""

        def __init__(self, kept: dict[str, Any]) -> None:
            self.kept = kept

        def __call__(self, graph: Any) -> None:
            import copy

            import torch

            self.kept["graph"] = torch.fx.GraphModule(torch.nn.Module(), copy.deepcopy(graph))

        def uuid(self) -> Any:
            return "kegen-keep-post-grad-graph"

    return KeepGraph(kept)


@contextlib.contextmanager
def _kernel_provenance(out: list[tuple[str, list[str]]]) -> Iterator[None]:
    """Record, for each kernel Inductor emits (in call() order), the post-grad nodes it computes:
    Inductor's provenance tracking (trace.provenance_tracking_level) keeps them only while it compiles."""
    import torch._inductor.codegen.triton as triton_codegen
    import torch._inductor.debug as debug

    original = debug.set_kernel_post_grad_provenance_tracing

    def record(node_schedule: Any, kernel_name: str, is_extern: bool = False) -> Any:
        handle = original(node_schedule, kernel_name, is_extern)
        if handle is not None:
            key = f"{kernel_name}:{handle}"
            nodes = debug._inductor_triton_kernel_to_post_grad_node_info.get(key, [])
            out.append((kernel_name, list(nodes)))
        return handle

    debug.set_kernel_post_grad_provenance_tracing = record
    triton_codegen.set_kernel_post_grad_provenance_tracing = record
    try:
        yield
    finally:
        debug.set_kernel_post_grad_provenance_tracing = original
        triton_codegen.set_kernel_post_grad_provenance_tracing = original


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
