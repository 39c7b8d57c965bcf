"""Measure a trusted candidate in this process on the mtia backend (tools and tests, not the search's
evaluator): outputs checked against the reference, simulated time and the shared-schema profile.

The search scores untrusted code with `kegen.eval` (sandboxed worker, out-of-process device).
This runner is for code kegen wrote itself (fixtures, the offline operator's mutations in
benchmarks): no sandbox, no subprocess, so a measurement costs one compile and one simulation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

TOLERANCE = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 3e-2}


@dataclass
class LocalRun:
    """One forward of a candidate: verdict, simulated seconds, the profile as stored (dict)."""

    status: str  # ok | incorrect | compile_error | runtime_error
    message: str = ""
    time_s: float | None = None
    profile: dict[str, Any] | None = None


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """Import a Python file under a unique module name."""
    name = name or "kegen_local_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, list | tuple) else [out]


def reference(problem: Path, seed: int = 0) -> tuple[ModuleType, list[Any], list[Any], dict[str, Any]]:
    """(problem module, inputs, reference outputs, roofline dict without `fraction`)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    prob = load_module(problem)
    torch.manual_seed(seed)
    inputs = prob.get_inputs()
    torch.manual_seed(seed)  # the candidate is built after the same seed: same initial weights
    model = prob.Model(*prob.get_init_inputs())
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        ref = _flat(model(*inputs))
    nbytes = sum(t.numel() * t.element_size() for t in inputs + ref if isinstance(t, torch.Tensor))
    return prob, inputs, ref, {"bytes": nbytes, "flops": int(counter.get_total_flops())}


def run_candidate(problem: Path, code: str, machine: str = "mtia-2i", seed: int = 0) -> LocalRun:
    """Compile and run `code` (a candidate module) once on `machine`; check it; profile it."""
    import torch

    from kegen.profiling.mtia import from_mtia_launches
    from lowering.backend import driver
    from mtia_sim.machine import load_machine

    prob, inputs, ref, roofline = reference(problem, seed)
    with tempfile.TemporaryDirectory(prefix="kegen-local-") as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(code)
        try:
            cand = load_module(path, "kegen_cand_" + hashlib.sha256(code.encode()).hexdigest()[:16])
            torch.manual_seed(seed)
            model = cand.ModelNew(*prob.get_init_inputs())
        except Exception as exc:
            return LocalRun("compile_error", f"{type(exc).__name__}: {exc}")
        try:
            with torch.no_grad():
                driver.clear_launch_history()
                out = _flat(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        except Exception as exc:
            return LocalRun("runtime_error", f"{type(exc).__name__}: {str(exc)[:500]}")
        launches = driver.launch_history()
    for got, want in zip(out, ref, strict=False):
        tol = TOLERANCE.get(str(want.dtype).removeprefix("torch."), 1e-3)
        if got.shape != want.shape or not torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
            err = (got.float() - want.float()).abs().max().item() if got.shape == want.shape else float("inf")
            return LocalRun("incorrect", f"output differs from the reference: max abs error {err:.3g}")
    if not launches:
        return LocalRun("incorrect", "the candidate launched no kernel")
    m = load_machine(machine)
    total = sum(float(r.result.seconds) for r in launches)
    mem_s, math_s = roofline["bytes"] / m.dram_bw, roofline["flops"] / m.peak_flops("fp32")
    roofline.update(
        time_s=max(mem_s, math_s),
        bound="memory" if mem_s >= math_s else "compute",
        fraction=max(mem_s, math_s) / total if total else None,
    )
    return LocalRun("ok", time_s=total, profile=from_mtia_launches(launches, machine, roofline).to_dict())
