"""`kegen tune --target nvidia|amd`: torch.compile's own code as the draft, and the rule that the tuned
model is never slower than torch.compile.

    source = draft(Path("variant0.py"), "nvidia")               # torch.compile's kernels as a candidate
    t = measure_vs_compile(Path("variant0.py"), source, "nvidia")   # the evaluator's times
    t.draft_s, t.compile_s, t.eager_s

On a GPU the draft is Inductor's code for that GPU (kegen.inductor.gpu_draft): its Triton kernels with
the launch configs its autotuning chose, its call() as `forward`. A GPU candidate may not call cuBLAS,
cuDNN or flash attention (the evaluator's op guard refuses library ops on device data), so GEMMs and
convolutions are Inductor's max-autotune Triton templates and attention is decomposed; the
torch.compile time every speedup is measured against is the evaluator's own `torch.compile` of the
reference (`EvalResult.times["compile"]`, cuBLAS and flash attention included), never the draft's.
Where neither the draft nor a searched winner beats it, `GpuTunedModel` runs torch.compile's module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kegen.tune.capture import ModelFile, TuneError, shapes_of


def draft(problem: Path, target: str, fused: bool = True) -> str:
    """torch.compile's code for `problem` on this machine's `target` GPU as a KernelBench candidate;
    `fused=False`: one kernel per op (eager-like). TuneError (kind "capture") names what blocks;
    without a CUDA device: "... needs a CUDA device"."""
    from kegen.inductor.capture import CaptureError
    from kegen.inductor.gpu_draft import draft_for_gpu

    try:
        source, _ = draft_for_gpu(Path(problem), target, fused=fused)
    except CaptureError as exc:
        raise TuneError(f"Inductor cannot draft {Path(problem).name} for {target}: {exc}", "capture") from exc
    return source


@dataclass
class GpuTimes:
    """One evaluation of a candidate on a GPU target, with the evaluator's baselines."""

    ok: bool
    draft_s: float | None  # the candidate's time
    compile_s: float | None  # the evaluator's torch.compile of the reference
    eager_s: float | None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "draft_s": self.draft_s,
            "compile_s": self.compile_s,
            "eager_s": self.eager_s,
            "message": self.message,
        }


def measure_vs_compile(problem: Path, source: str, target: str, seed: int = 42) -> GpuTimes:
    """Evaluate `source` on `problem` (fp32: atol 1e-4, rtol 5e-4; fp16/bf16: the evaluator's
    tolerances) and read the evaluator's torch.compile and eager times of the reference."""
    from kegen.eval import EvalConfig, evaluate
    from kegen.tune.problems import FP32_TOL

    cfg = EvalConfig(target=target, seed=seed, atol=FP32_TOL[0], rtol=FP32_TOL[1], gpu_profile="timing")
    result = evaluate(str(problem), source, config=cfg)
    return GpuTimes(
        ok=result.ok,
        draft_s=result.candidate_time_s if result.ok else None,
        compile_s=result.times.get("compile"),
        eager_s=result.times.get("eager"),
        message="" if result.ok else f"{result.status}: {result.message}"[:500],
    )


def beats_compile(candidate_s: float | None, compile_s: float | None) -> bool:
    """A candidate is installed on a GPU only when it was measured and is strictly faster than the
    evaluator's torch.compile (with no compile time there is nothing it provably beats)."""
    return candidate_s is not None and compile_s is not None and candidate_s < compile_s


def pick(times: dict[str, float | None]) -> str:
    """Which of {"compile", "draft", "tuned"} runs: the fastest measured one, "compile" on ties and
    whenever torch.compile was not measured (the tuned model is never slower than torch.compile)."""
    compile_s = times.get("compile")
    best = "compile"
    for name in ("draft", "tuned"):
        t = times.get(name)
        best_s = times.get(best)
        if beats_compile(t, compile_s) and (best_s is None or (t is not None and t < best_s)):
            best = name
    return best


class GpuTunedModel:
    """The tuned model on a GPU: inputs with the shapes of a variant whose candidate beat torch.compile
    run that candidate; everything else runs `torch.compile(model)`."""

    def __init__(self, mf: ModelFile, installed: dict[str, str]) -> None:
        self.mf = mf
        self.sources = installed  # shape key -> candidate source (only variants that beat compile)
        self._built: dict[str, Any] = {}
        self._compiled: Any = None

    @staticmethod
    def shape_key(inputs: list[Any]) -> str:
        return json.dumps(shapes_of(list(inputs)))

    def __call__(self, *inputs: Any) -> Any:
        import torch

        key = self.shape_key(list(inputs))
        with torch.no_grad(), torch.device("cuda"):
            if key in self.sources:
                if key not in self._built:
                    from kegen.tune.install import load_candidate

                    self._built[key] = load_candidate(self.sources[key])
                return self._built[key](*inputs)
            if self._compiled is None:
                self._compiled = torch.compile(self.mf.build())
            return self._compiled(*inputs)
