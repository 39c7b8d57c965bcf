"""A problem's PyTorch reference timed in the native dtype of its operands (GPU baselines).

Production problems' references upcast fp16/bf16 operands to float32 (`x.float()`) so that the
reference is exact and fast on a CPU host (fp16 GEMMs on CPUs are ~40x slower than fp32). On a GPU
that turns the eager and torch.compile baselines into fp32 computations no production model runs.
`native_baselines` times the reference with `Tensor.float` made the identity for fp16/bf16 tensors
(operands stay in their dtype; cuBLAS/cuDNN accumulate in fp32), eager and under torch.compile,
with the evaluator's GPU timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


def reference_upcasts(problem_path: Path | None) -> bool:
    """True when the problem file calls `.float()` (its reference may upcast its operands)."""
    try:
        return problem_path is not None and ".float()" in problem_path.read_text()
    except OSError:
        return False


@contextlib.contextmanager
def native_float() -> Iterator[None]:
    """Within: `t.float()` returns `t` itself for fp16/bf16 tensors (a production model's dtype)."""
    orig = torch.Tensor.float

    def keep(self: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
        return self if self.dtype in (torch.float16, torch.bfloat16) else orig(self, *a, **k)

    torch.Tensor.float = keep  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.Tensor.float = orig  # type: ignore[method-assign]


def native_keeps_dtypes(problem_path: Path) -> bool:
    """Whether the reference returns the same dtypes with `.float()` kept native (on meta tensors)."""
    from kegen.eval.loader import load_problem

    def dtypes(out: Any) -> list[Any]:
        outs = out if isinstance(out, list | tuple) else [out]
        return [o.dtype for o in outs if isinstance(o, torch.Tensor)]

    try:
        prob = load_problem(problem_path)
        with torch.device("meta"), torch.no_grad():
            model = prob.model_cls(*prob.get_init_inputs())
            inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
            upcast = dtypes(model(*inputs))
            with native_float(), _SameDtypeProducts():
                native = dtypes(model(*inputs))
    except Exception:  # the meta run is a check only: keep the reference as written
        return False
    return upcast == native


_PRODUCTS = {torch.matmul, torch.mm, torch.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__}
_PRODUCTS |= {torch.Tensor.mm, torch.Tensor.bmm, torch.nn.functional.linear, torch.addmm}


class _SameDtypeProducts(torch.overrides.TorchFunctionMode):
    """Raises where a matrix product meets two float dtypes: meta tensors do not check it, and a
    reference that upcasts only some operands (an int8 weight's `.float()` stays float32 while the
    fp16 activations stay native) would be drafted as a mixed-dtype GEMM that does not compile."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in _PRODUCTS:
            floats = {a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()}
            if len(floats) > 1:
                raise TypeError(f"a matrix product of {sorted(map(str, floats))} in the operands' dtype")
        return func(*args, **(kwargs or {}))


def _timed(fn: Any, sets: list[list[Any]]) -> float:
    """Median seconds per call by the evaluator's own GPU timing (kegen.eval.timing_gpu.measure:
    L2 flushed, launch overhead hidden behind a spin kernel, host-bound forwards charged their host
    time), so these baselines compare like with like with candidates' and the recorded baselines'."""
    from kegen.eval import EvalConfig
    from kegen.eval.timing_gpu import measure

    return float(measure(lambda xs: fn(*xs), sets, EvalConfig(target="nvidia")).stats.median_s)


def native_baselines(problem_path: Path, device: str = "cuda") -> dict[str, Any]:
    """Seconds per call of the reference as written (`upcast_eager_s`) and, in the native dtype,
    eager (`native_eager_s`) and torch.compile (`native_compile_s`), on `device`."""
    from kegen.eval.loader import load_problem

    if not torch.cuda.is_available():
        raise RuntimeError("native-dtype baselines time CUDA kernels: no GPU is visible")
    prob = load_problem(problem_path)
    torch.manual_seed(0)
    model = prob.model_cls(*prob.get_init_inputs()).to(device)
    sets = [[x.to(device) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()] for _ in range(3)]
    out: dict[str, Any] = {"upcast_eager_s": _timed(model, sets)}
    with native_float():
        out["native_eager_s"] = _timed(model, sets)
        torch._dynamo.reset()
        out["native_compile_s"] = _timed(torch.compile(model), sets)
    return out
