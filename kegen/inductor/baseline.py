"""torch.compile on the simulated MTIA as a baseline: the simulated time of Inductor's kernels for a
KernelBench problem (the compiler's speed, which a searched kernel should beat).

    b = compile_baseline("problem.py", machine="mtia-2i")
    b.seconds, b.kernels, b.host_ops, b.max_abs_error
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.inductor.capture import load_problem
from kegen.inductor.routing import CompiledModel, KernelRun


@dataclass
class CompileBaseline:
    """One forward of `torch.compile(Model)` on the simulated chip.

    `seconds` is the simulated device time (the launches' times summed, launch overhead included);
    `host_ops` names what Inductor left to library calls on the host, which that time does not
    include (a baseline with host ops is incomplete: `complete` is False)."""

    problem: str
    machine: str
    seconds: float
    kernels: list[KernelRun] = field(default_factory=list)
    host_ops: list[str] = field(default_factory=list)
    max_abs_error: float = 0.0
    compile_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.host_ops

    def to_dict(self) -> dict[str, Any]:
        """Plain data (per-kernel name, grid, cycles and seconds; counters left out)."""
        return {
            "problem": self.problem,
            "machine": self.machine,
            "seconds": self.seconds,
            "complete": self.complete,
            "host_ops": list(self.host_ops),
            "max_abs_error": self.max_abs_error,
            "compile_s": self.compile_s,
            "kernels": [
                {"kernel": k.kernel, "grid": list(k.grid), "cycles": k.cycles, "seconds": k.seconds}
                for k in self.kernels
            ],
        }


def compile_baseline(
    problem_path: str | Path,
    machine: str = "mtia-2i",
    inputs: list[Any] | None = None,
    seed: int = 0,
) -> CompileBaseline:
    """Compile the problem's Model with torch.compile onto the simulated `machine` and time one forward.

    The model is built as the evaluator builds it (`torch.manual_seed(seed)`, `Model(*get_init_inputs())`,
    eval mode); `inputs` default to `get_inputs()` under the same seed. The first call compiles and
    autotunes (by simulated time); the second is the one measured. Raises RuntimeError when the
    compiled model's output differs from the eager reference's (beyond kegen eval's tolerance for
    the output's dtype, at least 1e-3 absolute + relative)."""
    import time

    import torch

    problem = load_problem(Path(problem_path))
    torch.manual_seed(seed)
    model = problem.Model(*problem.get_init_inputs()).eval()
    if inputs is None:
        torch.manual_seed(seed)
        inputs = list(problem.get_inputs())
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    compiled = CompiledModel(model, machine)
    counters.clear()
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*inputs)  # compile + autotune
        compile_s = time.perf_counter() - start
        out = compiled(*inputs)
        ref = model(*inputs)
    err = _max_error(out, ref)
    run = compiled.last_run
    assert run is not None
    # code torch.compile did not capture runs eagerly on the host: name it (the time is incomplete)
    host = list(run.host_ops) + [f"eager after a graph break: {why}" for why in counters["graph_break"]]
    if not run.kernels and not host:
        host.append("eager: no kernel of this forward ran on the device")
    return CompileBaseline(
        problem=str(problem_path),
        machine=machine,
        seconds=run.seconds,
        kernels=run.kernels,
        host_ops=host,
        max_abs_error=err,
        compile_s=compile_s,
    )


def measure_in_subprocess(problem_path: str | Path, machine: str, timeout_s: float = 600.0) -> dict[str, Any]:
    """The compile baseline of one problem measured in its own process (`python -m
    kegen.inductor.baseline`), as plain data: {"seconds", "kernels", "host_ops", ...} or {"error"}.
    A compiler failure or hang costs this measurement only, and the caller's process keeps its driver."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "kegen.inductor.baseline", str(problem_path), "--machine", machine]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"torch.compile on {machine} took over {timeout_s:g} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"torch.compile baseline failed: {tail}"}
    data: dict[str, Any] = json.loads(lines[-1])
    return data


def _max_error(out: Any, ref: Any) -> float:
    import torch

    outs = out if isinstance(out, list | tuple) else [out]
    refs = ref if isinstance(ref, list | tuple) else [ref]
    worst = 0.0
    for o, r in zip(outs, refs, strict=True):
        if not isinstance(r, torch.Tensor):
            continue
        # kegen eval's tolerance for the output's dtype (fp16/bf16 1e-2), never below 1e-3
        from kegen.eval.config import DEFAULT_TOLERANCES

        dtype_tol = DEFAULT_TOLERANCES.get(str(r.dtype).removeprefix("torch."), (0.0, 0.0))
        atol, rtol = (max(1e-3, t) for t in dtype_tol)
        o, r = o.double(), r.double()
        err = (o - r).abs()
        if not torch.all(err <= atol + rtol * r.abs()):
            raise RuntimeError(
                f"torch.compile on mtia disagrees with the eager reference (max error {err.max():.3g})"
            )
        worst = max(worst, float(err.max()) if err.numel() else 0.0)
    return worst


def main(argv: list[str] | None = None) -> int:
    """`python -m kegen.inductor.baseline PROBLEM [--machine M]`: print the baseline as JSON (a
    failure is printed as {"error": ...} with exit code 1)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m kegen.inductor.baseline", description=main.__doc__)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--machine", default="mtia-2i")
    args = ap.parse_args(argv)
    try:
        b = compile_baseline(args.problem, machine=args.machine)
    except Exception as exc:  # reported as data: the caller (kegen bench) records it per problem
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(b.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
