"""Host time the candidate worker adds to a forward: the default device as a torch function mode
(`with torch.device("cuda")`, what the worker used before D86) against the wrapped constructors
(`kegen.eval.sandboxed.factory_device`, what it uses now).

    python tools/bench_worker_host.py [--json OUT] [PROBLEM CANDIDATE ...]

Without pairs (any machine): a launcher-like forward (three rounds of reshape, empty, strides and
data pointers, as a Triton launch inspects its arguments) on CPU tensors, host microseconds per call.
With pairs (a GPU machine): each candidate timed by `kegen.eval.timing_gpu.time_calls` through the
worker's `Guards.call`, as the evaluator's worker times it, under each default-device mechanism:
the charged median (CUDA events, or host time when host-bound) and the forward's host median.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kegen.eval.sandboxed.factory_device import factory_device

MECHANISMS: dict[str, Callable[[str], Any]] = {
    "none": lambda device: contextlib.nullcontext(),
    "torch_function_mode": torch.device,
    "factory_device": factory_device,
}


def _launcher_like(x: torch.Tensor, w: torch.Tensor) -> None:
    for _ in range(3):
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.empty((x2.shape[0], w.shape[0]), dtype=x.dtype, device=x.device)
        for t in (x2, w, y, w):
            t.data_ptr(), t.stride(0), t.stride(1), t.dtype, t.is_contiguous()
        y.view(*x.shape[:-1], w.shape[0])


def host_only(repeats: int = 3000) -> dict[str, float]:
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    out: dict[str, float] = {}
    for name, ctx in MECHANISMS.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            with ctx("meta"):  # a default that is not the tensors' own: every constructor names its device
                _launcher_like(x, w)
            times.append(time.perf_counter() - t0)
        out[name] = round(statistics.median(times) * 1e6, 2)
    return out


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _host_timed(guards: Any, host: list[float]) -> Callable[[Any, list[Any]], Any]:
    """The worker's guarded call, recording the host time from entering it to the forward's return."""

    def guarded(fwd: Any, xs: list[Any]) -> Any:
        t0 = time.perf_counter()

        def timed_forward(*a: Any) -> Any:
            out = fwd(*a)
            host.append(time.perf_counter() - t0)
            return out

        return guards.call(timed_forward, xs, "bench", watch_ops=False)

    return guarded


def worker_pair(problem_path: str, candidate_path: str, sets: int = 20) -> dict[str, Any]:
    from kegen.eval import timing_gpu
    from kegen.eval.loader import load_candidate
    from kegen.eval.sandboxed import runner

    problem = _load(problem_path, "bench_problem")
    torch.manual_seed(0)
    inputs = [
        [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()] for _ in range(sets)
    ]
    guards = runner.Guards(Path(candidate_path).resolve(), (), True, True)
    with torch.device("cuda"):
        model = load_candidate(Path(candidate_path).resolve())(*problem.get_init_inputs())
    row: dict[str, Any] = {"candidate": candidate_path}
    for name in ("torch_function_mode", "factory_device"):
        runner.factory_device = MECHANISMS[name]  # type: ignore[attr-defined]
        try:
            host: list[float] = []
            guarded = _host_timed(guards, host)
            timing_gpu.time_calls(guarded, model, inputs)
            host.clear()
            samples, _ = timing_gpu.time_calls(guarded, model, inputs)
        finally:
            runner.factory_device = factory_device  # type: ignore[attr-defined]
        row[name] = {
            "charged_us": round(statistics.median(samples) * 1e6, 1),
            "forward_host_us": round(statistics.median(host) * 1e6, 1),
        }
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="*", help="PROBLEM CANDIDATE ... (GPU only)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if len(args.pairs) % 2:
        ap.error("pairs come as PROBLEM CANDIDATE")
    report: dict[str, Any] = {"host_only_us": host_only()}
    print("launcher-like forward, host us per call:", report["host_only_us"], flush=True)
    if args.pairs and not torch.cuda.is_available():
        ap.error("timing candidates needs a CUDA GPU")
    report["pairs"] = []
    for prob, cand in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        row = worker_pair(prob, cand)
        report["pairs"].append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
